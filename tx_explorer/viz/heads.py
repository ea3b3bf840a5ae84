"""Figures for multi-head attention: head grids, maps, BertViz-style lines, head similarities, per-head numbers
as layers × heads heatmaps, and the text coloured by attention.

Pure functions: arrays and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import style
from tx_explorer.viz.charts import signed_heatmap
from tx_explorer.viz.heatmap import X_TICKS, heatmap, mosaic
from tx_explorer.viz.style import safe_labels

WORDS = {  # every visible word; a page passes its translations (``fig_<key>`` in common.json)
    "layer": "layer {i}",
    "head": "head {i}",
    "head_group": "h{i} · kv{g}",  # grouped-query attention: query head i reads key/value head g
    "heads": "head",
    "pooled": " (max-pooled {k}×{k})",
    "query_hover": "query {i}: {token}",
    "key_hover": "key {j}: {token} · weight {w:.3f}",
}
SEARCH_WORDS = {  # the head search's words; the multi-head page passes its translations (``fig_<key>``)
    "cell": "layer {layer}, head {head}",
    "cell_kv": "layer {layer}, head {head} (key/value head {g})",
    "value": "{value:.3f}",
    "no_value": "no score on this text",  # NaN: no query of the text has what the number needs
    "layers": "layer",
}
DETAIL_SIDE = 512  # a detail map larger than this is pooled: 512² float32 is already 1.4 MB of chart data
MANY_HEADS = 6  # beyond this many heads a layer, the grid's thumbnails fill the width instead of staying square
GRID_ROW_PX = 60  # a layer's row of thumbnails when they fill the width (30 layers: 1 920 px)


def _words(words: Mapping[str, str] | None) -> dict[str, str]:
    return {**WORDS, **(words or {})}


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
    rows, cols = np.arange(0, n, k), np.arange(0, m, k)  # each block's first row and column

    def pooled(op: np.ufunc) -> np.ndarray:  # op over each block, NaN ignored (fmax/fmin): (..., ⌈n/k⌉, ⌈m/k⌉)
        return op.reduceat(op.reduceat(maps, cols, axis=-1), rows, axis=-2)

    # Reductions in place of an argmax over k² copies of every block: SmolLM2's 270 maps of 373 tokens pool in
    # 0.15 s (weights, one reduction) against 0.6 s.
    high = pooled(np.fmax)
    if not np.nanmin(maps, initial=0.0) < 0.0:  # weights: the max is the largest magnitude
        return high, k
    low = pooled(np.fmin)
    return np.where(-low > high, low, high), k  # the block's value of largest magnitude, its sign kept


def head_grid(
    maps: np.ndarray,
    *,
    title: str = "",
    cells: int = 64,
    zmax: float = 1.0,
    words: Mapping[str, str] | None = None,
    groups: Sequence[int] | None = None,
    hover: Sequence[Sequence[str]] | None = None,
    layer_marks: Mapping[int, str] | None = None,
) -> go.Figure:
    """All layers × heads as thumbnails: ``maps [L, H, N, N]`` → one mosaic (rows = layers, columns = heads;
    ``layer_marks``: a word beside some rows' names, :func:`style.marked`).

    Inputs longer than ``cells`` tokens are max-pooled to ``cells`` × ``cells`` per thumbnail. ``groups``: the
    key/value head each query head reads (grouped-query attention), named in the column titles ("h3 · kv1").
    ``hover`` ``[L][H]``: a line per thumbnail, shown on hover, and a click on a thumbnail reports [layer, head].
    """
    small, k = pool_peaks(maps, cells)
    layers, heads = small.shape[:2]
    w = _words(words)
    note = w["pooled"].format(k=k) if k > 1 else ""
    fig = mosaic(
        small,
        row_names=style.marked([w["layer"].format(i=i) for i in range(layers)], layer_marks),
        col_names=[
            w["head"].format(i=j) if groups is None else w["head_group"].format(i=j, g=groups[j]) for j in range(heads)
        ],
        title=title + note,
        zmax=zmax,
        height=min(1400, 150 * layers + 120) if heads <= MANY_HEADS else GRID_ROW_PX * layers + 120,
    )
    fig.update_layout(margin=dict(l=70, r=10, t=60, b=10))  # room for the layer names
    if heads > MANY_HEADS:  # square tiles of 30 × 9 heads filled 45 % of the width: let them stretch instead
        fig.update_yaxes(scaleanchor=False)  # False, not None: an image trace anchors its axes by default
    if hover is not None:
        n = small.shape[-1]  # a tile's side in mosaic cells; a gap of one cell follows it
        centre = lambda k: k * (n + 1) + (n - 1) / 2  # noqa: E731 (as the mosaic places its ticks)
        fig.add_trace(_cell_markers(hover, x=centre, y=centre))
        rows, cols = layers * (n + 1) - 1, heads * (n + 1) - 1  # the mosaic's cells
        fig.update_xaxes(range=[-0.5, cols - 0.5])  # the markers must not widen the axes around them
        fig.update_yaxes(range=[rows - 0.5, -0.5], autorange=False)
    return fig


def _cell_markers(hover: Sequence[Sequence[str]], *, x, y) -> go.Scatter:
    """An invisible marker on every head's cell (at ``x(head)``, ``y(layer)``) that carries its hover line and its
    click: Streamlit reports point selections of scatter traces but not of heatmaps (streamlit#8760), so the markers
    carry ``customdata`` = [layer, head]."""
    layers, heads = len(hover), len(hover[0])
    layer, head = np.divmod(np.arange(layers * heads), heads)  # (L·H,) each: the cell of every marker
    return go.Scatter(
        x=x(head),
        y=y(layer),
        customdata=np.stack([layer, head], axis=1),
        text=[hover[i][h] for i, h in zip(layer, head)],
        mode="markers",
        marker=dict(size=max(10, min(40, 600 // max(layers, heads))), opacity=0, symbol="square"),
        hovertemplate="%{text}<extra></extra>",
        showlegend=False,
    )


def head_names(layers: int, heads: int, groups: Sequence[int] | None, words: Mapping[str, str]) -> list[list[str]]:
    """Each head's name as hovers say it, ``[L][H]``: its layer, its number and, under grouped-query attention,
    the key/value head it reads."""
    return [
        [
            words["cell"].format(layer=i, head=h)
            if groups is None
            else words["cell_kv"].format(layer=i, head=h, g=groups[h])
            for h in range(heads)
        ]
        for i in range(layers)
    ]


def head_heatmap(
    values: np.ndarray,
    names: Sequence[Sequence[str]],
    *,
    title: str,
    words: Mapping[str, str],
    zmin: float | None = 0.0,
    zmax: float | None = 1.0,
    layer_marks: Mapping[int, str] | None = None,
) -> go.Figure:
    """A per-head number ``[L, H]`` as a layers × heads heatmap (rows layer 0…, columns head 0…), one colour scale;
    the hover names the head (``names`` of :func:`head_names`) and its value, and a click reports [layer, head].
    ``layer_marks``: a word beside some rows' names (:func:`style.marked`)."""
    v = np.asarray(values, dtype=np.float64)
    layers, heads = v.shape
    fig = heatmap(
        v,
        style.marked([str(i) for i in range(layers)], layer_marks),
        [str(h) for h in range(heads)],
        title=title,
        x_title=words["heads"],
        y_title=words["layers"],
        zmin=zmin,
        zmax=zmax,
        show_values=False,
        height=max(300, min(900, 22 * layers + 160)),
    )
    fig.data[0].hoverinfo = "skip"  # the markers below name the head
    said = lambda x: words["value"].format(value=x) if np.isfinite(x) else words["no_value"]  # noqa: E731
    hover = [[f"{names[i][h]}<br>" + said(v[i, h]) for h in range(heads)] for i in range(layers)]
    fig.add_trace(_cell_markers(hover, x=lambda h: h, y=lambda i: i))
    fig.update_xaxes(range=[-0.5, heads - 0.5])  # the cells' edges: the markers must not widen the axes
    fig.update_yaxes(range=[layers - 0.5, -0.5], autorange=False)
    return fig


def token_text(
    tokens: Sequence[str],
    weights: np.ndarray,
    *,
    picked: int | None,
    title: str,
    hover: Sequence[str],
    line_chars: int = 72,
) -> go.Figure:
    """The text itself as the picture (CircuitsVis-style): each token a box on its line, coloured by ``weights [N]``,
    the ``picked`` token outlined; a click on a token reports its index (``customdata``).

    Tokens are laid out in reading order, wrapped at about ``line_chars`` characters, each box as wide as its label.
    """
    labels = style.safe_labels(tokens)
    widths = np.array([max(2, len(str(t))) + 1 for t in tokens], dtype=float)  # characters, with a gap
    start, line, x = np.zeros(len(tokens)), np.zeros(len(tokens), dtype=int), 0.0
    for i, w in enumerate(widths):
        if x > 0 and x + w > line_chars:
            x, line[i:] = 0.0, line[i] + 1
        start[i], x = x, x + w
    w = np.nan_to_num(np.asarray(weights, dtype=np.float64))
    outline = np.where(np.arange(len(tokens)) == picked, 3, 0)
    height = int(34 * (line[-1] + 1) + 90)
    plot_px = height - 60  # less the margins: the colour bar's length
    # A tick per two lines of text at most: on a one-line text Plotly's six ticks were drawn one on the other
    ticks = max(2, plot_px // (2 * style.FONT["size"]))
    fig = go.Figure(
        go.Bar(
            x=widths - 0.4,
            base=start,
            y=line,
            orientation="h",
            width=0.8,
            text=labels,
            textposition="inside",
            insidetextanchor="middle",
            textangle=0,
            customdata=np.arange(len(tokens)),
            hovertext=list(hover),
            hoverinfo="text",
            marker=dict(
                color=w,
                colorscale=style.SEQUENTIAL,
                cmin=0.0,
                cmax=max(float(w.max()), 1e-6),
                line=dict(width=outline, color="#d62728"),
                showscale=True,
                colorbar=dict(thickness=12, nticks=ticks),
            ),
            showlegend=False,
        )
    )
    fig.update_xaxes(visible=False, range=[-0.5, line_chars + 0.5])
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=10, r=10, t=50, b=10),
        font=style.FONT,
        bargap=0.2,
    )
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
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """A query × key map, zoomable; maps wider than ``max_side`` are pooled to it by :func:`pool_peaks`.

    After pooling the axes name index ranges ("8–15"). ``signed``: a difference map on the diverging scale.
    """
    z, k = pool_peaks(values, max_side)
    if k > 1:
        n, m = np.shape(values)
        row_labels = [f"{i}–{min(n, i + k) - 1}" for i in range(0, n, k)]
        col_labels = [f"{j}–{min(m, j + k) - 1}" for j in range(0, m, k)]
        title += _words(words)["pooled"].format(k=k)
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
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """BertViz's head view: queries on the left, keys on the right, a line per weight (opacity = weight).

    Args:
        weights: ``[N, M]`` (rows = queries).
        min_weight: weights below it are not drawn (they would be invisible anyway).
        focus: draw only this query's lines.
        max_lines: keep the strongest lines when there are more (long inputs).
    """
    w = np.asarray(weights, dtype=np.float64)
    wd = _words(words)
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
        _token_column(0.0, left, "left", [wd["query_hover"].format(i=i, token=t) for i, t in enumerate(left)])
    )
    fig.add_trace(
        _token_column(
            1.0,
            right,
            "right",
            [wd["key_hover"].format(j=j, token=t, w=strength[j]) for j, t in enumerate(right)],
            mode="text+markers",
            marker=dict(size=6, color=strength, colorscale=style.WEIGHTS, cmin=0, cmax=max(1.0, float(strength.max()))),
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


def _token_column(
    x: float, tokens: Sequence[str], side: str, hovertext: list[str], mode: str = "text", **extra: Any
) -> go.Scatter:
    """One side of the head view: the tokens as text at ``x``, one row each, aligned away from the lines."""
    return go.Scatter(
        x=np.full(len(tokens), x),
        y=np.arange(len(tokens)),
        mode=mode,
        text=[str(t) for t in tokens],
        textposition=f"middle {side}",
        hovertext=hovertext,
        hoverinfo="text",
        showlegend=False,
        **extra,
    )


def similarity_matrix(
    distances: np.ndarray, labels: Sequence[str], *, title: str = "", words: Mapping[str, str] | None = None
) -> go.Figure:
    """Pairwise head distances ``[K, K]`` in [0, 1] (0 = identical maps)."""
    return heatmap(
        distances,
        labels,
        labels,
        title=title,
        x_title=_words(words)["heads"],
        y_title=_words(words)["heads"],
        colorscale=style.SEQUENTIAL + "_r",
        zmin=0.0,
        zmax=1.0,
        show_values=len(labels) <= 16,
    )


ROW_GAP = 0.12  # between the rows of :func:`vector_rows`, a share of the plot's height


def vector_rows(
    rows: Mapping[str, np.ndarray],
    col_labels: Sequence[str],
    *,
    title: str,
    x_title: str,
    x_ticks: int = X_TICKS,
    height: int = 300,
) -> go.Figure:
    """Vectors of one length (``{row name: [C]}``) as one-row heatmaps stacked over one x axis, each on its own
    diverging scale with its own colour bar beside it: a query of about ±4 and the head's output of about ±0.03 on
    one scale drew the output white."""
    fig, share = go.Figure(), (1 - ROW_GAP * (len(rows) - 1)) / len(rows)  # a row's part of the plot's height
    for r, (name, values) in enumerate(rows.items()):
        one = np.asarray(values)[None]
        part = signed_heatmap(one, [name], col_labels, title=title, x_title=x_title, y_title="", x_ticks=x_ticks)
        top, axis = 1 - r * (share + ROW_GAP), r + 1 if r else ""  # Plotly's y axes: "y", "y2", …
        bar = dict(y=top - share / 2, len=share, yanchor="middle")
        fig.add_trace(part.data[0].update(yaxis=f"y{axis}", colorbar=bar))
        fig.layout[f"yaxis{axis}"] = part.layout.yaxis.update(domain=[max(0.0, top - share), top], anchor="x")
    part.layout.xaxis.anchor = f"y{axis}"  # one x axis, its labels and title under the last row
    return fig.update_layout(
        title=part.layout.title, xaxis=part.layout.xaxis, height=height, margin=part.layout.margin, font=style.FONT
    )
