"""Figures for the norms-and-blocks page: training curves, depth profiles, maps side by side, layer × step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from tx_explorer.viz import style

PALETTE = qualitative.D3


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def curves(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str = "",
    x_title: str = "step",
    y_title: str = "loss",
    log_y: bool = False,
    dashed: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    dashed_suffix: str = "validation",
    height: int = 380,
) -> go.Figure:
    """Overlaid line charts: ``series[name] = (x, y)``; ``dashed`` adds a second line per name (same colour).

    Non-finite y values (a diverged run) are drawn as gaps.
    """
    fig = go.Figure()
    for i, (name, (x, y)) in enumerate(series.items()):
        y = np.asarray(y, dtype=np.float64)
        fig.add_trace(
            go.Scatter(
                x=list(x),
                y=np.where(np.isfinite(y), y, np.nan),
                mode="lines",
                name=name,
                line=dict(color=_colour(i), width=1.6),
                legendgroup=name,
            )
        )
        if dashed and name in dashed:
            dx, dy = dashed[name]
            fig.add_trace(
                go.Scatter(
                    x=list(dx),
                    y=list(dy),
                    mode="lines+markers",
                    name=f"{name} · {dashed_suffix}",
                    line=dict(color=_colour(i), dash="dash", width=1.6),
                    marker=dict(size=4),
                    legendgroup=name,
                )
            )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, type="log" if log_y else "linear")
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=60, r=10, t=40 if title else 10, b=40),
        font=style.FONT,
        legend=dict(orientation="h", yanchor="top", y=-0.18),
    )
    return fig


def depth_profiles(
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    x_title: str = "block",
    y_title: str = "",
    log_y: bool = True,
    x_start: int = 0,
    height: int = 360,
) -> go.Figure:
    """One subplot per panel (e.g. "at initialisation", "after training"); in each, one line per variant
    across depth: ``panels[panel][variant] = values[L]``. Subplots share the y axis so the panels compare."""
    names = list(panels)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, shared_yaxes=True, horizontal_spacing=0.04)
    variants = list(dict.fromkeys(v for p in panels.values() for v in p))
    for c, panel in enumerate(names, start=1):
        for variant, values in panels[panel].items():
            i = variants.index(variant)
            fig.add_trace(
                go.Scatter(
                    x=list(range(x_start, x_start + len(values))),
                    y=list(values),
                    mode="lines+markers",
                    name=variant,
                    legendgroup=variant,
                    showlegend=c == 1,
                    line=dict(color=_colour(i)),
                    marker=dict(size=5),
                ),
                row=1,
                col=c,
            )
        fig.update_xaxes(title=x_title, row=1, col=c)
    fig.update_yaxes(title=y_title, type="log" if log_y else "linear", row=1, col=1)
    if log_y:
        fig.update_yaxes(type="log")
    fig.update_layout(
        height=height,
        margin=dict(l=60, r=10, t=40, b=40),
        font=style.FONT,
        legend=dict(orientation="h", yanchor="top", y=-0.2),
    )
    return fig


def side_by_side(
    maps: Mapping[str, np.ndarray],
    *,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    diverging: Sequence[str] = (),
    zmax: float = 1.0,
    diff_max: float | None = None,
    x_title: str = style.KEY_AXIS,
    y_title: str = style.QUERY_AXIS,
    height: int = 380,
) -> go.Figure:
    """Equally sized 2-D maps in one row of subplots. Names listed in ``diverging`` (e.g. a difference
    map, or signed activations) use the red–blue scale centred on 0 with their own colour bar. Each colour bar
    stands right of the last map it colours, so neither sits between another map and its bar."""
    names = list(maps)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.06)
    scales = ["coloraxis2" if n in diverging else "coloraxis" for n in names]
    last = {a: c for c, a in enumerate(scales)}  # each scale's last map: its colour bar stands right of it
    gaps = [0.06 + (0.09 if c in last.values() else 0.0) for c in range(len(names) - 1)]  # room for a bar
    width = (1 - sum(gaps)) / len(names)
    starts = [c * width + sum(gaps[:c]) for c in range(len(names))]
    for c, x0 in enumerate(starts):
        fig.update_xaxes(domain=[x0, x0 + width], row=1, col=c + 1)
        fig.layout.annotations[c].x = x0 + width / 2  # the subplot title follows its map
    bar_x = {a: starts[c] + width for a, c in last.items()}
    signed = [np.asarray(maps[n], dtype=np.float64) for n in names if n in diverging]
    dmax = diff_max if diff_max is not None else max([float(np.nanmax(np.abs(s))) for s in signed] + [1e-12])
    for c, name in enumerate(names, start=1):
        z = np.asarray(maps[name], dtype=np.float64)
        is_div = name in diverging
        rl = list(row_labels) if row_labels is not None else [str(i) for i in range(z.shape[0])]
        cl = list(col_labels) if col_labels is not None else [str(j) for j in range(z.shape[1])]
        custom = np.empty((*z.shape, 2), dtype=object)
        custom[:, :, 0] = np.array(rl, dtype=object)[:, None]
        custom[:, :, 1] = np.array(cl, dtype=object)[None, :]
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=np.arange(z.shape[1]),
                y=np.arange(z.shape[0]),
                customdata=custom,
                coloraxis="coloraxis2" if is_div else "coloraxis",
                hovertemplate="%{customdata[0]} → %{customdata[1]}<br>%{z:.4f}<extra>" + name + "</extra>",
            ),
            row=1,
            col=c,
        )
        step = max(1, int(np.ceil(len(cl) / max(6, 30 // len(names)))))  # labels one of n panels holds upright
        fig.update_xaxes(
            tickmode="array",
            tickvals=list(range(0, len(cl), step)),
            ticktext=cl[::step],
            title=x_title,
            row=1,
            col=c,
        )
        fig.update_yaxes(
            tickmode="array",
            tickvals=list(range(0, len(rl), step)),
            ticktext=rl[::step],
            autorange="reversed",
            title=y_title if c == 1 else None,
            showticklabels=c == 1,
            row=1,
            col=c,
        )
    fig.update_layout(
        coloraxis=dict(
            colorscale=style.WEIGHTS, cmin=0, cmax=zmax, colorbar=dict(x=bar_x.get("coloraxis"), len=0.9, thickness=12)
        ),
        coloraxis2=dict(
            colorscale=style.DIVERGING,
            cmin=-dmax,
            cmax=dmax,
            colorbar=dict(x=bar_x.get("coloraxis2"), len=0.9, thickness=12),
        ),
        height=height,
        margin=dict(l=60, r=40, t=40, b=60),
        font=style.FONT,
    )
    return fig


def layer_by_step(
    values: np.ndarray,
    steps: Sequence[int],
    *,
    title: str = "",
    z_title: str = "",
    x_title: str = "step",
    y_title: str = "block",
    height: int = 340,
) -> go.Figure:
    """A ``[L, S]`` heatmap (block × step) of a per-layer quantity, on a log₁₀ colour scale."""
    v = np.asarray(values, dtype=np.float64)
    z = np.log10(np.where(v > 0, v, np.nan))
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(steps),
            y=list(range(v.shape[0])),
            colorscale=style.SEQUENTIAL,
            customdata=v,
            colorbar=dict(title=f"log₁₀ {z_title}"),
            hovertemplate=f"{y_title} %{{y}}, {x_title} %{{x}}<br>{z_title} %{{customdata:.4g}}<extra></extra>",
        )
    )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, autorange="reversed")
    fig.update_layout(title=title, height=height, margin=dict(l=60, r=10, t=40 if title else 10, b=50), font=style.FONT)
    return fig
