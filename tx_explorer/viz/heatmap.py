"""Heatmaps of attention maps and matrices.

Token labels repeat ("the … the"), and Plotly merges repeated category labels, so every axis is numeric
with the labels as tick text.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from tx_explorer.viz import style

LABELLED_CELLS = 48 * 48  # up to this many cells each carries its labels; beyond, the axes name rows and columns


# Labels a half-width chart's x axis holds upright without overlap on the narrowest window (style.NARROWEST): its
# plot beside a colour bar is about 225 px there, 10 px a label (28 stood on each other: 128 columns, every 5th)
X_TICKS = 22
NICE = (1, 2, 2.5, 5)  # × 10^k: the steps round tick labels go by (tick_cells)
TICK_PX = 15  # a y-axis label's height with its gap, at our 12 px font


# The sizes of numbers written with decimals: under 0.01 two decimals print "0.00", from 10 000 on "1732050.75" overruns
# its cell; beyond, three significant figures and a power of ten ("1.73e6", "5e−31").
PLAIN = (0.01, 1e4)


def number(v: float, scale: float | None = None) -> str:
    """``v`` short enough for a cell, a colour bar's tick or a sentence, its form chosen by ``scale`` (the largest
    size among the numbers written beside it, so that they read alike; ``|v|`` by default): two decimals where
    ``scale`` is 0 or within :data:`PLAIN`, else three significant figures and a power of ten, 0 as "0"."""
    scale = abs(v) if scale is None else scale
    if scale == 0 or PLAIN[0] <= scale < PLAIN[1]:
        return style.decimal(v, 2)
    if v == 0:
        return "0"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}".replace("-", "−")  # a true minus, as the prose


def _y_ticks(height: int) -> int:
    """How many labels a y axis ``height`` px tall (margins included) holds without overlap."""
    return max(4, (height - 120) // TICK_PX)


def thinned_ticks(labels: Sequence[str] | None, n: int, max_ticks: int = 64) -> dict:
    """Every label, or every k-th one when more would overlap (the hover still names each cell)."""
    if labels is None:
        labels = [str(i) for i in range(n)]
    step = max(1, int(np.ceil(n / max_ticks)))
    idx = list(range(0, n, step))
    return dict(tickmode="array", tickvals=idx, ticktext=[str(labels[i]) for i in idx])


def _unique_names(labels: list[str]) -> list[str]:
    """Category names for an axis: Plotly merges equal ones, so repeated labels get their index ("7: the")."""
    return labels if len(set(labels)) == len(labels) else [f"{i}: {t}" for i, t in enumerate(labels)]


def _hover_name(axis_title: str) -> str:
    """An axis title as the prefix of a hover line ("" without a title)."""
    return f"{axis_title} " if axis_title else ""


def names_cells(labels: Sequence[str]) -> bool:
    """Whether an axis's labels name their cells themselves, so that a hover writes the label alone: distinct labels
    that carry a number (positions "300", pooled ranges "8–15", "12: the", "L3", "x1", "g0·5"), all of them or all
    but one (a sink's column beside positions) on three or more. Elsewhere (a text's tokens, which repeat) the hover
    writes the cell's index before its label, "queries (rows) 7: the": before numbered labels that index read
    "layer 17: L17", "cached positions 0: 500: the" (a cache of positions 500 on) or "keys 2: 8–15" (a pooled map)."""
    labels = [str(t) for t in labels]
    if len(set(labels)) != len(labels):
        return False
    bare = sum(not any(c.isdigit() for c in t) for t in labels)
    return bare == 0 or (bare == 1 and len(labels) >= 3)


# A column-wide figure's plot where the figure does not know its width: less the row labels and title (55 px) and
# the colour bar (about 105 px), the margins style.tidy gives a heatmap.
CELL_AREA_PX = style.COLUMN_PX - 160


def tick_cells(cells: int, pool: int = 1, most: int = 6) -> list[int]:
    """The columns of a map of ``cells`` blocks of ``pool`` positions whose labels (their first positions) the x axis
    writes upright (``heatmap(x_tick_cells=…)``): at most ``most``, at a round step that is a multiple of ``pool``
    (0, 200, 400 … on 640 tokens in blocks of 5), else at the least common multiple of one and ``pool`` (0, 150,
    300 … in blocks of 6)."""
    n = cells * pool
    nice = [int(m * 10**k) for k in range(7) for m in NICE if float(m * 10**k).is_integer()]
    steps = [s for s in nice if s % pool == 0] + [math.lcm(s, pool) for s in nice]
    step = next(s for s in steps if -(-n // s) <= most)  # the last nice step, 5 000 000, leaves one label
    return [k for k in range(cells) if (k * pool) % step == 0]


def heatmap(
    values: np.ndarray,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    title: str = "",
    x_title: str = style.KEY_AXIS,
    y_title: str = style.QUERY_AXIS,
    colorscale: str = style.WEIGHTS,
    zmin: float | None = 0.0,
    zmax: float | None = 1.0,
    zmid: float | None = None,
    show_values: bool | None = None,
    height: int | None = None,
    x_ticks: int = X_TICKS,
    colorbar: dict | None = None,
    x_tick_cells: Sequence[int] | None = None,
    hover_index: tuple[bool, bool] | None = None,
) -> go.Figure:
    """A labelled heatmap of a 2-D array (rows top to bottom), light enough for 512 × 512 maps.

    Up to :data:`LABELLED_CELLS` cells, each cell carries its row and column label for hover. Larger maps
    would ship N² label pairs, so there the axes are categorical and name each row and column once.

    Args:
        values: ``[R, C]``; ±inf and NaN are drawn as gaps (masked positions).
        show_values: write the numbers in the cells (default: when the map is at most 16 × 16 and they fit their
            cells at a legible size in a column-wide figure), all in one form (:func:`number`, by the largest).
        x_ticks: the most x labels drawn (every k-th beyond): fewer where the plot is narrower than a column's.
        colorbar: Plotly's colour bar settings (its ticks).
        x_tick_cells: the columns whose labels the x axis writes, upright (default: every k-th, as many as
            ``x_ticks`` allows, turned by the template where they crowd).
        hover_index: whether a cell's hover writes its (row, column) index before its labels, "queries (rows) 7: the"
            (default: on an axis whose labels do not name their cells, :func:`names_cells`; never where a label is
            its own index, "dims 5: 5").
    """
    z = np.asarray(values, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D array, got shape {z.shape}")
    rows, cols = z.shape
    finite = np.where(np.isfinite(z), z, np.nan)
    rl = style.safe_labels(row_labels if row_labels is not None else range(rows))
    cl = style.safe_labels(col_labels if col_labels is not None else range(cols))
    common = dict(colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, colorbar=colorbar)
    axes = dict(automargin=True, zeroline=False, showgrid=False)
    # The hover names a cell by the axis titles, so it speaks the caller's language: "queries (rows) 3: the".
    x_name, y_name = (_hover_name(t) for t in (x_title, y_title))
    # Between a cell's index and its label, the colon of the titles' language: "查询 3：the" in 中文, not "3: the"
    sep = style.colon(x_title, y_title)
    xaxis = dict(axes, title=dict(text=x_title))  # tick angle: the template turns crowded labels
    yaxis = dict(axes, title=dict(text=y_title), autorange="reversed")
    side = height or max(260, min(760, 32 * max(rows, cols) + 140))
    scale = float(np.nanmax(np.abs(finite))) if np.isfinite(z).any() else 0.0  # the numbers' size: their form
    value = "%{z:.4f}" if scale == 0 or PLAIN[0] <= scale < PLAIN[1] else "%{z:.3~g}"  # 1e-30 hovered as 0.0000
    if z.size > LABELLED_CELLS:
        x, y = _unique_names(cl), _unique_names(rl)
        trace = go.Heatmap(
            z=finite.astype(np.float32),
            x=x,
            y=y,
            **common,
            hovertemplate=f"{y_name}%{{y}}<br>{x_name}%{{x}}<br>{value}<extra></extra>",
        )
        for names, axis, most in ((x, xaxis, x_ticks), (y, yaxis, _y_ticks(side))):
            axis.update(type="category", tickmode="array", tickvals=names[:: max(1, int(np.ceil(len(names) / most)))])
        if x_tick_cells is not None:
            xaxis.update(tickvals=[x[j] for j in x_tick_cells])
    else:
        text = None
        if show_values or (show_values is None and rows <= 16 and cols <= 16):
            text = np.vectorize(
                lambda v: number(v, scale) if np.isfinite(v) else ("−∞" if v == -np.inf else ""), otypes=[object]
            )(z)
            if show_values is None:
                text = style.fitted_numbers(text, CELL_AREA_PX / cols)
        show_values = text is not None
        custom = np.empty((rows, cols, 2), dtype=object)
        custom[:, :, 0] = np.array(rl, dtype=object)[:, None]
        custom[:, :, 1] = np.array(cl, dtype=object)[None, :]
        if hover_index is None:
            hover_index = (not names_cells(rl), not names_cells(cl))
        # labels that open with the axis's title ("query head 5" under "query head") are written without it
        y_name, x_name = (
            "" if title and all(str(t).startswith(title) for t in labels) else name
            for name, title, labels in ((y_name, y_title, rl), (x_name, x_title, cl))
        )
        y_at, x_at = (
            f"{name}%{{{axis}}}{sep}%{{customdata[{k}]}}" if indexed else f"{name}%{{customdata[{k}]}}"
            for name, axis, k, indexed in ((y_name, "y", 0, hover_index[0]), (x_name, "x", 1, hover_index[1]))
        )
        trace = go.Heatmap(
            z=finite,
            x=np.arange(cols),
            y=np.arange(rows),
            **common,
            text=text,
            texttemplate="%{text}" if show_values else None,
            customdata=custom,
            hovertemplate=f"{y_at}<br>{x_at}<br>{value}<extra></extra>",
        )
        xaxis.update(thinned_ticks(cl, cols, x_ticks))
        if x_tick_cells is not None:
            xaxis.update(tickvals=list(x_tick_cells), ticktext=[str(cl[j]) for j in x_tick_cells])
        yaxis.update(thinned_ticks(rl, rows, _y_ticks(side)))
    if x_tick_cells is not None:
        xaxis.update(tickangle=0)
    # One constructor call: each update_* call re-validates, and together they cost 3× the figure itself.
    layout = dict(
        title=dict(text=title),
        height=side,
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        font=style.FONT,
        xaxis=xaxis,
        yaxis=yaxis,
    )
    return go.Figure(trace, layout=layout)


WHITE = "rgb(255, 255, 255)"  # the gaps' colour (a name that the PNG palette can parse too)
GAP = 255  # mosaic cells are uint8: weights 0…254, this code for the gaps between tiles (drawn white)


def _png(codes: np.ndarray, scale: list[list]) -> str:
    """uint8 ``codes [rows, cols]`` → a palette PNG as a data URI, code c coloured as a heatmap with this ``scale``
    and z from 0 to GAP colours it. Written with zlib alone (figures import no imaging library)."""
    at = np.array([pos for pos, _ in scale])
    rgb = np.array([plotly.colors.convert_colors_to_same_type(c, "tuple")[0][0] for _, c in scale])  # (stops, 3)
    codes_at = np.arange(GAP + 1) / GAP  # code c sits at c / GAP of the scale
    palette = np.stack([np.interp(codes_at, at, rgb[:, k]) for k in range(3)], axis=1)  # (256, 3) in 0…1

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows, cols = codes.shape
    scanlines = np.concatenate([np.zeros((rows, 1), np.uint8), codes], axis=1)  # each row: filter 0, then codes
    png = b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", cols, rows, 8, 3, 0, 0, 0)),  # 8-bit palette indices
            chunk(b"PLTE", (palette * 255).round().astype(np.uint8).tobytes()),
            chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 1)),  # level 1: 10× faster than 6 on a grid, 20 % larger
            chunk(b"IEND", b""),
        ]
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _gap_colorscale(colorscale: str) -> list[list]:
    """``colorscale`` over codes 0…254 and white for :data:`GAP`."""
    top = (GAP - 1) / GAP
    scale = [[pos * top, colour] for pos, colour in plotly.colors.get_colorscale(colorscale)]
    return [*scale, [(GAP - 0.5) / GAP, WHITE], [1.0, WHITE]]


def round_ticks(lo: float, hi: float, most: int = 6) -> np.ndarray:
    """Round values inside [lo, hi] for a colour bar: multiples of 1, 2, 2.5 or 5 × 10^k, at most ``most`` of them
    (a range cut in equal parts would label 0.248, 0.495, 0.743)."""
    span = (hi - lo) or 1.0
    power = 10.0 ** np.floor(np.log10(span / most))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if span / (m * power) < most)
    ticks = np.arange(np.ceil(lo / step - 1e-9), np.floor(hi / step + 1e-9) + 1) * step
    # rounded below the step (not to fixed places, which make 5e-31 0) to drop float noise: 0.30000000000000004
    return np.round(ticks, 12 - int(np.floor(np.log10(step)))) + 0.0  # + 0.0: no "-0" label


def mosaic(
    maps: np.ndarray,
    *,
    row_names: Sequence[str],
    col_names: Sequence[str],
    title: str = "",
    gap: int = 1,
    colorscale: str = style.WEIGHTS,
    zmin: float = 0.0,
    zmax: float = 1.0,
    height: int | None = None,
) -> go.Figure:
    """Many equally sized maps ``[R, C, n, m]`` tiled into **one** image with gaps between tiles.

    One trace renders several times faster than ``R × C`` subplots. The maps are quantised to uint8 codes
    (0 → ``zmin``, 254 → ``zmax``, finer than the colour scale resolves) and sent as a palette PNG that the
    browser decodes natively, where a heatmap trace is coloured cell by cell in JavaScript: SmolLM2's grid of
    270 heads (276 000 cells) redrew in 414 ms as an image against 523 ms as a heatmap (benchmarks/head_search.py).
    Tiles carry no hover: their row and column names are the axis ticks.
    """
    maps = np.asarray(maps, dtype=np.float32)
    if maps.ndim != 4:
        raise ValueError(f"mosaic needs [R, C, n, m] maps, got shape {maps.shape}")
    r, c, n, m = maps.shape
    scaled = np.nan_to_num((maps - zmin) / ((zmax - zmin) or 1.0))
    codes = np.rint(np.clip(scaled, 0.0, 1.0) * (GAP - 1)).astype(np.uint8)
    big = np.full((r * (n + gap) - gap, c * (m + gap) - gap), GAP, dtype=np.uint8)
    for i in range(r):
        for j in range(c):
            big[i * (n + gap) : i * (n + gap) + n, j * (m + gap) : j * (m + gap) + m] = codes[i, j]
    ticks = round_ticks(zmin, zmax)
    scale = _gap_colorscale(colorscale)
    # the ticks written here, with the true minus Plotly's own and the prose write ("−0.5", not "-0.5")
    ticktext = [f"{t:.6g}".replace("-", "−") for t in ticks]
    colorbar = dict(tickvals=(ticks - zmin) / ((zmax - zmin) or 1.0) * (GAP - 1), ticktext=ticktext)
    fig = go.Figure(
        [
            go.Image(source=_png(big, scale), x0=0, dx=1, y0=0, dy=1, hoverinfo="skip"),  # pixel (i, j) at x=j, y=i
            # an image has no colour bar: an invisible two-cell heatmap of the same scale carries it
            go.Heatmap(
                z=[[0, GAP]], colorscale=scale, zmin=0, zmax=GAP, opacity=0, hoverinfo="skip", colorbar=colorbar
            ),
        ]
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=[j * (m + gap) + (m - 1) / 2 for j in range(c)],
        ticktext=style.safe_labels(col_names),
        showgrid=False,
        zeroline=False,
        side="top",
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=[i * (n + gap) + (n - 1) / 2 for i in range(r)],
        ticktext=style.safe_labels(row_names),
        autorange="reversed",
        showgrid=False,
        zeroline=False,
        scaleanchor="x",
    )
    fig.update_layout(title=title, height=height or min(1400, 90 * r + 120), margin=dict(l=10, r=10, t=60, b=10))
    return fig
