"""A shown figure is sent in the form the browser draws once (tx_explorer.viz.sent): its template's layout in its
own, no template, a data revision, numbers as lists. tests/test_browser_sent.py draws both forms in Chromium."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from tx_explorer.viz import sent, style


def _spec(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def test_the_template_layout_is_written_into_every_axis_and_annotation_and_the_figure_keeps_its_own():
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[1, 2], y=[3, 4]), row=1, col=1)
    fig.add_trace(go.Scatter(x=[1, 2], y=[3, 4]), row=1, col=2)
    fig.update_layout(plot_bgcolor="red", xaxis2=dict(gridcolor="blue"))
    fig.add_annotation(text="a", x=1, y=3, arrowhead=3)
    template = fig.layout.template.layout
    out = _spec(sent.as_sent(fig))["layout"]
    assert "template" not in out
    assert out["plot_bgcolor"] == "red" and out["paper_bgcolor"] == template.paper_bgcolor  # ours wins, else its
    for axis in ("xaxis", "xaxis2", "yaxis", "yaxis2"):
        assert out[axis]["zerolinecolor"] == template.xaxis.zerolinecolor and out[axis]["automargin"] is True
    assert out["xaxis2"]["gridcolor"] == "blue" and out["xaxis"]["gridcolor"] == template.xaxis.gridcolor
    assert out["xaxis"]["title"]["standoff"] == template.xaxis.title.standoff
    (note,) = out["annotations"]
    assert note["arrowhead"] == 3 and note["arrowcolor"] == template.annotationdefaults.arrowcolor
    assert sent.untemplated(_spec(fig), fig.data)["layout"] == out  # a second pass finds nothing to write


def test_baked_colours_show_no_line_the_template_left_hidden():
    """A colour set in the layout makes Plotly show the line it styles; one from the template does not: a bar
    chart's category axis keeps no grid or zero line and no axis gets a line, unless the figure asks."""
    fig = go.Figure([go.Bar(x=["a", "b"], y=[1, 2]), go.Bar(y=["c"], x=[3], orientation="h", xaxis="x2", yaxis="y2")])
    fig.update_layout(yaxis=dict(showgrid=False, linewidth=2))
    out = _spec(sent.as_sent(fig))["layout"]
    assert (out["xaxis"]["showgrid"], out["xaxis"]["zeroline"], out["xaxis"]["showline"]) == (False, False, False)
    assert (out["yaxis"]["showgrid"], out["yaxis"]["zeroline"], out["yaxis"]["showline"]) == (False, True, True)
    assert (out["xaxis2"]["showgrid"], out["yaxis2"]["showgrid"]) == (True, False)  # horizontal: y positions


def test_numbers_go_as_lists_with_nan_as_null_and_large_figures_stay_typed():
    grid = np.arange(6, dtype=np.float32).reshape(2, 3)
    line = np.array([0.5, np.nan, 2.0])
    fig = sent.as_sent(go.Figure([go.Heatmap(z=grid), go.Scatter(x=np.arange(3), y=line)]))
    spec = _spec(fig)
    assert spec["layout"]["datarevision"] == sent.DATAREVISION and "template" not in spec["layout"]
    assert "bdata" not in json.dumps(spec)
    assert spec["data"][0]["z"] == grid.tolist() and spec["data"][1]["y"] == [0.5, None, 2.0]
    assert spec["data"][1]["x"] == [0, 1, 2]
    big = sent.as_sent(go.Figure(go.Scatter(y=np.zeros(sent.LIST_NUMBERS + 1))))
    assert set(_spec(big)["data"][0]["y"]) == {"dtype", "bdata"}  # typed: a second draw, not megabytes of text


def test_a_tidied_figure_sent_twice_is_sent_the_same_and_keeps_its_own_modes():
    """ui.show_figure sends ``as_sent(tidy(fig), **modes)``: a figure shown again (a rerun keeps it) is sent the
    same; the modes given fill in only what the figure leaves unset; the figure itself is not changed."""
    fig = go.Figure(go.Scatter(x=np.arange(4.0), y=np.arange(4.0), name="a"), layout=dict(title="t", dragmode="zoom"))
    once = _spec(sent.as_sent(style.tidy(fig, 460), clickmode="event+select", dragmode="pan"))
    assert isinstance(fig, sent.ListFigure) and "template" not in once["layout"] and "bdata" not in json.dumps(once)
    assert (once["layout"]["clickmode"], once["layout"]["dragmode"]) == ("event+select", "zoom")
    assert fig.layout.template.layout.plot_bgcolor and fig.layout.clickmode is None  # only its dict differs
    assert _spec(sent.as_sent(style.tidy(fig, 460), clickmode="event+select", dragmode="pan")) == once
