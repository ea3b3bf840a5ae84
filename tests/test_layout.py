"""Every page reads like a textbook, in both languages: the layout check (:mod:`tests.layout_check`) finds nothing.

Each page is opened in a fresh tab and scrolled through so every section of the default view is drawn, then
screenshotted (``test-artifacts/layout/<lang>-<page>.png``) and read in English, and again after the switch to 中文
the way a user makes it: legends clear of titles, titles within their charts, tick labels apart, buttons labelled in
full, no raw TeX, Markdown or HTML entities, axis titles inside their figure, point labels apart, round colour-bar
ticks, no empty panel, margins that held the labels at the first draw; and all of it again on a 1280 px window
(the narrowest the layout holds to). A first test shows the check fails on a page built with each of those faults,
a second that the narrower look finds what only the narrower window shows.

The same visits prove that no page imports torch's compiler: the server logs every import (``-X importtime``), and
after each page its log names neither TorchDynamo nor SymPy (hundreds of modules, seconds alone). torch imports them
on the first call of some Python functions (``torch.broadcast_shapes``; ``normal_``, ``randn`` and ``empty_like`` on
the meta device): the home chart, which serve.py's warm-up draws, would make the first visitor wait, and a visitor's
run doing so under a class's load once held every other session up for minutes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from tests.layout_check import COUNT_DRAWS, LANGS, READ_PAGE, VIEWPORT, check_page, narrowed, problems
from tests.test_browser import (  # noqa: F401  (fixtures: the one server and browser of the browser suite)
    app,
    app_pages,
    browser,
    model_root,
)

pytestmark = pytest.mark.browser
SERVER_ENV = {"PYTHONPROFILEIMPORTTIME": "1"}  # the module's server (tests/test_browser.py's app) logs each import
HEAVY = ("torch._dynamo", "sympy")


def heavy_imports(log: str) -> list[str]:
    """The modules of :data:`HEAVY` that ``-X importtime``'s lines in ``log`` name."""
    names = [line.rsplit("|", 1)[-1].strip() for line in log.splitlines() if line.startswith("import time:")]
    return [n for n in names if any(n == m or n.startswith(m + ".") for m in HEAVY)]


def test_the_import_log_names_a_heavy_import():
    """A fresh interpreter that imports SymPy, as torch's compiler does: :func:`heavy_imports` finds it."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", "import sympy"], capture_output=True, text=True)
    assert "sympy" in heavy_imports(run.stderr)
    assert not heavy_imports(
        subprocess.run([sys.executable, "-X", "importtime", "-c", "import json"], capture_output=True, text=True).stderr
    )


# Pages whose check still fails (in either language), with the reason; empty when every page passes.
KNOWN: dict[str, str] = {}


def _faulty_page() -> str:
    """A page with one of each fault, laid out the way Streamlit nests its elements."""
    fig = go.Figure(
        [go.Scatter(x=[1, 2, 3], y=[1, 3, 2], name="a long legend entry"), go.Scatter(x=[1, 3], y=[2, 2], name="b")]
    )
    fig.update_layout(
        width=420,
        height=300,
        # Large type, so each fault holds whatever fonts the machine has: the title, centred in a 40 px top margin,
        # spans it; the legend stands on the plot's top edge inside that margin.
        title=dict(
            text="A title far too long for its chart, about a_{t,i} and nothing else at all, really", font_size=24
        ),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", font_size=18),
        margin=dict(t=40),
        xaxis=dict(title="x axis", tickvals=[1, 1.02, 3], ticktext=["first", "second", "third"]),
    )
    chart = fig.to_html(full_html=False, include_plotlyjs=True)
    charts = chart + _faulty_panels().to_html(full_html=False, include_plotlyjs=False)
    return f"""<!DOCTYPE html><html><body><div data-testid="stMain">
      <p>The state s_{{t−1}} and **bold** and &amp;lt;|endoftext|&amp;gt;</p>
      <button></button><button style="width: 40px; overflow: hidden; white-space: nowrap">Data download</button>
      <div class="st-key-fig_faulty"><div data-testid="stPlotlyChart">{charts}</div></div></div>
      <script>  // as Streamlit does with each chart it mounts: react with a copy (template, typed arrays: a redraw)
        const gd = document.querySelector('.js-plotly-plot'), copy = JSON.parse(JSON.stringify(gd.data));
        Plotly.react(gd, copy, JSON.parse(JSON.stringify(gd.layout)));
      </script></body></html>"""


def _faulty_panels() -> go.Figure:
    """Issue 40's faults in one figure: a y-axis title longer than the figure is tall, ‖·‖_F left raw, two point
    labels on one spot, a colour bar cut in equal parts (0.248, 0.495, …) and a panel with no data."""
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(
        go.Scatter(
            x=[0.0, 0.001, 1.0],
            y=[0.0, 0.001, 1.0],
            mode="markers+text",
            text=["H0", "H5", "H1"],
            marker=dict(color=[0.0, 0.5, 0.99], colorbar=dict(tickvals=[0.0, 0.248, 0.495, 0.743])),
        ),
        row=1,
        col=1,
    )
    fig.add_trace(go.Scatter(x=[], y=[], name="measured later"), row=1, col=2)  # a panel drawn with no data yet
    fig.update_yaxes(title="a y-axis title far longer than this short figure is tall, cut at both ends", row=1, col=1)
    fig.update_xaxes(title="‖diag(a) − aaᵀ‖_F", row=1, col=1)
    fig.update_layout(width=500, height=220, showlegend=False, margin=dict(t=20, b=40))
    return fig


def test_the_check_finds_each_fault_it_looks_for(browser, tmp_path):  # noqa: F811
    path = tmp_path / "faulty.html"
    path.write_text(_faulty_page(), encoding="utf-8")
    page = browser.new_page(viewport={"width": 800, "height": 600})
    page.add_init_script(COUNT_DRAWS)
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .legend")
        page.wait_for_selector(".js-plotly-plot .colorbar")
        found = [p.what for p in problems(page.evaluate(READ_PAGE), "faulty", "en")]
    finally:
        page.close()
    expected = [
        "raw TeX subscript in 'The state s_{t−1}",
        "Markdown bold in 'The state",
        "HTML entity in 'The state",
        "a button with no label",
        "label cut: 'Data download'",
        "title wider than its chart",
        "legend over the title",
        "tick labels overlap: ",  # 'first' and 'second', in the order the fonts lay them out
        "raw TeX subscript in 'A title far too long",
        "axis title cut at the figure's edge: 'a y-axis title far longer",
        "raw subscript in '‖diag(a) − aaᵀ‖_F'",
        "labels overlap: 'H0' and 'H5'",
        "colour bar ticks not round: 0.248, 0.495, 0.743",
        "empty panel: axes x2y2 with no data",
        "margins grown after the first draw: ",  # a colour bar in the default margin, a legend on the top edge
        "drawn 2 times in full, its data calculated each time",  # a copy: template, typed arrays
    ]
    missed = [e for e in expected if not any(f.startswith(e) for f in found)]
    assert not missed, f"the check missed {missed}; it found {found}"


def test_the_check_finds_on_the_narrow_window_what_only_that_window_shows(browser, tmp_path):  # noqa: F811
    """A chart whose column narrows with the window (as Streamlit's do), its labels level on a 1400 px window and
    turned on a 1280 px one: the check of the same tab made narrower finds the margin Plotly grew there."""
    fig = go.Figure(go.Bar(x=[f"word {i}" for i in range(10, 22)], y=[1, 2, 3] * 4))  # 12 labels of about 45 px
    fig.update_layout(margin=dict(l=40, r=40, t=20, b=35), xaxis_automargin=True)
    chart = fig.to_html(full_html=False, include_plotlyjs=True, config={"responsive": True})
    path = tmp_path / "narrow.html"
    path.write_text(  # the column: 800 px wide on a 1400 px window, 560 on a 1280 px one
        f"""<!DOCTYPE html><html><body style="margin: 0"><div data-testid="stMain">
          <div style="width: calc((100vw - 1000px) * 2)">{chart}</div></div></body></html>""",
        encoding="utf-8",
    )
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .xtick")
        wide = [p.what for p in problems(page.evaluate(READ_PAGE), "narrow", "en")]
        narrow = [p.what for p in problems(narrowed(page, VIEWPORT["height"]), "narrow", "en, 1280 px")]
    finally:
        page.close()
    assert not wide, wide
    assert any(p.startswith("margins grown after the first draw: b +") for p in narrow), narrow


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=[pytest.mark.xfail(reason=KNOWN[slug])] if (slug := Path(path).stem) in KNOWN else [])
        for path in app_pages()
    ],
)
def test_page_layout(app, browser, path):  # noqa: F811
    found = check_page(browser, app.url, Path(path).stem, LANGS)
    assert not found, "\n".join(map(str, found))
    heavy = heavy_imports(app.output(tail=None))  # by this page or one before it on this server (or its warm-up)
    assert not heavy, f"the server imported {sorted(set(heavy))[:5]} (python -X importtime)"
