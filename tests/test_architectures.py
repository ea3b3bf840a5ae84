"""The architectures a student can open since issue 41: Qwen3, Gemma 2, Phi-3, OLMo 2 and gpt-oss folders and
Qwen3 GGUF files, each through parts of our modules picked by the config, against transformers' eager models on
random tiny configs saved with ``save_pretrained`` (logits and every attention map ≤ 1e-4, inputs longer than the
windows); variants we do not implement (gpt-oss's YaRN, its GGUF files …) refused naming what is missing; and
gpt-oss's attention sinks as a module part against a float64 reference and transformers' own formula."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.checkpoints import CHATML, perturb, quantize, write_tokenizer
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.modules.attention import AttentionSinks, MultiHeadAttention, make_attention
from tx_explorer.modules.experts import ClampedSwiGLUExperts
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}
WINDOW = 5
TINY = dict(
    vocab_size=300,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
YARN = {"rope_type": "yarn", "rope_theta": 1000.0, "factor": 8.0, "original_max_position_embeddings": 8}
CASES = {  # model_type → (config class, model class, overrides of TINY); what each adds is in its interop module
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=24)),  # QK-norm, heads 24 wide ≠ D/H = 16
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        # caps small enough to bite on random weights; layer 0 local (window 5), layer 1 global
        dict(head_dim=16, query_pre_attn_scalar=24, sliding_window=WINDOW, attn_logit_softcapping=0.5),
    ),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(pad_token_id=0, eos_token_id=2)),
    "gpt_oss": (
        "GptOssConfig",
        "GptOssForCausalLM",
        # 4 experts, 2 per token; layer 0 local (window 5), layer 1 global; YaRN as released (factor 32 over 4 096
        # tokens, not truncated) scaled down to stretch 8× over 8 tokens, so that inputs run past it
        dict(
            head_dim=24,
            intermediate_size=48,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=WINDOW,
            rope_parameters=dict(YARN, truncate=False),
        ),
    ),
}
FINAL_CAP = 2.0  # Gemma 2's final soft cap in the case above (30 in the real models)


def reference(model_type: str, seed: int = 0, **overrides) -> torch.nn.Module:
    """A random float32 transformers model of ``model_type`` (eager attention), every weight perturbed."""
    import transformers as tf

    config_cls, model_cls, extra = CASES[model_type]
    if model_type == "gemma2":
        extra = extra | {"final_logit_softcapping": FINAL_CAP}
    torch.manual_seed(seed)
    config = getattr(tf, config_cls)(**(TINY | extra | overrides), attn_implementation="eager")
    model = perturb(getattr(tf, model_cls)(config).eval(), scale=0.2)
    if model_type == "gpt_oss":
        with torch.no_grad():  # sinks large enough to take a visible share of every row
            for layer in model.model.layers:
                layer.self_attn.sinks.add_(torch.linspace(-1.0, 2.0, config.num_attention_heads))
    return model


def compare(ref_model: torch.nn.Module, model: torch.nn.Module, idx: torch.Tensor) -> list[torch.Tensor]:
    """Logits and every layer's attention map ``[B, H, N, N]`` of ours against transformers'; ours returned."""
    trace = Trace()
    with torch.no_grad():
        ref = ref_model(idx, output_attentions=True)
        got = model(idx, trace)
    torch.testing.assert_close(got, ref.logits, **TOL)
    maps = [r for r in trace if r.kind != "router"]  # gpt-oss's experts record their router too
    assert len(maps) == len(ref.attentions)
    for record, theirs in zip(maps, ref.attentions, strict=True):
        assert record.weights.shape == theirs.shape
        torch.testing.assert_close(record.weights, theirs, **TOL)
    return [record.weights for record in maps]


def saved(tmp_path: Path, model_type: str, **overrides) -> tuple[Path, torch.nn.Module]:
    ref_model = reference(model_type, **overrides)
    ref_model.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, "llama")
    return tmp_path, ref_model


@pytest.mark.parametrize("model_type", list(CASES))
def test_a_folder_matches_transformers_logits_and_every_map(tmp_path, model_type):
    folder, ref_model = saved(tmp_path, model_type)
    tm = load_checkpoint(folder)
    assert tm.info["model_type"] == model_type and tm.kind == "causal"
    idx = torch.randint(0, TINY["vocab_size"], (2, 13), generator=torch.Generator().manual_seed(1))
    maps = compare(ref_model, tm.model, idx)
    for weights in maps:  # rows of an ordinary softmax sum to 1; with sinks to less
        sums = weights.sum(-1)
        if model_type == "gpt_oss":
            assert (sums < 1).all() and (sums > 0).all() and sums.min() < 0.5  # the sink's share is gone
        else:
            torch.testing.assert_close(sums, torch.ones(weights.shape[:-1]))


@pytest.mark.parametrize(
    ("model_type", "overrides"),
    [
        ("phi3", dict(sliding_window=4)),  # a window on every layer (Phi-3-mini's 2 047), as Mistral
        ("qwen3", dict(attention_bias=True, tie_word_embeddings=True)),  # biases on q, k, v and o
        ("olmo2", dict(num_key_value_heads=4)),  # multi-head: the key norm as wide as the query norm
        ("gemma2", dict(layer_types=["full_attention", "sliding_attention"], attn_logit_softcapping=None)),
    ],
    ids=["phi3-window", "qwen3-biased-tied", "olmo2-mha", "gemma2-own-pattern-no-score-cap"],
)
def test_variants_of_the_configs_match_too(tmp_path, model_type, overrides):
    folder, ref_model = saved(tmp_path, model_type, **overrides)
    idx = torch.randint(0, TINY["vocab_size"], (1, 12), generator=torch.Generator().manual_seed(6))
    compare(ref_model, load_checkpoint(folder).model, idx)


def test_each_architecture_is_built_from_its_parts(tmp_path):
    """The config picks the parts: what each architecture adds shows in our config and in the modules built."""
    cfgs = {}
    for model_type in CASES:
        folder, _ = saved(tmp_path / model_type, model_type)
        cfgs[model_type] = load_checkpoint(folder)
    qwen3, gemma2, phi3, olmo2, gpt_oss = (cfgs[t].model for t in CASES)
    assert (qwen3.cfg.qk_norm, qwen3.cfg.qk_norm_width, qwen3.cfg.head_dim) == (True, "head", 24)
    assert qwen3.blocks[0].attn.qk_norm.q.weight.shape == (24,)
    assert (gemma2.cfg.attn_softcap, gemma2.cfg.final_softcap, gemma2.cfg.qk_norm) == (0.5, FINAL_CAP, False)
    assert gemma2.cfg.layer_types == ("sliding", "full") and gemma2.cfg.norm_position == "sandwich"
    assert phi3.cfg.mlp == "swiglu" and phi3.blocks[0].attn.qkv.weight.shape == (64 + 2 * 32, 64)
    assert olmo2.cfg.norm_position == "after" and olmo2.cfg.qk_norm_width == "full"
    assert olmo2.blocks[0].attn.qk_norm.q.weight.shape == (64,) and olmo2.blocks[0].attn.qk_norm.k.weight.shape == (32,)
    assert isinstance(olmo2.blocks[0].norm1, torch.nn.Identity)  # no norm in front of the sub-layers
    assert (gpt_oss.cfg.mlp, gpt_oss.cfg.num_experts, gpt_oss.cfg.experts_per_token) == ("experts", 4, 2)
    assert gpt_oss.cfg.attention_sinks and gpt_oss.cfg.layer_types == ("sliding", "full")
    assert isinstance(gpt_oss.blocks[1].mlp, ClampedSwiGLUExperts) and gpt_oss.blocks[0].attn.qkv.bias is not None


def test_gemma2s_caps_bite_and_its_local_layer_sees_a_window(tmp_path):
    folder, ref_model = saved(tmp_path, "gemma2")
    model = load_checkpoint(folder).model
    idx = torch.randint(0, TINY["vocab_size"], (1, 17), generator=torch.Generator().manual_seed(2))
    maps = compare(ref_model, model, idx)
    with torch.no_grad():
        logits = model(idx)
        uncapped = CausalLM(model.cfg.replace(attn_softcap=None, final_softcap=None))
        uncapped.load_state_dict(model.state_dict())
        free = uncapped.eval()(idx)
    assert logits.abs().max() < FINAL_CAP < free.abs().max()  # the final cap holds where the logits would not
    visible = [(weights[0, 0] > 0).sum(-1) for weights in maps]  # keys each query reads
    assert torch.equal(visible[0], torch.arange(1, 18).clamp(max=WINDOW))  # layer 0: local
    assert torch.equal(visible[1], torch.arange(1, 18))  # layer 1: global


def test_gpt_oss_with_truncated_yarn_and_plain_rotary_matches_too(tmp_path):
    """YaRN's ramp at whole pairs (truncate, transformers' default) and no YaRN at all: the same parity."""
    from tx_explorer.modules.positional import Rotary, YaRNRotary

    idx = torch.randint(0, TINY["vocab_size"], (1, 21), generator=torch.Generator().manual_seed(5))
    for name, rope in (
        ("truncated", dict(YARN, truncate=True)),
        ("plain", {"rope_type": "default", "rope_theta": 50.0}),
    ):
        folder, ref_model = saved(tmp_path / name, "gpt_oss", rope_parameters=rope)
        model = load_checkpoint(folder).model
        position = model.blocks[0].attn.position
        assert isinstance(position, YaRNRotary) == (name == "truncated") and isinstance(position, Rotary)
        compare(ref_model, model, idx)


def test_cached_decoding_equals_the_full_pass(tmp_path):
    """The new parts hold under a KV cache too (QK-norm over the full width, norms after, soft caps, windows)."""
    from tx_explorer.modules.cache import KVCache

    for model_type in ("gemma2", "olmo2", "gpt_oss"):
        folder, _ = saved(tmp_path / model_type, model_type)
        model = load_checkpoint(folder).model
        idx = torch.randint(0, TINY["vocab_size"], (1, 11), generator=torch.Generator().manual_seed(3))
        cache = KVCache()
        with torch.no_grad():
            full = model(idx)
            steps = [model(idx[:, :4], cache=cache)] + [model(idx[:, i : i + 1], cache=cache) for i in range(4, 11)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL)


# --- refused: what our modules do not implement, named -------------------------------------------------------------
def _refused(call, key: str, *words: str) -> None:
    with pytest.raises(InputError) as e:
        call()
    assert e.value.key == key, str(e.value)
    for lang in ("en", "zh"):
        message = e.value.message(lang)
        assert all(w in message for w in words), message


def _config_only(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("model_type", "changes", "words"),
    [
        ("qwen3", dict(use_sliding_window=True, sliding_window=4), ("qwen3", "use_sliding_window")),
        ("phi3", dict(rope_parameters={"rope_type": "longrope", "rope_theta": 1e4}), ("phi3", "longrope")),
        ("gemma2", dict(hidden_activation="gelu"), ("gemma2", "'gelu'")),
        ("olmo2", dict(mlp_bias=True), ("olmo2", "mlp_bias")),
        ("gpt_oss", dict(rope_parameters=dict(YARN, mscale=0.7, mscale_all_dim=1.0)), ("gpt_oss", "mscale")),
        ("gpt_oss", dict(rope_parameters={"rope_type": "longrope", "rope_theta": 1e4}), ("gpt_oss", "longrope")),
    ],
    ids=["qwen3-windows", "phi3-longrope", "gemma2-activation", "olmo2-mlp-bias", "gpt-oss-mscale", "gpt-oss-longrope"],
)
def test_a_variant_we_do_not_implement_is_refused_from_its_config(tmp_path, model_type, changes, words):
    config = reference(model_type).config.to_dict() | changes
    folder = _config_only(tmp_path / model_type, config)
    _refused(lambda: load_checkpoint(folder), "checkpoint_variant", *words)


# --- Qwen3 GGUF files, written as llama.cpp's converter writes them ------------------------------------------------
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
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def _gguf_name(key: str) -> str:
    stem, _, param = key.rpartition(".")
    if stem.startswith("model.layers."):
        layer, _, part = stem.removeprefix("model.layers.").partition(".")
        return f"blk.{layer}.{_GGUF_NAMES[part]}.{param}"
    return f"{_GGUF_NAMES[stem]}.{param}"


def write_qwen3_gguf(
    path: Path, *, drop: str = "", window: int | None = None, quant: str = "Q8_0", **overrides
) -> torch.nn.Module:
    """A random Qwen3 (heads 128 wide, as every Qwen3 and as transformers' GGUF reader assumes) written as a
    ``qwen3`` GGUF file: llama.cpp's names, unpermuted W_Q/W_K, the 2-D weights as ``quant`` (K-quants by
    ``tests.checkpoints.quantize``, as gguf writes none; their rows must be whole 256-value super-blocks) and the
    norms as F32, a byte-level BPE vocabulary with ChatML; ``drop`` leaves one tensor out, ``window`` states a
    sliding window. Returns the float32 reference model."""
    import gguf

    model = reference("qwen3", head_dim=128, tie_word_embeddings=False, **overrides)
    cfg = model.config
    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    if window is not None:
        w.add_sliding_window(window)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    tok = write_tokenizer(path.parent / f"{path.stem}-tokenizer", "llama")
    tokens = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    tokens += [f"[PAD{i}]" for i in range(len(tokens), cfg.vocab_size - 2)] + ["<|im_start|>", "<|im_end|>"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in json.loads(tok.to_str())["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    w.add_token_types([3 if t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>") else 1 for t in tokens])
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_chat_template(CHATML)
    qtype = gguf.GGMLQuantizationType[quant]
    for key, t in model.state_dict().items():
        data = t.detach().float().numpy()
        if _gguf_name(key) == drop:
            continue
        if data.ndim == 1:
            w.add_tensor(_gguf_name(key), data)
        else:
            q = quantize(data, quant)
            w.add_tensor(_gguf_name(key), q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


# how far each quantisation's logits may stray from the original model's (mean |Δ| / mean |logit|): random weights
# of this model amplify the weights' rounding about fivefold (Q4_K's is ~8 % of their spread, Q8_0's ~0.5 %)
DRIFT = {"Q8_0": 0.05, "Q4_K": 0.5}


@pytest.mark.parametrize("quant", DRIFT)
def test_a_qwen3_gguf_file_is_read_as_transformers_reads_it(tmp_path, quant):
    from transformers import AutoModelForCausalLM

    from tx_explorer.interop.gguf import load_gguf

    path = tmp_path / f"tiny-qwen3-{quant}.gguf"
    original = write_qwen3_gguf(path, quant=quant, hidden_size=256, intermediate_size=256)  # whole super-blocks
    tm = load_checkpoint(path)
    assert tm.info["model_type"] == "qwen3" and tm.info["stored_dtypes"] == ["F32", quant]
    assert (tm.config.head_dim, tm.config.qk_norm) == (128, True)
    theirs = AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    idx = torch.tensor([tm.encode("The cat sat on the mat; heads copy tokens.").ids])
    compare(theirs, tm.model, idx)  # the same dequantised weights, the same model
    with torch.no_grad():  # and stays near the model it was written from (a garbled dequantisation strays ~1.4)
        ours, exact = load_gguf(path).model(idx), original(idx).logits
    assert (ours - exact).abs().mean() < DRIFT[quant] * exact.abs().mean()


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        ({"drop": "blk.1.attn_k_norm.weight"}, "gguf_missing_tensor", ("blk.1.attn_k_norm.weight", "qwen3")),
        ({"window": 4}, "checkpoint_variant", ("qwen3", "use_sliding_window")),
    ],
    ids=["missing-k-norm", "window"],
)
def test_a_qwen3_gguf_variant_we_do_not_read_is_refused_from_its_header(tmp_path, monkeypatch, edit, key, words):
    from tx_explorer.interop import gguf as reader

    path = tmp_path / "bad-qwen3.gguf"
    write_qwen3_gguf(path, **edit)
    monkeypatch.setattr(reader, "read_tensor", lambda *a, **k: pytest.fail("a tensor was read before the refusal"))
    _refused(lambda: load_checkpoint(path), key, *words)


def test_a_gpt_oss_gguf_header_is_refused_naming_what_is_missing(tmp_path):
    import gguf

    path = tmp_path / "gpt-oss.gguf"
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    w.add_block_count(2)
    w.add_tensor("token_embd.weight", torch.zeros(8, 32).numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    _refused(lambda: load_checkpoint(path), "checkpoint_missing_part", "gpt-oss", "MXFP4", "YaRN")


# --- attention sinks (gpt-oss) as a part of our modules --------------------------------------------------------------
def _sink_reference(q, k, v, sinks, mask):
    """float64 by hand: softmax over [scores, s_h] per row, the sink's column dropped."""
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    sink = sinks.view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    e = torch.cat([scores, sink], -1).exp()
    weights = (e / e.sum(-1, keepdim=True))[..., :-1]
    return weights @ v, weights


def test_sinks_take_a_share_of_every_row_against_float64_and_transformers():
    from types import SimpleNamespace

    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    gen = torch.Generator().manual_seed(0)
    b, h, n, dh = 2, 4, 9, 8
    q, k, v = (torch.randn(b, h, n, dh, generator=gen, dtype=torch.float64) for _ in range(3))
    attn = MultiHeadAttention(h * dh, h, sinks=AttentionSinks(h)).double()
    with torch.no_grad():
        attn.sinks.logits.copy_(torch.randn(h, generator=gen, dtype=torch.float64) * 2)
    mask = torch.ones(n, n, dtype=torch.bool).tril()  # causal
    y, weights = attn.attend(q, k, v, mask, None)
    want_y, want_w = _sink_reference(q, k, v, attn.sinks.logits.detach(), mask)
    torch.testing.assert_close(weights, want_w, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(y, want_y, atol=1e-12, rtol=1e-12)
    module = SimpleNamespace(sinks=attn.sinks.logits.detach(), num_key_value_groups=1, training=False)
    additive = torch.zeros(n, n, dtype=torch.float64).masked_fill(~mask, float("-inf"))[None, None]
    their_y, their_w = eager_attention_forward(module, q, k, v, additive, scaling=dh**-0.5)
    torch.testing.assert_close(weights, their_w, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(y.transpose(1, 2), their_y, atol=1e-12, rtol=1e-12)  # theirs (B, N, H, Dh)
    sums = weights.sum(-1)
    assert (sums < 1).all() and (sums > 0).all()


def test_a_stack_with_sinks_and_alternating_windows_traces_rows_below_one():
    """make_attention picks the sinks from the config; the trace records the weights without the sink column,
    each row summing to 1 − (the sink's share), and the local layers see their window only."""
    cfg = TransformerConfig(
        vocab_size=50,
        max_len=32,
        dim=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        positions="rotary",
        norm="rmsnorm",
        mlp="swiglu",
        bias=False,
        sliding_window=3,
        layer_types=("sliding", "full"),  # gpt-oss: 128-token windows on alternate layers
        attention_sinks=True,
    )
    assert isinstance(make_attention(cfg, layer=0).sinks, AttentionSinks)
    assert make_attention(cfg.replace(attention_sinks=False)).sinks is None
    torch.manual_seed(0)
    model = CausalLM(cfg).eval()
    trace = Trace()
    idx = torch.randint(0, 50, (1, 10))
    with torch.no_grad():
        logits = model(idx, trace)
        fused_free = model(idx)  # no trace: the sinks keep the explicit path, the same logits
    torch.testing.assert_close(logits, fused_free)
    for layer, record in enumerate(trace):
        assert record.weights.shape == (1, 4, 10, 10)
        assert (record.weights.sum(-1) < 1).all()  # the sink's share is gone from every row
        visible = (record.weights[0, 0] > 0).sum(-1)
        expected = torch.arange(1, 11).clamp(max=3) if layer == 0 else torch.arange(1, 11)
        assert torch.equal(visible, expected)


def test_routed_experts_are_the_gated_sum_of_their_clamped_experts():
    """Each token's output is Σ gate · expert(x) over its k experts, the gates a softmax over the k best router
    logits (gpt-oss's formula), each expert min(g, L), clamp(u, ±L), (u + 1)·g·σ(α·g): written out here in float64."""
    torch.manual_seed(0)
    part = ClampedSwiGLUExperts(8, 6, num_experts=4, top_k=2, limit=0.5, alpha=1.702).double()
    with torch.no_grad():
        for p in part.parameters():
            p.normal_(0, 1.0)  # large enough that both clamps act
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    got = part(x)
    flat, want = x.reshape(10, 8), torch.zeros(10, 8, dtype=torch.float64)
    logits = flat @ part.router.weight.T + part.router.bias
    top, chosen = logits.topk(2, dim=-1)
    gates = top.softmax(-1)
    clamped = 0
    for t in range(10):
        for slot in range(2):
            e = int(chosen[t, slot])
            g = part.w1[e] @ flat[t] + part.b1[e]
            u = part.w2[e] @ flat[t] + part.b2[e]
            clamped += int((g > 0.5).sum() + (u.abs() > 0.5).sum())
            g, u = g.clamp(max=0.5), u.clamp(-0.5, 0.5)
            want[t] += gates[t, slot] * (part.w3[e] @ ((u + 1) * g * torch.sigmoid(1.702 * g)) + part.b3[e])
    assert clamped > 0
    torch.testing.assert_close(got.reshape(10, 8), want, atol=1e-12, rtol=1e-12)
