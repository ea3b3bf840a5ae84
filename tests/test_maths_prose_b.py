"""Maths in the prose of the operator, self-attention, home, Seq2Seq and cost pages is written in LaTeX between
``$…$`` (Streamlit renders it with KaTeX), never as raw letters ("E = QKᵀ", "large D", "permutation σ"); and the
numbers in those sentences read as students read them ("1,150", not ``.3g``'s 1.15e+03; "1.10", not 1.10e+00; a
float's rounding with a true minus, 2.4e−07)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

from tx_explorer import locales
from tx_explorer.analysis import qk_norm as qk
from tx_explorer.views import operator as op_view
from tx_explorer.views import self_attention as sa_view
from tx_explorer.views import texts

MATH = re.compile(r"\$[^$]+\$")
SCIENTIFIC = re.compile(r"\de[+-]")  # 1.15e+03, 2.4e-07: .3g and .1e as Python writes them

# (page, key) → the raw symbols it wrote outside $…$ (a single letter stands for itself as a name, not inside a word)
CONVERTED = {
    ("operator", "help_nq"): ("Q", "Y"),
    ("operator", "edit_hint"): ("Q", "K", "V"),
    ("operator", "scale_help"): ("QKᵀ", "D"),
    ("operator", "steps_numbers"): ("QKᵀ", "Σ", "Aᵢⱼ", "E", "A", "Y", "Q"),
    ("operator", "replace_result_V"): ("V",),
    ("operator", "cross_intro"): ("Q", "K", "V"),
    ("operator", "cross_self"): ("X", "Q K V"),
    ("operator", "cross_shapes"): ("X", "A", "Y"),
    ("operator", "qk_how_head"): ("q", "k"),
    ("operator", "qk_how_full"): ("q", "k"),
    ("operator", "qk_absent"): ("q", "k"),
    ("self_attention", "intro"): ("X",),
    ("self_attention", "perm_intro"): ("σ", "Q", "K", "V"),
    ("self_attention", "width_help"): ("D/H",),
    ("self_attention", "heads_help"): ("D",),
    ("self_attention", "perm_order"): ("σ", "X"),
    ("home", "s1_why"): ("s₀",),
    ("home", "s2_why"): ("QKᵀ", "√D", "softmax("),
    ("home", "s3_why"): ("∞",),
    ("home", "s4_why"): ("N²",),
    ("home", "s9_why"): ("Q/K/V",),
    ("seq2seq", "beam_help"): ("k",),
    ("seq2seq", "aer_help"): ("A∩G", "|A|", "A", "G"),
    ("seq2seq", "recurrence_check"): ("max",),
    ("seq2seq", "state_check"): ("max",),
    ("cost_of_attention", "matmul_intro"): ("N",),
    ("cost_of_attention", "flops_summary"): ("N",),
    ("cost_of_attention", "flops_at_2d"): ("N", "2D"),
    ("cost_of_attention", "flops_at_4d"): ("N", "4D"),
    ("cost_of_attention", "measure_hint"): ("N",),
    ("cost_of_attention", "over_budget"): ("N",),
    ("cost_of_attention", "lecture_note"): ("N", "H"),
    ("cost_of_attention", "ratio_note"): ("N",),
    ("cost_of_attention", "guard_ok"): ("N", "H"),
    ("cost_of_attention", "guard_no"): ("N", "H"),
    ("cost_of_attention", "max_diff"): ("|difference|",),
    ("cost_of_attention", "kv_help"): ("H",),
    ("cost_of_attention", "dh_help"): ("D / H", "D"),
    ("cost_of_attention", "shape_read"): ("D", "H"),
    ("cost_of_attention", "shape_d"): ("D",),
    ("cost_of_attention", "shape_h"): ("H",),
    ("cost_of_attention", "flops_at_cross"): ("N",),
    ("cost_of_attention", "flops_at_twice"): ("N",),
    ("cost_of_attention", "row_kv_flops"): ("N",),  # a row label of st.table, which renders Markdown and LaTeX
    ("cost_of_attention", "col_mha"): ("H",),  # a column of the same st.table
    ("cost_of_attention", "share_mha"): ("H",),
    ("cost_of_attention", "share_gqa"): ("H",),
    ("cost_of_attention", "share_mqa"): ("H",),
    ("cost_of_attention", "share_width"): ("D/H", "4D²"),
}
ENGLISH_ONLY = {("seq2seq", "recurrence_check"), ("seq2seq", "state_check"), ("cost_of_attention", "max_diff")}


def raw(symbol: str, text: str) -> bool:
    """``symbol`` in ``text`` as a name: a lone letter not inside a word, a LaTeX command or a field's braces."""
    return re.search(rf"(?<![A-Za-z0-9_\\{{]){re.escape(symbol)}(?![A-Za-z0-9_}}])", text) is not None


@pytest.mark.parametrize(
    ("page", "key", "lang"),
    # the Chinese sentences of ENGLISH_ONLY say it in words (最大为, 最大绝对差)
    [(p, k, lang) for p, k in sorted(CONVERTED) for lang in ("en", "zh") if lang == "en" or (p, k) not in ENGLISH_ONLY],
)
def test_the_maths_of_the_prose_is_latex(page, key, lang):
    s = locales.table(page)[key][lang]
    outside = MATH.sub(" ", s)
    assert outside.count("$") == 0, s  # every $ opened is closed
    left = [sym for sym in CONVERTED[page, key] if raw(sym, outside)]
    assert left == [], (left, s)


def test_the_check_sees_the_old_raw_symbols():
    assert raw("D", "with a large D the softmax") and raw("σ", "permutation σ and")
    assert not raw("D", "with a large $D$ the softmax".replace("$D$", " ")) and not raw("H", "the Heads")
    assert not raw("k", r"$H_{kv}$ key") and not raw("N", "{n} FLOPs")


def test_the_chinese_spaces_a_formula_from_its_characters():
    """第 $t$ 步: a space between a Chinese character and a formula, where the text was "上下文 X"."""
    zh = locales.table("self_attention")["perm_intro"]["zh"]
    assert "用置换 $\\sigma$ 打乱" in zh
    assert "上下文取 $X$ 时" in locales.table("operator")["cross_self"]["zh"]
    assert "$N$ = {n} 时" in locales.table("cost_of_attention")["flops_summary"]["zh"]


# ---- Numbers in the sentences ----------------------------------------------------------------------------------
def _layer(i: int, normed: tuple[float, float], raw_: tuple[float, float]) -> qk.QKNormLayer:
    return qk.QKNormLayer(i, qk.Side(*normed, 2.9), qk.Side(*raw_, 0.004))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_qk_norm_reading_writes_plain_numbers_below_a_million(lang):
    """Gemma 3's reading said "从 0.989 变到 1.15e+03（最大分数 1.02e+04）"."""
    tm = SimpleNamespace(name="some-qk-model", max_len=4096)
    found = [_layer(0, (0.989, 12.34), (1150.3, 10234.0)), _layer(1, (1.0249, 9.0), (0.989, 8.0))]
    _, words = op_view.qk_norm(tm, found, lang=lang)
    assert "1,150" in words and "10,200" in words and "0.989" in words and "1.02" in words, words
    assert not SCIENTIFIC.search(words), words


def test_plain_keeps_a_power_of_ten_for_the_huge_and_the_tiny():
    assert [op_view.plain(v) for v in (0.989, 12.34, 999.7, 1150.3, 0)] == ["0.989", "12.3", "1,000", "1,150", "0"]
    assert op_view.plain(3.2e7) == "3.2e7" and op_view.plain(2.4e-7) == "2.4e−7" and op_view.plain(-0.5) == "−0.500"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_operator_writes_rounding_with_a_true_minus(lang):
    torch.manual_seed(0)
    q, k, v = op_view.random_qkv(4, 6, 8, 4, 0)
    numbers = op_view.steps(q, k, v, lang=lang).numbers
    assert re.search(r"\*\*(0|\d\.\de−\d\d)\*\*", numbers), numbers  # 1.2e−07, or 0
    assert not SCIENTIFIC.search(numbers), numbers
    _, words = op_view.cross(lang=lang)
    assert not SCIENTIFIC.search(words), words  # an exact 0 is "0", not "0.0e+00"


def test_a_measured_difference_reads_as_two_decimals():
    """The word-order metrics wrote 1.10e+00 and 1.76e+00: the helper the page shows them with."""
    assert [sa_view.difference(d) for d in (1.1, 1.7644, 0.0123, 0.0)] == ["1.10", "1.76", "0.01", "0"]
    assert sa_view.difference(2.4e-7) == "2.4e−07"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_unexpected_word_order_verdict_reads_its_numbers(lang):
    T = texts("self_attention", lang)
    words = sa_view._order_conclusion(False, {"none": 1.1, "sinusoidal": 1.76, "learned": 2.4e-7}, T)
    assert "1.10" in words and "1.76" in words and "2.4e−07" in words, words
    assert not SCIENTIFIC.search(words), words


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_permutation_verdict_writes_a_true_minus(lang):
    p = sa_view.permutation(n=6, dim=16, heads=4, seed=0, kind="none", lang=lang)
    assert p.equal and re.search(r"\de−\d", p.verdict) and not SCIENTIFIC.search(p.verdict), p.verdict
