"""RNN vs convolution vs self-attention (§4.5) and the block profile (§4.3): library, view and the cost page."""

from __future__ import annotations

import math

import pytest
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer.analysis import mixers
from tx_explorer.views import mixers as view


@pytest.mark.parametrize("n", [2, 3, 4, 7, 10, 11])
def test_conv_stack_reaches_the_first_token_after_exactly_ceil_half_layers(n):
    need = mixers.conv_layers_to_reach(n)
    assert need == math.ceil((n - 1) / 2)
    assert mixers.reaches_first("conv", n, need)
    if need > 1:
        assert not mixers.reaches_first("conv", n, need - 1)  # one layer short: the gradient is exactly zero
    assert mixers.layers_to_reach("conv", n) == need


@pytest.mark.parametrize("kind", ["rnn", "attention"])
def test_rnn_and_attention_reach_the_first_token_in_one_layer(kind):
    assert mixers.layers_to_reach(kind, 9) == 1


def test_sequential_steps_and_bad_kind():
    assert [mixers.sequential_steps(k, 512, conv_layers=4) for k in mixers.KINDS] == [512, 4, 1]
    with pytest.raises(ValueError, match="token mixer"):
        mixers.build("lstm", 8)


def test_attention_memory_grows_as_n_squared_and_the_gru_linearly():
    small = {k: mixers.measure(k, 128, dim=32, repeats=1) for k in mixers.KINDS}
    large = {k: mixers.measure(k, 512, dim=32, repeats=1) for k in mixers.KINDS}
    assert all(r.seconds > 0 and r.peak_bytes > 0 for r in [*small.values(), *large.values()])
    grow = {k: large[k].peak_bytes / small[k].peak_bytes for k in mixers.KINDS}
    assert grow["attention"] > 10  # 4× N → ~16× the N × N weights
    assert grow["rnn"] < 5 and grow["conv"] < 5  # linear in N


def test_predicted_seconds_scales_attention_quadratically():
    run = mixers.MixerRun("attention", 128, 0.01, 1, 1)
    assert mixers.predicted_seconds(run, 256) == pytest.approx(0.08)
    assert mixers.predicted_seconds(mixers.MixerRun("rnn", 128, 0.01, 1, 1), 256) == pytest.approx(0.04)


def test_matmul_share_is_a_fraction_with_matmuls_among_the_operators():
    s = mixers.matmul_share(64, dim=64, repeats=1)
    assert 0 < s.share < 1 and s.matmul_us > 0 and s.other_us > 0
    assert {"aten::addmm", "aten::bmm"} & {name for name, _ in s.top}


def test_view_measures_within_budget_and_compares_in_both_languages():
    calls = []

    def fake(kind, n, **kw):
        calls.append((kind, n))
        return mixers.MixerRun(kind, n, 1e-3 * n, 100 * n * (n if kind == "attention" else 1), 1)

    found = view.measure_all(256, dim=32, measure=fake)
    assert calls == [(k, n) for n in (128, 256) for k in mixers.KINDS]
    with pytest.raises(ValueError):
        view.measure_all(100, dim=32, measure=fake)
    for lang in ("en", "zh"):
        c = view.compare(found, max_n=256, dim=32, lang=lang)
        assert len(c.table) == 3 and c.note and ("256" in c.note)
        assert "1" in c.check and ("⌈" in c.check)
    stale = view.compare(found, max_n=512, dim=32)  # other settings: the old runs are not shown
    # other settings: time and memory are left out of the grid (no empty axes) and the note says Measure draws them
    assert "Measure" in stale.note and len(stale.grid.figure.data) == 6  # steps and layers, three mixers each
    assert {a.text for a in stale.grid.figure.layout.annotations} == {
        "sequential steps (stack of 4 conv layers)",
        "layers until the last token sees the first",
    }
    assert len({tr.name for tr in stale.grid.figure.data if tr.showlegend}) == 3  # each mixer in the legend
    assert view.reach_check()["conv"] == [mixers.conv_layers_to_reach(n) for n in view.CHECK_NS]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cost_page_shows_the_three_mixers_and_measures_on_a_click(lang):
    at = open_page("cost_of_attention")
    at.session_state["lang"] = lang
    at.session_state["cost_open_mix"] = True  # the section is built once opened
    at.run()
    at.selectbox(key="mix_max_n").set_value(256)
    at.selectbox(key="mix_dim").set_value(32).run()
    assert_clean(at)
    grid = [s for s in plotly_specs(at) if len(s["data"]) == 6]  # steps and layers × 3 mixers, until measured
    assert grid and len(at.table) >= 1
    at.button(key="mix_measure").click().run()
    assert_clean(at)
    assert [s for s in plotly_specs(at) if len(s["data"]) >= 12]  # with time and memory: 4 subplots × 3 mixers
    assert any(("%" in m.value and "§4.3" in m.value) for m in at.markdown)


@pytest.mark.parametrize(("lang", "steps"), [("en", "sequential steps at N = 8,192"), ("zh", "N = 8,192 时的顺序步数")])
def test_the_tables_headers_write_n_as_its_cells_do(lang, steps):
    """The headers said "N = 8192" above cells that say "8,192"."""
    table = view.compare(None, max_n=256, dim=32, lang=lang).table
    assert steps in table[0] and table[0][steps] == "8,192"  # the GRU's steps
    assert not any("8192" in column for column in table[0]), list(table[0])
