"""Figures for Mixture-of-Experts routing: per-token gates, coloured tokens, load, drops, entropy, co-occurrence,
cost and loss curves.

Every visible word comes from ``words`` (defaults: :data:`WORDS`, English), so a page passes its translations.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from tx_explorer.viz import style

EXPERT_COLOURS = qualitative.Dark24  # one fixed colour per expert index, on every figure
WORDS = {
    "expert": "expert",
    "token": "token",
    "layer": "layer",
    "layer_i": "layer {i}",  # one layer by its number (中文 puts the number inside: 第 {i} 层)
    "gate": "gate",
    "router_p": "router p",
    "first_choice": "first choice",
    "second_choice": "second choice",
    "count": "count",
    "load": "× mean",
    "capacity_factor": "capacity factor",
    "dropped": "dropped assignments (%)",
    "token_entropy": "per-token router entropy (mean)",
    "marginal_entropy": "entropy of the marginal expert distribution",
    "uniform_line": "ln E = {value} (uniform)",
    "nats": "nats",
    "experts_axis": "experts per block E",
    "total_params": "total parameters",
    "active_params": "active parameters per token",
    "flops": "forward FLOPs per token",
    "params_axis": "parameters",
    "train": "train",
    "validation": "validation",
    "loss_axis": "cross-entropy (nats per token)",
}


def _words(words: Mapping[str, str] | None) -> dict[str, str]:
    return {**WORDS, **(words or {})}


def _layout(fig: go.Figure, title: str, height: int, left: int = 70, **extra) -> go.Figure:
    """Common layout; the margins leave room for tick labels and axis titles (Plotly does not widen them here)."""
    margin = dict(l=left, r=10, t=60 if title else 10, b=50)  # b: x tick labels and title
    fig.update_layout(title=title, height=height, margin=margin, font=style.FONT, **extra)
    return fig


def _escape(tokens: Sequence[str]) -> list[str]:
    """Plotly renders a few HTML tags in text; escaped, a typed "<b>" shows as itself (entities are decoded)."""
    return [html.escape(str(t)) for t in tokens]


def _tick_labels(tokens: Sequence[str], max_ticks: int = 64) -> dict:
    step = max(1, int(np.ceil(len(tokens) / max_ticks)))
    idx = list(range(0, len(tokens), step))
    return dict(tickmode="array", tickvals=idx, ticktext=[str(tokens[i]) for i in idx])


def gate_heatmaps(
    gates: np.ndarray,
    probs: np.ndarray,
    tokens: Sequence[str],
    *,
    title: str = "",
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """Token × expert heatmaps, one panel per layer: colour = gate weight (0 for experts not chosen).

    Args:
        gates: ``[L, T, E]`` gate of each token for each expert (zero where not among its top k).
        probs: ``[L, T, E]`` router probabilities (shown on hover).
        tokens: T display labels.
    """
    w = _words(words)
    gates, probs = np.asarray(gates, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    if gates.ndim != 3 or gates.shape != probs.shape or gates.shape[1] != len(tokens):
        raise ValueError(f"gates and probs must both be [L, T={len(tokens)}, E], got {gates.shape} and {probs.shape}")
    n_layers, t, e = gates.shape
    fig = make_subplots(
        rows=1,
        cols=n_layers,
        shared_yaxes=True,
        horizontal_spacing=0.02,
        subplot_titles=[w["layer_i"].format(i=i) for i in range(n_layers)],
    )
    labels = _escape(tokens)
    tok = np.array(labels, dtype=object)[:, None].repeat(e, axis=1)
    for layer in range(n_layers):
        fig.add_trace(
            go.Heatmap(
                z=gates[layer],
                x=np.arange(e),
                y=np.arange(t),
                colorscale=style.WEIGHTS,
                zmin=0.0,
                zmax=1.0,
                customdata=np.stack([tok, probs[layer]], axis=-1),
                showscale=layer == n_layers - 1,
                hovertemplate=f"{w['token']} %{{y}}: %{{customdata[0]}}<br>{w['expert']} %{{x}}<br>"
                f"{w['gate']} %{{z:.3f}}<br>"
                f"{w['router_p']} %{{customdata[1]:.3f}}<extra>{w['layer_i'].format(i=layer)}</extra>",
            ),
            row=1,
            col=layer + 1,
        )
        fig.update_xaxes(
            title=w["expert"], tickmode="linear", dtick=1 if e <= 16 else max(1, e // 8), row=1, col=layer + 1
        )
    fig.update_yaxes(autorange="reversed", **_tick_labels(labels), row=1, col=1)
    return _layout(fig, title, max(280, min(900, 20 * t + 160)), left=100)


def coloured_tokens(
    tokens: Sequence[str],
    first: np.ndarray,
    num_experts: int,
    *,
    title: str = "",
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """The text once per layer, each token's cell coloured by its first-choice expert ``first [L, T]``."""
    w = _words(words)
    first = np.asarray(first)
    n_layers, t = first.shape
    if t != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but routing for {t}")
    colours = [EXPERT_COLOURS[i % len(EXPERT_COLOURS)] for i in range(num_experts)]
    # A discrete colour scale: expert i fills the band [i, i+1) / E (z = expert + 0.5 lands in its middle).
    scale = [pair for i, c in enumerate(colours) for pair in ([i / num_experts, c], [(i + 1) / num_experts, c])]
    text = np.array(_escape(tokens), dtype=object)[None, :].repeat(n_layers, axis=0)
    fig = go.Figure(
        go.Heatmap(
            z=first + 0.5,
            x=np.arange(t),
            y=np.arange(n_layers),
            zmin=0,
            zmax=num_experts,
            colorscale=scale,
            text=text,
            texttemplate="%{text}",
            textfont=dict(color="white", size=11),
            customdata=first,
            xgap=2,
            ygap=4,
            hovertemplate=w["layer_i"].format(i="%{y}") + f"<br>{w['token']} %{{x}}: %{{text}}<br>{w['first_choice']}: "
            f"{w['expert']} %{{customdata}}<extra></extra>",
            colorbar=dict(
                title=w["expert"],
                tickmode="array",
                tickvals=np.arange(num_experts) + 0.5,
                ticktext=[str(i) for i in range(num_experts)],
            ),
        )
    )
    fig.update_xaxes(title=w["token"], showticklabels=False)
    fig.update_yaxes(title=w["layer"], autorange="reversed", tickmode="linear", dtick=1)
    return _layout(fig, title, 70 * n_layers + 130)


def load_heatmap(load: np.ndarray, *, title: str = "", words: Mapping[str, str] | None = None) -> go.Figure:
    """Layer × expert load relative to the mean ``[L, E]`` (1 = perfectly balanced)."""
    w = _words(words)
    load = np.asarray(load, dtype=np.float64)
    fig = go.Figure(
        go.Heatmap(
            z=load,
            x=np.arange(load.shape[1]),
            y=np.arange(load.shape[0]),
            colorscale=style.DIVERGING,
            zmid=1.0,
            zmin=0.0,
            zmax=max(2.0, float(load.max())),
            text=np.round(load, 2),
            texttemplate="%{text}",
            hovertemplate=w["layer_i"].format(i="%{y}")
            + f", {w['expert']} %{{x}}<br>%{{z:.2f}} {w['load']}<extra></extra>",
            colorbar=dict(title=w["load"]),
        )
    )
    fig.update_xaxes(title=w["expert"], tickmode="linear", dtick=1)
    fig.update_yaxes(title=w["layer"], autorange="reversed", tickmode="linear", dtick=1)
    return _layout(fig, title, 60 * load.shape[0] + 150)


def drop_curves(
    factors: Sequence[float],
    rates: np.ndarray,
    *,
    current: float | None = None,
    title: str = "",
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """Drop rate against capacity factor, one line per layer (``rates [L, F]``), a marker at ``current``."""
    w = _words(words)
    fig = go.Figure()
    for layer, row in enumerate(np.asarray(rates, dtype=np.float64)):
        fig.add_trace(
            go.Scatter(
                x=list(factors),
                y=100 * row,
                mode="lines",
                name=w["layer_i"].format(i=layer),
                line=dict(color=EXPERT_COLOURS[layer % len(EXPERT_COLOURS)]),
            )
        )
    if current is not None:
        fig.add_vline(x=current, line_dash="dash", line_color="grey", annotation_text=f"{current:g}")
    fig.update_xaxes(title=w["capacity_factor"])
    fig.update_yaxes(title=w["dropped"], rangemode="tozero")
    return _layout(fig, title, 380)


def entropy_bars(
    token_entropy: Sequence[float],
    marginal_entropy: Sequence[float],
    ln_e: float,
    *,
    title: str = "",
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """Per layer: mean per-token router entropy and the marginal expert distribution's entropy, against ln E."""
    w = _words(words)
    layers = [w["layer_i"].format(i=i) for i in range(len(token_entropy))]
    fig = go.Figure(
        [
            go.Bar(x=layers, y=list(token_entropy), name=w["token_entropy"]),
            go.Bar(x=layers, y=list(marginal_entropy), name=w["marginal_entropy"]),
        ]
    )
    fig.add_hline(
        y=ln_e, line_dash="dash", line_color="grey", annotation_text=w["uniform_line"].format(value=f"{ln_e:.2f}")
    )
    fig.update_yaxes(title=w["nats"], rangemode="tozero")
    return _layout(fig, title, 380, barmode="group", legend=dict(orientation="h", y=-0.2))


def cooccurrence_heatmap(counts: np.ndarray, *, title: str = "", words: Mapping[str, str] | None = None) -> go.Figure:
    """``[E, E]`` counts of (first choice = row, second choice = column) pairs."""
    w = _words(words)
    counts = np.asarray(counts)
    e = counts.shape[0]
    fig = go.Figure(
        go.Heatmap(
            z=counts,
            x=np.arange(e),
            y=np.arange(e),
            colorscale=style.SEQUENTIAL,
            zmin=0,
            text=counts,
            texttemplate="%{text}" if e <= 16 else None,
            colorbar=dict(title=w["count"]),
            hovertemplate=f"{w['first_choice']} %{{y}}, {w['second_choice']} %{{x}}<br>"
            f"{w['count']} %{{z}}<extra></extra>",
        )
    )
    fig.update_xaxes(title=w["second_choice"], tickmode="linear", dtick=1)
    # the title kept clear of the tick labels, in a left margin wide enough for both
    first = dict(text=w["first_choice"], standoff=18)
    fig.update_yaxes(title=first, autorange="reversed", tickmode="linear", dtick=1)
    return _layout(fig, title, 30 * e + 200, left=90)


def cost_chart(
    experts: Sequence[int],
    total: Sequence[float],
    active: Sequence[float],
    flops: Sequence[float],
    *,
    chosen: int | None = None,
    title: str = "",
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """Total vs active parameters (left axis) and forward FLOPs per token (right axis) against E, for fixed k."""
    w = _words(words)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(x=list(experts), y=list(total), name=w["total_params"], mode="lines+markers"), secondary_y=False
    )
    fig.add_trace(
        go.Scatter(x=list(experts), y=list(active), name=w["active_params"], mode="lines+markers"), secondary_y=False
    )
    fig.add_trace(
        go.Scatter(x=list(experts), y=list(flops), name=w["flops"], mode="lines", line=dict(dash="dot")),
        secondary_y=True,
    )
    if chosen is not None:
        fig.add_vline(x=chosen, line_dash="dash", line_color="grey")
    fig.update_xaxes(title=w["experts_axis"])
    fig.update_yaxes(title=w["params_axis"], rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title=w["flops"], rangemode="tozero", secondary_y=True)
    fig = _layout(fig, title, 400, legend=dict(orientation="h", y=-0.25))
    fig.update_layout(margin_r=80)  # the FLOPs axis is on the right
    return fig


def loss_curves(
    curves: Mapping[str, Mapping[str, Sequence[float]]],
    x: str = "step",
    *,
    labels: Mapping[str, str] | None = None,
    x_title: str = "",
    title: str = "",
    words: Mapping[str, str] | None = None,
) -> go.Figure:
    """Training (thin) and validation (thick, markers) loss of each run against ``x`` ("step", "flops", "seconds"…).

    ``curves[name]`` holds the columns ``x``, ``step``, ``train_loss``, ``val_step`` and ``val_loss``; validation
    is plotted at the ``x`` value of its step.
    """
    w = _words(words)
    fig = go.Figure()
    for i, (name, c) in enumerate(curves.items()):
        colour = EXPERT_COLOURS[i % len(EXPERT_COLOURS)]
        label = labels.get(name, name) if labels else name
        xs = np.asarray(c[x], dtype=np.float64)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=c["train_loss"],
                name=f"{label} · {w['train']}",
                mode="lines",
                line=dict(color=colour, width=1),
                opacity=0.45,
            )
        )
        at = {s: xs[j] for j, s in enumerate(c["step"])}
        fig.add_trace(
            go.Scatter(
                x=[at[s] for s in c["val_step"]],
                y=c["val_loss"],
                name=f"{label} · {w['validation']}",
                mode="lines+markers",
                line=dict(color=colour, width=3),
            )
        )
    fig.update_xaxes(title=x_title or x)
    fig.update_yaxes(title=w["loss_axis"])
    return _layout(fig, title, 420, legend=dict(orientation="h", y=-0.25))
