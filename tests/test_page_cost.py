"""AppTest for the "Cost of attention" page: analytic charts at once, measuring on a click, guard, tile view."""

from __future__ import annotations

import re

import numpy as np
from conftest import assert_clean, open_page, plotly_specs


def _titles(at) -> list[str]:
    return [spec["layout"].get("title", {}).get("text", "") for spec in plotly_specs(at)]


def test_first_load_shows_charts_and_the_flops_table_without_measuring():
    at = open_page("cost_of_attention")
    assert_clean(at)
    titles = _titles(at)
    assert any("FLOPs" in t for t in titles) and any("Peak memory" in t for t in titles)
    assert not any("time" in t.lower() for t in titles)  # nothing measured before the button
    table = at.dataframe[0].value
    assert len(table) == 4 and table.iloc[1, 2] == f"{2 * 8 * 1024 * 64 * 1024:,}"  # QKᵀ: 2·H·N·D_H·N
    assert any("needs 275 GB" in w.value for w in at.warning)  # the guard's verdict at N = 65 536, H = 8


def test_measuring_adds_points_and_a_time_chart():
    at = open_page("cost_of_attention")
    at.selectbox(key="cost_max_n").set_value(256)
    at.number_input(key="cost_repeats").set_value(1)
    at.number_input(key="cost_heads").set_value(2)
    at.button(key="cost_measure").click().run()
    assert_clean(at)
    assert any("time" in t.lower() for t in _titles(at))
    results = next(d.value for d in at.dataframe if "method" in d.value.columns)  # the measured runs' table
    assert len(results) == 6  # N = 128, 256 × naive, flash, sdpa
    memory = next(s for s in plotly_specs(at) if "Peak memory" in s["layout"]["title"]["text"])
    measured = [tr for tr in memory["data"] if "measured" in tr.get("name", "")]
    assert len(measured) == 3 and all(len(tr["x"]) == 2 for tr in measured)


def test_guard_and_tile_view_follow_their_inputs():
    at = open_page("cost_of_attention")
    at.number_input(key="cost_guard_n").set_value(512).run()
    assert any("would run" in s.value for s in at.success)
    at.session_state["cost_open_tile"] = True  # the tile view is built once opened
    at.run()
    at.checkbox(key="cost_tile_causal").uncheck().run()
    assert_clean(at)
    assert any("9 of 9" in t for t in _titles(at))  # no tile skipped without the causal mask
    at.checkbox(key="cost_tile_causal").check().run()
    assert any("6 of 9" in t for t in _titles(at))
    at.number_input(key="cost_tile_n").set_value(64).run()
    assert_clean(at)


def test_the_last_three_sections_are_built_only_once_opened():
    at = open_page("cost_of_attention")
    closed = len(plotly_specs(at))
    # FLOPs and memory, and the K/V sharing table; no tile grid, IO curves, mixers' table or fused-QKV timing yet
    assert closed == 2 and len(at.table) == 1
    assert not at.number_input(key="cost_tile_n") if "cost_tile_n" in at.session_state else True
    for key, charts in (("cost_open_tile", 3), ("cost_open_io", 2), ("cost_open_mix", 2)):
        at.session_state[key] = True
        at.run()
        assert_clean(at)
        assert len(plotly_specs(at)) == closed + charts, key
        closed += charts


def test_every_string_is_bilingual_and_every_used_key_exists():
    import re
    import string
    from pathlib import Path

    from tx_explorer import locales

    table = locales.table("cost_of_attention")
    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    for key, entry in table.items():
        assert entry.get("en", "").strip() and entry.get("zh", "").strip(), key
        assert fields(entry["en"]) == fields(entry["zh"]), key
    source = (Path(__file__).resolve().parents[1] / "pages" / "cost_of_attention.py").read_text(encoding="utf-8")
    used = set(re.findall(r'\bT\("([a-z0-9_]+)"', source))
    assert used and used <= set(table), used - set(table)


def test_chinese_page_loads_clean():
    at = open_page("cost_of_attention")
    n_charts = len(plotly_specs(at))
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert len(plotly_specs(at)) == n_charts
    assert any("注意力的代价" in t.value for t in at.title)


def test_bytes_moved_axes_read_in_bytes_with_several_ticks():
    """The IO charts' axes said "1B", "100B" (Plotly's billion) beside "1MB … 1TB", and the by-tile chart had one."""
    from tx_explorer.views import flash_io as io_view

    fio = io_view.io(64, 128, 4096, measure=None)
    for panel in (fio.by_n, fio.by_tile):
        axis = panel.figure.layout.yaxis
        values = np.concatenate([np.asarray(t.y, dtype=float) for t in panel.figure.data])
        shown = [t for v, t in zip(axis.tickvals, axis.ticktext) if values.min() <= v <= values.max()]
        assert len(shown) >= 3 and all(re.fullmatch(r"\d+[kMGT]?B", t) for t in axis.ticktext), axis.ticktext
    assert {"1MB", "1GB", "100GB"} <= set(fio.by_n.figure.layout.yaxis.ticktext)


def test_chinese_flops_title_leaves_no_character_alone_on_a_line():
    from tx_explorer import locales
    from tx_explorer.viz import style

    title = locales.text("cost_of_attention", "flops_title", "zh")
    for width in (style.COLUMN_PX, style.PAGE_PX):
        lines = style.wrap(title, 0.9 * width).split("<br>")
        assert all(len(line) >= 3 for line in lines[1:]), lines  # was "…（悬停查看绝对值" and "）"
