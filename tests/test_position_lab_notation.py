"""One meaning per symbol on the position lab page, in both languages: θ was both RoPE's base and a pair's angle,
m both a position and ALiBi's slope. The page follows RoFormer (positions m, n; pair i turns by θᵢ = b^(−2i/D_h),
b the base) and names ALiBi's slope s_h. Read are everything a visitor reads: the locale texts, the formulas, the
rotary widgets' labels and help, and every string of every figure (titles, axes, legend, hovers, marks)."""

from __future__ import annotations

import re

import pytest

from tx_explorer import locales
from tx_explorer.families import positions as positions_family
from tx_explorer.views import position_lab as view
from tx_explorer.views import texts
from tx_explorer.views.inputs import label_key

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def results() -> positions_family.Results:
    return positions_family.load_results(positions_family.BUNDLE)


def _strings(node) -> list[str]:
    """Every string in a figure's JSON (numbers left out)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list | tuple):
        return [s for v in node for s in _strings(v)]
    return []


def _figure_texts(res, lang: str) -> list[str]:
    demo = view.rotary_demo(16, 10_000.0, 8, 4, 0, True, lang=lang)
    panels = [
        view.loss_by_position(res, res.schemes, 8, lang=lang),
        view.attention_by_distance(res, res.schemes, 0, lang=lang),
        demo.rotation,
        demo.scores,
        demo.by_distance,
    ]
    return [s for p in panels for s in _strings(p.figure.to_plotly_json()["layout"])] + [
        s for p in panels for t in p.figure.data for s in (t.name, t.hovertemplate) if s
    ]


def _page_texts(res, lang: str) -> list[str]:
    T = texts("position_lab", lang)
    widgets = [T(label_key(i)) for i in view.ROTARY.inputs] + [T(i.help) for i in view.ROTARY.inputs if i.help]
    return [e[lang] for e in locales.table("position_lab").values()] + widgets + _figure_texts(res, lang)


FORMULAS = [f for fs in view.LATEX.values() for f in fs]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_theta_is_only_a_pairs_angle_and_m_only_a_position(results, lang):
    shown = _page_texts(results, lang) + FORMULAS
    # θ always with its pair's index: a bare θ (θ^(−2i/D_h), a widget labelled θ) was the base
    assert not [s for s in shown if re.search(r"θ(?!ᵢ|_i|<sub>i)|\\theta(?!_i)", s)]
    # m is a position: never ALiBi's slope m_h
    assert not [s for s in shown if re.search(r"\bm_h|mₕ|m<sub>h", s)]
    # i is a rotary pair (a dimension): never a position beside j
    assert not [s for s in shown if re.search(r"\b[qks]_\{?[ij]\b|\b[ij]\s*[−-]\s*[ij]\b", s)]
    # whatever speaks of a slope names it s_h, of a base b
    slope, base = ("slope", "base") if lang == "en" else ("斜率", "底数")
    assert all("s_h" in s for s in shown if slope in s.lower())
    assert all(re.search(r"\$b\$|\bb\^", s) for s in shown if base in s.lower())


def test_the_formulas_write_the_base_b_the_slope_s_h_and_the_distance_m_minus_n():
    rotary, alibi = view.LATEX["rotary"][0], view.LATEX["alibi"][0]
    assert r"\theta_i=b^{-2i/D_h}" in rotary and r"\cos m\theta_i" in rotary
    assert r"s_h\,(m-n)" in alibi and "s_h=2^{-8h/H}" in alibi and r"q_m\cdot k_n" in alibi


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_notation_line_names_every_symbol(lang):
    line = locales.text("position_lab", "notation", lang)
    assert all(s in line for s in ("$m$", "$n$", "$d = m - n$", "$i$", r"$\theta_i$", "$b$", "$s_h$", "$D_h$"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_figure_prints_raw_latex(results, lang):
    """Plotly draws no LaTeX here: a `$`, `\\` or `_{` in a figure would show as typed."""
    assert not [s for s in _figure_texts(results, lang) if re.search(r"\$|\\[a-z]|[_^]\{", s)]
