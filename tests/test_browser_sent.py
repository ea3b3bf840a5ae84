"""The form a figure is sent in (tx_explorer.viz.sent) looks the same in Chromium as the figure with its template,
and a copy of it handed to Plotly.react, as Streamlit hands one on mounting each chart, calculates nothing again.

Drawn with the plotly.js that the plotly package ships (the same defaults as Streamlit's bundle); the pages
themselves are checked by the layout check (tests/layout_check.py: no chart drawn twice at one size)."""

from __future__ import annotations

import json
import re

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly.subplots import make_subplots

from tests.test_browser import browser, plotly_page  # noqa: F401  (the browser suite's one Chromium)
from tx_explorer.viz import sent, style

pytestmark = pytest.mark.browser

DRAW = """async (s) => {
  const gd = document.getElementById('g');
  Plotly.purge(gd);
  await Plotly.newPlot(gd, s.data, s.layout);
  return [...gd.querySelectorAll('.main-svg')].map((e) => e.outerHTML).join('');
}"""
COPY = """async (s) => {
  const gd = document.getElementById('g');
  Plotly.purge(gd);
  await Plotly.newPlot(gd, s.data, s.layout);
  const drawn = gd.calcdata, copy = JSON.parse(JSON.stringify(s));
  await Plotly.react(gd, copy.data, copy.layout);
  return gd.calcdata === drawn;
}"""


def _figures() -> dict[str, go.Figure]:
    """One of each kind the app draws: lines with gaps and a legend, bars both ways, a heatmap with a colour bar
    and annotations, images in subplots with a reference line, a log axis."""
    lines = go.Figure([go.Scatter(x=np.arange(5.0), y=[1, np.nan, 3, 2, 4], name="a"), go.Scatter(y=[2, 1], name="b")])
    bars = make_subplots(rows=1, cols=2)
    bars.add_trace(go.Bar(x=["p", "q"], y=[1.0, 2.0]), row=1, col=1)
    bars.add_trace(go.Bar(y=["p", "q"], x=[3.0, 1.0], orientation="h"), row=1, col=2)
    heat = go.Figure(go.Heatmap(z=np.arange(12.0).reshape(3, 4), colorscale=style.WEIGHTS))
    heat.add_annotation(text="peak", x=3, y=2)
    images = make_subplots(rows=1, cols=2, subplot_titles=["left", "right"])
    for col in (1, 2):
        images.add_trace(go.Image(z=np.full((4, 4, 3), 40 * col, dtype=np.uint8)), row=1, col=col)
    images.add_vline(x=1.5, line_dash="dot")
    log = go.Figure(go.Scatter(x=[1, 10, 100], y=[3, 2, 1], mode="lines+markers"), layout=dict(xaxis_type="log"))
    for fig in (lines, bars, heat, images, log):
        fig.update_layout(width=600, height=400, title="t")
    return dict(lines=lines, bars=bars, heat=heat, images=images, log=log)


def _plain(svg: str) -> str:
    """The SVG without the random ids Plotly draws (clip paths, gradients) and with each tag's attributes sorted."""
    svg = re.sub(r'(id|clip-path|href|class)="[^"]*"|url\([^)]*\)', "", svg)
    return re.sub(r"<([\w:-]+)((?:\s+[\w:-]+=\"[^\"]*\")*)\s*>", lambda m: f"<{m[1]} {sorted(m[2].split())}>", svg)


@pytest.fixture(scope="module")
def plot(browser):  # noqa: F811
    with plotly_page(browser, 800, 600) as page:
        yield page


@pytest.mark.parametrize("kind", list(_figures()))
def test_sent_form_looks_the_same_and_a_copy_recalculates_nothing(plot, kind):
    fig = _figures()[kind]
    templated = json.loads(pio.to_json(fig, validate=False))
    form = json.loads(pio.to_json(sent.as_sent(fig), validate=False))
    assert "template" in templated["layout"] and "template" not in form["layout"]
    assert _plain(plot.evaluate(DRAW, form)) == _plain(plot.evaluate(DRAW, templated))
    assert plot.evaluate(COPY, form)
    assert not plot.evaluate(COPY, templated)  # the check can fail: as it was, every chart was calculated twice
