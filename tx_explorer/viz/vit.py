"""Figures for the Vision Transformer page: images with patch grids, attention overlays, position maps, predictions.

Pure builders: arrays and labels in, ``go.Figure`` out. Images use pixel coordinates (pixel centres at integers),
so patch (r, c) of size P spans x ∈ [c·P − ½, (c+1)·P − ½] and a ``[g, g]`` map overlays with
``x0 = (P−1)/2, dx = P``.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from tx_explorer.viz import charts, style
from tx_explorer.viz.heatmap import mosaic

WORDS = {  # every visible word; a page passes its translations (``fig_<key>`` in its locale file)
    "flat_index": "index in the flattened patch (0 … {last})",
    "value": "value",
    "dimension": "dimension",
    "patch_row": "patch row",
    "patch_col": "patch column",
    "patch_hover": "patch row %{customdata[0]}, column %{customdata[1]}",  # a cell's (row, column): _cells
    "weight": "weight",
    "probability": "probability",
}
GRID_LINE = dict(color="rgba(255,255,255,0.75)", width=1)
HIGHLIGHT = dict(color="#ff2d55", width=3)


def _words(words: Mapping[str, str] | None) -> dict[str, str]:
    return {**WORDS, **(words or {})}


def _picture(pixels: np.ndarray, **kwargs) -> go.Image:
    """An ``[S, S, 3]`` uint8 image sent as a PNG (``source``), not as numbers (``z``): a 224² picture is ~200 kB
    of base64 numbers but a few kB of PNG, and a small-multiples figure repeats its picture in every panel."""
    return go.Image(source="data:image/png;base64," + base64.b64encode(_png(pixels)).decode(), **kwargs)


def _png(pixels: np.ndarray) -> bytes:
    """An RGB PNG file of ``[H, W, 3]`` uint8 pixels (standard library only: figures do not import PIL)."""
    h, w, _ = pixels.shape
    flat = np.asarray(pixels, np.uint8).reshape(h, 3 * w)
    sub = flat.copy()
    sub[:, 3:] -= flat[:, :-3]  # PNG's "Sub" filter (each byte minus the same channel to its left, mod 256)
    rows = np.concatenate([np.ones((h, 1), np.uint8), sub], axis=1)  # filter type 1 at the start of each row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8 bits per channel, RGB, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + chunk(b"IEND", b"")
    )


def _grid_lines(size: int, patch: int) -> go.Scatter:
    """All patch boundaries as one line trace (segments separated by None)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for k in range(1, size // patch):
        edge = k * patch - 0.5
        xs += [edge, edge, None, -0.5, size - 0.5, None]
        ys += [-0.5, size - 0.5, None, edge, edge, None]
    return go.Scatter(x=xs, y=ys, mode="lines", line=GRID_LINE, hoverinfo="skip", showlegend=False)


def _highlight(fig: go.Figure, patch: int, grid: int, index: int, **where: int) -> None:
    r, c = divmod(index, grid)
    fig.add_shape(
        type="rect",
        x0=c * patch - 0.5,
        x1=(c + 1) * patch - 0.5,
        y0=r * patch - 0.5,
        y1=(r + 1) * patch - 0.5,
        line=HIGHLIGHT,
        **where,
    )


AXES_OFF = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False)
CHART_MARGIN = dict(l=60, r=10, b=40)  # room for tick labels and axis titles


def _frame(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_xaxes(**AXES_OFF)
    fig.update_yaxes(**AXES_OFF, scaleanchor="x")
    fig.update_layout(title=title, height=height, margin=dict(l=5, r=5, t=40 if title else 5, b=5), font=style.FONT)
    return fig


def image_with_grid(
    pixels: np.ndarray,
    patch: int,
    *,
    highlight: int | None = None,
    title: str = "",
    height: int = 360,
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """An ``[S, S, 3]`` uint8 image with its patch grid drawn and one patch (row-major index) outlined; hovered, the
    patch under the pointer (it said "x 37, y 12" in pixels, in English on a 中文 page)."""
    size = pixels.shape[0]
    clear = [[0, "rgba(0,0,0,0)"], [1, "rgba(0,0,0,0)"]]  # drawn for its hover only: the picture shows through
    cells = _patch_map(
        np.zeros((size // patch,) * 2), patch, _words(words)["patch_hover"] + "<extra></extra>", colorscale=clear
    )
    fig = go.Figure([_picture(pixels, hoverinfo="skip"), cells.update(showscale=False), _grid_lines(size, patch)])
    if highlight is not None:
        _highlight(fig, patch, size // patch, highlight)
    return _frame(fig, title, height)


def _cells(grid: int) -> np.ndarray:
    """Each patch's (row, column), ``[g, g, 2]``, for a hover: a patch map sits on the picture's pixel axes, where
    ``%{x}`` is a patch centre's pixel (7.5, 23.5 …), not its column."""
    rows, cols = np.indices((grid, grid))
    return np.stack([rows, cols], axis=-1)


def _patch_map(z: np.ndarray, patch: int, hover: str, **style_: object) -> go.Heatmap:
    """A ``[g, g]`` map laid over a picture of ``g × patch`` pixels, hovered by patch (:func:`_cells`)."""
    return go.Heatmap(
        z=z.astype(np.float32),  # half the bytes; hover shows 4 decimals
        x0=(patch - 1) / 2,
        dx=patch,
        y0=(patch - 1) / 2,
        dy=patch,
        customdata=_cells(z.shape[0]),
        hovertemplate=hover,
        **style_,
    )


def _overlay_traces(
    pixels: np.ndarray, attn: np.ndarray, zmax: float, opacity: float, show_scale: bool, hover: str
) -> list:
    patch = pixels.shape[0] // attn.shape[0]
    return [
        _picture(pixels, hoverinfo="skip"),
        _patch_map(
            attn, patch, hover, zmin=0.0, zmax=zmax, colorscale=style.WEIGHTS, opacity=opacity, showscale=show_scale
        ),
    ]


def _panel_domains(count: int, gap: float) -> list[list[float]]:
    """``count`` equal spans of [0, 1] separated by ``gap`` (a fraction of the figure)."""
    width = (1 - gap * (count - 1)) / count
    return [[i * (width + gap), i * (width + gap) + width] for i in range(count)]


def attention_overlays(
    pixels: np.ndarray,
    maps: np.ndarray,
    names: Sequence[str],
    *,
    title: str = "",
    opacity: float = 0.6,
    highlight: int | None = None,
    columns: int = 5,
    height_per_row: int = 230,
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """Small multiples: each ``[g, g]`` map of ``maps [K, g, g]`` over the image, on one shared colour scale.

    ``highlight`` outlines the query patch (row-major index) in every panel. The panels' axes are laid out in
    one layout dict: ``make_subplots`` and per-panel updates re-validate the figure each time (10× slower).
    """
    maps = np.asarray(maps, dtype=np.float64)
    if maps.ndim != 3 or len(names) != maps.shape[0]:
        raise ValueError(f"need maps [K, g, g] with K names, got shape {maps.shape} and {len(names)} names")
    k, grid = maps.shape[0], maps.shape[1]
    cols = min(columns, k)
    rows = -(-k // cols)
    patch = pixels.shape[0] // grid
    x_domains, y_domains = _panel_domains(cols, 0.02), _panel_domains(rows, 0.08)[::-1]  # row 0 on top
    zmax = float(maps.max()) or 1.0
    w = _words(words)
    hover = f"{w['patch_hover']}<br>{w['weight']} %{{z:.4f}}<extra></extra>"
    traces, layout, annotations, shapes = [], {}, [], []
    for i, name in enumerate(style.safe_labels(names)):
        suffix = str(i + 1) if i else ""
        x_dom, y_dom = x_domains[i % cols], y_domains[i // cols]
        for trace in _overlay_traces(pixels, maps[i], zmax, opacity, i == 0, hover):
            traces.append(trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}"))
        layout[f"xaxis{suffix}"] = dict(AXES_OFF, domain=x_dom, anchor=f"y{suffix}")
        layout[f"yaxis{suffix}"] = dict(
            AXES_OFF, domain=y_dom, anchor=f"x{suffix}", autorange="reversed", scaleanchor=f"x{suffix}"
        )  # square panels
        annotations.append(
            dict(
                text=name,
                x=sum(x_dom) / 2,
                y=y_dom[1],
                xref="paper",
                yref="paper",
                xanchor="center",
                yanchor="bottom",
                showarrow=False,
            )
        )
        if highlight is not None:
            r, c = divmod(highlight, grid)
            shapes.append(
                dict(
                    type="rect",
                    xref=f"x{suffix}",
                    yref=f"y{suffix}",
                    line=HIGHLIGHT,
                    x0=c * patch - 0.5,
                    x1=(c + 1) * patch - 0.5,
                    y0=r * patch - 0.5,
                    y1=(r + 1) * patch - 0.5,
                )
            )
    layout.update(
        title=dict(text=title),
        height=height_per_row * rows + 60,
        margin=dict(l=5, r=5, t=70, b=5),
        font=style.FONT,
        annotations=annotations,
        shapes=shapes,
    )
    return go.Figure(traces, layout=layout)


def patch_values(
    values: np.ndarray,
    channels: int = 3,
    *,
    title: str = "",
    height: int = 260,
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """One flattened patch (``C·P·P`` values, channel-major) as a line per colour channel."""
    values = np.asarray(values, dtype=np.float64)
    per = values.size // channels
    names, colours = ("R", "G", "B"), ("#d62728", "#2ca02c", "#1f77b4")
    fig = go.Figure(
        [
            go.Scatter(
                x=np.arange(c * per, (c + 1) * per),
                y=values[c * per : (c + 1) * per],
                mode="lines",
                name=names[c] if c < 3 else f"ch{c}",
                line=dict(color=colours[c % 3], width=1),
            )
            for c in range(channels)
        ]
    )
    w = _words(words)
    fig.update_xaxes(title=w["flat_index"].format(last=values.size - 1))
    fig.update_yaxes(title=w["value"])
    fig.update_layout(title=title, height=height, margin=dict(CHART_MARGIN, t=40 if title else 10), font=style.FONT)
    return fig


def vector_bars(
    vec: np.ndarray, *, title: str = "", height: int = 260, words: Mapping[str, str] | None = None
) -> go.Figure:
    """A D-dimensional vector (e.g. a patch's projection) as bars."""
    vec = np.asarray(vec, dtype=np.float64)
    # Sign as a two-colour scale over 0/1: a list of colour strings is validated one by one (10× slower).
    sign = dict(color=(vec >= 0).astype(np.uint8), colorscale=[[0, "#d62728"], [1, "#1f77b4"]], cmin=0, cmax=1)
    fig = go.Figure(go.Bar(x=np.arange(vec.size), y=vec, marker=sign))
    fig.update_xaxes(title=_words(words)["dimension"])
    fig.update_layout(title=title, height=height, margin=dict(CHART_MARGIN, t=40 if title else 10), font=style.FONT)
    return fig


def similarity_maps(
    sim: np.ndarray, *, title: str = "", height: int = 520, words: Mapping[str, str] | None = None
) -> go.Figure:
    """Position-embedding similarity small multiples: ``sim [g, g, g, g]``, tile (r, c) = that patch's map.

    The colour range runs from the smallest similarity to 1, so that a table whose rows are all alike
    (e.g. low-frequency sin-cos on a small grid) still shows its structure.
    """
    g = sim.shape[0]
    names = [str(i) for i in range(g)]
    fig = mosaic(sim, row_names=names, col_names=names, title=title, zmin=float(np.min(sim)), zmax=1.0, height=height)
    fig.update_traces(colorbar_title_text="cos", selector=dict(type="heatmap"))  # the trace carrying the bar
    fig.update_xaxes(title=_words(words)["patch_col"])  # on top, with the column numbers (mosaic's side)
    fig.update_yaxes(title=_words(words)["patch_row"])
    fig.update_layout(margin=dict(l=50, r=10, t=90, b=10))  # column numbers and their title sit on top, under the title
    return fig


def layer_head_maps(
    maps: np.ndarray, row_names: Sequence[str], col_names: Sequence[str], *, title: str = ""
) -> go.Figure:
    """All ``[L, H, g, g]`` maps (one query) tiled as layers × heads, on a colour range up to their maximum."""
    fig = mosaic(maps, row_names=row_names, col_names=col_names, title=title, zmax=float(np.max(maps)) or 1.0)
    fig.update_layout(margin=dict(l=70, r=10, t=80, b=10))
    return fig


def condition_bars(
    categories: Sequence[str], series: dict[str, np.ndarray], *, title: str = "", y_title: str = ""
) -> go.Figure:
    """Grouped bars (one group per class, one bar per condition) with the legend under the plot."""
    fig = charts.bars(categories, series, title=title, y_title=y_title, height=400)
    fig.update_layout(
        legend=dict(orientation="h", yanchor="top", y=-0.15, xanchor="left", x=0), margin=dict(l=60, b=90)
    )
    return fig


def prediction_bars(
    labels: Sequence[str],
    probs: np.ndarray,
    *,
    top: int = 10,
    title: str = "",
    height: int | None = None,
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """The ``top`` most probable classes as horizontal bars, most probable on top."""
    probs = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-probs)[:top]
    fig = go.Figure(
        go.Bar(
            x=probs[order],
            y=np.arange(order.size),
            orientation="h",
            text=[f"{probs[i]:.1%}" for i in order],
            textposition="auto",
            marker_color=_bar_colours(order.size),
            customdata=[labels[i] for i in order],
            hovertemplate="%{customdata}: %{x:.4f}<extra></extra>",
        )
    )
    fig.update_yaxes(
        tickmode="array", tickvals=list(range(order.size)), ticktext=[labels[i] for i in order], autorange="reversed"
    )
    fig.update_xaxes(title=_words(words)["probability"], range=[0, 1])
    fig.update_yaxes(automargin=True)
    fig.update_layout(
        title=title,
        height=height or 90 + 28 * order.size,
        margin=dict(l=10, r=10, t=40 if title else 10, b=40),
        font=style.FONT,
    )
    return fig


def _bar_colours(n: int) -> list[str]:
    """The winner in a strong colour, the rest muted."""
    return ["#1f77b4"] + ["#9ecae1"] * (n - 1)
