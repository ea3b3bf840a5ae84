"""Figures for translation models: alignment matrices with gold links, the context vector as a weighted
sum, and quality by source length (the bottleneck curves of Bahdanau et al. 2015, Figure 2)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tx_explorer.viz import style
from tx_explorer.viz.heatmap import heatmap, mosaic

SOURCE_AXIS = "source words (English)"
OUTPUT_AXIS = "output words (Italian)"
GOLD_COLOR = "#ff4b4b"
MODEL_COLORS = {"fixed": "#636efa", "attention": "#ef553b", "transformer": "#00cc96"}


# Vertical space of an alignment figure outside its plot: the title (two lines once tidied to a column), the x
# axis's words and title, the gold legend below.
PLOT_OVERHEAD_PX = 190


def _fitted(title: str) -> str:
    """An axis title in two lines of about equal width (when it has words to break between)."""
    return (
        title
        if "<br>" in title
        else style.wrap(title, 0.55 * style.text_width(title, style.FONT["size"]), style.FONT["size"])
    )


def alignment_figure(
    weights: np.ndarray,
    source: Sequence[str],
    output: Sequence[str],
    *,
    gold: Iterable[tuple[int, int]] | None = None,
    title: str = "",
    x_title: str = SOURCE_AXIS,
    y_title: str = OUTPUT_AXIS,
    gold_label: str = "gold",
    height: int | None = None,
) -> go.Figure:
    """Alignment ``[T_out, T_in]`` (x = source words, y = output words); gold links ``(i, j)`` as open squares."""
    w = np.asarray(weights)
    if w.shape != (len(output), len(source)):
        raise ValueError(f"weights of shape {w.shape} do not match {len(output)} output × {len(source)} source words")
    fig = heatmap(
        w, output, source, title=title, x_title=x_title, y_title=_fitted(y_title), height=height, show_values=False
    )
    # The y title runs along the plot, which a short sentence is short of: make the figure tall enough for its
    # longest line (Plotly draws it anyway and the figure's box cuts both ends).
    longest = max(style.text_width(line, style.FONT["size"]) for line in fig.layout.yaxis.title.text.split("<br>"))
    fig.update_layout(height=max(fig.layout.height, math.ceil(longest) + PLOT_OVERHEAD_PX))
    if gold is not None:
        links = sorted(gold)
        side = max(6, min(22, 480 // max(1, len(source), len(output))))
        fig.add_trace(
            go.Scatter(
                x=[i for i, _ in links],
                y=[j for _, j in links],
                mode="markers",
                marker=dict(symbol="square-open", size=side, color=GOLD_COLOR, line=dict(width=2)),
                name=gold_label,
                hovertemplate=gold_label + style.colon(gold_label) + "%{x} → %{y}<extra></extra>",
            )
        )
        fig.update_layout(showlegend=True, legend=dict(orientation="h", y=-0.15))
    return fig


def context_figure(
    weights_row: np.ndarray,
    terms: np.ndarray,
    context: np.ndarray,
    source: Sequence[str],
    *,
    title: str = "",
    weight_title: str = "weight a<sub>t,i</sub>",
    dim_title: str = "dimension of h<sub>i</sub> and c<sub>t</sub>",
    source_title: str = SOURCE_AXIS,
) -> go.Figure:
    """One decoder step: weights a_{t,i} over the source (bars) and c_t = Σ a_{t,i} h_i term by term (heatmap).

    Args:
        weights_row: ``[T_in]``; terms: ``[T_in, C]`` rows a_{t,i}·h_i; context: ``[C]`` their sum.
    """
    terms, context = np.asarray(terms), np.asarray(context)
    n = len(source)
    rows = np.vstack([terms, context[None]])  # (T_in + 1, C)
    names = [f"{a:.2f} · h({w})" for a, w in zip(weights_row, source)] + ["c<sub>t</sub> = Σ"]
    fig = make_subplots(rows=2, cols=1, row_heights=[0.3, 0.7], vertical_spacing=0.16)
    fig.add_trace(
        go.Bar(
            x=list(range(n)),
            y=np.asarray(weights_row),
            marker_color=MODEL_COLORS["attention"],
            name="a<sub>t</sub>",
            customdata=list(source),
            hovertemplate="%{customdata}: %{y:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    bound = float(np.abs(rows).max()) or 1.0
    fig.add_trace(
        go.Heatmap(
            z=rows,
            y=list(range(n + 1)),
            colorscale=style.DIVERGING,
            zmid=0,
            zmin=-bound,
            zmax=bound,
            customdata=np.repeat(np.array(names, dtype=object)[:, None], rows.shape[1], axis=1),
            hovertemplate=f"%{{customdata}}<br>{dim_title} %{{x}}: %{{z:.3f}}<extra></extra>",
            colorbar=dict(len=0.65, y=0.33),
        ),
        row=2,
        col=1,
    )
    fig.update_xaxes(title=source_title, tickmode="array", tickvals=list(range(n)), ticktext=list(source), row=1, col=1)
    fig.update_yaxes(title=weight_title, range=[0, 1], row=1, col=1)
    fig.update_yaxes(tickmode="array", tickvals=list(range(n + 1)), ticktext=names, autorange="reversed", row=2, col=1)
    fig.update_xaxes(title=dim_title, row=2, col=1)
    fig.update_layout(
        title=title,
        height=max(420, 22 * n + 320),
        showlegend=False,
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
    )
    return fig


def bucket_curves(
    results: Mapping[str, Mapping[str, Any]],
    metric: str,
    *,
    labels: Mapping[str, str] | None = None,
    title: str = "",
    y_title: str = "",
    percent: bool = True,
    floor_label: str = "lowest possible",
    x_title: str = "source length (words)",
) -> go.Figure:
    """One line per model of ``results[model][metric]`` against the source-length buckets (models with no
    value for the metric, e.g. AER of the fixed model, are skipped); ``labels`` renames models in the legend.
    For ``metric="aer"`` the results' ``aer_floor`` is drawn dashed."""
    fig = go.Figure()
    floor = next((r["aer_floor"] for r in results.values() if r.get("aer_floor")), None) if metric == "aer" else None
    if floor is not None:
        first = next(iter(results.values()))
        fig.add_trace(
            go.Scatter(
                x=list(first["buckets"]),
                y=[None if v is None else (100 * v if percent else v) for v in floor],
                mode="lines",
                name=floor_label,
                line=dict(color="grey", dash="dash"),
            )
        )
    for key, r in results.items():
        values = r.get(metric)
        if values is None:
            continue
        name = (labels or {}).get(key, key)
        y = [None if v is None else (100 * v if percent else v) for v in values]
        fig.add_trace(
            go.Scatter(
                x=list(r["buckets"]),
                y=y,
                mode="lines+markers",
                name=name,
                line=dict(color=MODEL_COLORS.get(key)),
                customdata=r.get("n"),
                hovertemplate="%{x}: %{y:.1f} (n=%{customdata})<extra>" + name + "</extra>",
            )
        )
    fig.update_xaxes(title=x_title, type="category")
    fig.update_yaxes(title=y_title, range=[0, 101] if percent or metric == "bleu" else None)
    fig.update_layout(
        title=title,
        height=340,
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        legend=dict(orientation="h", y=-0.3),
    )
    return fig


def cross_mosaic(
    cross: np.ndarray,
    *,
    layer_name: str = "layer",
    head_name: str = "head",
    x_title: str = "heads (in a tile: source words →)",
    y_title: str = "layers (in a tile: output words ↓)",
    title: str = "",
) -> go.Figure:
    """Every decoder layer (rows) × head (columns) of cross-attention ``[L, H, T_out, T_in]`` as one mosaic."""
    cross = np.asarray(cross)
    if cross.ndim != 4:
        raise ValueError(f"cross-attention must be [L, H, T_out, T_in], got shape {cross.shape}")
    rows = [f"{layer_name} {i}" for i in range(cross.shape[0])]  # counted from 0, as on every page
    fig = mosaic(cross, row_names=rows, col_names=[f"{head_name} {h}" for h in range(cross.shape[1])], title=title)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    fig.update_layout(margin=dict(l=70, r=10, t=90 if title else 70, b=10))
    return fig
