"""Figures of head science (pure: arrays and words in, Plotly figures out): layer × head maps, patching and
logit-lens maps with top-5 hovers, per-head score bars, the 2-D map of heads, attribution and deletion curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import charts, style


def layer_head_map(values: np.ndarray, *, title: str, x_title: str, y_title: str, clickable: bool = False) -> go.Figure:
    """A signed ``[L, H]`` map, rows "L0…", columns "H0…" (ablation effects, patching recovery).

    ``clickable`` lays an invisible marker on every cell: Streamlit reports point selections of scatter traces
    but not of heatmaps (streamlit#8760), so the markers carry the click (``customdata`` = [layer, head]) and
    the hover label, which the heatmap below then leaves to them."""
    layers, heads = values.shape
    rows, cols = [f"L{i}" for i in range(layers)], [f"H{h}" for h in range(heads)]
    fig = charts.signed_heatmap(values, rows, cols, title=title, x_title=x_title, y_title=y_title)
    if clickable:
        layer, head = np.divmod(np.arange(layers * heads), heads)  # (L·H,) each: the cell of every marker
        fig.data[0].hoverinfo = "skip"
        fig.add_trace(
            go.Scatter(
                x=head,  # the heatmap's cells sit at integer positions, named by its tick labels
                y=layer,
                customdata=np.stack([layer, head], axis=1),
                text=[f"{rows[i]}, {cols[h]}<br>{np.asarray(values)[i, h]:.3f}" for i, h in zip(layer, head)],
                mode="markers",
                marker=dict(size=max(8, min(40, 400 // max(layers, heads))), opacity=0, symbol="square"),
                hovertemplate="%{text}<extra></extra>",
                showlegend=False,
            )
        )
    return fig


def position_map(
    values: np.ndarray,
    rows: Sequence[str],
    tokens: Sequence[str],
    *,
    title: str,
    x_title: str,
    y_title: str,
    hover: np.ndarray | None = None,
    signed: bool = True,
) -> go.Figure:
    """A ``[R, N]`` map over token positions (columns "i: token"); ``hover`` ``[R, N]`` adds a line per cell."""
    z = np.asarray(values, dtype=np.float64)
    cols = [f"{i}: {t}" for i, t in enumerate(style.safe_labels(tokens))]
    limit = float(np.abs(z[np.isfinite(z)]).max()) if np.isfinite(z).any() and np.abs(z).max() > 0 else 1.0
    scale = dict(colorscale=style.DIVERGING, zmin=-limit, zmax=limit, zmid=0.0) if signed else {}
    custom = np.empty(z.shape, dtype=object)
    custom[:] = "" if hover is None else np.vectorize(lambda s: "<br>" + s)(hover)
    trace = go.Heatmap(
        z=z,
        x=list(range(len(cols))),
        y=list(range(len(rows))),
        customdata=custom,
        hovertemplate="%{y}, %{x}<br>%{z:.3f}%{customdata}<extra></extra>",
        **(scale or dict(colorscale=style.WEIGHTS)),
    )
    ticks = dict(tickmode="array", tickvals=list(range(len(cols))), ticktext=cols)
    layout = dict(
        title=dict(text=title),
        height=max(280, min(900, 26 * len(rows) + 160)),
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        xaxis=dict(title=dict(text=x_title), **ticks),
        yaxis=dict(
            title=dict(text=y_title),
            autorange="reversed",
            tickmode="array",
            tickvals=list(range(len(rows))),
            ticktext=list(rows),
        ),
    )
    return go.Figure(trace, layout=layout)


def score_bars(
    values: np.ndarray,
    head_names: Sequence[str],
    *,
    title: str,
    x_title: str,
    y_title: str,
    flagged: np.ndarray | None = None,
) -> go.Figure:
    """One bar per head (``values`` ``[L, H]`` flattened layer by layer); ``flagged`` heads drawn in red."""
    flat = np.asarray(values, dtype=float).ravel()
    colors = [
        "#d62728" if f else "#1f77b4" for f in (np.zeros_like(flat, bool) if flagged is None else flagged.ravel())
    ]
    fig = charts.bars(head_names, {y_title: flat}, title=title, x_title=x_title, y_title=y_title)
    fig.update_traces(marker_color=colors, showlegend=False)
    return fig


SCATTER_PLOT_PX = (820, 350)  # about the map's plot area, full page width: its labels' room in data units


def head_scatter(
    coords: np.ndarray,
    head_names: Sequence[str],
    sinks: np.ndarray,
    hover: Sequence[str],
    *,
    title: str,
    x_title: str,
    y_title: str,
    names: tuple[str, str],
) -> go.Figure:
    """All heads on two axes (principal components of their scores); sinks and the rest as two traces, each head
    named beside its point where the name has room (:func:`~tx_explorer.viz.style.label_positions`)."""
    flags = np.asarray(sinks).ravel()
    where = style.label_positions(coords, head_names, SCATTER_PLOT_PX, marker_px=11)
    fig = go.Figure()
    for chosen, name, symbol in ((~flags, names[0], "circle"), (flags, names[1], "x")):
        idx = np.nonzero(chosen)[0]
        fig.add_trace(
            go.Scatter(
                x=coords[idx, 0],
                y=coords[idx, 1],
                mode="markers+text",
                name=name,
                marker=dict(size=11, symbol=symbol),
                text=[head_names[i] if where[i] else "" for i in idx],
                textposition=[where[i] or "top center" for i in idx],
                customdata=[hover[i] for i in idx],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        height=460,
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        xaxis_title=x_title,
        yaxis_title=y_title,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    return fig


def attribution_bars(
    scores: Mapping[str, np.ndarray], tokens: Sequence[str], *, title: str, x_title: str, y_title: str
) -> go.Figure:
    """Each method's per-token scores divided by its largest magnitude, grouped by token."""
    scaled = {name: s / (np.abs(s).max() or 1.0) for name, s in scores.items()}
    labels = [f"{i}: {t}" for i, t in enumerate(style.safe_labels(tokens))]
    return charts.bars(labels, scaled, title=title, x_title=x_title, y_title=y_title)


def deletion_curves(
    removed: np.ndarray, curves: Mapping[str, np.ndarray], *, title: str, x_title: str, y_title: str
) -> go.Figure:
    """The target value as each method's top tokens are removed (faster fall = more faithful)."""
    return charts.lines(removed, curves, title=title, x_title=x_title, y_title=y_title)
