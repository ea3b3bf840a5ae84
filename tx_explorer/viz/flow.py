"""Figures of information flow (pure: arrays and words in, Plotly figures out): the route graph, tokens across
and layers up, and the three views of one edge's heads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import style
from tx_explorer.viz.bars import BELOW

COLOURS = {"attn": "#1f77b4", "residual": "#9e9e9e", "mlp": "#ff7f0e"}
NODE_COLOURS = {"x": "#444444", "m": "#1f77b4", "mlp": "#ff7f0e"}
WIDTHS = (1.0, 2.5, 4.5, 7.0, 10.0)  # one line trace per kind and width class: a trace per edge would be hundreds
MLP_OFFSET = 0.3  # an MLP node sits right of its position, half-way between the attention and the next layer


def _translucent(colour: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r, g, b, alpha)``: the lines' own alpha, not the trace's ``opacity``, with which the
    browser paints each trace into a layer of its own to blend at every redraw (a tenth of the graph's redraw)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def node_xy(kind: str, layer: int, pos: int) -> tuple[float, float]:
    """Where a node sits: x = its position (an MLP a little right), y = 2·layer (input), + 1 (after attention),
    + 1.5 (MLP); the final residual is at 2·L."""
    if kind == "x":
        return float(pos), 2.0 * layer
    return (pos + MLP_OFFSET, 2.0 * layer + 1.5) if kind == "mlp" else (float(pos), 2.0 * layer + 1)


def route_graph(
    nodes: Sequence[tuple[str, int, int]],
    edges: Sequence[tuple[tuple[str, int, int], tuple[str, int, int], str, float]],
    tokens: Sequence[str],
    num_layers: int,
    *,
    node_hover: Sequence[str],
    edge_hover: Sequence[str],
    names: Mapping[str, str],
    title: str,
    x_title: str,
    y_title: str,
    layer_label: str,
    final_label: str,
    layer_marks: Mapping[int, str] | None = None,
) -> go.Figure:
    """Edges (source, target, kind, share) as lines whose width grows with the share, coloured by kind (``names``
    gives each kind's legend entry); nodes as markers, a trace per kind. Clicks: each node carries ``customdata``
    ["node", kind, layer, position] and each attention edge a marker at its middle with ["edge", layer, query, key].
    ``layer_marks``: a word beside some layers' ticks (:func:`style.marked`: Gemma 3's global layers), each of them
    ticked even where the labelled levels skip it."""
    # Arrays, not lists, and one colour and symbol per trace: Plotly checks a list element by element (most of
    # this figure's time), an array at once. NaN breaks a line as None does (no segment through a missing point).
    fig = go.Figure()
    edges = list(edges)
    shares = np.array([e[3] for e in edges], dtype=float)
    classes = np.minimum((shares * len(WIDTHS)).astype(int), len(WIDTHS) - 1)
    kinds = np.array([e[2] for e in edges], dtype=object)
    ends = np.array([(*node_xy(*e[0]), *node_xy(*e[1])) for e in edges], dtype=float).reshape(-1, 4)  # (E, 4)
    for kind in ("residual", "mlp", "attn"):
        first = True
        for c, width in enumerate(WIDTHS):
            chosen = ends[(kinds == kind) & (classes == c)]  # (K, 4): x0, y0, x1, y1
            if len(chosen):
                gaps = np.full(len(chosen), np.nan)
                fig.add_trace(
                    go.Scatter(
                        x=np.stack([chosen[:, 0], chosen[:, 2], gaps], axis=1).ravel(),  # x0, x1, NaN per edge
                        y=np.stack([chosen[:, 1], chosen[:, 3], gaps], axis=1).ravel(),
                        mode="lines",
                        line=dict(color=_translucent(COLOURS[kind], 0.75), width=width),
                        name=names[kind],
                        legendgroup=kind,
                        showlegend=first,
                        hoverinfo="skip",
                    )
                )
                first = False
    attn = np.flatnonzero(kinds == "attn")
    if len(attn):
        mids = (ends[attn, :2] + ends[attn, 2:]) / 2  # (A, 2)
        clicks = [["edge", edges[i][1][1], edges[i][1][2], edges[i][0][2]] for i in attn]  # layer, query, key
        fig.add_trace(
            go.Scatter(
                x=mids[:, 0],
                y=mids[:, 1],
                mode="markers",
                marker=dict(size=9, color=COLOURS["attn"], opacity=0.35, symbol="diamond"),
                customdata=np.array(clicks, dtype=object),  # (A, 4)
                text=np.array(style.safe_labels([edge_hover[i] for i in attn]), dtype=object),
                hovertemplate="%{text}<extra></extra>",
                showlegend=False,
            )
        )
    hover = style.safe_labels(node_hover)
    for kind in ("m", "mlp", "x"):  # a trace per kind, its colour and symbol one value; "x" last, the lowest node
        chosen = [i for i, n in enumerate(nodes) if n[0] == kind]  # top-down, as the graph lists them
        if not chosen:
            continue
        xy = np.array([node_xy(*nodes[i]) for i in chosen], dtype=float)  # (K, 2)
        fig.add_trace(
            go.Scatter(
                x=xy[:, 0],
                y=xy[:, 1],
                mode="markers",
                marker=dict(
                    size=np.array([12 if nodes[i][1] == num_layers else 8 for i in chosen]) if kind == "x" else 8,
                    color=NODE_COLOURS[kind],
                    symbol="square" if kind == "mlp" else "circle",
                    line=dict(width=1, color="white"),
                ),
                customdata=np.array([["node", *nodes[i]] for i in chosen], dtype=object),  # (K, 4)
                text=np.array([hover[i] for i in chosen], dtype=object),
                hovertemplate="%{text}<extra></extra>",
                showlegend=False,
            )
        )
    n = len(tokens)
    levels = list(range(0, 2 * num_layers + 1, max(1, num_layers // 8) * 2))  # at most ~9 labelled levels
    # Gemma 3's global layers 5, 11 and 17 fell between the every-other-layer ticks, unnamed
    marks = {layer: word for layer, word in (layer_marks or {}).items() if 0 <= layer < num_layers}
    levels = sorted({*levels, *(2 * layer for layer in marks)})
    ticks = style.marked([layer_label.format(layer=layer) for layer in range(num_layers)], marks)
    fig.update_layout(
        title=dict(text=title),
        height=max(420, min(1400, 34 * num_layers + 200)),
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        legend=BELOW,
        xaxis=dict(
            title=dict(text=x_title),
            tickmode="array",
            tickvals=list(range(n)),
            ticktext=[f"{i}: {t}" for i, t in enumerate(style.safe_labels(tokens))],
            tickangle=-60,
            range=[-0.7, n - 0.3],
            automargin=True,
            showgrid=False,
        ),
        yaxis=dict(
            title=dict(text=y_title),
            tickmode="array",
            tickvals=levels,
            # the top level is the final residual, after block L − 1: "L{L}" would name a layer that is not there
            ticktext=[final_label if y == 2 * num_layers else ticks[y // 2] for y in levels],
            range=[-0.7, 2 * num_layers + 0.7],
            zeroline=False,
            automargin=True,
        ),
    )
    return fig


# The views' plot: half the page less its axis titles and colour bar (264 px measured in Chinese, whose colour bar
# title is the widest)
EDGE_PLOT_PX = (style.COLUMN_PX - 200, 300)
EDGE_HEIGHT = 420  # the views' figure; the per-head bars drawn beside them match it
EDGE_MARKER_PX = 14


def edge_views(
    weight: np.ndarray,
    norm: np.ndarray,
    effect: np.ndarray,
    *,
    title: str,
    x_title: str,
    y_title: str,
    colour_title: str,
) -> go.Figure:
    """One point per head: attention weight across, write norm up, causal effect as colour (diverging, 0 white)."""
    limit = float(np.abs(effect).max()) or 1.0
    xy = np.stack([np.asarray(weight, dtype=float), np.asarray(norm, dtype=float)], axis=1)  # (H, 2)
    # A label's room past the highest and the rightmost point (weights crowd at 1, the axis's end: Gemma 3's top
    # head had no place for its name)
    pad = style.LABEL_HEIGHT_PX + EDGE_MARKER_PX
    names = [f"H{h}" for h in range(len(xy))]
    where = style.label_positions(xy, names, EDGE_PLOT_PX, marker_px=EDGE_MARKER_PX, origin=True, pad_px=pad)
    top = xy.max(0)
    top = np.where(top > 0, top, 1.0)  # an axis of zeros (no weight on the edge) still spans something
    span = top * (1 + pad / (np.asarray(EDGE_PLOT_PX) - pad))  # the axes' ends, from 0: ``pad`` past the points
    fig = go.Figure(
        go.Scatter(
            x=np.asarray(weight, dtype=float),
            y=np.asarray(norm, dtype=float),
            mode="markers+text",
            text=[n if w else "" for n, w in zip(names, where)],
            textposition=[w or "top center" for w in where],
            marker=dict(
                size=EDGE_MARKER_PX,
                color=np.asarray(effect, dtype=float),
                colorscale=style.DIVERGING,
                cmin=-limit,
                cmax=limit,
                colorbar=dict(title=dict(text=colour_title)),
                line=dict(width=1, color="#444444"),
            ),
            customdata=[[float(e), f"H{h}"] for h, e in enumerate(np.asarray(effect, dtype=float))],
            hovertemplate="%{customdata[1]}<br>a = %{x:.3f}<br>‖·‖ = %{y:.3f}<br>%{customdata[0]:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title),
        height=EDGE_HEIGHT,
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        xaxis=dict(title=dict(text=x_title), range=[0.0, span[0]]),
        yaxis=dict(title=dict(text=y_title), range=[0.0, span[1]]),
    )
    return fig
