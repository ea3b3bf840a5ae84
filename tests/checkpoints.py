"""Tiny random checkpoint folders, written exactly as a user's would be: ``save_pretrained`` + ``tokenizer.json``.

``write_checkpoint(folder, family)`` builds a random ``transformers`` model of one family (small enough to load in
a fraction of a second), perturbs every weight so that biases and norms matter, saves it with ``save_pretrained``
(safetensors; sharded with ``max_shard_size``; in bf16/fp16 with ``dtype``) and trains a tiny tokenizer into the
same folder. It returns the float32 ``transformers`` model whose outputs the loaded checkpoint must reproduce.
``write_gguf`` does the same as llama.cpp's converter would, and ``quantize`` stores a matrix in llama.cpp's blocks,
K-quants included. Shared by the library tests (test_checkpoint.py, test_gguf.py …) and the app/browser tests.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from torch import nn

FAMILIES = ("bert", "gpt2", "llama", "qwen2", "mistral")
TEXT = [
    "The cat sat on the mat because it was tired.",
    "Attention is all you need; heads specialise and copy tokens.",
    "Rotary positions turn queries and keys; grouped heads share their keys and values.",
] * 4
VOCAB = 300  # every config's vocab_size; the trained tokenizers (256 byte symbols + merges) stay below it

_LLAMA_LIKE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=88,
    num_hidden_layers=2,
    num_attention_heads=8,
    num_key_value_heads=2,  # GQA: four query heads per key/value head
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
)
CONFIGS: dict[str, dict[str, Any]] = {
    "bert": dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    ),
    "gpt2": dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0),
    "llama": dict(_LLAMA_LIKE, rope_theta=500.0, tie_word_embeddings=False),
    "qwen2": dict(_LLAMA_LIKE, tie_word_embeddings=True),
    "mistral": dict(_LLAMA_LIKE, sliding_window=6, head_dim=8, tie_word_embeddings=False),
}


def hf_model(family: str, seed: int = 0, **overrides: Any) -> nn.Module:
    """A random float32 ``transformers`` model of ``family`` (eager attention), every weight perturbed."""
    import transformers as tf

    config_cls, model_cls = {
        "bert": (tf.BertConfig, tf.BertModel),
        "gpt2": (tf.GPT2Config, tf.GPT2LMHeadModel),
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
    }[family]
    torch.manual_seed(seed)
    config = config_cls(**(CONFIGS[family] | overrides), attn_implementation="eager")
    return perturb(model_cls(config).eval())  # transformers zero-initialises biases and sets norms to one


@torch.no_grad()
def perturb(model: nn.Module, scale: float = 0.05) -> nn.Module:
    """Add a little noise to every weight, so that zero-initialised biases and unit norms count in a comparison."""
    for p in model.parameters():
        p.add_(torch.randn_like(p) * scale)
    return model


def capture_timm_attention(vit: nn.Module) -> list[torch.Tensor]:
    """Switch a timm ViT's blocks to the explicit attention path and record each softmax output, in order, into
    the returned list as the model runs."""
    captured: list[torch.Tensor] = []
    for block in vit.blocks:
        block.attn.fused_attn = False  # the fused kernel never materialises the weights
        block.attn.attn_drop.register_forward_hook(lambda m, i, o: captured.append(o.detach()))
    return captured


def write_tokenizer(folder: Path, family: str) -> Tokenizer:
    """Train a tiny tokenizer into ``folder/tokenizer.json``: WordPiece with [CLS]/[SEP] for BERT, byte-level
    BPE with ``<|endoftext|>`` for the decoders."""
    if family == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok.train_from_iterator(TEXT, trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials))
        from tokenizers.processors import TemplateProcessing

        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
    else:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=VOCAB - 10,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train_from_iterator(TEXT, trainer)
    assert tok.get_vocab_size() <= VOCAB
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return tok


def write_checkpoint(
    folder: Path,
    family: str,
    *,
    dtype: torch.dtype | None = None,
    max_shard_size: str | None = None,
    seed: int = 0,
    **overrides: Any,
) -> nn.Module:
    """Save a random ``family`` checkpoint and a tokenizer into ``folder``; return the float32 reference model.

    ``dtype`` (e.g. ``torch.bfloat16``) stores the weights in that precision; the returned reference then holds
    the same rounded weights in float32. ``max_shard_size`` (e.g. ``"20KB"``) splits the weights into shards
    listed in ``model.safetensors.index.json``."""
    model = hf_model(family, seed, **overrides)
    kwargs = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    (copy.deepcopy(model).to(dtype) if dtype is not None else model).save_pretrained(folder, **kwargs)
    if dtype is not None:
        with torch.no_grad():  # round the weights alone: the rotary buffers stay float32, as a loader rebuilds them
            for p in model.parameters():
                p.copy_(p.to(dtype))
    write_tokenizer(Path(folder), family)
    return model


# llama.cpp's names for the Hugging Face Llama layout's tensors (the GGUF reader maps them back).
_GGUF_NAMES = {
    "model.embed_tokens": "token_embd",
    "model.norm": "output_norm",
    "lm_head": "output",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _gguf_name(key: str) -> str:
    stem, _, param = key.rpartition(".")
    if stem.startswith("model.layers."):
        layer, _, part = stem.removeprefix("model.layers.").partition(".")
        return f"blk.{layer}.{_GGUF_NAMES[part]}.{param}"
    return f"{_GGUF_NAMES[stem]}.{param}"


def _llama_cpp_permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter's row order for W_Q / W_K (its ``LlamaModel.permute``), written independently of
    the reader's inverse: per head, the two rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize(data: Any, quant: str) -> Any:
    """``data`` (rows, columns) float32 in llama.cpp's ``quant`` blocks, as bytes (rows, bytes per row): gguf's own
    quantizer for the legacy blocks (Q8_0, Q5_0 …), ours below for Q4_K and Q6_K, which gguf (0.19) reads but
    cannot write (``gguf.quants.quantize`` raises NotImplementedError for every K-quant)."""
    import gguf

    if quant == "Q4_K":
        return quantize_q4_k(data)
    if quant == "Q6_K":
        return quantize_q6_k(data)
    return gguf.quants.quantize(data, gguf.GGMLQuantizationType[quant])


def _over(a: Any, b: Any) -> Any:
    """a / b, with 0 where b is 0 (an all-zero block has scale 0 and stores quants 0)."""
    import numpy as np

    return np.divide(a, b, out=np.zeros(np.broadcast_shapes(a.shape, b.shape), np.float32), where=b != 0)


def quantize_q4_k(data: Any) -> Any:
    """llama.cpp's ``block_q4_K``, 144 bytes per 256 values (eight sub-blocks of 32): fp16 ``d`` and ``dmin``, 12
    bytes packing eight 6-bit scales and eight 6-bit mins, 128 bytes of 4-bit quants; value = d·scale·q − dmin·min.

    Written so that the tests can store the K-quants that real Q4_K_M files (the packaged Gemma 3 270M's among
    them) hold: gguf's writer has no K-quant quantizer. Each sub-block's grid spans [its min (≤ 0), its max] in 15
    even steps; q is rounded against the scale and min as stored (after their 6-bit rounding). llama.cpp searches
    for a grid with a smaller error; any grid is read the same, so a plain one is enough to test readers."""
    import numpy as np

    rows, cols = data.shape
    x = np.asarray(data, np.float32).reshape(-1, 8, 32)  # (super-blocks, sub-blocks, values)
    low = np.minimum(x.min(-1), 0)  # (n, 8): the stored min is subtracted, so it is ≥ 0
    step, mins = (x.max(-1) - low) / 15, -low
    d = (step.max(-1) / 63).astype("<f2")  # (n,): the largest scale becomes 63
    dmin = (mins.max(-1) / 63).astype("<f2")
    scales = np.clip(np.rint(_over(step, d[:, None].astype(np.float32))), 0, 63).astype(np.uint8)  # (n, 8)
    qmins = np.clip(np.rint(_over(mins, dmin[:, None].astype(np.float32))), 0, 63).astype(np.uint8)
    stored_step = d[:, None].astype(np.float32) * scales  # (n, 8)
    stored_min = dmin[:, None].astype(np.float32) * qmins
    q = np.clip(np.rint(_over(x + stored_min[..., None], stored_step[..., None])), 0, 15).astype(np.uint8)
    # 12 bytes: the low 6 bits of bytes 0–3 are scales 0–3, of bytes 4–7 mins 0–3; bytes 8–11 hold the low 4 bits
    # of scales 4–7 (low nibble) and mins 4–7 (high nibble), whose top 2 bits fill bits 6–7 of bytes 0–3 and 4–7
    packed = np.concatenate(
        [
            scales[:, :4] | (scales[:, 4:] >> 4) << 6,
            qmins[:, :4] | (qmins[:, 4:] >> 4) << 6,
            (scales[:, 4:] & 15) | (qmins[:, 4:] & 15) << 4,
        ],
        axis=1,
    )  # (n, 12)
    pairs = q.reshape(-1, 4, 2, 32)  # (n, 4, 2, 32): 32 bytes hold sub-blocks 2i (low nibble) and 2i + 1 (high)
    qs = (pairs[:, :, 0] | pairs[:, :, 1] << 4).reshape(-1, 128)
    blocks = [d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), packed, qs]
    return np.concatenate(blocks, axis=1).reshape(rows, cols // 256 * 144)


def quantize_q6_k(data: Any) -> Any:
    """llama.cpp's ``block_q6_K``, 210 bytes per 256 values (sixteen sub-blocks of 16): 128 bytes of the quants'
    low 4 bits, 64 of their high 2 bits, sixteen int8 scales, fp16 ``d``; value = d·scale·(q − 32).

    The other K-quant of Q4_K_M files (Gemma 3 270M's ``ffn_down``), for the same reason as
    :func:`quantize_q4_k`. Each sub-block's scale maps its largest magnitude to ±31 (llama.cpp searches; any scale
    is read the same)."""
    import numpy as np

    rows, cols = data.shape
    x = np.asarray(data, np.float32).reshape(-1, 16, 16)  # (super-blocks, sub-blocks, values)
    step = np.abs(x).max(-1) / 31  # (n, 16)
    d = (step.max(-1) / 127).astype("<f2")  # (n,): the largest scale becomes 127
    scales = np.clip(np.rint(_over(step, d[:, None].astype(np.float32))), 0, 127).astype(np.int8)  # (n, 16)
    stored_step = d[:, None].astype(np.float32) * scales
    q = (np.clip(np.rint(_over(x, stored_step[..., None])), -32, 31) + 32).astype(np.uint8)  # 6 bits, 0..63
    # each half of 128 values is four quarters of 32: byte l of the half's 64 low-bit bytes holds quarters 0 and 2
    # (l < 32) or 1 and 3 (l ≥ 32) in its nibbles; byte l of its 32 high-bit bytes holds all four quarters' top bits
    quarters = q.reshape(-1, 2, 4, 32)  # (n, half, quarter, 32)
    low = quarters & 15
    ql = np.concatenate([low[:, :, 0] | low[:, :, 2] << 4, low[:, :, 1] | low[:, :, 3] << 4], axis=2)  # (n, 2, 64)
    high = quarters >> 4
    qh = high[:, :, 0] | high[:, :, 1] << 2 | high[:, :, 2] << 4 | high[:, :, 3] << 6  # (n, 2, 32)
    blocks = [ql.reshape(-1, 128), qh.reshape(-1, 64), scales.view(np.uint8), d.view(np.uint8).reshape(-1, 2)]
    return np.concatenate(blocks, axis=1).reshape(rows, cols // 256 * 210)


def write_gguf(path: Path, family: str, quant: str = "F32", *, seed: int = 0, **overrides: Any) -> nn.Module:
    """Write a random ``family`` (llama, qwen2, mistral) model as llama.cpp's converter would, as ``path``: the
    metadata, a byte-level BPE tokenizer with ChatML, W_Q/W_K rows permuted for llama and mistral, 2-D weights
    stored as ``quant`` (F32, F16, Q8_0, Q4_1 …; Q4_K / Q6_K need rows of whole 256-value super-blocks) and norms
    as F32. Returns the float32 reference model."""
    import gguf
    import numpy as np

    model = hf_model(family, seed, **({"intermediate_size": 96} | overrides))  # rows of whole 32-wide blocks
    cfg = model.config
    arch = "qwen2" if family == "qwen2" else "llama"  # llama.cpp writes Mistral as a llama file
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny random mistral" if family == "mistral" else f"tiny random {family}")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if getattr(cfg, "sliding_window", None) and family == "mistral":  # llama.cpp's key; transformers' loader skips it
        w.add_sliding_window(cfg.sliding_window)
    tok = write_tokenizer(path.parent / f"{path.stem}-tokenizer", family)
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    tokens += [f"[PAD{i}]" for i in range(len(tokens), cfg.vocab_size - 2)] + ["<|im_start|>", "<|im_end|>"]
    merges = [" ".join(m) if isinstance(m, (list, tuple)) else m for m in json.loads(tok.to_str())["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    special = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
    w.add_token_types([3 if t in special else 1 for t in tokens])
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_chat_template(CHATML)
    qtype = gguf.GGMLQuantizationType[quant]
    for key, t in model.state_dict().items():
        if key == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        t = t.detach().float()
        if arch == "llama" and ".q_proj." in key:
            t = _llama_cpp_permute(t, cfg.num_attention_heads)
        elif arch == "llama" and ".k_proj." in key:
            t = _llama_cpp_permute(t, cfg.num_key_value_heads)
        data = t.numpy()
        if data.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(_gguf_name(key), data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(_gguf_name(key), data.astype(np.float16))
        else:
            q = quantize(data, quant)
            w.add_tensor(_gguf_name(key), q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def transformers_gguf(path: Path, auto: Any = None, **kwargs: Any) -> Any:
    """``auto.from_pretrained`` (default: AutoModelForCausalLM, float32, eager attention) on the GGUF file ``path``:
    transformers' own reading, the parity reference. transformers opens the file twice (its config, then its
    tensors) and gguf's reader parses every metadata field each time, the whole vocabulary included (Gemma 3's
    262,144 pieces: 19 s a parse on 2 cores); here the second opening gets the first one's reader, so the file is
    parsed once and every number still comes from their code."""
    import gguf
    from transformers import AutoModelForCausalLM

    auto = AutoModelForCausalLM if auto is None else auto
    if auto is AutoModelForCausalLM:
        kwargs = {"dtype": torch.float32, "attn_implementation": "eager"} | kwargs
    opened: dict[str, Any] = {}
    reader = gguf.GGUFReader

    def once(file: Any, *args: Any, **kw: Any) -> Any:
        key = str(Path(file).resolve())
        if key not in opened:
            opened[key] = reader(file, *args, **kw)
        return opened[key]

    gguf.GGUFReader = once  # transformers imports it from gguf inside each call, so it finds this one
    try:
        return auto.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    finally:
        gguf.GGUFReader = reader
