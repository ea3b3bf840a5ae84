"""Review of the model sizes, cost of attention and attention operator pages, each test holding what a visitor met
before its fix:

* model sizes, "Where the parameters are": a fixed intro ("in a tiny model the embedding is a large share … the
  MLP holds two thirds of it … norms are a rounding error … the GPT presets tie the head") whatever the chart
  showed; tiny-llama's MLP holds 75% of its blocks, not two thirds. The words are read from the chart's counts now.
* model sizes, "Your own model": changing the heads $H$ changed no number but $D_H$, and nothing said why; nor that
  sharing key/value heads (grouped-query attention, not offered in the form) would change the count.
* model sizes, the comparison chart: its legend sat at y = −0.2 of the plot, a large empty gap under the labels.
* cost of attention, fused [Q K V]: "max |Δ| = 0.0e+00" for an exact 0; the tiles' "largest absolute difference
  1.79e-07" with an ASCII minus in the exponent.
* cost of attention, "layers until the last token sees the first": the GRU's line at 1 lay hidden under
  self-attention's, drawn the same way.
* cost of attention, fused [Q K V] chart: one slow call among five made the one product's standard deviation
  exceed its mean, the band's upper end ∞, and its bar ran the chart's whole height (drawn to 10× past the axis),
  unremarked. Bars are cut at the axis's edge now, the cut end marked, and the note says where and why.
* operator §3: "with the scaling the softmax behaves the same at every width; without it, it saturates" was fixed
  text; it is read from the curves drawn now, with their numbers at the smallest and the largest $D$.
* operator §5: the intro named Gemma 3 (and Qwen3, OLMo 2) whichever QK-norm model was picked; it names the
  picked model and how its norm is taken (per head or over the full width) from its config now.
"""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest

from tx_explorer import locales
from tx_explorer.analysis import cost
from tx_explorer.analysis import mixers as mixers_lab
from tx_explorer.config import TransformerConfig
from tx_explorer.views import cost_of_attention as cost_view
from tx_explorer.views import mixers as mix_view
from tx_explorer.views import model_sizes as sizes
from tx_explorer.views import operator as op_view

LANGS = ["en", "zh"]


def T(page: str, key: str, lang: str = "en", **fmt: object) -> str:
    return locales.text(page, key, lang, **fmt)


# ---- model sizes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_where_the_parameters_are_is_read_from_the_chart(lang):
    words = sizes.breakdown_words(lang=lang)
    parts = sizes.breakdown(True).data  # the chart's own numbers, per preset: embeddings, attention, MLP, norms, head
    llama = parts["tiny-llama"]
    assert f"{llama[2] / (llama[1] + llama[2]):.1%}" == "75.0%" and "75.0%" in words  # not two thirds: said
    gpt3 = parts["gpt3"]
    assert f"{gpt3[0] / sum(gpt3):.1%}" in words  # the largest model's embedding share, 0.4%
    assert T("model_sizes", "preset_bert-base", lang) in words
    assert "two thirds of it" not in words and "占三分之二。" not in words  # the old fixed sentence
    if lang == "zh":
        assert not re.search(r"[\u4e00-\u9fff][:;]", words)  # full-width colons after Chinese


@pytest.mark.parametrize("lang", LANGS)
def test_the_heads_change_no_count_and_the_page_says_so(lang):
    one = sizes.OWN_MODEL.compute(layers=2, dim=96, heads=12, vocab=100, context=16, lang=lang)
    other = sizes.OWN_MODEL.compute(layers=2, dim=96, heads=3, vocab=100, context=16, lang=lang)
    assert one.total == other.total and one.head_dim == 8
    assert "$D_H$ = 96 / 12 = 8" in one.heads and f"{one.total:,}" in one.heads
    shared = TransformerConfig(num_layers=2, dim=96, num_heads=12, num_kv_heads=1, vocab_size=100, max_len=16)
    fewer = one.total - sum(sizes.counted(shared.to_dict())[1].values())
    assert fewer > 0 and f"{fewer:,}" in one.heads  # grouped-query attention would change it: said, with how much
    assert T("model_sizes", "heads_kv", lang, h=12, fewer=f"{fewer:,}", layers=2) in one.heads


def test_the_comparison_legend_sits_at_the_figures_foot():
    _, panel = sizes.lecture_table()
    legend = panel.figure.layout.legend
    assert legend.yref == "container" and legend.yanchor == "bottom"  # not y = −0.2 of the plot: no gap


# ---- cost of attention -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def timing() -> cost.FusedTiming:
    return cost.fused_qkv_sweep(ns=(16, 128), ds=(64, 128), repeats=5)


@pytest.mark.parametrize("lang", LANGS)
def test_an_exact_fused_difference_reads_zero(timing, lang):
    note = mix_view.fused(dataclasses.replace(timing, max_diff=0.0), lang=lang).note
    assert T("mixers", "fused_same_numbers", lang, diff="0") in note and "e+00" not in note


@pytest.mark.parametrize("lang", LANGS)
def test_the_tiles_difference_has_a_true_minus(lang):
    note = cost_view.tiles(12, 4, lang=lang).note
    assert re.search(r"\d\.\de−\d\d", note) and "e-" not in note


def test_the_gru_and_attention_lines_at_one_layer_are_drawn_apart():
    fig = mix_view.compare(None, max_n=1024, dim=64).grid.figure
    name = {k: T("mixers", f"kind_{k}") for k in ("rnn", "attention")}
    reach = [t for t in fig.data if list(t.y)[:1] == [1] and t.name in name.values() and t.xaxis == "x2"]
    assert {t.name for t in reach} == set(name.values())  # both at 1 in the reach panel
    assert len({(t.line.dash, t.marker.symbol) for t in reach}) == 2  # drawn differently: one shows through


def noisy(timing: cost.FusedTiming) -> cost.FusedTiming:
    """The fused product's five calls at N = 128, D = 64 spread as widely as their median (half their interquartile
    range exceeds it)."""
    calls = timing.fused_calls.copy()
    m = float(np.median(calls[0, 1]))
    calls[0, 1] = [0.2 * m, 0.4 * m, m, 3 * m, 8 * m]
    return dataclasses.replace(timing, fused_calls=calls)


@pytest.mark.parametrize("lang", LANGS)
def test_a_bar_past_the_chart_is_cut_at_its_edge_and_said(timing, lang):
    slow = noisy(timing)
    _, _, high = mixers_lab.fused_ratio_band(slow)
    assert np.isinf(high[0, 1])
    fused = mix_view.fused(slow, lang=lang)
    fig = fused.chart.figure
    lo, hi = (10**v for v in fig.layout.yaxis.range)
    for t in fig.data:
        if t.error_y and t.error_y.array is not None:
            y, up, down = (np.asarray(v, dtype=float) for v in (t.y, t.error_y.array, t.error_y.arrayminus))
            ok = np.isfinite(up)
            assert np.all(y[ok] + up[ok] <= hi * (1 + 1e-9)) and np.all(y[ok] - down[ok] >= lo * (1 - 1e-9))
    marks = [t for t in fig.data if t.mode == "markers" and t.marker.symbol in ("triangle-up", "triangle-down")]
    assert marks and any(hi == pytest.approx(y) for t in marks for y in t.y)
    assert T("mixers", "fused_cut", lang, where="")[:8] in fused.note and "∞" in fused.note
    assert "N = 128" in fused.note.split(T("mixers", "fused_cut", lang, where="")[:8])[1]


# ---- operator ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_the_scaling_verdict_is_read_from_the_curves(lang):
    _, words = op_view.scaling(16, lang=lang)
    unscaled = op_view.saturation(16, 0, False)
    assert f"{unscaled.max_weight[0]:.2f}" in words and f"{unscaled.max_weight[-1]:.2f}" in words
    assert f"{unscaled.grad_norm[0]:.3f}" in words  # the smallest width's number, not only the largest's
    flat = lambda n, seed, scaled: dataclasses.replace(  # noqa: E731
        op_view.saturation(n, seed, scaled), entropy=np.linspace(2.7, 0.5, len(op_view.DIMS))
    )
    _, moved = op_view.scaling(16, curve=flat, lang=lang)  # a curve that does not hold: the verdict turns
    assert T("operator", "sqrt_moves", lang, d0=1, d1=1024, lo="0.50", hi="2.70", h0="2.70", h1="0.50",
             m0="", m1="", h_max="2.77")[:12] in moved  # fmt: skip
    assert T("operator", "sqrt_same", lang, d0=1, d1=1024, lo="", hi="", h_max="")[:12] not in moved


@pytest.mark.parametrize("lang", LANGS)
def test_the_qk_norm_intro_names_the_model_picked(lang):
    cfg = TransformerConfig(num_heads=4, num_kv_heads=2, qk_norm=True, qk_norm_width="full", positions="rotary")
    words = op_view.qk_intro(SimpleNamespace(name="my-olmo2", config=cfg), lang=lang)
    assert "my-olmo2" in words and "Gemma" not in words and "128" in words and "64" in words
    per_head = dataclasses.replace(cfg, qk_norm_width="head")
    assert "$D_H$ = 32" in op_view.qk_intro(SimpleNamespace(name="x", config=per_head), lang=lang)
    assert "Gemma" not in op_view.qk_absent("tiny-gpt", None, lang=lang)
