"""Signed matrices, measured curves and grouped bars (pure: arrays and labels in, figures out)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import style
from tx_explorer.viz.heatmap import PLAIN, heatmap, number, round_ticks, thinned_ticks


def signed_heatmap(
    values: np.ndarray, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None, **options: Any
) -> go.Figure:
    """A heatmap of signed values (Q, K, V, scores, outputs) on the diverging scale, symmetric around 0; ``options``
    are :func:`~tx_explorer.viz.heatmap.heatmap`'s (titles, height).

    Non-finite entries (−∞ where a mask hides a key) are gaps labelled "−∞". Values beyond
    :data:`~tx_explorer.viz.heatmap.PLAIN` get colour bar ticks written as the cells write them ("−5e−31", "1e6"):
    Plotly's own "−0.5×10⁻³⁰" took a typed Q of 1e-30 most of its figure's width. Within it, Plotly's ticks are
    short already, and as many as the bar's length holds.
    """
    z = np.asarray(values, dtype=np.float64)
    finite = z[np.isfinite(z)]
    limit = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
    bar = None
    if not PLAIN[0] <= limit < PLAIN[1]:
        ticks = round_ticks(-limit, limit)
        bar = dict(tickvals=ticks, ticktext=[number(t, limit) for t in ticks])
    return heatmap(
        z,
        row_labels,
        col_labels,
        colorscale=style.DIVERGING,
        zmin=-limit,
        zmax=limit,
        zmid=0.0,
        colorbar=bar,
        **options,
    )


def _frame(title: str, height: int) -> dict[str, Any]:
    """The layout every chart here shares: a title (the top margin only as deep as it needs), the height, the
    font and the one legend placement (:data:`~tx_explorer.viz.style.LEGEND`, clear of the titles)."""
    return dict(
        title=dict(text=title),
        height=height,
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        font=style.FONT,
        legend=style.LEGEND,
    )


def lines(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    references: Mapping[str, float] | None = None,
    height: int = 360,
) -> go.Figure:
    """Measured curves sharing one x axis, with optional horizontal reference lines (e.g. log N, 1/N), each named
    just above its line; ``log_y``: a log y axis (positive levels), labelled at its decades only."""
    fig = go.Figure()
    for name, y in series.items():
        fig.add_trace(go.Scatter(x=list(x), y=list(np.asarray(y, dtype=float)), mode="lines+markers", name=name))
    for name, level in (references or {}).items():
        # On a log axis a line is drawn at its value but an annotation is placed at log10 of it: given the value,
        # the name would float at 10^level (near 1 for a small tolerance), far from its line.
        at = {"annotation_y": math.log10(level)} if log_y else {}
        fig.add_hline(
            y=level, line_dash="dot", line_color="grey", annotation_text=name, annotation_position="top left", **at
        )
    fig.update_xaxes(title=x_title, type="log" if log_x else "linear")
    fig.update_yaxes(title=y_title, **({"type": "log", "minorloglabels": "none"} if log_y else {}))
    fig.update_layout(**_frame(title, height))
    return fig


def bars(
    categories: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    height: int = 360,
    x_ticks: int | None = None,
) -> go.Figure:
    """Grouped bars: one group per category (numeric axis, so repeated labels stay separate); the labels are made
    safe for Plotly's HTML (tokens such as ``<s>``) and the axes grow to fit long ones. ``x_ticks``: the most
    categories named under the axis (every k-th beyond; the hover names each), where all would touch."""
    labels = style.safe_labels(categories)
    layout = dict(
        _frame(title, height),
        barmode="group",
        xaxis=dict(
            title=dict(text=x_title),
            **thinned_ticks(labels, len(labels), x_ticks or len(labels) or 1),
            automargin=True,
        ),
        yaxis=dict(title=dict(text=y_title), automargin=True),
    )  # one constructor call: every update_* re-validates the figure
    fig = go.Figure(
        [go.Bar(x=list(range(len(labels))), y=np.asarray(v, dtype=float), name=name) for name, v in series.items()],
        layout=layout,
    )
    return fig
