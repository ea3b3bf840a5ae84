"""Figures of the long-context atlas (pure: arrays and words in, Plotly figures out): a layers × heads grid of one
statistic, one head's statistic along the positions, and an exact block of one head's weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import charts, style
from tx_explorer.viz.head_science import layer_head_map
from tx_explorer.viz.heatmap import heatmap


def head_grid(
    values: np.ndarray,
    *,
    title: str,
    x_title: str,
    y_title: str,
    zmax: float | None = None,
    layer_marks: Mapping[int, str] | None = None,
) -> go.Figure:
    """An ``[L, H]`` map of a statistic (≥ 0) on the weights' scale, from 0 to ``zmax`` (default: its largest value);
    every cell clickable (``customdata`` = [layer, head]); ``layer_marks``: a word beside some rows' names."""
    fig = layer_head_map(values, title=title, x_title=x_title, y_title=y_title, clickable=True, layer_marks=layer_marks)
    top = float(np.max(values)) if zmax is None else zmax
    fig.data[0].update(colorscale=style.WEIGHTS, zmin=0.0, zmax=top if top > 0 else 1.0, zmid=None)
    return fig


MARKED_UP_TO = 64  # positions up to which the curves' points are marked


def along(
    positions: np.ndarray, series: Mapping[str, np.ndarray], *, title: str, x_title: str, y_title: str
) -> go.Figure:
    """Curves over token positions (one head's statistic, and its layer's mean beside it): lines only, as a text of
    thousands of tokens would bury the curves under markers; a short text's few points marked (one token's single
    point drew nothing as a line)."""
    fig = charts.lines(positions, series, title=title, x_title=x_title, y_title=y_title)
    fig.update_traces(mode="lines" if len(positions) > MARKED_UP_TO else "lines+markers")
    return fig


def weights_block(
    weights: np.ndarray, rows: Sequence[int], cols: Sequence[int], *, title: str, x_title: str, y_title: str
) -> go.Figure:
    """An exact block of one head's weights, queries ``rows`` × keys ``cols`` (positions), coloured from 0 to the
    block's largest weight: far from the diagonal and the sinks the weights are small, and a 0…1 scale hides them."""
    top = float(np.max(weights)) if np.size(weights) else 1.0
    return heatmap(
        weights,
        [str(i) for i in rows],
        [str(j) for j in cols],
        title=title,
        x_title=x_title,
        y_title=y_title,
        zmax=top if top > 0 else 1.0,
    )
