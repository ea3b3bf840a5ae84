"""Figures for the token-mixing probe (lecture §5.1, §9.5): how far each token moves after each sub-layer.

Every visible word is a keyword argument (English defaults), so pages pass their translations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tx_explorer.viz import style


def probe_bars(
    tokens: Sequence[str],
    delta: Mapping[str, np.ndarray],
    changed: int,
    *,
    title: str = "",
    x_title: str = "token",
    y_title: str = "‖Δh‖",
    hover: str = "moved by",
) -> go.Figure:
    """One row of bars per stage (``{stage title: ‖Δh_i‖ [N]}``), the changed token's bar in red, the others
    blue; a bar of exactly 0 is absent, which is the point."""
    labels = [f"{i}: {t}" for i, t in enumerate(style.safe_labels(tokens))]
    rows = len(delta)
    height = 150 * rows + 120  # 150 px a stage: a sandwich block's eight as readable as a Pre-Norm block's six
    margin = dict(t=60, b=10)
    # a gap of 45 px between stages, room for the next one's title, whatever their number (a fraction of the plot
    # area, which is the height less the margins)
    gap = 45 / (height - margin["t"] - margin["b"])
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=list(delta), vertical_spacing=gap)
    colors = ["#d62728" if i == changed else "#1f77b4" for i in range(len(tokens))]
    for r, values in enumerate(delta.values(), start=1):
        fig.add_bar(
            x=labels,
            y=values,
            marker_color=colors,
            showlegend=False,
            hovertemplate=f"%{{x}}<br>{hover} %{{y:.3g}}<extra></extra>",
            row=r,
            col=1,
        )
        fig.update_yaxes(title=y_title, row=r, col=1)
    fig.update_xaxes(title=x_title, row=rows, col=1)
    fig.update_layout(title=title, font=style.FONT, height=height, margin=margin)
    return fig
