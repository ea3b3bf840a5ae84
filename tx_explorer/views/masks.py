"""Masks page (lecture §3.4, §9.4): scores with −∞ where a mask hides a key, weights exactly 0 after the softmax."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from torch import Tensor

from tx_explorer import locales, masks
from tx_explorer.analysis import atlas
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, axes, model_facts, rounding, texts
from tx_explorer.viz import charts
from tx_explorer.viz.heatmap import heatmap, tick_cells

PAGE = "masks"


def kind_tab(label: str, lang: str = "en") -> str:
    """The mask-kind tab named ``label`` in either language, named in ``lang``: a tab's value is its label, and after
    a switch of the sidebar's language the old label would open the first tab instead; another label as it is."""
    for kind in mg.MASK_KINDS:
        if label in {locales.text(PAGE, f"kind_{kind}", other) for other in locales.LANGUAGES}:
            return texts(PAGE, lang)(f"kind_{kind}")
    return label


EXAMPLE = ["Attention", "is", "very"]
LATEX = (
    r"E_{ij}=\begin{cases}q_i\cdot k_j/\sqrt{D} & M_{ij}=1\\ -\infty & M_{ij}=0\end{cases}"
    r"\qquad A=\operatorname{softmax}(E),\quad e^{-\infty}=0"
)


@dataclass(frozen=True)
class Masked:
    scores: Panel  # E with −∞ where hidden
    weights: Panel  # A = softmax(E)
    ok: bool  # every hidden weight is exactly 0
    check: str  # that verdict in words
    empty_rows: str | None  # a warning when a query sees no key at all
    why: str  # what the mask is for


def masked(kind: str, mask: Tensor, tokens: list[str], seed: int = 0, *, lang: str = "en") -> Masked:
    """Random scores for ``tokens`` under ``mask`` (True = visible), before and after the softmax."""
    T, ax = texts(PAGE, lang), axes(lang)
    r = mg.masked_attention(mask, seed)
    scores, weights = r.steps.masked.numpy(), r.steps.weights.numpy()
    ok = r.max_hidden_weight == 0.0
    numbers = dict(hidden=r.hidden, total=r.mask.numel(), rowsum=rounding(r.max_row_error))  # "0", "1.2e−07"
    if not ok:
        check = T("check_failed", hidden=r.hidden, max=f"{r.max_hidden_weight:.3g}")
    else:  # a mask that hides nothing (one token, a grid all ticked) has no hidden weight to call 0
        check = T("check_ok" if r.hidden else "check_none", **numbers)
    return Masked(
        Panel(f"{kind}_scores", charts.signed_heatmap(scores, tokens, tokens, title=T("scores_title"), **ax), scores),
        Panel(
            f"{kind}_weights",
            heatmap(weights, tokens, tokens, title=T("weights_title"), **ax),
            {"weights": weights, "mask": r.mask.numpy()},
        ),
        ok,
        check,
        T("empty_rows", rows=", ".join(str(i + 1) for i in r.empty_rows)) if r.empty_rows else None,
        T(f"why_{kind}"),
    )


def sentence_mask(sentence: str, kind: str = "causal", seed: int = 0, *, lang: str = "en", **options) -> Masked:
    """:func:`masked` for a typed sentence and a mask kind of :data:`mask_gallery.MASK_KINDS` (``options``: its
    length, window, prefix, sizes, grid or causal, as :func:`mask_gallery.build_mask` takes them)."""
    toks = mg.tokens(sentence)
    return masked(kind, mg.build_mask(kind, len(toks), **options), toks, seed, lang=lang)


def example(seed: int = 0, *, lang: str = "en") -> tuple[Panel, dict[str, list[str]]]:
    """The lecture's three-word causal example: its weights, and what each position sees and predicts."""
    T = texts(PAGE, lang)
    r = mg.masked_attention(masks.causal(len(EXAMPLE)), seed)
    weights = r.steps.weights.numpy()
    fig = heatmap(weights, EXAMPLE, EXAMPLE, title=T("example_title"), **axes(lang))
    table = {
        T("col_position"): EXAMPLE,
        T("col_sees"): [" ".join(s) for s in mg.visible_keys(r.mask, EXAMPLE)],
        T("col_predicts"): [*EXAMPLE[1:], T("next_word")],
    }
    return Panel("example_weights", fig, weights), table


def first_windowed(names: Sequence[str], load: Callable[[str], TextModel]) -> str | None:
    """The first of ``names`` with a window on some layers only (local and global layers): the section's default."""
    return next((n for n in names if load(n).config.layer_types is not None), None)


def model_tokens(tm: TextModel, asked: int) -> int:
    """How many of the ``asked`` tokens ``tm`` reads: no more than its context."""
    return min(int(asked), tm.max_len)


def refusal(tm: TextModel, *, lang: str = "en") -> str | None:
    """The section's message for a model with no causal mask to check (an encoder), else None."""
    if tm.kind == "causal":
        return None
    return texts(PAGE, lang)("model_not_causal", named=model_facts.named(tm, lang))


def read_layers(tm: TextModel, n: int) -> mg.ModelMasks:
    """:func:`mask_gallery.model_masks` on the first ``n`` tokens of the bundled held-out text."""
    return mg.model_masks(tm, atlas.corpus_ids(tm, n))


TICKS = 6  # the most x labels a pooled map (about 280 px across in its column) writes upright
WINDOW_SHADE = "rgba(220, 220, 220, 0.6)"  # over Viridis' dark 0: the hidden keys greyed, the map still seen
WINDOW_EDGE = "rgb(255, 127, 14)"  # Plotly's orange: seen on the map and in the legend's white
# The legend in the map's top right corner: the future keys, which the causal mask hides on every layer, so it covers
# no weight, and the maps side by side keep the same plot height (a legend below would shorten this one's)
WINDOW_LEGEND = dict(x=0.98, xanchor="right", y=0.98, yanchor="top", yref="paper", bgcolor="rgba(255, 255, 255, 0.9)")


def mark_window(fig: go.Figure, n: int, window: int, pool: int, name: str) -> None:
    """Shade, on a map of ``n`` positions in blocks of ``pool``, the keys a window of ``window`` hides (j ≤ i − window,
    a triangle under the band the layer sees), edged with a dashed line, and name it in a legend in the
    top right corner (the shape's own entry)."""
    c = lambda p: p / pool - 0.5  # noqa: E731 (a position's place on the axes: block k spans k − ½ … k + ½)
    path = f"M {c(0)},{c(window)} L {c(0)},{c(n)} L {c(n - window)},{c(n)} Z"
    style = dict(fillcolor=WINDOW_SHADE, line=dict(color=WINDOW_EDGE, width=1.5, dash="dash"))
    fig.add_shape(type="path", path=path, xref="x", yref="y", layer="above", name=name, showlegend=True, **style)
    fig.update_traces(showlegend=False)  # the map itself is no entry: style.tidy then leaves this legend in place
    fig.update_layout(legend=WINDOW_LEGEND, showlegend=True)


@dataclass(frozen=True)
class ModelMasksView:
    ok: bool  # every hidden weight exactly 0, and no local layer reaching past its window
    check: str  # that verdict with its numbers
    short: str | None  # the text is too short to reach a window: said, with the window
    cut: str | None  # fewer tokens read than asked (the model's context is shorter): said, with both counts
    sinks: str | None  # a model with learned sinks: its rows' sums measured, and the sink's share, in words
    panels: list[Panel]  # the shown layers' weights (the largest over heads, pooled)
    table: list[dict[str, str]]  # one row per layer


def model_masks(tm: TextModel, r: mg.ModelMasks, asked: int | None = None, *, lang: str = "en") -> ModelMasksView:
    """:func:`mask_gallery.model_masks`' numbers for ``tm`` as the page shows them; ``asked``: the tokens the visitor
    asked for, said when the model read fewer (:func:`model_tokens`)."""
    T, ax = texts(PAGE, lang), axes(lang)
    worst = max(layer.max_hidden for layer in r.layers)
    windowed = [layer for layer in r.layers if layer.window is not None]
    beyond = [layer.layer for layer in windowed if layer.reach >= layer.window]
    ok = worst == 0.0 and not beyond
    numbers = dict(layers=len(r.layers), heads=r.heads, n=r.n, max=f"{worst:.3g}", model=tm.name)
    back = lambda k: T("model_back_one" if k == 1 else "model_back", n=f"{k:,}")  # noqa: E731 ("1 position back")
    if not ok:
        check = T("model_failed", **numbers, beyond=", ".join(map(str, beyond)) or "—")
    elif windowed and len(windowed) == len(r.layers):  # every layer windowed (Mistral): no global layer to name
        reach = max(layer.reach for layer in windowed)
        check = T("model_ok_all_local", **numbers, window=windowed[0].window, reach=back(reach))
    elif windowed:
        reach = max(layer.reach for layer in windowed)
        full = [layer for layer in r.layers if layer.window is None]
        check = T(
            "model_ok_window",
            **numbers,
            local=len(windowed),
            window=windowed[0].window,
            reach=back(reach),
            full=len(full),
            full_reach=back(max((layer.reach for layer in full), default=0)),
        )
    else:
        check = T("model_ok_causal", **numbers, reach=back(max(layer.reach for layer in r.layers)))
    short = None
    if windowed and r.n <= windowed[0].window:
        short = T("model_short", n=r.n, window=windowed[0].window)
    cut = None
    if asked is not None and asked > r.n:
        cut = T("model_cut", model=tm.name, context=f"{tm.max_len:,}", asked=f"{asked:,}", n=f"{r.n:,}")
    sinks = None
    if r.sinks:
        mean = sum(layer.row_mean for layer in r.layers) / len(r.layers)
        low = min(r.layers, key=lambda layer: layer.row_min)
        sinks = T(
            "model_sinks",
            model=tm.name,
            mean=f"{mean:.3f}",
            min=f"{low.row_min:.3f}",
            layer=low.layer,
            share=f"{1 - mean:.3f}",
            top=f"{1 - low.row_min:.3f}",
        )
    labels = [str(k * r.pool) for k in range(-(-r.n // r.pool))]
    keys = [*labels, T("model_sink_key")] if r.sinks else labels  # the sink's column is the last key
    kind = lambda layer: T("model_local" if layer.window is not None else "model_global")  # noqa: E731
    ticks = tick_cells(len(labels), r.pool, TICKS) + ([len(labels)] if r.sinks else [])  # the sink's column named
    panels = []
    for i, w in r.shown.items():
        title = T(
            "model_map_title_one" if r.pool == 1 else "model_map_title", layer=i, kind=kind(r.layers[i]), pool=r.pool
        )
        fig = heatmap(w, labels, keys, title=title, **ax, x_tick_cells=ticks)
        if (window := r.layers[i].window) is not None and r.n > window:  # a window that hides some key here
            mark_window(fig, r.n, window, r.pool, T("model_window_hidden", window=f"{window:,}"))
        panels.append(Panel(f"model_mask_layer_{i}", fig, w))
    table = [
        {
            T("col_layer"): str(layer.layer),
            T("col_kind"): kind(layer),
            T("col_window"): "—" if layer.window is None else f"{layer.window:,}",
            T("col_theta"): "—" if layer.theta is None else f"{layer.theta:,.0f}",
            T("col_reach"): f"{layer.reach:,}",
            T("col_hidden"): f"{layer.hidden:,}",
            T("col_max_hidden"): f"{layer.max_hidden:.3g}",
            **({T("col_row_sums"): f"{layer.row_mean:.3f} · {layer.row_min:.3f}"} if r.sinks else {}),
        }
        for layer in r.layers
    ]
    return ModelMasksView(ok, check, short, cut, sinks, panels, table)
