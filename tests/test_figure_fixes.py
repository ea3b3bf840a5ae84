"""Issue 40's chart defects, each held by its figure function: the alignment's y title fits its figure, flow's
head labels keep apart, a mosaic's colour bar is labelled at round numbers, SmolLM2 stands in the size comparison
and log axes print no "2 5" between their decades. (The browser's layout check reads the drawn pages for the same
faults; these tests name the function at fault without a browser.)"""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go
import pytest

from tx_explorer.views import model_sizes
from tx_explorer.viz import charts, flow, heatmap, margins, seq2seq, style


@pytest.mark.parametrize("title", ["decoder step: reads → writes (Italian)", "解码步骤：读入 → 写出（意大利语）"])
def test_alignment_figure_is_tall_enough_for_its_y_title(title):
    fig = seq2seq.alignment_figure(np.full((4, 4), 0.25), list("abcd"), list("wxyz"), gold=[(0, 0)], y_title=title)
    lines = fig.layout.yaxis.title.text.split("<br>")
    assert len(lines) == 2 and "".join(lines).replace(" ", "") == title.replace(" ", "")
    plot = fig.layout.height - seq2seq.PLOT_OVERHEAD_PX
    assert all(style.text_width(line, style.FONT["size"]) <= plot for line in lines)
    # the way it was cut: the whole sentence on one line is longer than the plot it runs along
    assert style.text_width(title, style.FONT["size"]) > plot


def test_flow_labels_only_heads_with_room_and_names_every_head_in_its_hover():
    weight = np.array([0.021, 0.466, 0.011, 0.087, 0.537, 0.015, 0.027, 0.010, 0.135])  # the edge
    norm = np.array([0.92, 23.2, 0.58, 4.56, 30.5, 0.60, 1.20, 0.50, 6.80])
    fig = flow.edge_views(weight, norm, norm - 5, title="t", x_title="x", y_title="y", colour_title="c")
    labels, where = list(fig.data[0].text), list(fig.data[0].textposition)
    named = [h for h in (0, 2, 5, 6, 7) if labels[h]]  # H0, H2, H5, H6, H7 within a label of each other
    # on the x axis: one named above them, none below (a label there was cut by the axis)
    assert len(named) == 1 and where[named[0]] == "top center", labels
    assert all(labels[h] == f"H{h}" for h in (1, 3, 4, 8))  # the spread-out heads keep theirs
    assert [c[1] for c in fig.data[0].customdata] == [f"H{h}" for h in range(9)]


def test_flow_names_the_top_head_at_the_axes_end_and_no_label_sits_beside_an_unnamed_one():
    """Gemma 3's edge (小猫坐在垫子上。×2): every weight near 1, the axis's end. H3, the highest, had no place for its
    name while H1's sat level with it, read as H3's. The axes leave a label's room past the points now."""
    weight = np.array([0.99362, 0.99842, 0.93964, 0.99989])
    norm = np.array([172.07, 222.60, 165.72, 242.12])
    fig = flow.edge_views(weight, norm, np.array([0.024, -0.006, -0.037, -0.058]), title="t", x_title="x",
                          y_title="y", colour_title="c")  # fmt: skip
    assert list(fig.data[0].text) == ["H0", "H1", "H2", "H3"]
    assert fig.layout.xaxis.range[1] > weight.max() and fig.layout.yaxis.range[1] > norm.max()


def _short(x: float) -> bool:
    return np.isclose(x, float(f"{x:.2g}"), rtol=1e-9, atol=0)


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 0.99), (0.0, 1.0), (-0.37, 1.0), (0.0, 0.0312), (3.0, 250.0)])
def test_mosaic_colour_bar_ticks_are_round_numbers_inside_the_range(lo, hi):
    maps = np.linspace(lo, hi, 16).reshape(2, 2, 2, 2)
    bar = heatmap.mosaic(maps, row_names=["a", "b"], col_names=["c", "d"], zmin=lo, zmax=hi).data[1].colorbar
    values = [float(t.replace("−", "-")) for t in bar.ticktext]  # written with a true minus
    assert len(values) >= 3 and all(_short(v) for v in values), bar.ticktext
    assert all(lo - 1e-12 <= v <= hi + 1e-12 for v in values)
    # each label sits where its value is on the uint8 codes (0 → lo, 254 → hi)
    np.testing.assert_allclose(bar.tickvals, (np.array(values) - lo) / (hi - lo) * (heatmap.GAP - 1))


def test_size_comparison_has_smollm2_counted_exactly_and_no_minor_log_labels():
    _, panel = model_sizes.lecture_table()
    bars = {t.name: dict(zip(t.x, t.y)) for t in panel.figure.data}
    assert bars["counted (ours)"]["SmolLM2-135M"] == 134_515_008  # = the released checkpoint's tensors
    assert bars["published"]["SmolLM2-135M"] == model_sizes.SMOLLM2_PUBLISHED
    assert np.isnan(bars["lecture"]["SmolLM2-135M"])  # the lecture's table has no SmolLM2
    assert panel.figure.layout.yaxis.minorloglabels == "none"


def test_cell_numbers_are_written_only_where_they_fit_their_cells_legibly():
    """The multi-head inspector's Q and K rows (16 signed values each) had numbers Plotly shrank to 6 px."""
    rng = np.random.default_rng(0)
    q = charts.signed_heatmap(rng.standard_normal((2, 16))).data[0]
    assert q.texttemplate is None and q.text is None
    small = charts.signed_heatmap(rng.standard_normal((4, 8))).data[0]
    assert small.texttemplate == "%{text}" and len(small.text[0][0]) <= 5
    weights = heatmap.heatmap(rng.random((12, 12))).data[0]  # "0.12" in a twelfth of a column: 9 px
    assert weights.texttemplate == "%{text}" and len(weights.text[0][0]) == 4
    # a sixteenth: "0.12" would be Plotly's 7 px, "0.1" is 9 (the hover keeps four decimals)
    sixteen = heatmap.heatmap(rng.random((16, 16))).data[0]
    assert sixteen.texttemplate == "%{text}" and {len(t) for t in np.ravel(sixteen.text)} == {3}
    assert heatmap.heatmap(rng.random((2, 16)) - 0.5, show_values=True).data[0].text is not None  # asked: kept


def test_cell_numbers_are_shortened_to_one_decimal_before_they_are_dropped():
    """The masks page's scores ("−0.47", 10 columns in half the page) were drawn 8 px high: one decimal fewer
    fits; cells that are not decimals ("−∞") stay; a number with one decimal is not cut further."""
    text = np.array([["−0.47", "−∞", "1.25", "−0.04"]], dtype=object)
    assert style.fitted_numbers(text, 200).tolist() == text.tolist()  # room: as written
    assert style.fitted_numbers(text, 27).tolist() == [["−0.5", "−∞", "1.2", "0.0"]]  # ⌊27 / (0.65 · 4)⌋ = 10 px
    assert style.fitted_numbers(text, 20) is None  # "−0.5" would be 7 px


def test_cell_numbers_too_small_for_the_width_a_figure_is_drawn_at_are_dropped():
    """The operator page's Q and K (4 × 8 signed values) in a third of the page were written 6 px high: once the
    width is known their numbers go (the hover keeps each value); a column-wide figure keeps them."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal((4, 8))
    wide = style.tidy(charts.signed_heatmap(values), style.COLUMN_PX).data[0]
    assert wide.texttemplate == "%{text}"
    narrow = style.tidy(charts.signed_heatmap(values), style.PAGE_PX / 3).data[0]
    assert narrow.texttemplate is None and narrow.text is None and "%{z:.4f}" in narrow.hovertemplate
    v = style.tidy(charts.signed_heatmap(values[:, :4]), style.PAGE_PX / 3).data[0]  # V's four columns fit
    assert v.texttemplate == "%{text}"
    tiny = charts.signed_heatmap(values * 1e-30).data[0]  # a typed 1e-30 hovered as 0.0000
    assert "%{z:.3~g}" in tiny.hovertemplate and "%{z:.4f}" not in tiny.hovertemplate


def test_point_labels_lie_on_no_other_label_and_no_marker():
    """The flow page's edge views drew H4's name over H8's marker: a label now avoids every marker and label."""
    rng = np.random.default_rng(1)
    plot, marker = (290.0, 300.0), 14.0
    for _ in range(20):
        xy = rng.random((12, 2)) * rng.choice([0.2, 1.0])  # crowded or spread
        names = [f"H{i}" for i in range(len(xy))]
        where = style.label_positions(xy, names, plot, marker_px=marker, origin=True)
        pad = style.PLOT_PAD_PX
        px = xy / (xy.max(0) / (np.array(plot) - pad))  # the span from 0 filling the plot less the autorange's pad
        r, h = marker / 2, style.LABEL_HEIGHT_PX
        markers = [(x - r, x + r, y - r, y + r) for x, y in px]
        labels = []
        for (x, y), name, w in zip(px, names, where):
            if w is not None:
                width = style.text_width(name, 12)
                side = w.split()[1]
                x0 = {"center": x - width / 2, "right": x + r, "left": x - r - width}[side]
                labels.append((x0, x0 + width, *((y + r, y + r + h) if w.startswith("top") else (y - r - h, y - r))))
        overlap = lambda a, b: a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]  # noqa: E731
        assert not any(overlap(a, b) for a in labels for b in markers + labels if a is not b)
        for x0, x1, y0, y1 in labels:  # none cut at the plot's edge
            assert 0 <= x0 and x1 <= plot[0] and 0 <= y0 and y1 <= plot[1]
        assert sum(w is not None for w in where) >= 1


def test_a_mosaic_is_a_png_of_its_codes_coloured_as_plotly_colours_them():
    """The mosaic is sent as a palette PNG: decoded (by Pillow, not our writer) its pixels are the uint8 codes tile
    by tile with white gaps, and each code's colour is the colour scale's at that value (Plotly's own sampler)."""
    import base64
    import io

    import plotly.colors
    from PIL import Image

    from tx_explorer.viz import style

    maps = np.random.default_rng(0).random((3, 4, 5, 6))
    fig = heatmap.mosaic(maps, row_names=list("abc"), col_names=list("defg"), zmin=0.0, zmax=1.0)
    png = Image.open(io.BytesIO(base64.b64decode(fig.data[0].source.removeprefix("data:image/png;base64,"))))
    pixels, palette = np.asarray(png), np.asarray(png.getpalette(), dtype=float).reshape(-1, 3)
    assert png.mode == "P" and pixels.shape == (3 * 6 - 1, 4 * 7 - 1)
    np.testing.assert_array_equal(pixels[6:11, 14:20], np.rint(maps[1, 2] * (heatmap.GAP - 1)))  # tile (1, 2)
    assert (pixels[5] == heatmap.GAP).all() and (palette[heatmap.GAP] == 255).all()  # a gap row, drawn white
    values = [float(v) for v in np.unique(pixels[pixels < heatmap.GAP]) / (heatmap.GAP - 1)]
    expected = plotly.colors.sample_colorscale(plotly.colors.get_colorscale(style.WEIGHTS), values, colortype="tuple")
    np.testing.assert_allclose(palette[np.unique(pixels[pixels < heatmap.GAP])], np.array(expected) * 255, atol=1.0)


def test_a_reference_line_on_a_log_axis_is_named_beside_it():
    """The KV stepper's tolerance on its log axis: Plotly places an annotation at log10 of its y there, so the name
    given the line's value (0.0023) stood at 10^0.0023 ≈ 1, at the top of the plot, over the axis's labels."""
    fig = charts.lines([0, 1, 2], {"max |Δ logit|": [3e-5, 5e-5, 4e-5]}, log_y=True, references={"tolerance": 0.0023})
    (line,), (note,) = fig.layout.shapes, fig.layout.annotations
    assert line.y0 == line.y1 == 0.0023  # shapes take the value
    assert note.y == pytest.approx(np.log10(0.0023)) and note.text == "tolerance"
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.minorloglabels == "none"
    linear = charts.lines([0, 1], {"a": [0.5, 1.5]}, references={"one": 1.0})
    assert linear.layout.annotations[0].y == 1.0 and linear.layout.yaxis.type in (None, "linear", "-")


# ---- margins that fit the labels before the browser draws them (viz.margins) -------------------------------------


def _heatmap(rows: list[str], cols: list[str], **layout) -> go.Figure:
    z = np.linspace(-1.0, 1.0, len(rows) * len(cols)).reshape(len(rows), len(cols))
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=rows))
    fig.update_layout(
        **{"margin": dict(l=10, r=10, t=40, b=10), "xaxis_title": "keys", "yaxis_title": "queries"} | layout
    )
    return fig


def test_margins_hold_the_longest_label_its_axis_title_and_the_colour_bar():
    short = margins.fit(_heatmap(["a", "b"], ["a", "b"]), (460,)).layout.margin
    longest = "▁Extraordinarily"
    wide = margins.fit(_heatmap(["a", longest], ["a", "b"]), (460,)).layout.margin
    extra = margins.text_width(longest, 12, "WFA") - margins.text_width("a", 12)  # "▁": wide in a CJK font
    assert wide.l - short.l == pytest.approx(extra, abs=1)
    assert short.l > margins.text_width("a", 12) + 14  # the title's line beside the labels
    # the colour bar: its 30 px, its labels (−1 … 1) and its offset 2 % of the plot right of it
    assert short.r > 10 + 30 + margins.text_width("−0.5", 12)
    assert short.b >= 12 + 14  # a row of level labels and the title under it


def test_margins_never_shrink_and_fitting_twice_changes_nothing():
    fig = _heatmap(["a"], ["b"], margin=dict(l=300, r=300, b=300, t=40))
    assert margins.fit(fig, (460,)).layout.margin.l == 300
    again = margins.fit(_heatmap(["q1", "q2"], ["k1", "k2"]), (460,))
    before = again.layout.margin.to_plotly_json()
    assert margins.fit(again, (460,)).layout.margin.to_plotly_json() == before


def test_labels_that_must_turn_at_the_least_width_drawn_get_the_depth_of_their_slant():
    tokens = [f"▁token{i}" for i in range(40)]  # 40 wide labels: no room to lie level in 460 px
    narrow = margins.fit(_heatmap(["a"], tokens), (460,)).layout.margin.b
    level = margins.fit(_heatmap(["a"], ["a", "b"]), (460,)).layout.margin.b
    assert narrow > level + 0.5 * margins.text_width(tokens[-1], 12)
    # drawn somewhere between a column and the page: level on the page, turned in the column. The margin holds them
    # turned (a 1280 px window turned labels a 1400 px one drew level, and Plotly grew the margin: a second draw)
    few = [f"▁word{i}" for i in range(8)]
    assert margins.fit(_heatmap(["a"], few), (920,)).layout.margin.b == level
    turned = margins.fit(_heatmap(["a"], few), (460,)).layout.margin.b
    assert turned > level and margins.fit(_heatmap(["a"], few), (460, 920)).layout.margin.b == turned


def test_a_colour_axis_no_trace_uses_and_a_hidden_scale_add_no_room():
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="markers"))
    fig.update_layout(margin=dict(l=10, r=10, t=40, b=10), coloraxis2=dict(colorbar=dict(x=1.08)))
    assert margins.fit(fig, (460,)).layout.margin.r < 30
    hidden = _heatmap(["a"], ["b"])
    hidden.update_traces(showscale=False)
    assert margins.fit(hidden, (460,)).layout.margin.r < 30
    given = go.Figure(
        go.Scatter(x=[0, 1], y=[0, 1], mode="markers", marker=dict(color=[0, 1], colorbar=dict(title="e")))
    )
    given.update_layout(margin=dict(l=10, r=10, t=40, b=10))
    assert margins.fit(given, (460,)).layout.margin.r > 40  # a marker's bar shows where one is given (Plotly's rule)


def test_a_legend_below_the_plot_gets_its_rows_under_the_axis():
    lines = [go.Scatter(x=[0, 1], y=[0, 1], name=f"variant {i}") for i in range(12)]
    one = style.tidy(go.Figure(lines[:2], layout=dict(margin=dict(b=10))), 460).layout.margin.b
    many = style.tidy(go.Figure(lines, layout=dict(margin=dict(b=10))), 460).layout.margin.b
    alone = style.tidy(go.Figure(lines[:1], layout=dict(margin=dict(b=10))), 460).layout.margin.b
    assert one - alone >= margins.LEGEND_ROW and many - one >= margins.LEGEND_ROW  # more rows, more room


HALF = style.PAGE_PX / 2  # a chart in a row of two, as planned on a 1400 px window


def test_a_title_fits_its_chart_on_the_narrowest_window():
    """A chart planned half the page wide is drawn :data:`style.NARROWEST` as wide on a 1280 px window, and its title
    starts 5 % in: wrapped to the 1400 px window's width, the masks page's 中文 titles ran past their charts there."""
    title = "Layer 0 (local): largest weight per block"
    one_line = margins.text_width(title, style.TITLE_PX)
    assert 0.9 * style.NARROWEST * HALF < one_line <= 0.9 * HALF  # one line would fit on the wide window only
    lines = style.tidy(go.Figure(layout=dict(title=dict(text=title))), HALF).layout.title.text.split("<br>")
    assert len(lines) == 2
    assert all(margins.text_width(line, style.TITLE_PX) <= 0.9 * style.NARROWEST * HALF for line in lines)


def test_a_legend_that_wraps_on_the_narrowest_window_has_its_rows_from_the_first_draw():
    """moe's drop curves: one legend row in a half-page chart on a 1400 px window, two on a 1280 px one, where
    Plotly grew the bottom margin after the first draw (the chart jumped)."""
    names = [f"layer {i} of 6" for i in range(3)]  # 3 entries of 40 px + 12 characters: 360 px or so

    def curves() -> go.Figure:
        layout = dict(margin=dict(l=10, r=10, b=10), legend=style.LEGEND)
        return go.Figure([go.Scatter(x=[0, 1], y=[0, 1], name=n) for n in names], layout=layout)

    narrow, wide = (margins.fit(curves(), (w,)).layout.margin.b for w in style.drawn_widths(HALF))
    assert narrow >= wide + margins.LEGEND_ROW  # the estimate: one row at the wide width, two at the narrow
    assert style.tidy(curves(), HALF).layout.margin.b == narrow


def test_the_x_labels_are_measured_on_the_plot_the_rounded_margins_leave():
    """The margins :func:`margins.fit` grows are rounded up (+ 2 px): the plot they leave is narrower than the one
    the labels were measured on, and eight "d1" … "d8" under K (a third of the page, on a 1280 px window) turned
    in the 5 px lost, growing the bottom margin after the first draw. At every width, the margin holds the labels
    as they lie on the plot drawn."""
    for width in range(200, 420, 2):
        fig = margins.fit(_heatmap([f"k{i}" for i in range(6)], [f"d{i}" for i in range(1, 9)]), (width,))
        m = fig.layout.margin
        assert margins._x_extent(fig, "xaxis", width - m.l - m.r)[0] <= m.b, width


def test_a_half_page_heatmap_keeps_its_column_labels_apart_on_the_narrowest_window():
    """The decoder's state s₀ (128 dimensions) in a row of two: every 5th label, upright, stood on the next on a
    1280 px window; the labels are thinned to what that window's plot holds (the layout check's rule: upright
    labels at least three quarters of the font apart)."""
    fig = style.tidy(charts.signed_heatmap(np.ones((1, 128)), ["s0"], [str(i) for i in range(128)], height=360), HALF)
    m, ticks = fig.layout.margin, fig.layout.xaxis.tickvals
    plot = style.NARROWEST * HALF - m.l - m.r
    assert plot / 128 * (ticks[1] - ticks[0]) >= 0.75 * margins.FONT_PX


@pytest.mark.parametrize(
    "axis",
    [
        dict(range=[14.5, -0.5]),  # a reversed axis (rows top-down), its range given high to low
        dict(type="log", range=[-6, -2]),  # a log axis's range, in decades
        dict(autorange="reversed"),
        dict(tickvals=[0, 1], ticktext=["<b>first</b>", "a<br>two-line label"]),  # markup and lines as drawn
    ],
)
def test_margins_read_any_axis_the_views_draw(axis):
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[1e-5, 0.2, 3.0]), layout=dict(yaxis=axis, margin=dict(l=0, b=0)))
    margin = margins.fit(fig, (460,)).layout.margin
    assert margin.l > margins.Y_PAD and margin.b > margins.X_PAD  # room for the labels, whatever the axis


def test_a_wrapped_cjk_title_leaves_no_character_alone_and_starts_no_line_with_closing_punctuation():
    """At every width: "…对头与查询取平" then "均" alone, or "（悬停查看绝对值" then "）", was what wrapping
    anywhere in CJK text gave; the line before now hands down its last characters. Latin words are never split."""
    titles = [
        "注意力权重（对头与查询取平均）随层变化的平均熵",
        "每个头的分数（悬停查看绝对值）",
        "各层 512 个查询的平均",
    ]
    for title in titles:
        for width in range(60, 420, 3):
            lines = style.wrap(title, width).split("<br>")
            assert "".join(lines).replace(" ", "") == title.replace(" ", "")
            assert all(not line.startswith(tuple("）、。，：")) for line in lines[1:]), lines
            assert len(lines) == 1 or len(lines[-1]) >= 3, lines
    assert style.wrap("Weights of head 0 for the shuffled sentence", 120).split("<br>")[-1] == "sentence"


def test_a_cjk_title_breaks_at_its_punctuation_or_spaces_where_one_is_near():
    """Chinese leaves no space between words: a break between any two characters split 位置 ("（◆ = 位<br>置 0）");
    a line now ends at a near space or punctuation, or before an opening bracket."""
    title = "旋转后的二维向量（◆ = 位置 0）"
    for width in range(150, 300, 2):
        lines = style.wrap(title, width).split("<br>")
        assert not any(a.endswith("位") and b.startswith("置") for a, b in itertools.pairwise(lines)), (width, lines)
    assert style.wrap(title, 150).split("<br>") == ["旋转后的二维向量", "（◆ = 位置 0）"]


def test_a_title_wrapped_to_more_lines_grows_a_figure_of_fixed_height_not_squeezes_its_plot():
    title = "A title long enough to take three lines in a narrow column of the page, s₀ and all"
    fixed = style.tidy(go.Figure(layout=dict(title=dict(text=title), height=200, margin=dict(t=40))), 300)
    added = fixed.layout.title.text.count("<br>")
    assert added >= 2 and fixed.layout.height - 200 == fixed.layout.margin.t - 40 > 0  # the plot keeps 200 − 40 px
    free = style.tidy(go.Figure(layout=dict(title=dict(text=title))), 300)
    assert free.layout.height is None  # Plotly's own height: nothing to grow


def test_markup_in_a_title_takes_no_width():
    """``y<sub>A</sub>`` is drawn as two characters, not twelve: a title fits where its drawn text fits."""
    title = "max |y<sub>A</sub>(word) − y<sub>B</sub>(word)| per word"
    drawn = margins.text_width("max |yA(word) − yB(word)| per word", style.TITLE_PX)
    assert style.wrap(title, drawn + 1) == title
    assert "<br>" in style.wrap(title, drawn - 20)


def test_a_short_tables_text_is_shown_as_it_is(monkeypatch):
    """st.table reads its cells as Markdown: flow's direct-logit table showed SmolLM2's tokens ▁`_ and ▁` as a code
    span, their backticks gone. Text cells are escaped; numbers stay numbers."""
    from tx_explorer.ui import figures

    shown = []
    monkeypatch.setattr(figures.st, "table", lambda data, **kwargs: shown.append(data))
    figures.literal_table({"pushes up": ["▁which +0.78, ▁`_ +0.69, ▁` +0.57", "**bold**"], "n": [1, 2]})
    figures.literal_table([{"tokens": "a*b*c"}])
    (up, n), (row,) = shown[0].values(), shown[1]
    assert up == [r"▁which +0.78, ▁\`\_ +0.69, ▁\` +0.57", r"\*\*bold\*\*"] and n == [1, 2]
    assert row == {"tokens": r"a\*b\*c"}


def test_the_token_strips_colour_bar_has_room_for_its_ticks():
    """A one-line text (Find the head, "Hi") left the colour bar 64 px for Plotly's six ticks, drawn one on the
    other: at most a tick per 24 px (two lines of the font) now; a longer text keeps more."""
    from tx_explorer.viz import heads

    for words, at_least in ((1, 2), (200, 5)):
        tokens = ["word"] * words
        fig = heads.token_text(tokens, np.linspace(0, 0.8, words), picked=0, title="t", hover=tokens)
        plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
        ticks = fig.data[0].marker.colorbar.nticks
        assert at_least <= ticks and ticks * 2 * style.FONT["size"] <= plot
