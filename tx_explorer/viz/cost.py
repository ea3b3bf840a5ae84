"""Figures for the cost of attention: FLOPs of the four matmuls, memory and time against N, the tile grid.

Every visible word is a keyword argument (English defaults), so pages pass their translations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tx_explorer.viz import charts, style
from tx_explorer.viz.heatmap import heatmap

# One colour per implementation on every chart of the page.
METHOD_COLORS = {"naive": "#d62728", "flash": "#1f77b4", "sdpa": "#2ca02c"}
_EXTRA = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
MATMUL_COLORS = ["#9ecae1", "#fd8d3c", "#e6550d", "#3182bd"]  # projections blue, N² products orange
TILE_COLORS = ["#f0f0f0", "#fdae6b", "#3182bd", "#31a354"]  # skipped, partly masked, computed, …
SERIES_OFFSET = 0.04  # decades of N between neighbouring series of ratio_bands: about 15 px on the page's chart
MAX_TILE_TICKS = 16  # tile indices labelled at most along each side of the tile grid
SI_PREFIXES = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
LOG_PAD = 0.05  # decades a log axis extends past its outermost ticks: a marker on one is drawn whole
X_MARGIN = 0.15  # decades of N the ratio chart's x axis extends past the outermost points
Series = Mapping[str, tuple[np.ndarray, np.ndarray]]  # name -> (N values, y values)


def _color(name: str, i: int) -> str:
    return METHOD_COLORS.get(name, _EXTRA[i % len(_EXTRA)])


def flops_bars(
    ns: Sequence[int],
    flops: Mapping[str, np.ndarray],
    crossover: float,
    *,
    title: str = "",
    crossover_label: str = "N = 2D",
    x_title: str = "N (tokens)",
    y_title: str = "share of FLOPs (%)",
) -> go.Figure:
    """Stacked bars of each product's share of the FLOPs for every N (hover: absolute counts), with a dashed
    line where the N² products overtake the projections (placed between the bars on a log scale of N).

    Args:
        flops: product name -> FLOPs ``[len(ns)]``, in stacking order.
    """
    ns = [int(n) for n in ns]
    labels = [f"{n:,}" for n in ns]
    total = np.sum([np.asarray(v, dtype=np.float64) for v in flops.values()], axis=0)
    fig = go.Figure()
    for i, (name, values) in enumerate(flops.items()):
        values = np.asarray(values, dtype=np.float64)
        fig.add_bar(
            x=labels,
            y=values,
            name=name,
            marker_color=MATMUL_COLORS[i % len(MATMUL_COLORS)],
            customdata=np.stack([values, 100 * values / total], axis=-1),
            hovertemplate="N=%{x}<br>" + name + ": %{customdata[0]:.3s} FLOPs (%{customdata[1]:.1f}%)<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        barnorm="percent",
        title=title,
        font=style.FONT,
        height=380,
        margin=dict(l=70, r=10, t=60 if title else 30, b=10),
        legend=dict(orientation="h", y=-0.25),
    )
    fig.update_xaxes(title=x_title, type="category")
    fig.update_yaxes(title=y_title)
    logs = np.log2(ns)
    if len(ns) > 1 and logs[0] <= np.log2(crossover) <= logs[-1]:
        x = float(np.interp(np.log2(crossover), logs, np.arange(len(ns))))
        fig.add_shape(
            type="line", x0=x, x1=x, y0=0, y1=1, xref="x", yref="paper", line=dict(dash="dash", color="black")
        )
        fig.add_annotation(x=x, y=1.0, xref="x", yref="paper", text=crossover_label, showarrow=False, yanchor="bottom")
    return fig


def _log_axes(fig: go.Figure, x_title: str, y_title: str, title: str) -> None:
    fig.update_xaxes(type="log", title=x_title, minorloglabels="none")  # no "2 5" between the decades
    fig.update_yaxes(type="log", title=y_title, minorloglabels="none")
    fig.update_layout(
        title=title,
        font=style.FONT,
        height=440,
        margin=dict(l=80, r=10, t=40, b=10),
        legend=dict(orientation="h", y=-0.2),
    )


def memory_curves(
    analytic: Series,
    measured: Series | None = None,
    *,
    device_bytes: float | None = None,
    device_label: str = "device memory",
    extrapolated: Mapping[str, tuple[float, float]] | None = None,
    title: str = "",
    analytic_label: str = "analytic",
    measured_label: str = "measured",
    x_title: str = "N (tokens)",
    y_title: str = "peak bytes",
) -> go.Figure:
    """Peak bytes against N on log–log axes.

    Args:
        analytic: name -> (N values, bytes), drawn as dashed lines.
        measured: name -> (N values, bytes), drawn as markers in the same colours.
        device_bytes: the device's memory, drawn as a horizontal line.
        extrapolated: label -> (N, bytes), single far-away points (e.g. the lecture's N = 100 000, H = 64).
    """
    fig = go.Figure()
    names = list(dict.fromkeys([*analytic, *(measured or {})]))
    for name, (ns, values) in analytic.items():
        fig.add_scatter(
            x=ns,
            y=values,
            mode="lines",
            name=f"{name} ({analytic_label})",
            line=dict(dash="dash", color=_color(name, names.index(name))),
            hovertemplate=f"N=%{{x:,}}<br>%{{y:.3s}}B<extra>{name} ({analytic_label})</extra>",
        )
    for name, (ns, values) in (measured or {}).items():
        fig.add_scatter(
            x=ns,
            y=values,
            mode="markers",
            name=f"{name} ({measured_label})",
            marker=dict(size=9, color=_color(name, names.index(name))),
            hovertemplate=f"N=%{{x:,}}<br>%{{y:.3s}}B<extra>{name} ({measured_label})</extra>",
        )
    for i, (label, (n, value)) in enumerate((extrapolated or {}).items()):
        fig.add_scatter(
            x=[n],
            y=[value],
            mode="markers+text",
            name=label,
            text=[label],
            textposition="middle left",
            marker=dict(symbol="star", size=14, color=_EXTRA[i % len(_EXTRA)]),
            hovertemplate=f"N=%{{x:,}}<br>%{{y:.3s}}B<extra>{label}</extra>",
        )
    if device_bytes:
        fig.add_hline(y=device_bytes, line=dict(color="black", width=1))
        # Placed by hand: on log axes annotations take log10 coordinates (add_hline's own label lands off-chart).
        fig.add_annotation(
            x=0.01,
            xref="paper",
            y=np.log10(device_bytes),
            yref="y",
            text=device_label,
            showarrow=False,
            xanchor="left",
            yanchor="bottom",
        )
    _log_axes(fig, x_title, y_title, title)
    fig.update_yaxes(exponentformat="SI", ticksuffix="B")  # 10GB, not 10B (plotly's default "billion")
    return fig


def time_curves(
    measured: Series,
    *,
    guide: str | None = "flash",
    title: str = "",
    x_title: str = "N (tokens)",
    y_title: str = "seconds (median)",
) -> go.Figure:
    """Median seconds against N on log–log axes, with a dotted ∝ N² guide through the last point of ``guide``."""
    fig = go.Figure()
    for i, (name, (ns, secs)) in enumerate(measured.items()):
        fig.add_scatter(
            x=ns,
            y=secs,
            mode="lines+markers",
            name=name,
            marker=dict(size=8),
            line=dict(color=_color(name, i)),
            hovertemplate=f"N=%{{x:,}}<br>%{{y:.3g}} s<extra>{name}</extra>",
        )
    if guide in measured and len(measured[guide][0]):
        ns = np.asarray(measured[guide][0], dtype=np.float64)
        n_last, t_last = ns[-1], float(np.asarray(measured[guide][1])[-1])
        fig.add_scatter(
            x=ns,
            y=t_last * (ns / n_last) ** 2,
            mode="lines",
            name="∝ N²",
            line=dict(dash="dot", color="gray"),
            hoverinfo="skip",
        )
    _log_axes(fig, x_title, y_title, title)
    log_ticks(fig, np.concatenate([np.asarray(tr.y, dtype=float) for tr in fig.data]), "s")
    return n_ticks(fig, [n for points, _ in measured.values() for n in points])


def tile_grid(
    status: np.ndarray,
    names: Sequence[str],
    *,
    block_q: int,
    block_k: int,
    title: str = "",
    x_title: str = "key tile j",
    y_title: str = "query tile i",
) -> go.Figure:
    """The (query tile, key tile) grid coloured by status.

    Args:
        status: ``[Tr, Tc]`` integer codes 0, 1, 2, …; ``names[c]`` names code ``c`` (e.g. skipped/partial/full).
    """
    status = np.asarray(status)
    k = len(names)
    scale = [[pos, TILE_COLORS[c]] for c in range(k) for pos in (c / k, (c + 1) / k)]
    tr, tc = status.shape
    first = np.stack(np.meshgrid(np.arange(tc) * block_k, np.arange(tr) * block_q), axis=-1)  # first key, first row
    fig = go.Figure(
        go.Heatmap(
            z=status,
            zmin=-0.5,
            zmax=k - 0.5,
            colorscale=scale,
            showscale=False,
            xgap=3 if max(tr, tc) <= MAX_TILE_TICKS else 1,  # 64 tiles of 8 px: 3 px gaps would hide them
            ygap=3 if max(tr, tc) <= MAX_TILE_TICKS else 1,
            text=np.array(names, dtype=object)[status],
            texttemplate="%{text}" if max(tr, tc) <= 8 else None,
            textfont=dict(size=11),
            customdata=first,
            # the axis titles name the tiles, in the caller's language; "(8…)": the tile's first row or key
            hovertemplate=f"{y_title} = %{{y}} (%{{customdata[1]}}…)<br>{x_title} = %{{x}} (%{{customdata[0]}}…)<br>"
            "%{text}<extra></extra>",
        )
    )
    axis = dict(tickmode="array", showgrid=False, zeroline=False, constrain="domain")
    fig.update_xaxes(title=x_title, tickvals=_every_kth(tc), side="top", **axis)
    fig.update_yaxes(title=y_title, tickvals=_every_kth(tr), autorange="reversed", scaleanchor="x", **axis)
    fig.update_layout(
        title=dict(text=title, y=0.98, yanchor="top"),
        height=min(640, max(300, 60 * tr + 160)),
        font=style.FONT,
        margin=dict(l=70, r=10, t=100, b=10),
        plot_bgcolor="white",
    )
    return fig


def _every_kth(count: int) -> list[int]:
    """Tile indices to label: all of them up to :data:`MAX_TILE_TICKS`, else every k-th so that at most that many
    are (64 labels of 1-token tiles ran together into one black stack)."""
    return list(range(0, count, -(-count // MAX_TILE_TICKS)))


def running_stat_map(
    values: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    x_title: str = "key tiles consumed",
    colorscale: str = style.SEQUENTIAL,
    **options: Any,
) -> go.Figure:
    """A row statistic (running max or sum) ``[Nq, Tc]`` after each key tile, on a colour range fitted to it; NaN
    (skipped tile) is a gap. ``options`` are :func:`~tx_explorer.viz.heatmap.heatmap`'s (title, y_title, zmid)."""
    values = np.asarray(values, dtype=np.float64)
    height = 100 + 26 * values.shape[0]
    # heatmap's axes already grow to fit the row labels and draw no zero line across skipped tiles' gaps
    return heatmap(
        values,
        row_labels,
        col_labels,
        x_title=x_title,
        colorscale=colorscale,
        zmin=None,
        zmax=None,
        height=height,
        **options,
    )


def _count(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.3g}"


def mixer_grid(
    panels: Mapping[str, Series],
    *,
    colors: Mapping[str, str],
    units: Mapping[str, str] | None = None,
    title: str = "",
    x_title: str = "N (tokens)",
    dashes: Mapping[str, str] | None = None,
    symbols: Mapping[str, str] | None = None,
) -> go.Figure:
    """Log–log curves against N two to a row, one subplot per ``{subplot title: {mixer: (N, values)}}`` that has
    values (one still to be measured is left out, not drawn as empty axes), the mixers coloured alike in every
    subplot (each in the legend once). ``units``: a subplot title → the unit of its values ("s", "B"), labelled and
    hovered with SI prefixes (10ms, 1.31MB); the others are counts (labelled 1k, hovered 1,024). N is labelled
    where it was drawn. ``dashes`` and ``symbols``: a mixer's line dash and marker (Plotly's names), so that two
    mixers on the same values stay apart (an open marker is drawn larger, around the one below it)."""
    units, dashes, symbols = units or {}, dashes or {}, symbols or {}
    names = [name for name, curves in panels.items() if any(len(ns) for ns, _ in curves.values())]
    rows = max(1, -(-len(names) // 2))
    # rows apart by more than an x-axis title and the next row's subplot title (0.16 let them touch)
    fig = make_subplots(rows=rows, cols=2, subplot_titles=names, horizontal_spacing=0.12, vertical_spacing=0.24)
    named: set[str] = set()
    for p, name in enumerate(names):
        where = dict(row=p // 2 + 1, col=p % 2 + 1)
        drawn = {mixer: (ns, ys) for mixer, (ns, ys) in panels[name].items() if len(ns)}
        unit = units.get(name)
        for mixer, (ns, ys) in drawn.items():
            fig.add_scatter(
                x=ns,
                y=ys,
                customdata=[si(y, unit) if unit else _count(y) for y in ys],
                mode="lines+markers",
                name=mixer,
                legendgroup=mixer,
                showlegend=mixer not in named,
                line=dict(color=colors.get(mixer), dash=dashes.get(mixer, "solid")),
                marker=dict(symbol=(mark := symbols.get(mixer, "circle")), size=10 if "open" in mark else 6),
                hovertemplate=f"N = %{{x:,}}<br>%{{customdata}}<extra>{mixer}</extra>",
                **where,
            )
            named.add(mixer)
        n_ticks(fig, [n for ns, _ in drawn.values() for n in ns], most=5, **where)
        # a count's axis too: Plotly's own labels mixed "1000" with "10k"
        log_ticks(fig, np.concatenate([np.asarray(ys, dtype=float) for _, ys in drawn.values()]), unit or "", **where)
    fig.update_xaxes(type="log", title=x_title)
    fig.update_yaxes(type="log", minorloglabels="none")
    fig.update_layout(title=title, font=style.FONT, height=140 + 270 * rows, legend=dict(orientation="h", y=-0.12))
    return fig


def ratio_span(ratios: Sequence[np.ndarray]) -> tuple[float, float]:
    """The ratio chart's y axis: the points and the line at 1, half as far again on each side (log)."""
    points = np.concatenate([np.asarray(r, dtype=float).ravel() for r in ratios])
    points = points[np.isfinite(points) & (points > 0)]
    return points.min(initial=1.0) / 1.5, points.max(initial=1.0) * 1.5


def ratio_bands(
    x: Sequence[float],
    series: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    same_label: str = "equal time",
    cut_label: str = "bar cut at the chart's edge",
) -> go.Figure:
    """Time ratios against N (log axes: ½ and 2 lie as far from 1), one line per ``name -> (ratio, low, high)``:
    each point with a bar from ``low`` to ``high`` (the calls' spread; none where NaN), and the dotted line at 1
    where both take the same time, named in the legend. The axis spans the points and 1 (:func:`ratio_span`); a
    longer bar (unbounded when the spread reaches the time, at or below 0 for a log axis) is cut at the axis's edge
    and its cut end marked with a triangle, hovered ``cut_label`` and the true end: drawn on, one noisy size's bar ran
    the whole height of the chart. The series sit :data:`SERIES_OFFSET` apart along x (hover: the true N): drawn at
    the same N, one series' bar hid another's, and a label on the line at 1 sat on a marker."""
    fig = charts.lines(
        x,
        {k: v[0] for k, v in series.items()},
        title=title,
        x_title=x_title,
        y_title=y_title,
        log_x=True,
        log_y=True,
    )
    lo, hi = ratio_span([v[0] for v in series.values()])
    ns = np.asarray(x, dtype=float)
    middle = (len(series) - 1) / 2
    colorway = fig.layout.template.layout.colorway
    for i, (trace, (ratio, low, high)) in enumerate(zip(list(fig.data), series.values(), strict=True)):
        trace.line.color = trace.line.color or colorway[i % len(colorway)]  # its cut markers take the same colour
        trace.x = list(xs := ns * 10 ** ((i - middle) * SERIES_OFFSET))
        trace.customdata = list(ns)
        trace.hovertemplate = f"N = %{{customdata:,}}<br>%{{y:.3g}}<extra>{trace.name}</extra>"
        up, down = np.minimum(high, hi) - ratio, ratio - np.maximum(low, lo)  # NaN: no bar
        trace.error_y = dict(type="data", symmetric=False, array=list(up), arrayminus=list(down), thickness=1.5)
        for ends, edge, symbol in ((high, hi, "triangle-up"), (low, lo, "triangle-down")):
            cut = (ends > hi) if edge == hi else (ends < lo)  # NaN compares False: no bar, nothing cut
            if cut.any():
                fig.add_scatter(
                    x=xs[cut],
                    y=[edge] * int(cut.sum()),
                    customdata=np.column_stack([ns[cut], ends[cut]]),
                    mode="markers",
                    marker=dict(symbol=symbol, size=11, color=trace.line.color),
                    cliponaxis=False,
                    showlegend=False,
                    hovertemplate=f"N = %{{customdata[0]:,}}<br>{cut_label}: %{{customdata[1]:.3g}}"
                    f"<extra>{trace.name}</extra>",
                )
    span = [ns.min() / 10**X_MARGIN, ns.max() * 10**X_MARGIN]
    fig.add_scatter(
        x=span, y=[1.0, 1.0], mode="lines", name=same_label, line=dict(dash="dot", color="grey"), hoverinfo="skip"
    )
    ticks = [m * 10.0**e for e in range(-3, 4) for m in (1, 2, 5) if lo <= m * 10.0**e <= hi]
    fig.update_xaxes(range=list(np.log10(span)))
    fig.update_yaxes(range=[np.log10(lo), np.log10(hi)], tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    return fig


def n_ticks(fig: go.Figure, values: Sequence[float], *, most: int = 8, **where: Any) -> go.Figure:
    """Label a log x axis at the values drawn (N, a tile size: powers of two, evenly spaced on it), with thousands
    separators, every second one where there are more than ``most``: Plotly's own labels mixed "1000" with "10k",
    gave less than a decade of N its linear-looking 130, 140, … 260, or a whole axis one label. ``where``: the
    subplot (``row=``, ``col=``)."""
    ns = sorted({int(n) for n in values})
    shown = ns[:: -(-len(ns) // most)]
    fig.update_xaxes(
        tickmode="array",
        tickvals=shown,
        ticktext=[f"{n:,}" for n in shown],
        range=[np.log10(ns[0]) - LOG_PAD, np.log10(ns[-1]) + LOG_PAD],
        **where,
    )
    return fig


def si(value: float, unit: str) -> str:
    """``value`` in ``unit`` with an SI prefix and three significant figures (1.31MB, 12.5ms), as :func:`log_ticks`
    labels its axis: a hover in the axis's own units."""
    e = 3 * int(np.floor(np.log10(abs(value)) / 3)) if value else 0
    e = min(max(e, min(SI_PREFIXES)), max(SI_PREFIXES))
    return f"{value / 10.0**e:.3g}{SI_PREFIXES[e]}{unit}"


def si_hover(fig: go.Figure, unit: str, x_name: str) -> go.Figure:
    """Every trace's hover in the units its axis is labelled in (:func:`si`): "N = 1,024", then "4.19MB", not
    Plotly's "(1024, 4194304)"."""
    for trace in fig.data:
        trace.customdata = [si(float(y), unit) for y in trace.y]
        trace.hovertemplate = f"{x_name} = %{{x:,}}<br>%{{customdata}}<extra>{trace.name}</extra>"
    return fig


def log_ticks(fig: go.Figure, values: Sequence[float], unit: str, **where: Any) -> go.Figure:
    """Label a log y axis in one style throughout, an SI prefix on ``unit`` (100kB, 1GB; 100µs, 5ms: Plotly's own
    mixed "100μ" with "0.001" on one axis, and its "B" means billion, which reads as bytes here), at every decade
    the ``values`` span, or at 1, 2 and 5 of each decade when they span less than three (one label was all a short
    axis had). The axis runs from the last label at or below the smallest value to the first at or above the
    largest, so no point lies beyond the labels. ``where``: the subplot (``row=``, ``col=``)."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v) & (v > 0)]
    lo, hi = int(np.floor(np.log10(v.min()))), int(np.ceil(np.log10(v.max())))
    steps = (1,) if hi - lo > 3 else (1, 2, 5)
    every = [(m, e) for e in range(lo - 1, hi + 2) for m in steps]  # a decade spare each side: log10's rounding
    first = max(i for i, (m, e) in enumerate(every) if m * 10.0**e <= v.min())
    last = min(i for i, (m, e) in enumerate(every) if m * 10.0**e >= v.max())
    ticks = every[first : last + 1]
    vals = [m * 10.0**e for m, e in ticks]
    text = [f"{m * 10 ** (e % 3)}{SI_PREFIXES[e - e % 3]}{unit}" for m, e in ticks]
    span = [np.log10(vals[0]) - LOG_PAD, np.log10(vals[-1]) + LOG_PAD]
    fig.update_yaxes(tickmode="array", tickvals=vals, ticktext=text, range=span, **where)
    return fig


def byte_ticks(fig: go.Figure, values: Sequence[float], **where: Any) -> go.Figure:
    """Label a log y axis of bytes like the peak-memory chart (:func:`log_ticks` in bytes)."""
    return log_ticks(fig, values, "B", **where)
