"""Figures for multi-head attention and language models: grids, BertViz-style lines, similarities, bars.

Pure functions: arrays and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import style
from tx_explorer.viz.charts import bars, signed_heatmap
from tx_explorer.viz.heatmap import heatmap, mosaic
from tx_explorer.viz.style import safe_labels

BELOW = dict(orientation="h", y=-0.2, yanchor="top", traceorder="normal")  # a legend clear of the title
DETAIL_SIDE = 512  # a detail map larger than this is pooled: 512² float32 is already 1.4 MB of chart data


def pool_peaks(maps: np.ndarray, cells: int) -> tuple[np.ndarray, int]:
    """Shrink the last two axes to at most ``cells`` by pooling blocks of k × k; returns ``(maps, k)``.

    Each block keeps its value of largest magnitude (the max for weights, the strongest sign for a
    difference map), so that a sharp weight — one key per query — stays visible in a thumbnail.
    """
    maps = np.asarray(maps, dtype=np.float32)
    n, m = maps.shape[-2:]
    k = max(1, int(np.ceil(max(n, m) / cells)))
    if k == 1:
        return maps, 1
    pn, pm = -(-n // k) * k, -(-m // k) * k
    padded = np.full((*maps.shape[:-2], pn, pm), np.nan, dtype=np.float32)
    padded[..., :n, :m] = maps
    blocks = padded.reshape(*maps.shape[:-2], pn // k, k, pm // k, k)  # (..., n/k, k, m/k, k)
    blocks = np.moveaxis(blocks, -3, -2).reshape(*maps.shape[:-2], pn // k, pm // k, k * k)  # (..., n/k, m/k, k²)
    peak = np.nan_to_num(np.abs(blocks), nan=-1.0).argmax(-1)[..., None]
    return np.take_along_axis(blocks, peak, -1)[..., 0], k


def head_grid(maps: np.ndarray, *, title: str = "", cells: int = 64, zmax: float = 1.0) -> go.Figure:
    """All layers × heads as thumbnails: ``maps [L, H, N, N]`` → one mosaic (rows = layers, columns = heads).

    Inputs longer than ``cells`` tokens are max-pooled to ``cells`` × ``cells`` per thumbnail.
    """
    small, k = pool_peaks(maps, cells)
    layers, heads = small.shape[:2]
    note = f" (max-pooled {k}×{k})" if k > 1 else ""
    fig = mosaic(
        small,
        row_names=[f"layer {i}" for i in range(layers)],
        col_names=[f"head {j}" for j in range(heads)],
        title=title + note,
        zmax=zmax,
        height=min(1400, 150 * layers + 120) if heads <= 6 else None,
    )
    fig.update_layout(margin=dict(l=70, r=10, t=60, b=10))  # room for the layer names
    return fig


def attention_map(
    values: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str = "",
    x_title: str = style.KEY_AXIS,
    y_title: str = style.QUERY_AXIS,
    signed: bool = False,
    max_side: int = DETAIL_SIDE,
) -> go.Figure:
    """A query × key map, zoomable; maps wider than ``max_side`` are pooled to it by :func:`pool_peaks`.

    After pooling the axes name index ranges ("8–15"). ``signed``: a difference map on the diverging scale.
    """
    z, k = pool_peaks(values, max_side)
    if k > 1:
        n, m = np.shape(values)
        row_labels = [f"{i}–{min(n, i + k) - 1}" for i in range(0, n, k)]
        col_labels = [f"{j}–{min(m, j + k) - 1}" for j in range(0, m, k)]
        title += f" (max-pooled {k}×{k})"
    if signed:  # these builders escape labels themselves
        return signed_heatmap(z, row_labels, col_labels, title=title, x_title=x_title, y_title=y_title)
    return heatmap(z, row_labels, col_labels, title=title, x_title=x_title, y_title=y_title)


def attention_lines(
    weights: np.ndarray,
    left: Sequence[str],
    right: Sequence[str] | None = None,
    *,
    title: str = "",
    min_weight: float = 0.02,
    focus: int | None = None,
    max_lines: int = 3000,
) -> go.Figure:
    """BertViz's head view: queries on the left, keys on the right, a line per weight (opacity = weight).

    Args:
        weights: ``[N, M]`` (rows = queries).
        min_weight: weights below it are not drawn (they would be invisible anyway).
        focus: draw only this query's lines.
        max_lines: keep the strongest lines when there are more (long inputs).
    """
    w = np.asarray(weights, dtype=np.float64)
    left = safe_labels(left)
    right = left if right is None else safe_labels(right)
    n, m = w.shape
    rows = np.arange(n) if focus is None else np.array([focus])
    sub = w[rows]
    qi, kj = np.nonzero((sub >= min_weight) & (sub > 0))
    vals = sub[qi, kj]
    if len(vals) > max_lines:
        top = np.argsort(vals)[-max_lines:]
        qi, kj, vals = qi[top], kj[top], vals[top]
    qi = rows[qi]
    fig = go.Figure()
    # Plotly has one opacity per trace: bin the lines into 10 opacity levels, one trace each.
    levels = np.minimum((vals * 10).astype(int), 9)
    for level in range(10):
        sel = levels == level
        if not sel.any():
            continue
        xs = np.tile([0.0, 1.0, np.nan], sel.sum())
        ys = np.stack([qi[sel], kj[sel], np.full(sel.sum(), np.nan)], axis=1).ravel()
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                line=dict(color="#1f77b4", width=2),
                opacity=(level + 1) / 10,
            )
        )
    strength = w.sum(axis=0) if focus is None else w[focus]
    fig.add_trace(
        go.Scatter(
            x=np.zeros(n),
            y=np.arange(n),
            mode="text",
            text=[str(t) for t in left],
            textposition="middle left",
            hovertext=[f"query {i}: {t}" for i, t in enumerate(left)],
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=np.ones(m),
            y=np.arange(m),
            mode="text+markers",
            text=[str(t) for t in right],
            textposition="middle right",
            marker=dict(size=6, color=strength, colorscale=style.WEIGHTS, cmin=0, cmax=max(1.0, float(strength.max()))),
            hovertext=[f"key {j}: {t} · weight {strength[j]:.3f}" for j, t in enumerate(right)],
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.update_xaxes(visible=False, range=[-0.8, 1.8])
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(
        title=title,
        height=max(300, min(2400, 22 * max(n, m) + 80)),
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
    )
    return fig


def labelled_bars(
    categories: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str = "",
    x_title: str = "",
    y_title: str = "",
) -> go.Figure:
    """Grouped bars over token (or head) labels; the axes grow to fit long labels."""
    fig = bars(safe_labels(categories), series, title=title, x_title=x_title, y_title=y_title)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def metric_bars(values: np.ndarray, *, title: str = "", x_title: str = "", y_title: str = "") -> go.Figure:
    """A per-head metric ``[L, H]`` as grouped bars: one group per head, one bar per layer."""
    v = np.asarray(values, dtype=float)
    return labelled_bars(
        [f"head {h}" for h in range(v.shape[1])],
        {f"layer {i}": v[i] for i in range(v.shape[0])},
        title=title,
        x_title=x_title,
        y_title=y_title,
    )


def similarity_matrix(distances: np.ndarray, labels: Sequence[str], *, title: str = "") -> go.Figure:
    """Pairwise head distances ``[K, K]`` in [0, 1] (0 = identical maps)."""
    return heatmap(
        distances,
        labels,
        labels,
        title=title,
        x_title="head",
        y_title="head",
        colorscale=style.SEQUENTIAL + "_r",
        zmin=0.0,
        zmax=1.0,
        show_values=len(labels) <= 16,
    )


def topk_bars(
    tokens: Sequence[str], probs: Sequence[float], *, title: str = "", highlight: int | None = None
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
        xaxis=dict(title=dict(text="probability"), range=[0, min(1.0, float(p.max()) * 1.25 + 1e-9)], automargin=True),
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
    models: Sequence[str], parts: Mapping[str, Sequence[float]], *, title: str = "", share: bool = True
) -> go.Figure:
    """One horizontal bar per model, split into parts (e.g. embeddings / attention / MLP / norms / head)."""
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
        title="share of parameters" if share else "parameters", tickformat=".0%" if share else "~s", automargin=True
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
    fig.update_yaxes(title=y_title, type="log", automargin=True)
    fig.update_layout(
        title=title, barmode="group", height=380, font=style.FONT, margin=dict(l=10, r=10, t=40, b=10), legend=BELOW
    )
    return fig
