"""The position lab's views and figures read alike in both languages: fixed colours, a rotary figure whose every
mark is named, numbers with no negative zero, one way of counting layers; and one run of the page for its pickers."""

from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.analysis import spread
from tx_explorer.families import positions as positions_family
from tx_explorer.views import position_lab as view
from tx_explorer.viz import style

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def results() -> positions_family.Results:
    return positions_family.load_results(positions_family.BUNDLE)


def _colours(fig) -> dict[str, str]:
    return {t.name: t.line.color for t in fig.data}


def test_a_scheme_keeps_its_colour_whichever_schemes_are_picked(results):
    full = _colours(view.loss_by_position(results, results.schemes).figure)
    assert len(set(full.values())) == len(full)  # five schemes and the bigram, each its own colour
    for picked in (["learned"], ["alibi", "none"]):
        assert _colours(view.loss_by_position(results, picked).figure).items() <= full.items()
        assert _colours(view.attention_by_distance(results, picked, 0).figure).items() <= full.items()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_rotary_pair_has_one_colour_its_own_and_every_mark_is_named(lang):
    fig = view.rotary_demo(256, 10_000.0, 256, 8, 0, True, lang=lang).rotation.figure
    arcs, starts = fig.data[0::2], fig.data[1::2]
    assert len(arcs) == len(starts) == 8
    assert len({a.line.color for a in arcs}) == 8  # no two pairs share a colour
    position = locales.text("position_lab", "axis_position", lang)
    for arc, start in zip(arcs, starts, strict=True):
        assert arc.line.color == arc.marker.color == start.marker.color  # the ◆ in its pair's colour
        assert start.name == arc.name and start.legendgroup == arc.legendgroup == arc.name
        assert start.hoverinfo == "skip" and start.showlegend is False  # no "trace 1": the arc's point 0 tells it
        assert arc.hovertemplate.startswith(f"{position} %{{customdata}}") and arc.customdata[0] == 0


@pytest.mark.parametrize("width_px", [style.COLUMN_PX, style.PAGE_PX, 300])
def test_the_rotary_title_breaks_nowhere_inside_its_diamond_note(width_px):
    fig = view.rotary_demo(256, 10_000.0, 256, 2, 0, True, lang="zh").rotation.figure
    lines = style.tidy(fig, width_px).layout.title.text.split("<br>")
    assert lines[-1] == locales.text("position_lab", "rotation_start", "zh")  # "◆ = 位置 0" whole, on its line
    assert fig.layout.margin.t >= 40 + 1.3 * style.TITLE_PX * (len(lines) - 1)  # room for every line


def test_a_rise_that_rounds_to_zero_is_written_without_a_minus(results):
    assert spread.stat([-1e-6, -3e-6, -2e-6]).plus_minus(4) == "0.0000 ± 0.0000"
    assert spread.fixed(-0.00004, 4) == "0.0000" and spread.fixed(-0.0004, 4) == "-0.0004"
    assert view._number("orders", spread.stat(-1e-6)) == "0.0000"  # an exact number, bare
    shown = str(view.loss_table(results)) + str(view.verdict_rows(results)) + view.findings(results)
    assert not re.search(r"-0\.0+(?!\d*[1-9])\b", shown), shown


def test_the_base_fits_its_box_at_its_largest():
    (base,) = [inp for inp in view.ROTARY.inputs if inp.name == "base"]
    assert base.format % base.high == "10000000"  # no "10000000.00" cut to "10000000." in a sixth of the page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_layers_are_counted_from_0_as_the_layer_picker_counts_them(lang):
    table = locales.table("position_lab")
    assert not [k for k, entry in table.items() if re.search(r"first layer|第一层", entry[lang], re.I)]
    assert ("layer 0" if lang == "en" else "第 0 层") in table["numbers_rotary_relative"][lang]


def test_the_pickers_speak_chinese_and_the_loss_table_outlives_an_empty_picker(results):
    at = open_page("position_lab")
    at.session_state["lang"] = "zh"  # AppTest does not send the sidebar's switch back: set it for every run
    at.run()
    assert_clean(at)
    pickers = at.multiselect
    assert pickers and all(m.placeholder == locales.text("position_lab", "schemes_placeholder", "zh") for m in pickers)
    assert all(m.proto.select_all == 0 for m in pickers)  # no English "Select all" in the list
    tables = len(at.table)
    at.multiselect(key="loss_schemes").set_value([])
    at.session_state["lang"] = "zh"
    at.run()
    assert any("请至少选择一种位置方案" in e.value for e in at.error)  # the chart asks for a scheme
    assert len(at.table) == tables  # the loss table stays
    assert any(view.loss_note(results, lang="zh") == m.value for m in at.markdown)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_positions_are_named_as_the_loss_axis_counts_them_from_0(results, lang):
    """The learned table's last row is position 63 on the axis: "no row past position 64" and "第 64 个位置之后" (after
    the 64th, which is position 63) each put the first missing row one position off."""
    curve = view._mean_curve(results, "learned", "loss_by_position")
    assert np.isfinite(curve[results.context - 1]) and np.isnan(curve[results.context])
    table = locales.table("position_lab")
    assert not [k for k, e in table.items() if re.search(r"第 ?(\{\w+\}|\d+)[–\d]* ?个位置|past position", e[lang])]
    learned = next(
        r for r in view.loss_table(results, lang=lang) if r[table["col_scheme"][lang]] == view.label("learned", lang)
    )
    first = "position 64 or later" if lang == "en" else "位置 64 及之后"
    assert first in learned[table["col_beyond"][lang]]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pairs_slider_says_a_small_head_has_fewer_pairs_than_it_asks(lang):
    """Eight pairs asked of a head of 2 or 4 dimensions draw 1 or 2: the slider's help says why (it said nothing)."""
    for dh, drawn in ((2, 1), (4, 2), (16, 8)):
        fig = view.rotary_demo(dh, 10_000.0, 8, 8, 0, True, lang=lang).rotation.figure
        assert len([t for t in fig.data if t.showlegend is not False]) == drawn
    (pairs,) = [inp for inp in view.ROTARY.inputs if inp.name == "pairs"]
    assert pairs.help and "$D_h/2$" in locales.text("position_lab", pairs.help, lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_verdicts_write_a_negative_gap_with_a_true_minus(results, lang):
    """A gap written "-0.000517" beside prose that writes −: a hyphen reads as a dash."""
    verdicts = [row[locales.text("position_lab", "col_verdict", lang)] for row in view.verdict_rows(results, lang=lang)]
    assert any("−" in v for v in verdicts)  # the shipped claims have negative gaps
    assert not [v for v in verdicts if re.search(r"(?<![\w.])-\d", v)]


def _relative(results, **spreads: float) -> positions_family.Results:
    """``results`` with every seed's relative spread of the named schemes set to ``spread`` × its scale."""
    summary = copy.deepcopy(results.summary)
    for scheme, value in spreads.items():
        for seed in summary["schemes"][scheme]["seeds"]:
            seed["relative"]["spread"] = value * seed["relative"]["scale"]
    return dataclasses.replace(results, summary=summary)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_rotary_note_reads_the_verdict_tables_numbers(results, lang):
    """The note under the live check said "a trained model's layer 0 shows the same (the verdict above)" in fixed
    words, also where no trained runs were shipped; it now gives the numbers of the verdict table's row."""
    T = lambda key: locales.text("position_lab", key, lang)  # noqa: E731
    row = view.verdict_rows(results, lang=lang)[-1][locales.text("position_lab", "col_numbers", lang)]
    shipped = re.findall(r"\d\.\d\de[−-]\d\d|\d\.\d+", row)
    note = view.rotary_note(results, lang=lang)
    assert note.startswith(T("rotary_note"))
    rotary, sinusoidal, learned = (view.label(s, lang) for s in ("rotary", "sinusoidal", "learned"))
    for scheme in (sinusoidal, learned):
        number = re.search(rf"{re.escape(scheme)} (\S+)", row).group(1)
        assert f"{scheme} {number}" in note and number in shipped
    rot = re.search(rf"{re.escape(rotary)} (\S+)", row).group(1)
    assert rot in note and "e−07" in rot  # rounding-sized, as shipped
    assert T("rotary_note_holds").split("{")[0] in note
    assert view.rotary_note(None, lang=lang) == T("rotary_note")  # no runs: nothing said of them


def test_the_rotary_note_says_so_when_a_run_does_not_show_the_property(results):
    """A rotary run whose scores vary by more than rounding is not credited with the property, and an added scheme
    whose scores do not is not said to depend on where the pair sits."""
    note = view.rotary_note(_relative(results, rotary=0.02, learned=1e-6), lang="en")
    assert "does not show it here" in note and "up to 2.00e−02" in note
    assert "instead (sinusoidal 4.35e−01) make a score depend on where the pair sits" in note
    assert note.endswith("even positions added to the input stay within rounding: learned 1.00e−06.")
