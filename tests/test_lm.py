"""The bundled tiny-gpt, its corpus, tokenizer and trainer, and parameter counting."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from tx_explorer import models
from tx_explorer.analysis import params
from tx_explorer.analysis.bigram import bigram_baseline, bigram_counts, bigram_nll
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.data.tokenizer import EOT, byte_level_label, piece_label
from tx_explorer.families.text import TextModel, load_tiny_gpt
from tx_explorer.modules.cache import common_prefix
from tx_explorer.trace import Trace
from tx_explorer.train import lm as train_lm

BUNDLE = models.WEIGHTS_DIR / "tiny-gpt"
ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def tiny() -> TextModel:
    return models.load_model("tiny-gpt")


# --- the bundle ---------------------------------------------------------------------------------------


def test_bundle_is_small_and_complete() -> None:
    files = {p.name: p.stat().st_size for p in BUNDLE.iterdir()}
    assert set(files) == set(train_lm.BUNDLE_FILES)
    assert sum(files.values()) <= 10 * 2**20
    assert set(json.loads((BUNDLE / "manifest.json").read_text())) == set(files) - {"manifest.json"}


def test_registry_loads_tiny_gpt(tiny: TextModel) -> None:
    assert "tiny-gpt" in models.available_models() and "tiny-gpt" in models.available_models("text", kind="causal")
    assert tiny.kind == "causal" and tiny.max_len == PRESETS["tiny"].max_len
    assert not tiny.model.training and not any(p.requires_grad for p in tiny.model.parameters())
    assert tiny.model.head.weight is tiny.model.embed.tok_embed.weight  # tied, stored once
    assert "head.weight" not in load_file(str(BUNDLE / "model.safetensors"))


def test_tiny_gpt_beats_the_bigram_clearly(tiny: TextModel) -> None:
    info = tiny.info
    assert info["val_loss"] < info["bigram"]["val_loss"] - 0.2
    assert info["corpus"]["sha256"] and info["parameters"] == sum(p.numel() for p in tiny.model.parameters())
    section = (ROOT / "BENCHMARKS.md").read_text().split("<!-- lm:start -->")[1].split("<!-- lm:end -->")[0]
    assert f"{info['val_loss']:.3f}" in section and f"{info['bigram']['val_loss']:.3f}" in section


def test_loss_curve_goes_down() -> None:
    rows = (BUNDLE / "loss_curve.csv").read_text().splitlines()
    assert rows[0] == "step,tokens,lr,train_loss,val_loss"
    val = [float(r.split(",")[-1]) for r in rows[1:]]
    assert len(val) >= 5 and val[-1] < val[0] - 1.0


@pytest.mark.parametrize("victim", ["model.safetensors", "tokenizer.json", "config.json"])
def test_manifest_rejects_a_tampered_file(tmp_path: Path, victim: str) -> None:
    copy = tmp_path / "tiny-gpt"
    shutil.copytree(BUNDLE, copy)  # never touch the real bundle
    assert load_tiny_gpt(copy).max_len > 0  # the untouched copy loads
    data = bytearray((copy / victim).read_bytes())
    data[len(data) // 2] ^= 0x01
    (copy / victim).write_bytes(bytes(data))
    with pytest.raises(models.BundleError, match=rf"{victim}.*python -m tx_explorer.train lm --preset tiny"):
        load_tiny_gpt(copy)


def test_missing_file_names_the_retrain_command(tmp_path: Path) -> None:
    copy = tmp_path / "tiny-gpt"
    shutil.copytree(BUNDLE, copy)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(models.BundleError, match=r"missing.*python -m tx_explorer\.train lm"):
        load_tiny_gpt(copy)


# --- tokenizer and encoding ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=200))
def test_tokenizer_round_trip(tiny: TextModel, text: str) -> None:
    ids = tiny.tokenizer.encode(text).ids
    assert tiny.decode(ids) == text
    assert all(0 <= i < tiny.config.vocab_size for i in ids)


def test_tokenizer_basics(tiny: TextModel) -> None:
    assert tiny.tokenizer.get_vocab_size() == PRESETS["tiny"].vocab_size
    assert tiny.tokenizer.token_to_id(EOT) == 0
    enc = tiny.encode("The function returns a list.")
    assert len(enc.ids) <= 8  # common English words are single tokens
    assert enc.tokens[1] == "▁function" and not any("Ġ" in t for t in enc.tokens)
    assert byte_level_label("ð") == "\\xf0"  # a lone byte of a multi-byte character
    # SmolLM2's tokens of a carriage return, a control byte, a no-break space: blank labels before; now their codes
    assert [byte_level_label(t) for t in ("č", "Ā", "Âł", "Ġ")] == ["␍", "\\x00", "\\xa0", "▁"]
    assert piece_label("▁\u200b\u3000a") == "▁\\u200b\\u3000a"  # a zero-width and an ideographic space


def test_sentencepiece_labels_show_newlines_and_byte_pieces(tiny: TextModel) -> None:
    """Gemma 3's pieces: a newline token was a blank label (the legend promises ↵), a byte-fallback piece <0x0A>
    would be read by Plotly as an HTML tag and dropped; spaces are ▁ already, special tokens stay as they are."""
    assert [piece_label(t) for t in ("\n", "\n\n", "\t", "▁the", "<0x0A>", "<0x41>", "<0xF0>")] == [
        "↵",
        "↵↵",
        "⇥",
        "▁the",
        "↵",
        "A",
        "\\xf0",
    ]
    pieces = TextModel("pieces", tiny.model, tiny.tokenizer, "causal", 8, special_tokens=("<0x0A>",))  # not byte-level
    assert pieces.label("\n") == "↵" and pieces.label("<0x0A>") == "<0x0A>"  # a special token is left as it is


def test_encode_truncates_with_a_flag(tiny: TextModel) -> None:
    long = tiny.encode("word " * 2000)
    assert long.truncated and len(long.ids) == tiny.max_len and long.num_tokens > tiny.max_len
    short = tiny.encode("word " * 10)
    assert not short.truncated and short.num_tokens == len(short.ids)
    for bad in ("", "   \n\t "):
        with pytest.raises(ValueError, match="empty"):
            tiny.encode(bad)
    with pytest.raises(ValueError, match="context"):
        tiny.run(list(range(tiny.max_len + 1)))


# --- corpus and baseline ------------------------------------------------------------------------------


def test_corpus_is_the_one_the_model_was_trained_on(tiny: TextModel) -> None:
    docs = corpus.documents()
    desc = corpus.describe(docs)
    assert desc["characters"] > 5_000_000 and all(corpus.is_prose(p) for d in docs[::50] for p in d.split("\n"))
    assert "torch 2.14.1" in desc["source"]  # provenance names the pinned packages read
    if desc["python"] == tiny.info["corpus"]["python"]:
        assert desc["sha256"] == tiny.info["corpus"]["sha256"]  # deterministic: same Python and pins, same text
    stdlib = corpus.documents("stdlib")
    assert docs[: len(stdlib)] == stdlib and len(stdlib) < len(docs)  # the standard library comes first
    with pytest.raises(ValueError, match="unknown corpus"):
        corpus.documents("web")
    parts = corpus.split(docs)
    assert len(parts.val) / len(docs) == pytest.approx(0.05, abs=0.02)
    assert set(parts.val).isdisjoint(parts.train)
    assert set(corpus.split(docs[::2]).val) <= set(parts.val)  # a document's side never depends on the others


@pytest.mark.parametrize(
    "text, prose",
    [
        ("Return a new list containing all items from the iterable in ascending order.", True),
        ("x = foo(bar[1], baz={'a': 2}) == qux", False),
        (">>> print('hello world, this is a doctest line here')", False),
        ("short one.", False),
    ],
)
def test_prose_filter(text: str, prose: bool) -> None:
    assert corpus.is_prose(text) is prose


def test_bigram_against_a_loop() -> None:
    ids = torch.tensor([0, 1, 2, 1, 2, 2, 0, 1, 1, 2])
    v, k = 3, 0.5
    counts = bigram_counts(ids, v)
    assert counts.sum() == len(ids) - 1 and counts[1, 2] == 3
    val = torch.tensor([2, 0, 1, 2])
    c = counts.numpy()
    want = -np.mean([np.log((c[a, b] + k) / (c[a].sum() + k * v)) for a, b in zip(val[:-1].tolist(), val[1:].tolist())])
    assert bigram_nll(counts, val, k) == pytest.approx(want)
    assert bigram_baseline(ids, val, v)["val_loss"] > 0


# --- trainer: resumable, writes a loadable bundle -----------------------------------------------------


def _train(tmp: Path, run: str, argv: list[str]) -> Path:
    out = tmp / f"bundle-{run}"
    train_lm.main(
        [
            "--preset",
            "unit",
            "--batch-size",
            "2",
            "--eval-every",
            "2",
            "--eval-windows",
            "2",
            "--warmup",
            "1",
            "--run-dir",
            str(tmp / run),
            "--out",
            str(out),
            "--benchmarks",
            str(tmp / "B.md"),
            *argv,
        ]
    )
    return out


def test_training_resumes_to_the_same_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tuple(f"Document number {i} explains how the parser reads a line of text." for i in range(200))
    monkeypatch.setattr(corpus, "documents", lambda source="full": docs)
    unit = TransformerConfig(vocab_size=300, max_len=16, dim=16, num_layers=1, num_heads=2)
    monkeypatch.setitem(PRESETS, "unit", unit)
    straight = _train(tmp_path, "a", ["--steps", "6"])
    _train(tmp_path, "b", ["--steps", "6", "--max-minutes", "1e-9"])  # stops at the first checkpoint (step 2)
    assert json.loads((tmp_path / "b" / "state.json").read_text())["step"] == 2
    resumed = _train(tmp_path, "b", ["--steps", "6", "--resume"])
    a, b = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    assert "<!-- lm:start -->" in (tmp_path / "B.md").read_text()
    tm = load_tiny_gpt(resumed)
    assert tm.info["steps"] == 6 and tm.max_len == 16


# --- parameter counts ---------------------------------------------------------------------------------

PUBLISHED_EXACT = {  # independent references: the checkpoints' own parameter counts
    "gpt2-small": 124_439_808,  # HF GPT2LMHeadModel (tied head counted once)
    "gpt2-xl": 1_557_611_200,
    "gpt3": 174_604_259_328,  # 96 × 12288 with 50257 × 12288 tokens and 2048 positions
    "bert-base": 108_891_648,  # HF BertModel without the pooler
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_EXACT))
def test_parameter_counts_of_published_configs(name: str) -> None:
    kind = "encoder" if name.startswith("bert") else "causal"
    cfg = PRESETS[name]
    model = params.build_on_meta(cfg, kind)
    assert all(p.is_meta for p in model.parameters())
    measured = params.measure(model)
    assert params.count_params(cfg, kind) == measured
    assert sum(measured.values()) == sum(p.numel() for p in model.parameters()) == PUBLISHED_EXACT[name]


def test_original_transformer_is_six_plus_six() -> None:
    row = params.LECTURE_TABLE[0]
    counted = params.count_params(row.config, row.kind, row.decoder_layers)
    assert counted == params.measure(params.build_on_meta(row.config, row.kind, row.decoder_layers))
    assert sum(counted.values()) == 214_245_376  # 213M in the paper
    d = row.config.dim
    assert counted["attention"] == (6 + 6 * 2) * (4 * d * d + 4 * d)  # decoder blocks add cross-attention


@pytest.mark.parametrize(
    "changes",
    [
        dict(mlp="swiglu"),
        dict(norm="rmsnorm"),
        dict(tie_embeddings=False),
        dict(positions="sinusoidal"),
        dict(bias=False),
        dict(mlp_ratio=3.0, final_norm=False),
        dict(type_vocab_size=2, embed_norm=True),
    ],
)
def test_formula_matches_the_meta_model(changes: dict) -> None:
    cfg = PRESETS["tiny"].replace(**changes)
    for kind in ("causal", "encoder"):
        assert params.count_params(cfg, kind) == params.measure(params.build_on_meta(cfg, kind))


def test_twelve_l_d_squared_dominates_large_models() -> None:
    cfg = PRESETS["gpt3"]
    counted = params.count_params(cfg)
    blocks = counted["attention"] + counted["mlp"]
    assert blocks == pytest.approx(12 * cfg.num_layers * cfg.dim**2, rel=1e-3)


def test_prefix_logits_do_not_change_when_tokens_are_appended() -> None:
    """§6: under the causal mask a prefix's logits are the same alone and inside a longer text; the check can
    fail: without the mask (every block told to see the future) the same comparison is far from zero."""
    from tx_explorer.analysis import lm

    tm = models.load_model("tiny-gpt")
    r = lm.read(tm, "The cat sat on the mat because it was warm.")
    assert r.prefix_len == (len(r.ids) + 1) // 2 and r.prefix_delta <= 1e-6 * r.prefix_scale
    full = tm.attention(tm.encode("The cat sat on the mat because it was warm."))[0]
    with torch.no_grad():  # the same comparison without the mask: appended tokens do reach the prefix
        attn, embed = tm.model.blocks[0].attn, tm.model.embed
        whole, alone = attn(embed(torch.tensor([r.ids]))), attn(embed(torch.tensor([r.ids[:3]])))
    assert (whole[0, :3] - alone[0]).abs().max() > 1e-3
    assert lm.prefix_invariance(tm, r.ids, full + 0.5, 3) == pytest.approx(0.5, abs=1e-4)
    # the opening's states kept by the page: the head makes from them the very logits a traced run alone gives
    with torch.no_grad():
        run_alone = tm.run(r.ids[:3], trace=Trace())[0]  # (3, V)
    assert torch.equal(tm.model.logits(lm.alone_states(tm, r.ids[:3])), run_alone)
    asked = []
    kept = lambda ids: asked.append(list(ids)) or lm.alone_states(tm, ids)  # noqa: E731
    again = lm.read(tm, "The cat sat on the mat because it was warm.", alone=kept)
    assert asked == [r.ids[: r.prefix_len]] and again.prefix_delta == r.prefix_delta


def test_prefix_verdict_allows_float32_rounding_that_grows_with_depth():
    from tx_explorer.views.language_model import prefix_verdict

    assert prefix_verdict(0.0, 30.0, 30) == "prefix_exact"
    assert prefix_verdict(7.8e-5, 27.4, 30) == "prefix_close"  # SmolLM2, measured: 2.9e-6 of the largest logit
    assert prefix_verdict(2e-4, 27.4, 30) == "prefix_close"
    assert prefix_verdict(2e-4, 27.4, 4) == "prefix_moved"  # the same gap in a 4-layer model is no rounding
    assert prefix_verdict(0.01, 27.4, 30) == "prefix_moved"


# --- the chat: sampling, why a reply stopped, the history that fits, what a reply read ----------------------------

CHATML = (  # ChatML's shape with tiny-gpt's one special token as the turn marker
    "{% for m in messages %}<|endoftext|>{{ m['role'] }}\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|endoftext|>assistant\n{% endif %}"
)
PROMPT = "Return a new list containing"


def _reply(tm: TextModel, new: int, **sampling) -> list[int]:
    from tx_explorer.analysis import lm

    ids = tm.encode(PROMPT).ids
    *_, last = lm.replies(tm, ids, new, stop=frozenset(), **sampling)
    return last.ids


def test_top_k_1_and_a_cold_temperature_sample_the_greedy_text(tiny: TextModel) -> None:
    greedy = _reply(tiny, 16)
    assert _reply(tiny, 16, greedy=False, top_k=1, temperature=1.7, seed=4) == greedy
    assert _reply(tiny, 16, greedy=False, temperature=1e-4, seed=5) == greedy  # T → 0: the softmax is the argmax
    hot = [_reply(tiny, 16, greedy=False, temperature=1.5, seed=s) for s in range(3)]
    assert any(h != greedy for h in hot)  # a hot sample leaves the argmax: the two checks above can fail


def test_the_same_seed_writes_the_same_reply(tiny: TextModel) -> None:
    first = _reply(tiny, 16, greedy=False, temperature=1.5, top_k=50, seed=7)
    assert _reply(tiny, 16, greedy=False, temperature=1.5, top_k=50, seed=7) == first
    assert any(_reply(tiny, 16, greedy=False, temperature=1.5, top_k=50, seed=s) != first for s in (8, 9))


def test_a_reply_says_why_it_stopped(tiny: TextModel) -> None:
    from tx_explorer.analysis import lm

    ids = tiny.encode(PROMPT).ids
    *growing, full = lm.replies(tiny, ids, 6, stop=frozenset())
    assert full.stop == lm.LIMIT and len(full.ids) == 6 and full.end is None
    assert all(r.stop is None for r in growing) and full.text == tiny.decode(full.ids)
    i = next(i for i, t in enumerate(full.ids) if i and t not in full.ids[:i])  # a token new to the reply
    *_, ended = lm.replies(tiny, ids, 6, stop=frozenset({full.ids[i]}))  # ends the turn there
    assert (ended.stop, ended.ids, ended.end) == (lm.END_OF_TURN, full.ids[:i], full.ids[i])


@pytest.fixture(scope="module")
def chatty(tiny: TextModel) -> TextModel:
    import dataclasses

    return dataclasses.replace(tiny, chat_template=CHATML)


def _turns(n: int) -> list[dict[str, str]]:
    return [
        {"role": role, "content": f"{role} {i}: " + "the list of files in the folder " * 2}
        for i in range(n)
        for role in ("user", "assistant")
    ]


def test_a_short_history_is_read_whole(chatty: TextModel) -> None:
    from tx_explorer.analysis import lm

    p = lm.chat_prompt(chatty, _turns(2), "Return the path.", 8, 512)
    assert (p.dropped, p.cut, len(p.messages)) == (0, None, 5)
    assert p.ids == chatty.tokenizer.encode(chatty.chat_prompt(p.messages), add_special_tokens=False).ids
    turn = chatty.decode(p.ids[p.start :])  # the new message's turn starts at its turn marker
    assert turn.startswith("<|endoftext|>user\nReturn the path.")


def test_the_oldest_turns_are_dropped_until_the_history_fits(chatty: TextModel) -> None:
    from tx_explorer.analysis import lm

    history, new = _turns(4), 8
    whole = len(lm.chat_prompt(chatty, history, "Return the path.", new, 512).ids)
    limit = whole + new - 1  # one token too few for every turn
    p = lm.chat_prompt(chatty, history, "Return the path.", new, limit)
    assert p.dropped == 1 and p.messages[:-1] == history[2:]  # the oldest turn, and only it
    assert len(p.ids) + new <= limit and p.limit == limit
    tight = lm.chat_prompt(chatty, history, "Return the path.", new, len(p.ids) + new - 1)
    assert tight.dropped == 2 and tight.messages[:-1] == history[4:]


def test_a_message_too_long_alone_keeps_its_start(chatty: TextModel) -> None:
    from tx_explorer.analysis import lm

    message = "Return a new list containing every file in the folder. " * 40
    p = lm.chat_prompt(chatty, _turns(2), message, 16, 100)
    assert p.dropped == 2 and len(p.messages) == 1 and len(p.ids) + 16 <= 100
    kept = p.messages[0]["content"]
    assert 0 < p.cut < len(chatty.tokenizer.encode(message).ids) and message.startswith(kept)
    with pytest.raises(ValueError, match="“New tokens” must lie between 1 and"):  # the template alone leaves no room
        lm.chat_prompt(chatty, [], message, 99, 100)
    with pytest.raises(ValueError, match="conversation is empty"):
        lm.chat_prompt(chatty, _turns(1), " ", 16, 100)


def test_a_reply_token_reads_what_the_traced_conversation_shows(chatty: TextModel) -> None:
    """The rows the cached generation recorded for a reply are the causal maps of the whole conversation, traced
    in one pass, at the steps that produced it, and the three shares split each row whole."""
    from tx_explorer.analysis import lm
    from tx_explorer.trace import Trace

    p = lm.chat_prompt(chatty, _turns(1), "Return the path.", 6, 512)
    *_, first = lm.replies(chatty, p.ids, 6, stop=frozenset())
    assert len(set(first.ids[:4])) == 4  # so that the fourth token ends the turn there
    steps = Trace()
    *_, reply = lm.replies(chatty, p.ids, 6, stop=frozenset({first.ids[3]}), trace=steps)  # three tokens, the end
    att = lm.reply_attention(chatty, p, reply, steps)
    L, H = chatty.config.num_layers, chatty.config.num_heads
    assert att.rows.shape == (L, H, 4, len(p.ids) + 3) and len(att.produced) == 4
    trace = Trace()
    chatty.run([*p.ids, *reply.ids], trace=trace)
    maps = trace.stack()[:, 0].numpy()
    n = len(p.ids)
    np.testing.assert_allclose(att.row(3, 1, 2), maps[1, 2, n + 2, : n + 3], atol=1e-3)  # float16 kept
    np.testing.assert_allclose(att.row(0, 0), maps[0, :, n - 1, :n].mean(axis=0), atol=1e-3)
    for token in range(4):
        shares = att.shares(token, L - 1, 0)
        assert sum(shares) == pytest.approx(1, abs=1e-2) and (token > 0 or shares[2] == 0)
    assert 0 < p.start < n
    with pytest.raises(ValueError, match="outside the reply"):
        att.row(4, 0)


def _windowed(chatty: TextModel, window: int) -> TextModel:
    """tiny-gpt's weights with a sliding window on every layer: a cached step keeps its last ``window`` keys."""
    import dataclasses

    from tx_explorer.modules.transformer import CausalLM

    model = CausalLM(chatty.config.replace(sliding_window=window))
    model.load_state_dict(chatty.model.state_dict())
    return dataclasses.replace(chatty, model=model.eval())


@pytest.mark.parametrize("window", [None, 5])
def test_a_turn_read_after_a_kept_conversation_replies_as_one_read_whole(chatty: TextModel, window) -> None:
    """Cached = uncached across turns: the second turn's prompt starts with the first turn's conversation, whose
    kept cache (lm.Prefixes) serves those tokens; the reply and its rows are those of a turn read from scratch.
    With a sliding window the first turn's cache has dropped rows: nothing is served, the turn still replies."""
    from tx_explorer.analysis import lm
    from tx_explorer.trace import Trace

    tm = chatty if window is None else _windowed(chatty, window)
    kept = lm.Prefixes()
    first = lm.chat_prompt(tm, [], "Return the path.", 6, 512)
    cache = kept.cache_for(first.ids)
    assert cache.seen == 0
    *_, reply = lm.replies(tm, first.ids, 6, stop=frozenset(), cache=cache)
    kept.keep([*first.ids, *reply.ids], cache)
    history = [{"role": "user", "content": "Return the path."}, {"role": "assistant", "content": reply.text}]
    second = lm.chat_prompt(tm, history, "And the name?", 6, 512)
    served = kept.cache_for(second.ids)
    shared = common_prefix([*first.ids, *reply.ids][: cache.seen], second.ids)
    assert served.seen == (shared if window is None else 0) and (window is not None or shared > len(first.ids))
    runs = []
    for start in (served, None):
        trace = Trace()
        *_, r = lm.replies(tm, second.ids, 6, stop=frozenset(), cache=start, trace=trace)
        runs.append((r, lm.reply_attention(tm, second, r, trace)))
    (a, att_a), (b, att_b) = runs
    assert a.ids == b.ids
    np.testing.assert_allclose(att_a.rows.astype(np.float32), att_b.rows.astype(np.float32), atol=2e-3)
    trace = Trace()
    tm.run([*second.ids, *a.ids], trace=trace)  # the windowed rows sit at their keys, as one pass places them
    n = len(second.ids)
    np.testing.assert_allclose(att_a.row(2, 1, 0), trace.stack()[1, 0, 0, n + 1, : n + 2].numpy(), atol=1e-3)


def test_prefixes_serve_the_longest_kept_start_as_a_copy_and_forget_the_oldest() -> None:
    from tx_explorer.analysis import lm
    from tx_explorer.modules.cache import KVCache

    def cache(n: int) -> KVCache:
        c = KVCache()
        c.keys = [torch.arange(n, dtype=torch.float32).view(1, 1, n, 1)]
        c.values = [torch.zeros(1, 1, n, 1)]
        c.positions, c.seen = torch.arange(n), n
        return c

    kept = lm.Prefixes(size=2)
    kept.keep([1, 2, 3, 4], cache(4))
    kept.keep([1, 2, 9], cache(3))
    served = kept.cache_for([1, 2, 3, 4, 5, 6])  # shares 4 with the first, 2 with the second
    assert served.seen == 4 and served.keys[0].flatten().tolist() == [0, 1, 2, 3]
    served.update(0, torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1))  # a copy: the kept one does not grow
    assert kept.cache_for([1, 2, 3, 4, 5]).seen == 4
    assert kept.cache_for([1, 2, 3, 4]).seen == 3  # the last token is read again: its logits start the reply
    assert kept.cache_for([7, 1]).seen == 0
    kept.keep([5, 5], cache(2))  # three kept, size two: the least recently served goes ([1, 2, 9])
    assert kept.cache_for([1, 2, 9, 9]).seen == 2 and kept.cache_for([5, 5, 5]).seen == 2


def test_a_cache_holding_the_whole_prompt_is_refused(chatty: TextModel) -> None:
    from tx_explorer.analysis import lm
    from tx_explorer.modules.cache import KVCache

    ids = chatty.encode(PROMPT).ids
    cache = KVCache()
    chatty.model(torch.tensor([ids]), cache=cache)
    with pytest.raises(ValueError, match="a prefix of the"):
        list(lm.replies(chatty, ids, 2, stop=frozenset(), cache=cache))


def test_token_labels_are_escaped_once_in_the_language_pages_heatmaps():
    """Plotly reads ``<…>`` as markup, so labels are escaped, but once: the heatmap does it itself, and a view that
    escaped them first showed ``&lt;b&gt;`` on the axis (the chat's ``<|im_end|>`` did)."""
    from tx_explorer import models
    from tx_explorer.views import language_model as view

    r = view.read(models.load_model("tiny-gpt"), "<b>bold</b> more")
    for fig in (view.causal(r).mask.figure, view.embeddings(r, 8).figure):
        shown = fig.to_json()
        assert "&lt;" in shown and "&amp;lt;" not in shown


def test_weight_tying_is_read_from_the_tensors(tiny: TextModel) -> None:
    from types import SimpleNamespace

    from tx_explorer.analysis.lm import tied_output

    def model(head: torch.Tensor, embed: torch.Tensor) -> SimpleNamespace:
        inner = SimpleNamespace(
            head=SimpleNamespace(weight=head), embed=SimpleNamespace(tok_embed=SimpleNamespace(weight=embed))
        )
        return SimpleNamespace(model=inner)

    w = torch.randn(5, 3)
    assert tied_output(model(w, w))  # one parameter
    assert tied_output(model(w.clone(), w))  # two copies of the same numbers (a file that stores both)
    assert not tied_output(model(w + 1, w))
    assert not tied_output(model(torch.randn(5, 4), w))
    assert tied_output(tiny) == (tiny.model.head.weight is tiny.model.embed.tok_embed.weight)


def test_new_tokens_leave_a_short_context_room_for_the_prompt(tiny: TextModel) -> None:
    """A model of 16 tokens' context (review B: a Qwen2 checkpoint): the "New tokens" slider tops at 15, starts at
    8, and a long prompt keeps its last tokens to make room for them; the page's fixed 24 was refused with a message
    naming ``max_new_tokens``."""
    import dataclasses

    from tx_explorer.errors import InputError
    from tx_explorer.views import language_model as view

    short = dataclasses.replace(tiny, max_len=16)
    top, usual = view.new_tokens(short, *view.GEN_NEW)
    assert (top, usual) == (15, 8) and view.new_tokens(short, *view.CHAT_NEW) == (15, 8)
    assert view.new_tokens(tiny, *view.GEN_NEW) == view.GEN_NEW  # 128 tokens: room for the page's own numbers
    text = "Return a new list containing the files of the folder, sorted by their names. " * 3
    for new in (top, usual):
        g = view.generate(short, text, new)
        assert g.prompt_cut and (g.prompt_len, len(g.ids)) == (16 - new, 16)
    with pytest.raises(InputError):
        view.generate(short, text, top + 1)


def test_a_model_without_a_chat_template_names_those_that_have_one(tiny: TextModel, chatty: TextModel) -> None:
    """Gemma 3 270M's chat section vanished without a word (review B): it says the model has no chat template and
    names the models that have one, read off them, in both languages."""
    from tx_explorer.views import language_model as view

    load = {"tiny-gpt": tiny, "chatty": chatty, "chatty-2": chatty}.__getitem__
    chatty_ones = view.chat_models(["tiny-gpt", "chatty", "chatty-2"], load)
    assert chatty_ones == ["chatty", "chatty-2"]
    en = view.no_chat(tiny, chatty_ones)
    assert en.startswith("tiny-gpt has no chat template") and "base model" in en and en.endswith("chatty, chatty-2.")
    zh = view.no_chat(tiny, chatty_ones, lang="zh")
    assert zh.startswith("tiny-gpt 没有对话模板") and "基础模型" in zh and zh.endswith("chatty、chatty-2。")
    assert view.no_chat(tiny, []).endswith("None of the models loaded here has one now.")
