"""Figures of head science (pure: arrays and words in, Plotly figures out): layer × head maps, patching and
logit-lens maps with top-5 hovers, per-head score bars, the 2-D map of heads, attribution and deletion curves."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import charts, margins, style


def layer_head_map(
    values: np.ndarray,
    *,
    title: str,
    x_title: str,
    y_title: str,
    clickable: bool = False,
    layer_marks: Mapping[int, str] | None = None,
) -> go.Figure:
    """A signed ``[L, H]`` map, rows "L0…", columns "H0…" (ablation effects, patching recovery); ``layer_marks``:
    a word beside some rows' names (:func:`style.marked`: Gemma 3's global layers).

    ``clickable`` lays an invisible marker on every cell: Streamlit reports point selections of scatter traces
    but not of heatmaps (streamlit#8760), so the markers carry the click (``customdata`` = [layer, head]) and
    the hover label, which the heatmap below then leaves to them."""
    layers, heads = values.shape
    rows, cols = style.marked([f"L{i}" for i in range(layers)], layer_marks), [f"H{h}" for h in range(heads)]
    fig = charts.signed_heatmap(values, rows, cols, title=title, x_title=x_title, y_title=y_title)
    # each cell's hover, "L11, H3<br>−0.141": a true minus, as the sentences beside the map write it (the heatmap's
    # own, "layer L11<br>head H3<br>-0.1410", writes Plotly's hyphen), and the words the click markers carry
    words = [
        [f"{rows[i]}, {cols[h]}<br>{v:.3f}".replace("-", "−") for h, v in enumerate(r)] for i, r in enumerate(values)
    ]
    fig.data[0].update(customdata=words, hovertemplate="%{customdata}<extra></extra>")
    if clickable:
        layer, head = np.divmod(np.arange(layers * heads), heads)  # (L·H,) each: the cell of every marker
        fig.data[0].hoverinfo = "skip"
        fig.add_trace(
            go.Scatter(
                x=head,  # the heatmap's cells sit at integer positions, named by its tick labels
                y=layer,
                customdata=np.stack([layer, head], axis=1),
                text=[words[i][h] for i, h in zip(layer, head)],
                mode="markers",
                marker=dict(size=max(8, min(40, 400 // max(layers, heads))), opacity=0, symbol="square"),
                hovertemplate="%{text}<extra></extra>",
                # a label of its own colour: the invisible markers' default, red, boxed a blue cell's −0.141
                hoverlabel=dict(bgcolor="white", bordercolor="#888", font=dict(color="#262730")),
                showlegend=False,
            )
        )
        # The axes end at the cells' edges: autorange gave the markers room as well, grey bands above L0 and below
        # the last layer that looked like rows of the map
        fig.update_xaxes(range=[-0.5, heads - 0.5], autorange=False)
        fig.update_yaxes(range=[layers - 0.5, -0.5], autorange=False)  # reversed: L0 at the top
    return fig


ROW_PX, FRAME_PX = 26, 160  # a position map's row where its height allows (900 px at most); its title and axes
ROW_LABEL_PX = 20  # the least room a row's label needs: the logit lens's 60 rows at 12 px had 中文 labels touching


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
    sep: str = ", ",
    log_floor: float | None = None,
    colorbar_title: str = "",
) -> go.Figure:
    """A ``[R, N]`` map over token positions (columns "i: token"); ``hover`` ``[R, N]`` adds a line per cell. Rows
    too many to label each (:data:`ROW_LABEL_PX`) are labelled every second or more; the hover names each.

    ``log_floor`` (unsigned values): colours on a log scale, values below the floor drawn as it, the colour bar's
    ticks at powers of ten written as numbers ("≤ 0.01", "0.1", "1", "10", "100"), the hover each cell's own
    value: Gemma 3's KL of about 200 nats after layer 0 drew every later row of the logit lens in one colour on a
    linear scale."""
    z = np.asarray(values, dtype=np.float64)
    cols = [f"{i}: {t}" for i, t in enumerate(style.safe_labels(tokens))]
    limit = float(np.abs(z[np.isfinite(z)]).max()) if np.isfinite(z).any() and np.abs(z).max() > 0 else 1.0
    scale = dict(colorscale=style.DIVERGING, zmin=-limit, zmax=limit, zmid=0.0) if signed else {}
    colour = z
    if log_floor is not None and not signed:
        colour = np.log10(np.maximum(np.where(np.isfinite(z), z, np.nan), log_floor))
        low, high = math.log10(log_floor), max(math.log10(limit), math.log10(log_floor) + 1)
        decades = np.arange(math.ceil(low), math.floor(high) + 1)
        words = [_power_of_ten(k) for k in decades]
        words[0] = ("≤ " if decades[0] == low else "") + words[0]
        bar = dict(tickmode="array", tickvals=decades.tolist(), ticktext=words)
        if colorbar_title:
            bar["title"] = dict(text=colorbar_title)
        scale = dict(colorscale=style.WEIGHTS, zmin=low, zmax=high, colorbar=bar)
    custom = np.empty(z.shape, dtype=object)
    # the hover's words are text: Plotly would read a top-5 token "<bos>" as a tag and drop it
    custom[:] = "" if hover is None else np.vectorize(lambda s: "<br>" + html.escape(s, quote=False))(hover)
    trace = go.Heatmap(
        z=colour,
        x=list(range(len(cols))),
        y=list(range(len(rows))),
        # every cell named ("，" after 中文 rows), labelled row or not, its value with a true minus
        text=[
            [f"{row}{sep}{col}<br>{f'{v:.3f}'.replace('-', '−')}" for col, v in zip(cols, r)] for row, r in zip(rows, z)
        ],
        customdata=custom,
        hovertemplate="%{text}%{customdata}<extra></extra>",
        **(scale or dict(colorscale=style.WEIGHTS)),
    )
    ticks = dict(tickmode="array", tickvals=list(range(len(cols))), ticktext=cols)
    height = max(280, min(900, ROW_PX * len(rows) + FRAME_PX))
    step = math.ceil(ROW_LABEL_PX * len(rows) / (height - FRAME_PX))  # every row, unless they would touch
    layout = dict(
        title=dict(text=title),
        height=height,
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        xaxis=dict(title=dict(text=x_title), **ticks),
        yaxis=dict(
            title=dict(text=y_title),
            autorange="reversed",
            tickmode="array",
            tickvals=list(range(len(rows)))[::step],
            ticktext=list(rows)[::step],
        ),
    )
    return go.Figure(trace, layout=layout)


def _power_of_ten(k: int) -> str:
    """10^k as a colour bar writes it: "0.01", "1", "100", "1e5" beyond."""
    return f"{10.0**k:g}" if -4 <= k < 5 else f"1e{k}"


def score_bars(
    values: np.ndarray,
    head_names: Sequence[str],
    *,
    title: str,
    x_title: str,
    y_title: str,
    flagged: np.ndarray | None = None,
) -> go.Figure:
    """One bar per head (``values`` ``[L, H]`` flattened layer by layer), each named on hover; ``flagged`` heads
    drawn in red. Where the page gives a bar less than a label's line, only each layer's first head is named under
    the axis (SmolLM2's 270 names were a smear)."""
    flat = np.asarray(values, dtype=float).ravel()
    colors = [
        "#d62728" if f else "#1f77b4" for f in (np.zeros_like(flat, bool) if flagged is None else flagged.ravel())
    ]
    fig = charts.bars(head_names, {y_title: flat}, title=title, x_title=x_title, y_title=y_title)
    fig.update_traces(
        marker_color=colors,
        showlegend=False,
        customdata=list(head_names),
        hovertemplate="%{customdata}: %{y:.3f}<extra></extra>",
    )
    if style.PAGE_PX / len(flat) < style.LABEL_HEIGHT_PX:  # Plotly turns crowded labels upright: a line each
        heads = np.shape(values)[-1]
        axis = fig.layout.xaxis
        fig.update_xaxes(tickvals=axis.tickvals[::heads], ticktext=axis.ticktext[::heads])
    return fig


SCATTER_PLOT_PX = (820, 350)  # the map's plot area at the page's width (its height set to it): its labels' room
SCATTER_LABELS = 30  # heads named at most, those farthest out: SmolLM2's 270 buried the map (the hover names all)
SCATTER_MARKER_PX = 11
# Past the outermost points the axes leave half a marker and a label's line: with Plotly's 8 px, Gemma 3's top-right
# head sat on the plot's edge, with no room for its name above it, beside it or (a neighbour there) below it
SCATTER_PAD_PX = SCATTER_MARKER_PX / 2 + style.LABEL_HEIGHT_PX


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
    """All heads on two axes (principal components of their scores); sinks and the rest as two traces, the
    :data:`SCATTER_LABELS` heads farthest out named beside their points where the name has room
    (:func:`~tx_explorer.viz.style.label_positions`). The plot is drawn :data:`SCATTER_PLOT_PX` tall and the axes
    span what that placement assumed, :data:`SCATTER_PAD_PX` past the points: Plotly's autorange also made room for
    the names' text, which shrank SmolLM2's points (its x axis ran 0.6 past the leftmost) and drew names on their
    neighbours."""
    flags = np.asarray(sinks).ravel()
    where = style.label_positions(
        coords, head_names, SCATTER_PLOT_PX, marker_px=SCATTER_MARKER_PX, limit=SCATTER_LABELS, pad_px=SCATTER_PAD_PX
    )
    xy = np.asarray(coords, dtype=float)[:, :2]
    lo, hi = xy.min(0), xy.max(0)
    pad = SCATTER_PAD_PX * np.maximum(hi - lo, 1e-12) / (np.asarray(SCATTER_PLOT_PX) - 2 * SCATTER_PAD_PX)
    fig = go.Figure()
    for chosen, name, symbol in ((~flags, names[0], "circle"), (flags, names[1], "x")):
        idx = np.nonzero(chosen)[0]
        fig.add_trace(
            go.Scatter(
                x=coords[idx, 0],
                y=coords[idx, 1],
                mode="markers+text",
                name=name,
                marker=dict(size=SCATTER_MARKER_PX, symbol=symbol),
                text=[head_names[i] if where[i] else "" for i in idx],
                textposition=[where[i] or "top center" for i in idx],
                customdata=[hover[i] for i in idx],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        margin=dict(l=10, r=10, t=40, b=10),
        font=style.FONT,
        xaxis=dict(title=dict(text=x_title), range=[lo[0] - pad[0], hi[0] + pad[0]]),
        yaxis=dict(title=dict(text=y_title), range=[lo[1] - pad[1], hi[1] + pad[1]]),
        legend=style.LEGEND,
    )
    margin = margins.fit(fig, style.drawn_widths()).layout.margin  # those the page draws it with
    fig.update_layout(height=SCATTER_PLOT_PX[1] + margin.t + margin.b)
    return fig


def attribution_bars(
    scores: Mapping[str, np.ndarray], tokens: Sequence[str], *, title: str, x_title: str, y_title: str
) -> go.Figure:
    """Each method's per-token scores divided by its largest magnitude, grouped by token (the labels raw:
    :func:`~tx_explorer.viz.charts.bars` makes them safe, and escaping them here too showed ``&lt;bos&gt;``)."""
    scaled = {name: s / (np.abs(s).max() or 1.0) for name, s in scores.items()}
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    return charts.bars(labels, scaled, title=title, x_title=x_title, y_title=y_title)


def deletion_curves(
    removed: np.ndarray, curves: Mapping[str, np.ndarray], *, title: str, x_title: str, y_title: str
) -> go.Figure:
    """The target value as each method's top tokens are removed (faster fall = more faithful)."""
    return charts.lines(removed, curves, title=title, x_title=x_title, y_title=y_title)
