"""A reviewer's three layout defects, each held: the multi-head inspector's maps of Gemma 3's 256-wide heads fitted
to the half page they are drawn in, the KV cache's bytes past Gemma 3's window labelled with the digits Plotly
writes ("18.91M"), and colour bars' negative numbers written with the true minus (−) of every other label.

The browser tests draw a figure as the app sends it with the plotly.js that the plotly package ships, at the least
and the most width it is drawn at, and read the margins Plotly grew after measuring the labels (each a second draw,
what the layout check reports)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from conftest import assert_clean, open_page

from tests.test_browser import browser, plotly_page  # noqa: F401  (the browser suite's one Chromium)
from tests.test_explore import FAST
from tx_explorer import explore, models
from tx_explorer.viz import charts, margins, sent, style

# Drawn ``w`` px wide: the sides Plotly grew beyond the figure's margins (by more than the layout check's 2 px)
GROWN = """async ([spec, w]) => {
  const gd = document.getElementById('g');
  Plotly.purge(gd);
  await Plotly.newPlot(gd, spec.data, {...spec.layout, width: w});
  const size = gd._fullLayout._size, margin = gd._fullLayout.margin;
  return ['l', 'r', 't', 'b'].filter((s) => size[s] > margin[s] + 2)
    .map((s) => `${s} +${Math.round(size[s] - margin[s])}`);
}"""
GEMMA = "gemma3-270m"
BYTES_PER_ROW = 2 * 1 * 256 * 4  # K and V, Gemma 3's one key/value head of 256, float32


@pytest.fixture(scope="module")
def plot(browser):  # noqa: F811
    with plotly_page(browser, 1400, 900) as page:
        yield page


def _grown(plot, spec: dict, width_px: float | None) -> dict[int, list[str]]:
    """The margins Plotly grew, at every 8 px from the least to the most width ``style.tidy`` fitted for."""
    least, most = style.drawn_widths(width_px)
    found = {w: plot.evaluate(GROWN, [spec, w]) for w in [*range(int(least) + 1, int(most), 8), int(most)]}
    return {w: g for w, g in found.items() if g}


def _cache_growth() -> dict:
    """The KV page's "Cache bytes per step" past Gemma 3's window, as sent: 8 steps from position 515, 15 local layers
    holding their 512 rows and 3 global ones every token (views.kv_cache.decoded's chart)."""
    steps = list(range(515, 524))
    nbytes = [BYTES_PER_ROW * (15 * 512 + 3 * (p + 1)) for p in steps]
    fig = charts.lines(steps, {"measured": nbytes, "formula": nbytes}, title="Cache bytes per step",
                       x_title="step (position)", y_title="bytes")  # fmt: skip
    fig.update_traces(selector=dict(name="formula"), mode="markers", marker=dict(symbol="x", size=9))
    return json.loads(pio.to_json(sent.as_sent(style.tidy(fig)), validate=False))


def test_si_labels_carry_the_digits_their_step_needs():
    """Plotly labels 18.9M … 18.95M at a step of 10k as "18.91M": three significant figures ("18.9M") missed a
    digit; trailing zeros are dropped as Plotly drops them, and one value's axis (± 1) carries every digit."""
    assert margins._number(18_910_000, -4) == "18.91M" and margins._number(18_900_000, -4) == "18.9M"
    assert margins._number(-2_500_000, -5) == "−2.5M" and margins._number(0.25, 2) == "0.25"
    fig = go.Figure(_cache_growth())
    labels, _ = margins._tick_labels(fig, "yaxis", 200)
    assert max(margins.text_width(t, margins.FONT_PX) for t in labels) >= margins.text_width("18.91M", margins.FONT_PX)


@pytest.mark.browser
def test_the_cache_bytes_past_gemmas_window_have_their_left_margin_from_the_first_draw(plot):
    assert not _grown(plot, _cache_growth(), None)


@pytest.mark.browser
def test_the_inspectors_maps_of_gemmas_256_wide_heads_hold_their_labels_in_their_half_page(browser, plot):  # noqa: F811
    """The query/key inspector's q and y, K, V and weighted-V maps, in a row of two: fitted to the page's width,
    their 16 labels of 256 dimensions lay level there and turned in the column, +11 to +16 px below."""
    if GEMMA not in models.available_models("text"):
        pytest.skip(f"{GEMMA} is not installed on this machine (make run assembles it)")
    at = open_page("multihead", timeout=300, mh_model=GEMMA, mh_view="qk")
    assert_clean(at)
    specs = [
        json.loads(el.proto.spec)
        for el in at.get("plotly_chart")
        if re.search(r"fig_qk_(q|k|v|weighted)\b", el.proto.id)
    ]
    assert len(specs) == 4 and all(len(s["data"][0]["z"][0]) == 256 for s in specs)
    grown = {s["layout"]["title"]["text"]: g for s in specs if (g := _grown(plot, s, style.PAGE_PX / 2))}
    assert not grown, grown


def _hyphenated(fig) -> list[str]:
    """Tick texts of colour bars and axes written as numbers with an ASCII hyphen-minus ("-0.5")."""
    spec = fig.to_plotly_json()
    bars = [h.get("colorbar", {}) for t in spec["data"] for h in (t, t.get("marker", {}))]
    layout = spec["layout"]
    axes = [v for k, v in layout.items() if re.fullmatch(r"[xy]axis\d*", k)]
    bars += [v.get("colorbar", {}) for k, v in layout.items() if k.startswith("coloraxis")]
    texts = [str(t) for part in bars + axes for t in part.get("ticktext", ())]
    return [t for t in texts if re.fullmatch(r"[\d.,e+\-]*-[\d.,e+\-]*[kMGT%]?", t) and re.search(r"\d", t)]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(set(FAST) - {"position_lab"}))  # position_lab trains: its own tests
def test_no_figure_writes_a_negative_tick_with_a_hyphen_minus(name, lang, one_thread):
    """Every page's figures as shown (explore's, each through ``style.tidy``): the ViT page's position similarity
    bar read "-0.5" (a mosaic's ticks written in Python), where Plotly's own labels and the prose write "−0.5"."""
    figures = getattr(explore, name)(**FAST[name], lang=lang)
    found = {key: bad for key, fig in figures.items() if (bad := _hyphenated(fig))}
    assert not found, found


def test_every_figure_shown_in_a_column_is_fitted_to_its_column() -> None:
    """A figure shown inside ``with c[i]:`` (a column) without ``width_px`` is fitted for the page's width, where its
    labels may lie level that turn in the column: Plotly then grows its margins and draws it twice (the query/key
    inspector's maps, the KV page's growth chart, the ViT page's prediction bars)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    shows = {"show", "show_result", "show_clickable", "show_figure"}
    unfitted = []
    for path in [*root.glob("pages/*.py"), *root.glob("tx_explorer/ui/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Subscript) for i in node.items):
                for call in ast.walk(node):
                    name = getattr(getattr(call, "func", None), "attr", getattr(getattr(call, "func", None), "id", ""))
                    if (
                        isinstance(call, ast.Call)
                        and name in shows
                        and "width_px" not in {k.arg for k in call.keywords}
                    ):
                        unfitted.append(f"{path.relative_to(root)}:{call.lineno}")
    assert not unfitted, unfitted
