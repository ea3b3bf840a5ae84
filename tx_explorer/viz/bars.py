"""Bar charts of tokens and models: next-token probabilities, labelled groups, parameter shares, log-scale sizes.

Pure functions: arrays and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import style
from tx_explorer.viz.style import safe_labels

BELOW = dict(orientation="h", y=-0.2, yanchor="top", traceorder="normal")  # a legend clear of the title


def topk_bars(
    tokens: Sequence[str],
    probs: Sequence[float],
    *,
    title: str = "",
    highlight: int | None = None,
    x_title: str = "probability",
) -> go.Figure:
    """Horizontal bars of the most likely next tokens, most likely on top; ``highlight`` marks one bar."""
    p = np.asarray(probs, dtype=float)
    tokens = safe_labels(tokens)
    rows = list(range(len(p)))
    layout = dict(
        title=dict(text=title),
        height=max(260, 26 * len(p) + 80),
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        yaxis=dict(
            tickmode="array", tickvals=rows, ticktext=[str(t) for t in tokens], autorange="reversed", automargin=True
        ),
        xaxis=dict(title=dict(text=x_title), range=[0, min(1.0, float(p.max()) * 1.25 + 1e-9)], automargin=True),
    )
    marker = dict(
        color=[1 if i == highlight else 0 for i in rows], colorscale=[[0, "#1f77b4"], [1, "#d62728"]], cmin=0, cmax=1
    )
    fig = go.Figure(
        go.Bar(
            x=p,
            y=rows,
            orientation="h",
            marker=marker,
            text=[f"{v:.3f}" for v in p],
            textposition="outside",
            customdata=[str(t) for t in tokens],
            hovertemplate="%{customdata}: %{x:.4f}<extra></extra>",
        ),
        layout=layout,
    )
    return fig


def stacked_parts(
    models: Sequence[str],
    parts: Mapping[str, Sequence[float]],
    *,
    title: str = "",
    share: bool = True,
    x_title: str | None = None,
) -> go.Figure:
    """One horizontal bar per model, split into parts (e.g. embeddings / attention / MLP / norms / head).

    ``x_title`` defaults to "share of parameters" (``share``) or "parameters"."""
    values = {k: np.asarray(v, dtype=float) for k, v in parts.items()}
    total = np.sum(list(values.values()), axis=0)
    fig = go.Figure()
    for name, v in values.items():
        x = v / np.where(total > 0, total, 1) if share else v
        fig.add_trace(
            go.Bar(
                y=list(models),
                x=x,
                name=name,
                orientation="h",
                customdata=v,
                hovertemplate=f"{name}: %{{customdata:,.0f}}<extra>%{{y}}</extra>",
            )
        )
    fig.update_xaxes(
        title=x_title or ("share of parameters" if share else "parameters"),
        tickformat=".0%" if share else None,
        range=[0, 1] if share else None,  # shares end at 100 %: autorange ran on, blank, to about 105 %
        exponentformat="B",  # counts as 1.5B, the page's own notation (SI's "~s" writes 1.5G)
        automargin=True,
    )
    fig.update_yaxes(automargin=True)
    fig.update_layout(
        title=title,
        barmode="stack",
        height=max(260, 60 * len(models) + 120),
        font=style.FONT,
        margin=dict(l=10, r=10, t=40, b=10),
        legend=BELOW,
    )
    return fig


def log_bars(
    categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str = "", y_title: str = ""
) -> go.Figure:
    """Grouped bars on a logarithmic axis (sizes spanning orders of magnitude)."""
    fig = go.Figure(
        [
            go.Bar(
                x=list(categories),
                y=list(np.asarray(v, dtype=float)),
                name=name,
                hovertemplate="%{y:,.0f}<extra>" + name + "</extra>",
            )
            for name, v in series.items()
        ]
    )
    fig.update_yaxes(title=y_title, type="log", automargin=True, minorloglabels="none")  # no "2 5" between decades
    fig.update_layout(
        title=title,
        barmode="group",
        height=380,
        font=style.FONT,
        margin=dict(l=10, r=10, t=40, b=10),
        legend=style.LEGEND,  # at the figure's foot: BELOW's y = −0.2 of the plot left a gap under the tick labels
    )
    return fig
