"""Gemma 3 through our own modules: its new parts (heads wider than D/H, QK-norm, local and global layers with a
RoPE base each, sandwich norms, GeGLU, √D embeddings, its score scale, one key/value head) against transformers'
Gemma 3 on a random model saved with ``save_pretrained`` and read back by our ``load_checkpoint`` (logits and every
attention map ≤ 1e-4, on inputs longer than the window); and the packaged Gemma 3 270M GGUF file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.checkpoints import perturb, quantize, transformers_gguf, write_tokenizer
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}
WINDOW = 5
TINY = dict(
    vocab_size=300,
    hidden_size=48,
    intermediate_size=80,
    num_hidden_layers=7,  # layers 0–4 and 6 local, layer 5 global (every sixth)
    num_attention_heads=4,
    num_key_value_heads=1,  # MQA, as Gemma 3 270M
    head_dim=16,  # 4 × 16 = 64 ≠ D = 48
    query_pre_attn_scalar=24,  # a score scale other than 1/√D_H
    max_position_embeddings=64,
    sliding_window=WINDOW,
)


def gemma3_reference(seed: int = 0, **overrides) -> torch.nn.Module:
    """A random float32 ``Gemma3ForCausalLM`` (eager attention), every weight perturbed (norms, too)."""
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.Gemma3TextConfig(**(TINY | overrides), attn_implementation="eager")
    return perturb(tf.Gemma3ForCausalLM(config).eval(), scale=0.2)


def compare(reference: torch.nn.Module, model: torch.nn.Module, idx: torch.Tensor, tol=TOL) -> None:
    """Logits and every layer's attention map ``[B, H, N, N]`` of ours against transformers'."""
    trace = Trace()
    with torch.no_grad():
        ref = reference(idx, output_attentions=True)
        got = model(idx, trace)
    torch.testing.assert_close(got, ref.logits, **tol)
    assert len(trace) == len(ref.attentions)
    for record, theirs in zip(trace, ref.attentions, strict=True):
        assert record.weights.shape[1] == theirs.shape[1]
        torch.testing.assert_close(record.weights, theirs, **tol)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    out = tmp_path_factory.mktemp("gemma3")
    reference = gemma3_reference()
    reference.save_pretrained(out)
    write_tokenizer(out, "llama")
    return out, reference


def test_a_gemma3_folder_matches_transformers_past_the_window(folder):
    path, reference = folder
    tm = load_checkpoint(path)
    cfg = tm.config
    assert tm.info["model_type"] == "gemma3_text" and tm.kind == "causal"
    assert (cfg.head_dim, cfg.num_kv_heads, cfg.norm_position, cfg.mlp) == (16, 1, "sandwich", "geglu")
    assert cfg.layer_types == ("sliding",) * 5 + ("full", "sliding")
    idx = torch.randint(0, TINY["vocab_size"], (2, 23), generator=torch.Generator().manual_seed(1))
    compare(reference, tm.model, idx)
    trace = Trace()
    with torch.no_grad():
        tm.model(idx, trace)
    for layer, record in enumerate(trace):
        visible = (record.weights[0, 0] > 0).sum(dim=-1)  # keys each query row reads
        expected = torch.arange(1, 24).clamp(max=WINDOW) if layer != 5 else torch.arange(1, 24)
        assert torch.equal(visible, expected), layer


def test_cached_decoding_equals_the_full_pass_on_mixed_layers(folder):
    from tx_explorer.modules.cache import KVCache

    tm = load_checkpoint(folder[0])
    idx = torch.randint(0, TINY["vocab_size"], (1, 14), generator=torch.Generator().manual_seed(2))
    cache = KVCache()
    with torch.no_grad():
        full = tm.model(idx)
        steps = [tm.model(idx[:, :6], cache=cache)] + [tm.model(idx[:, i : i + 1], cache=cache) for i in range(6, 14)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL)


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_key_value_heads": 2, "tie_word_embeddings": False},  # grouped heads, an LM head of its own
        {"num_hidden_layers": 3, "layer_types": ["full_attention", "sliding_attention", "full_attention"]},
        {
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 50.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 7.0},
            }
        },
    ],
    ids=["gqa-untied", "own-pattern", "thetas"],
)
def test_variants_of_the_config_match_too(tmp_path, overrides):
    reference = gemma3_reference(seed=3, **overrides)
    reference.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, "llama")
    idx = torch.randint(0, TINY["vocab_size"], (1, 17), generator=torch.Generator().manual_seed(4))
    compare(reference, load_checkpoint(tmp_path).model, idx)


# --- gemma3 GGUF files written here as llama.cpp's converter writes them --------------------------------------------
_GGUF_BLOCK = {  # Gemma 3's names → llama.cpp's (every "norm" among them stored as 1 + w)
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
PIECES = ["▁", *"abcdefghijklmnopqrstuvwxyz", "▁t", "he", "▁the", "▁a", "at", "▁c", "▁cat", "in", "  ", "\n"]


def gemma3_vocab(size: int) -> tuple[list[str], list[int]]:
    """A small SentencePiece vocabulary as Gemma's files hold one: control tokens, 256 byte pieces, then pieces
    (runs of spaces stored as spaces, "\\n" user-defined), padded with unused control tokens to ``size``."""
    tokens = SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + PIECES
    types = [3] * len(SPECIALS) + [6] * 256 + [4 if p == "\n" else 1 for p in PIECES]
    unused = [f"<unused{i}>" for i in range(size - len(tokens))]
    return tokens + unused, types + [3] * len(unused)


def write_gemma3_gguf(
    path: Path,
    *,
    seed: int = 0,
    drop: str = "",
    key_length: int | None = None,
    pattern=None,
    vocab_cut: int = 0,
    quant: str = "F32",
    **overrides,
) -> torch.nn.Module:
    """A random Gemma 3 model (query_pre_attn_scalar = head_dim, the scale llama.cpp uses) written as a gemma3
    GGUF file, its norms as 1 + w, in float32 or, for matrices whose rows are whole blocks, as ``quant`` (K-quants
    by ``tests.checkpoints.quantize``, as gguf writes none); ``drop`` leaves one tensor out, ``key_length`` states
    another head width, ``pattern`` writes attention.sliding_window_pattern, ``vocab_cut`` drops the last tokens.
    Returns the reference model."""
    import gguf

    model = gemma3_reference(
        seed, **({"query_pre_attn_scalar": overrides.get("head_dim", TINY["head_dim"])} | overrides)
    )
    cfg = model.config
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(key_length or cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_parameters["full_attention"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_sliding_window(cfg.sliding_window)
    if isinstance(pattern, str):  # a kind of value llama.cpp never writes there
        w.add_string("gemma3.attention.sliding_window_pattern", pattern)
    elif pattern is not None:
        w.add_sliding_window_pattern(pattern)
    tokens, types = gemma3_vocab(cfg.vocab_size)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens[: len(tokens) - vocab_cut])
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)
    for key, t in model.state_dict().items():
        stem = key.removeprefix("model.").removesuffix(".weight")
        if stem == "lm_head":
            continue  # tied
        if stem.startswith("layers."):
            _, layer, part = stem.split(".", 2)
            name = f"blk.{layer}.{_GGUF_BLOCK[part]}.weight"
        else:
            name = {"embed_tokens": "token_embd.weight", "norm": "output_norm.weight"}[stem]
        data = (t + 1 if "norm" in stem else t).float().numpy()
        qtype = gguf.GGMLQuantizationType[quant]
        if name == drop:
            continue
        if data.ndim == 2 and data.shape[1] % gguf.GGML_QUANT_SIZES[qtype][0] == 0 and quant != "F32":
            q = quantize(data, quant)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def test_a_gemma3_gguf_file_is_the_model_it_was_written_from(tmp_path):
    from tx_explorer.interop.gguf import load_gguf

    path = tmp_path / "tiny-gemma3.gguf"
    reference = write_gemma3_gguf(path)
    tm = load_gguf(path)
    assert tm.config.layer_types == ("sliding",) * 5 + ("full", "sliding")
    ids = tm.encode("the cat at  the\nhat 🙂").ids
    assert ids[0] == 2 and tm.decode(ids[1:]) == "the cat at  the\nhat 🙂"  # <bos>, then bytes for the emoji
    assert tm.tokenizer.token_to_id("▁cat") in ids and tm.tokenizer.token_to_id("\n") in ids
    idx = torch.randint(0, TINY["vocab_size"], (1, 19), generator=torch.Generator().manual_seed(5))
    compare(reference, tm.model, idx)


def _refused(path: Path, key: str, *words: str) -> None:
    from tx_explorer.errors import InputError
    from tx_explorer.interop.gguf import load_gguf

    with pytest.raises(InputError) as e:
        load_gguf(path)
    assert e.value.key == key, str(e.value)
    for lang in ("en", "zh"):
        message = e.value.message(lang)
        assert all(w in message for w in words), message


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        ({"drop": "blk.3.post_ffw_norm.weight"}, "gguf_missing_tensor", ("blk.3.post_ffw_norm.weight",)),
        ({"drop": "blk.0.attn_q_norm.weight"}, "gguf_missing_tensor", ("blk.0.attn_q_norm.weight",)),
        ({"key_length": 12}, "gguf_head_width", ("blk.0.attn_q.weight", "64")),
        ({"pattern": "every sixth"}, "gguf_layer_pattern", ("every sixth",)),
        ({"pattern": [True, False]}, "gguf_layer_pattern", ("sliding_window_pattern",)),
        ({"vocab_cut": 10}, "gguf_vocab_size", ("290", "300")),
    ],
    ids=["missing-post-norm", "missing-qk-norm", "head-width", "pattern-text", "pattern-short", "vocab-cut"],
)
def test_a_bad_gemma3_gguf_file_is_refused_in_both_languages(tmp_path, edit, key, words):
    path = tmp_path / "bad.gguf"
    write_gemma3_gguf(path, **edit)
    _refused(path, key, *words)


def test_a_stated_layer_pattern_is_followed(tmp_path):
    from tx_explorer.interop.gguf import load_gguf

    path = tmp_path / "pattern.gguf"
    flags = [True, False, True, True, False, True, True]  # True = sliding
    write_gemma3_gguf(path, pattern=flags)
    assert load_gguf(path).config.layer_types == tuple("sliding" if f else "full" for f in flags)


# --- the packaged Gemma 3 270M (the model tier: the names say gemma3_270m) ------------------------------------------
SAMPLES = {
    "english": "The cat sat on the mat. It was a sunny day, and the children played in the garden.",
    "chinese": "注意力机制让模型关注输入的不同部分。我们用中文测试分词。",
    "code": "def square(x: int) -> int:\n    return x ** 2  # 平方\n\tif a != b: {'k': [1, 2]}",
    "emoji": "emoji 🙂👍🏽 and flags 🇫🇷🇯🇵, a family 👨‍👩‍👧",
    "control": "ctrl \x00\x01\x07 bell\ttab\r\n end \x7f",
    "spaces": "  leading spaces   and    runs\n\n\nof lines",
    "specials": "<start_of_turn>user\nhi<end_of_turn>\n<bos>",
}


@pytest.fixture(scope="module")
def gemma3_270m():
    from tx_explorer import models

    assert "gemma3-270m" in models.available_models("text", kind="causal"), "make run assembles it"
    return models.load_model("gemma3-270m")


def _gemma3_270m_transformers(auto):
    from tx_explorer.interop.assemble import GEMMA3_PATH

    return transformers_gguf(GEMMA3_PATH, auto)


# The ids transformers' GGUF tokenizer gives on SAMPLES, recorded by `python -m tests.test_gemma3` from the same file:
# converting the 262 144-piece vocabulary takes transformers 30-90 s on 2 cores (our reader 5 s), once per make test.
TRANSFORMERS_IDS = Path(__file__).with_name("data") / "gemma3_270m_transformers_ids.json"


def record_transformers_ids() -> None:
    from transformers import AutoTokenizer

    theirs = _gemma3_270m_transformers(AutoTokenizer)
    ids = {name: theirs(text)["input_ids"] for name, text in SAMPLES.items()}
    TRANSFORMERS_IDS.write_text(json.dumps(ids) + "\n", encoding="utf-8")


def test_gemma3_270m_vocabulary_gives_transformers_ids(gemma3_270m):
    theirs = json.loads(TRANSFORMERS_IDS.read_text(encoding="utf-8"))
    assert theirs.keys() == SAMPLES.keys(), "SAMPLES changed: re-record with python -m tests.test_gemma3"
    for name, text in SAMPLES.items():
        ids = gemma3_270m.encode(text).ids
        assert ids == theirs[name], name
        assert ids[0] == 2 and gemma3_270m.decode(ids[1:]) == text, name  # <bos> first; decoding gives the text back


def test_gemma3_270m_matches_transformers_gguf_loader_past_the_window(gemma3_270m):
    """Log-probabilities ≤ 1e-3 at every fourth position and the last, and every attention map ≤ 1e-4, on 656 tokens:
    prose, then 300 random ids twice (measured: 2.4e-4 and 1.5e-5). Every position's hidden state feeds the maps
    compared; the 262,144-wide LM head runs on a quarter of them (each side's [656, V] logits were 0.7 GB)."""
    from transformers import AutoModelForCausalLM

    prose = "Attention lets every token look at every earlier token and take a weighted mix of their values. " * 3
    rand = torch.randint(1000, 200000, (300,), generator=torch.Generator().manual_seed(0)).tolist()
    idx = torch.tensor([gemma3_270m.encode(prose).ids + rand + rand])
    n = idx.shape[1]
    assert n > gemma3_270m.config.sliding_window == 512
    kept = torch.tensor(sorted({*range(0, n, 4), n - 1}))  # (K,): positions whose logits are read
    trace = Trace()
    with torch.no_grad():
        model = gemma3_270m.model
        got = model.logits(model.states(idx, trace)[:, kept]).log_softmax(-1)  # (1, K, V)
        ref = _gemma3_270m_transformers(AutoModelForCausalLM).eval()(idx, output_attentions=True, logits_to_keep=kept)
    assert ref.logits.shape == got.shape == (1, len(kept), gemma3_270m.config.vocab_size)
    torch.testing.assert_close(got, ref.logits.log_softmax(-1), atol=1e-3, rtol=0)
    assert len(trace) == len(ref.attentions) == 18
    for layer, (record, theirs) in enumerate(zip(trace, ref.attentions, strict=True)):
        assert record.weights.shape == (1, 4, n, n)  # four query heads reading one key/value head
        torch.testing.assert_close(record.weights, theirs, atol=1e-4, rtol=0)
        visible = (record.weights[0, :, -1] > 0).sum(dim=-1)  # keys the last query reads, per head
        if layer in (5, 11, 17):  # global: beyond the window (a weight may still round to 0 in float32)
            assert (visible > 512).all(), layer
        else:
            assert visible.tolist() == [512] * 4, layer
    inside = kept < n - 1  # a kept position's next token is known
    nll = torch.nn.functional.cross_entropy(got[0, inside], idx[0, kept[inside] + 1], reduction="none")
    second, first = kept[inside] >= n - 300, (kept[inside] >= n - 600) & (kept[inside] < n - 300)
    assert nll[second].mean() < nll[first].mean() / 4  # the second copy is copied, not guessed


# --- the install step and the registry ---------------------------------------------------------------------------


def test_assembling_checks_the_sha256_and_leaves_nothing_wrong_behind(tmp_path, monkeypatch):
    from tx_explorer.interop import assemble

    target = tmp_path / "m" / assemble.GEMMA3_FILE
    assert assemble.assemble(target) == target
    assert target.stat().st_size == assemble.GEMMA3_BYTES and assemble.sha256(target) == assemble.GEMMA3_SHA256
    target.unlink()
    monkeypatch.setattr(assemble, "GEMMA3_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="SHA-256"):
        assemble.assemble(target)
    assert not any(target.parent.iterdir())  # neither the file nor its partial copy


def test_without_the_assembled_file_the_entry_is_absent_and_says_what_to_run(tmp_path, monkeypatch):
    from tx_explorer import models
    from tx_explorer.interop import gguf

    monkeypatch.setattr(gguf, "GEMMA3_PATH", tmp_path / "missing.gguf")
    assert "gemma3-270m" not in models.available_models("text")
    with pytest.raises(models.BundleError, match="make run"):
        models.load_model("gemma3-270m")


@pytest.mark.parametrize("quant", ["Q8_0", "Q5_0", "Q4_K", "Q6_K"])  # the four the packaged Q4_K_M file mixes
def test_a_quantised_gemma3_gguf_file_matches_transformers_gguf_loader(tmp_path, quant):
    """Both loaders read the same quantised file (heads of width 256: transformers' default score scale and
    llama.cpp's 1/√D_H then agree; D = 256 so that every matrix's rows are whole K-quant super-blocks): logits and
    every map ≤ 1e-4."""
    from transformers import AutoModelForCausalLM

    from tx_explorer.interop.gguf import load_gguf, read_header

    path = tmp_path / f"tiny-gemma3-{quant}.gguf"
    write_gemma3_gguf(path, quant=quant, hidden_size=256, head_dim=256, intermediate_size=256)
    assert {info.qtype.name for info in read_header(path).tensors.values()} == {"F32", quant}  # norms stay F32
    theirs = AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    idx = torch.randint(0, TINY["vocab_size"], (1, 19), generator=torch.Generator().manual_seed(6))
    compare(theirs, load_gguf(path).model, idx)


def test_the_pages_per_layer_inputs_reproduce_a_sandwich_models_attention(folder):
    """The lenses and inspectors re-run one layer's attention from ``attention_inputs``: in a sandwich block that
    input is norm1(x), as in a pre-norm one (handing it the raw stream gave other maps)."""
    tm = load_checkpoint(folder[0])
    ids = list(range(5, 28))
    trace = Trace()
    tm.run(ids, trace)
    mask = tm.mask(len(ids))
    for layer, (record, x) in enumerate(zip(trace, tm.attention_inputs(ids), strict=True)):
        again = Trace()
        with torch.no_grad():
            tm.attention_module(layer)(x, mask=mask, trace=again)
        torch.testing.assert_close(next(iter(again)).weights, record.weights)


if __name__ == "__main__":
    record_transformers_ids()
