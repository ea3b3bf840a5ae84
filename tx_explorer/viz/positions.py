"""Figures of the position lab and the KV cache page: rotary pairs turning, curves with a marked boundary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from tx_explorer.viz import charts, style

# Plotly's ten colours, in its order: enough for the 8 rotary pairs a page shows, and one fixed colour per position
# scheme (the order the full loss chart drew them in), so a scheme keeps its colour whichever others are picked.
PALETTE = qualitative.Plotly
SCHEME_COLOURS = dict(zip(("none", "sinusoidal", "learned", "rotary", "alibi", "bigram"), PALETTE))


def marked_lines(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    mark: float | None = None,
    mark_label: str = "",
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    colours: Mapping[str, str] | None = None,
) -> go.Figure:
    """:func:`charts.lines` (missing values leave gaps) with a dashed vertical line at ``mark``; ``colours``: a
    fixed colour per series name (else Plotly's in turn)."""
    fig = charts.lines(x, series, title=title, x_title=x_title, y_title=y_title, log_x=log_x)
    fig.update_traces(mode="lines", connectgaps=False)
    for trace in fig.data if colours else ():
        trace.line.color = colours[trace.name]
    if mark is not None:
        fig.add_vline(x=mark, line_dash="dash", line_color="grey", annotation_text=mark_label)
    if log_y:
        fig.update_yaxes(type="log", dtick=1)  # powers of ten only: the 2…9 between them crowd a short axis
    return fig


def rotation(
    path: np.ndarray, names: Sequence[str], *, title: str = "", start: str = "", axis: str = "", position: str = ""
) -> go.Figure:
    """Each 2-D pair ``path [pairs, P, 2]`` as it turns with position: a dotted arc from the start (a ◆ in the
    pair's colour) to the last position; every pair keeps its length. ``start`` says what the ◆ marks, on a line of
    its own below ``title`` (a break chosen here, not inside a word); ``position``: the word the hover names a
    position by."""
    fig = go.Figure()
    hover = f"{position} %{{customdata}}: (%{{x:.3f}}, %{{y:.3f}})"  # the pair's name beside it, as Plotly adds
    for i, name in enumerate(names):
        xy, colour = path[i], PALETTE[i % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=xy[:, 0],
                y=xy[:, 1],
                customdata=np.arange(len(xy)),
                mode="lines+markers",
                name=name,
                legendgroup=name,  # the legend hides a pair's ◆ with its arc
                marker=dict(size=4, color=colour),
                line=dict(color=colour),
                hovertemplate=hover,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=xy[:1, 0],
                y=xy[:1, 1],
                name=name,
                legendgroup=name,
                mode="markers",
                marker=dict(size=11, symbol="diamond", color=colour),
                showlegend=False,
                hoverinfo="skip",  # the arc's own point 0 under it tells the position
            )
        )
    fig.update_xaxes(title=f"{axis} 1", zeroline=True)
    fig.update_yaxes(title=f"{axis} 2", zeroline=True, scaleanchor="x", scaleratio=1)
    grown = 1.3 * style.TITLE_PX if start else 0  # the start's line, as style.tidy grows a wrapped title
    fig.update_layout(
        title="<br>".join(t for t in (title, start) if t),
        height=460 + grown,
        margin=dict(l=10, r=10, t=40 + grown, b=10),
        font=style.FONT,
    )
    return fig
