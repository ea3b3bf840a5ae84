"""Figures of a circuit forming: training curves with the phase change marked, and each head's scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tx_explorer.viz import style
from tx_explorer.viz.norm_figures import PALETTE


def formation(
    steps: Sequence[int],
    losses: Mapping[str, Sequence[float]],
    scores: Mapping[str, Sequence[float]],
    *,
    phase: int | None = None,
    phase_label: str = "",
    marks: Sequence[int] = (),
    x_title: str = "step",
    loss_title: str = "loss",
    score_title: str = "score",
    height: int = 460,
) -> go.Figure:
    """Losses (top) and scores (bottom) over the training steps, one x axis; a dotted line at ``phase``, labelled
    above the plot area (inside it, the label sat on the first copy's loss), and small ticks at the ``marks`` (e.g.
    the shipped checkpoints)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.55, 0.45])
    for i, (row, series) in enumerate(((1, losses), (2, scores))):
        for j, (name, y) in enumerate(series.items()):
            fig.add_trace(
                go.Scatter(
                    x=list(steps),
                    y=list(np.asarray(y, dtype=float)),
                    mode="lines",
                    name=name,
                    line=dict(color=PALETTE[(2 * i + j) % len(PALETTE)], width=1.8),
                ),
                row=row,
                col=1,
            )
    if phase is not None:
        for row in (1, 2):
            fig.add_vline(x=phase, line_dash="dot", line_color="grey", row=row, col=1)
        # the label runs away from the nearer end of the axis, so a late phase change is not cut off on the right
        late = phase > (min(steps) + max(steps)) / 2
        fig.add_annotation(
            x=phase,
            y=1,
            xref="x",
            yref="paper",
            text=phase_label,
            showarrow=False,
            xanchor="right" if late else "left",
            yanchor="bottom",
        )
    for step in marks:
        fig.add_vline(x=step, line_width=1, line_color="rgba(0,0,0,0.15)", row=2, col=1)
    fig.update_xaxes(title=x_title, row=2, col=1)
    fig.update_yaxes(title=loss_title, row=1, col=1)
    fig.update_yaxes(title=score_title, range=[0, 1], row=2, col=1)
    fig.update_layout(height=height, margin=dict(l=60, r=10, t=30, b=40), font=style.FONT)  # t: the phase's label
    return fig


def head_scores(
    models: Mapping[str, tuple[np.ndarray, np.ndarray]],
    *,
    x_title: str = "previous-token score",
    y_title: str = "induction score",
    height: int = 420,
) -> go.Figure:
    """Every head of each model as a point: previous-token score (x) against induction score (y);
    ``models[name] = (previous [L, H], induction [L, H])``. The hover names the head (L layer, H head) and each
    score by its axis's title."""
    fig = go.Figure()
    for i, (name, (previous, induction)) in enumerate(models.items()):
        layers, heads = np.indices(np.shape(previous))
        fig.add_trace(
            go.Scatter(
                x=np.ravel(previous),
                y=np.ravel(induction),
                mode="markers",
                name=name,
                text=[f"L{a} H{b}" for a, b in zip(layers.ravel(), heads.ravel(), strict=True)],
                # each score named: "0.012, 0.917" left the reader to guess which axis was which
                hovertemplate=f"%{{text}}<br>{x_title} %{{x:.3f}}<br>{y_title} %{{y:.3f}}<extra>"
                + style.safe_labels([name])[0]
                + "</extra>",
                marker=dict(color=PALETTE[i % len(PALETTE)], size=9, opacity=0.8, line=dict(width=0.5, color="white")),
            )
        )
    fig.update_xaxes(title=x_title, range=[-0.02, 1.02])
    fig.update_yaxes(title=y_title, range=[-0.02, 1.02])
    fig.update_layout(height=height, margin=dict(l=60, r=10, t=10, b=40), font=style.FONT)
    return fig
