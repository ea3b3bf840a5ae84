"""Figures of the position lab and the KV cache page: rotary pairs turning, curves with a marked boundary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import charts, style


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
) -> go.Figure:
    """:func:`charts.lines` (missing values leave gaps) with a dashed vertical line at ``mark``."""
    fig = charts.lines(x, series, title=title, x_title=x_title, y_title=y_title, log_x=log_x)
    fig.update_traces(mode="lines", connectgaps=False)
    if mark is not None:
        fig.add_vline(x=mark, line_dash="dash", line_color="grey", annotation_text=mark_label)
    if log_y:
        fig.update_yaxes(type="log", dtick=1)  # powers of ten only: the 2…9 between them crowd a short axis
    return fig


def rotation(path: np.ndarray, names: Sequence[str], *, title: str = "", axis: str = "") -> go.Figure:
    """Each 2-D pair ``path [pairs, P, 2]`` as it turns with position: a dotted arc from the start (large
    marker) to the last position; every pair keeps its length."""
    fig = go.Figure()
    for i, name in enumerate(names):
        xy = path[i]
        fig.add_trace(go.Scatter(x=xy[:, 0], y=xy[:, 1], mode="lines+markers", name=name, marker=dict(size=4)))
        fig.add_trace(
            go.Scatter(
                x=xy[:1, 0], y=xy[:1, 1], mode="markers", marker=dict(size=11, symbol="diamond"), showlegend=False
            )
        )
    fig.update_xaxes(title=f"{axis} 1", zeroline=True)
    fig.update_yaxes(title=f"{axis} 2", zeroline=True, scaleanchor="x", scaleratio=1)
    fig.update_layout(title=title, height=460, margin=dict(l=10, r=10, t=40, b=10), font=style.FONT)
    return fig
