"""Review of *What a head does*: the logit lens in bounded memory (Gemma 3's 262 144-token vocabulary × 36 read-outs
× 128 positions at once was 18 GB and killed the server), only the shown tokens labelled, 中文 punctuation in the
head lists, one sink head named in the singular, and the byte tokens of a Chinese text explained."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from tx_explorer.analysis import head_science as hs
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.edit import Edit
from tx_explorer.families.text import TextModel
from tx_explorer.models import WEIGHTS_DIR
from tx_explorer.modules.transformer import CausalLM, Encoder
from tx_explorer.views import head_science as view

SMALL = dict(vocab_size=2048, max_len=64, dim=32, num_layers=2, num_heads=4)  # tiny-gpt's tokenizer: 2048 ids
TEXT = "The function returns a list of the keys in the dictionary, and the list is sorted."


def _model(kind: str = "causal") -> TextModel:
    torch.manual_seed(0)
    tokenizer = Tokenizer.from_file(str(WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"))
    model = (
        Encoder(TransformerConfig(**SMALL)) if kind == "encoder" else CausalLM(PRESETS["tiny-llama"].replace(**SMALL))
    )
    return TextModel(name=kind, model=model.eval(), tokenizer=tokenizer, kind=kind, max_len=64, byte_level=True)


@pytest.fixture(scope="module")
def tm() -> TextModel:
    return _model()


def test_the_lens_reads_out_one_sublayer_at_a_time_and_matches_all_at_once(tm, monkeypatch) -> None:
    ids = hs.encode(tm, TEXT, 64)
    n, vocab, layers = len(ids), tm.config.vocab_size, len(tm.model.blocks)
    largest = []
    logits = tm.model.logits
    monkeypatch.setattr(tm.model, "logits", lambda h, *a, **k: largest.append(h.numel() // h.shape[-1]) or logits(h))
    r = hs.logit_lens(tm, ids)
    monkeypatch.undo()
    assert max(largest) <= n, f"{max(largest)} rows of {vocab} logits at once, not one read-out of {n}"
    # the same numbers as the whole [2L, N, V] computed at once
    with torch.no_grad():
        rec = Edit().record()
        out = hs.forward(tm, torch.tensor([ids]), rec)
        resid = torch.cat([rec.captured.get_site(s, i) for i in range(layers) for s in ("mid", "post")])
        logp = tm.model.logits(tm.model.norm(resid)).log_softmax(-1)
        final = out[0].log_softmax(-1)
    np.testing.assert_allclose(r.entropy, -(logp.exp() * logp).sum(-1).numpy(), atol=1e-5)
    np.testing.assert_allclose(r.kl_to_final, (final.exp() * (final - logp)).sum(-1).clamp_min(0).numpy(), atol=1e-5)
    np.testing.assert_allclose(r.top_probs, logp.exp().topk(hs.TOP_K, -1).values.numpy(), atol=1e-6)
    assert r.final_max_diff < 1e-4


def test_the_lens_labels_only_the_tokens_it_shows(tm, monkeypatch) -> None:
    asked = []
    labels = tm.labels
    monkeypatch.setattr(tm, "labels", lambda ids: asked.append(len(ids)) or labels(ids))
    m = view.lens_numbers(tm, TEXT)
    assert max(asked) <= len(np.unique(m.r.top_ids)) < tm.config.vocab_size  # not the whole vocabulary
    words = np.array(labels(list(range(tm.config.vocab_size))), dtype=object)[m.r.top_ids]
    assert m.hover[3, 5] == ", ".join(f"{w} {p:.2f}" for w, p in zip(words[3, 5], m.r.top_probs[3, 5]))


@pytest.fixture(scope="module")
def scored(tm):
    return view.taxonomy_numbers(tm, TEXT)


def test_chinese_lists_the_strongest_heads_with_chinese_punctuation(tm, scored) -> None:
    notes = view.taxonomy_words(tm, scored, lang="zh").notes
    listed = [n for n in notes if n.startswith("重复序列上最强的")]
    assert len(listed) == 2 and all("、" in n and "（" in n and "）" in n for n in listed), listed
    assert not any(c in n for n in listed for c in "(),"), listed  # "L5 H1 (0.91), L5 H2 (0.79)" was the 中文
    english = [n for n in view.taxonomy_words(tm, scored, lang="en").notes if n.startswith("Strongest")]
    assert all(", L" in n and " (" in n for n in english), english


@pytest.mark.parametrize("kind", ["causal", "encoder"])
def test_one_sink_head_is_named_in_the_singular(kind, tm) -> None:
    model = tm if kind == "causal" else _model("encoder")
    m = view.taxonomy_numbers(model, TEXT)
    sinks = np.zeros_like(m.r.sinks)
    for count in (1, 3):
        sinks.ravel()[:count] = True
        r = dataclasses.replace(
            m.r, sinks=sinks.copy(), sink_effect=-0.25, base_loss=None if kind == "encoder" else 2.0
        )
        said = " ".join(view.taxonomy_words(model, dataclasses.replace(m, r=r), lang="en").notes)
        assert "head(s)" not in said
        assert ("the one sink head " if count == 1 else "the 3 sink heads ") in said, said
        if kind == "causal":
            assert "by −0.250 nats (from 2.000 nats)" in said, said  # the loss before, with its unit


def test_a_chinese_text_in_a_byte_level_tokenizer_explains_its_byte_tokens(tm) -> None:
    text = "猫坐在垫子上。"
    tokens = view._tokens(tm, hs.encode(tm, text, 64))
    assert any(t.startswith("\\x") for t in tokens), tokens  # tiny-gpt writes these characters as bytes
    for lang, words in (("en", "is one byte"), ("zh", "是一个被拆到几个 token 中的字符的一个字节")):
        lens = view.lens_words(tm, view.lens_numbers(tm, text), lang=lang).notes
        attribution = view.attribution_words(tm, view.attribution_numbers(tm, text), lang=lang).notes
        assert any(words in n for n in lens) and any(words in n for n in attribution), (lens, attribution)
    english = view.lens_words(tm, view.lens_numbers(tm, TEXT)).notes
    assert not any("is one byte" in n for n in english)  # no note where no token is a byte


def test_ablation_reads_the_logits_of_one_sequence_at_a_time(tm, monkeypatch) -> None:
    """Every head of a layer is ablated in one batch (H sequences per window): its logits, H × windows × tokens ×
    vocabulary at once, were over 6 GB for Gemma 3's held-out windows. The loss is taken a sequence at a time."""
    ids = torch.tensor([hs.encode(tm, TEXT, 64)])
    clean = hs.head_importance(tm, ids)
    sequences = []
    logits = tm.model.logits
    monkeypatch.setattr(tm.model, "logits", lambda h, *a, **k: sequences.append(h.shape[0]) or logits(h, *a, **k))
    again = hs.head_importance(tm, ids)
    assert sequences and max(sequences) == 1, sequences
    np.testing.assert_allclose(again.delta_loss, clean.delta_loss, atol=1e-6)
