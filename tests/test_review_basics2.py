"""Review of the basic pages (home, seq2seq, operator, self-attention, position lab) in both languages: numbers in
prose with a true minus, heads named L1 H0, maths in LaTeX, and 中文 sentences and lists joined the Chinese way."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tx_explorer.analysis import seq2seq_claims as claims
from tx_explorer.families import positions as positions_family
from tx_explorer.views import position_lab as pl_view
from tx_explorer.views import self_attention as sa_view
from tx_explorer.views import seq2seq as s2s_view
from tx_explorer.views import texts

torch.set_num_threads(1)


# ---- Position lab: the setup caption ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results() -> positions_family.Results:
    return positions_family.load_results(positions_family.BUNDLE)


def test_position_lab_setup_joins_chinese_sentences_and_lists_seeds(results):
    """中文 read "15 次训练共用 9.1 CPU 分钟。 每种方案…（0, 1, 2）" and "× D 64" in both languages."""
    zh = pl_view.setup(results, lang="zh")
    assert "。 " not in zh and "（0、1、2）" in zh and "$D$ = 64" in zh, zh
    en = pl_view.setup(results, lang="en")
    assert "CPU-minutes in all. Every scheme" in en and "(0, 1, 2)" in en and "$D$ = 64" in en, en


# ---- Self-attention: the positional-encoding reading and the shuffled order --------------------------------------
def test_self_attention_reading_writes_a_true_minus():
    """A learned table (seed 1) read "positions at least 32 apart -0.005"; seed 3 "The difference, -0.021"."""
    for seed in (1, 3):
        table, sim, _ = sa_view.encodings("learned", 64, 64, seed, {}, lang="en")
        words = sa_view.encoding_reading("learned", table.data, sim.data, lang="en")
        assert "-0." not in words and "−0.0" in words, words
        assert "$\\mathcal{N}(0, 1)$" in words


def test_self_attention_shuffled_order_is_listed_in_chinese():
    zh = sa_view.permutation(n=4, dim=8, heads=2, seed=0, kind="none", lang="zh").order
    assert "、" in zh and ", " not in zh, zh
    assert ", " in sa_view.permutation(n=4, dim=8, heads=2, seed=0, kind="none", lang="en").order


# ---- Seq2Seq: heads, signs, T and t in LaTeX ---------------------------------------------------------------------
def _subject_verb() -> s2s_view.SubjectVerb:
    scores = claims.SubjectVerbHeads(
        subject=np.array([[0.139, 0.1], [0.05, 0.02]]), baseline=np.array([[0.044, 0.05], [0.05, 0.03]]), pairs=169
    )
    return s2s_view.SubjectVerb(scores, {None: (0, 169), (0, 0): (0, 169), (1, 1): (0, 169)}, (1, 1))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_seq2seq_subject_verb_heads_are_named_l_h(lang):
    """It said "encoder layer 0 head 0", "第 0 层第 0 个头", "layer 1 head 1", "第 1 层第 1 个"."""
    shown = s2s_view.subject_verb_view(_subject_verb(), lang=lang)
    assert "L0 H0" in shown.text and "L1 H1" in shown.text, shown.text
    assert "L0 H0" in shown.metrics.values()
    assert "layer 0" not in shown.text and "第 0 层" not in shown.text


def test_seq2seq_verdict_writes_true_minus_and_no_space_after_chinese_bracket():
    """A drop below 0 (accuracy rising with length) printed "-1.0"; 中文 read "Transformer（交叉注意力） 11.1"."""
    trend = lambda acc, exact: SimpleNamespace(  # noqa: E731
        token_accuracy=acc, exact_match=exact, sentences=(50, 50), buckets=("3–5", "36–40"), falls=False, exact_se=0.05
    )
    trends = {"fixed": trend((0.9, 0.2), (0.8, 0.0)), "transformer": trend((0.9, 0.91), (0.8, 0.81))}
    original = s2s_view.ev.length_trend
    s2s_view.ev.length_trend = lambda r: r  # the trends stand in for their results
    try:
        en = s2s_view.bottleneck_verdict(trends, lang="en")
        zh = s2s_view.bottleneck_verdict(trends, lang="zh")
    finally:
        s2s_view.ev.length_trend = original
    assert "−1.0 for" in en and "-1.0" not in en, en
    assert "） " not in zh and "Transformer（交叉注意力）为 −1.0" in zh, zh


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_seq2seq_symbols_are_latex(lang):
    """ "the lengths T and T′", "T ≠ T′", "Pick an output step t", "s₀ = 0" were raw in Markdown."""
    T = texts("seq2seq", lang)
    assert "$T$" in T("ends_header") and "$T'$" in T("ends_intro") and "$t$" in T("step_intro")
    ends = T("ends_result", n=1, t_lo=1, t_hi=2, u_lo=1, u_hi=2, differ=1, limit=3, lengths="x")
    assert "$T \\neq T'$" in ends and "T ≠" not in ends and "$s_0 = 0$" in T("s0_intro")


def test_seq2seq_one_cross_attention_head_is_named_l_h():
    """Head 2 of layer 1 was titled "Transformer cross-attention · layer 1 · 2"."""
    T = texts("seq2seq", "en")
    assert T("cross_title_head", layer=1, head=2).endswith("L1 H2")
    assert texts("seq2seq", "zh")("cross_title_head", layer=1, head=2).endswith("L1 H2")


# ---- Operator: gpt-oss sinks name their heads L1 H0; √D section in LaTeX -----------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_operator_sinks_and_sqrt_words(lang):
    T = texts("operator", lang)
    n = dict(model="m", n=64, mean=0.9, min=0.5, low_layer=3, low_head=1, share=0.1, top=0.5, layer=2, head=0, most=0.3)
    words = T("sinks_reading", **n)
    assert "L3 H1" in words and "L2 H0" in words, words
    assert "$\\sqrt{D}$" in T("sqrt_intro") and "diag(a) − aaᵀ" not in T("sqrt_intro")
    assert "$D$ = 8" in T(
        "sqrt_numbers",
        d=8,
        **dict.fromkeys(["h_scaled", "h_unscaled", "h_max", "m_scaled", "m_unscaled", "g_scaled", "g_unscaled"], "1"),
    )
