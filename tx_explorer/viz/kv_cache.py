"""The KV cache page's bars of the rows each layer holds: local layers stop at the window, global ones grow past it.

Pure functions: counts and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from tx_explorer.viz import charts

HEADROOM = 0.15  # above the tallest bar, of the axis's span: room for its number


def rows_floor(rows: Sequence[int], window: int) -> int:
    """Where the rows axis starts: 0, or just below the least count where the layers differ by little against their
    size (512 against 523 rows past Gemma 3's window look alike on an axis from 0), so that the difference takes
    about a third of the height. A round number, so the axis's first tick is one; 0 where the counts and the window
    are all one (nothing to tell apart)."""
    lo, hi = min(rows), max(*rows, window)
    start = lo - 2 * (hi - lo)
    if start <= 0 or hi == lo:
        return 0
    unit = 10 ** int(math.log10(hi - start))
    return start // unit * unit


def layer_rows(
    layers: Sequence[str],
    rows: Sequence[int],
    window: int,
    *,
    title: str,
    x_title: str,
    y_title: str,
    series: str,
    window_name: str,
) -> go.Figure:
    """A bar of ``rows`` per layer, each labelled with its count, on an axis from :func:`rows_floor` (``y_title``
    should say where it starts), and the window as a dotted line named in the legend (``window_name``): a label
    drawn on the plot lay over a bar that grows past it."""
    fig = charts.bars(layers, {series: rows}, title=title, x_title=x_title, y_title=y_title)
    fig.update_traces(texttemplate="%{y:,}", textposition="outside", cliponaxis=False, showlegend=False)
    floor, top = rows_floor(rows, window), max(*rows, window)
    fig.add_trace(
        go.Scatter(
            x=[-0.5, len(layers) - 0.5],
            y=[window, window],
            mode="lines",
            line=dict(dash="dot", color="grey"),
            name=window_name,
            hoverinfo="skip",
        )
    )
    fig.update_layout(showlegend=True, yaxis_range=[floor, top + HEADROOM * (top - floor)])
    return fig
