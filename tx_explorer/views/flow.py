"""Information flow page: the route graph to one token's prediction, the three views of an edge's
heads (attention weight, write norm, causal effect) and what a node reads and writes."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tx_explorer import models
from tx_explorer.analysis import flow
from tx_explorer.analysis import head_science as hs
from tx_explorer.families.text import TextModel
from tx_explorer.modules.cache import common_prefix
from tx_explorer.views import Panel, Result, listed, model_facts, sentences, signed, split_bytes_note, texts
from tx_explorer.viz import bars, charts, style
from tx_explorer.viz import flow as vf

PAGE = "flow"
LIMIT = 128  # tokens analysed: the decomposition holds L × H × T × D floats (SmolLM2 at 128 tokens: 85 MB)
CELL_CHARS = 16  # the direct-logit table's characters per token: its cells wrap, but a run of spaces would not
PREFERRED = "smollm2-135m-instruct"  # the page's first model when the registry has it


def default_model() -> str | None:
    """The preferred model if registered, else the registry's first causal text model (None without one)."""
    causal = models.available_models("text", kind="causal")
    return PREFERRED if PREFERRED in causal else next(iter(causal), None)


def frozen_norms(tm: TextModel, name: str, *, lang: str = "en") -> str:
    """How the page freezes ``tm``'s output norms (``name``: as the picker shows it); its formula and its parts name
    W_O's bias only where the model has one (Gemma 2/3 and OLMo 2 have none)."""
    return texts(PAGE, lang)(f"frozen_norms{_unbiased(tm)}", model=name)


def _unbiased(tm: TextModel) -> str:
    """The suffix of the locale keys that leave W_O's bias out, "" where the model has one."""
    return "" if tm.config.attention_bias[1] else "_unbiased"


def undecomposable(tm: TextModel, name: str, shipped: Sequence[str], load: Callable[[str], Any], *, lang="en") -> str:
    """Why ``tm`` (``name``) has no routes here, and which models do: those of ``shipped`` (the registry's models
    loaded with the server; ``load`` gives each) whose stream is a sum of writes, found, not listed by hand."""
    T = texts(PAGE, lang)
    routable = [n for n in shipped if flow.decomposable(hs.text_model(load(n)))]
    why = T(f"{flow.undecomposable_norm(tm)}_norm", model=name)
    return sentences([why, T("pick_decomposable", models=listed(routable, lang))], lang)


@dataclass(frozen=True)
class Analysis:
    """One text's decomposition and shares: computed once, read by every view of the page."""

    ids: list[int]
    tokens: list[str]
    dec: flow.Decomposition
    imp: flow.Importance
    cut: int | None  # the text's token count when it was cut to LIMIT, else None
    exactness: float  # max |embed + Σ writes − the model's residual| over layers, positions and dimensions
    relative: float  # the largest of these differences over the largest |residual entry| of its layer and position
    # Predictions and edges' and nodes' read-outs once computed: a click or the threshold reruns the page, and the
    # edge shown (a rerun of the model per head) is mostly one already computed. Small results, never figures.
    memo: dict[tuple, object] = field(default_factory=dict, compare=False, repr=False)

    def remembered(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per ``key`` for this text (sessions sharing the analysis share the results)."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


@dataclass(frozen=True)
class Route(Result):
    """The route graph's result and the edge to open first."""

    edge: tuple[int, int, int] | None = None  # (layer, query, key)


def analyse(tm: TextModel, text: str, earlier: Analysis | None = None) -> Analysis:
    """Decompose ``text`` (at most :data:`LIMIT` tokens) and score every update's parts; a decoder's positions that
    ``earlier`` (this model's analysis of another text) shares from the start are taken from it, not recomputed
    (a text edited at its end reruns only from the edit)."""
    enc = tm.encode(text, limit=LIMIT)
    ids = hs.encode(tm, text, LIMIT)
    shared = 0 if earlier is None else common_prefix(earlier.ids, ids)
    dec = flow.decompose(tm, ids, reuse=(earlier.dec, shared) if shared else None)
    rebuilt = dec.embed + (dec.heads.sum(1) + dec.attn_bias + dec.mlp).cumsum(0)  # (L, T, D)
    diff = (rebuilt - dec.residual[1:]).abs().amax(-1)  # (L, T): float32 rounding grows with the residual's size
    return Analysis(
        ids=ids,
        tokens=tm.labels(ids),
        dec=dec,
        imp=flow.importance(tm, dec, reuse=(earlier.imp, shared) if shared else None),
        cut=enc.num_tokens if enc.truncated else None,
        exactness=diff.max().item(),
        relative=(diff / dec.residual[1:].abs().amax(-1)).max().item(),
    )


def _predicted(tm: TextModel, an: Analysis, target: int) -> int:
    """The token a decoder predicts after position ``target`` (0 … T − 1): the graph's title and the edge's effect."""
    return an.remembered(("predicted", target), lambda: flow.predicted(tm, an.dec, target))


def _mark(T, marks: dict[int, str], layer: int) -> str:
    """The words after a global layer's number ("block 5 (global)", "第 5 块（全局）"), "" after any other: the
    hovers and titles are sentences, where style.marked's " · " join reads badly. Only what the block's attention
    does is marked (its heads, the node after it), not its MLP or the residual entering it, as the logit lens's rows
    on the head science page."""
    return T("layer_mark", word=marks[layer]) if layer in marks else ""


def _node_name(T, node: flow.Node, an: Analysis, marks: dict[int, str]) -> str:
    kind, layer, pos = node
    final = kind == "x" and layer == an.dec.num_layers
    mark = _mark(T, marks, layer) if kind == "m" else ""
    return T("node_final" if final else f"node_{kind}", layer=layer, mark=mark, pos=pos, token=an.tokens[pos])


def _count(T, noun: str, n: int) -> str:
    """``n`` and its noun, singular for one ("1 attention edge")."""
    return T(f"count_{noun}_one" if n == 1 else f"count_{noun}", n=n)


def route(tm: TextModel, an: Analysis, target: int = -1, threshold: float = flow.THRESHOLD, *, lang="en") -> Route:
    """The graph of parts whose share passes ``threshold`` on the way to ``target``'s final residual."""
    T = texts(PAGE, lang)
    g = flow.routes(an.imp, target, threshold)
    tokens = an.tokens
    marks = model_facts.layer_marks(tm.config.global_layers, lang)
    hover = [_node_name(T, n, an, marks) for n in g.nodes]
    edge_hover = [
        T(
            f"edge_{e.kind}",
            layer=e.target[1],
            mark=_mark(T, marks, e.target[1]) if e.kind == "attn" else "",
            j=e.source[2],
            i=e.target[2],
            share=f"{e.weight:.3f}",
            source=tokens[e.source[2]],
            token=tokens[e.target[2]],
        )
        for e in g.edges
    ]
    title = T("title_graph", pos=g.target, token=tokens[g.target], threshold=f"{threshold:.2f}")
    notes = [T("truncated", n=an.cut, limit=len(an.ids))] if an.cut else []  # LIMIT, or the context if shorter
    if split := split_bytes_note(tokens, lang):  # a Chinese text in SmolLM2: the axis is mostly \xNN bytes
        notes.append(split)
    if tm.kind == "causal":
        predicted = tm.labels([_predicted(tm, an, g.target)])[0]
        title = T(
            "title_graph_predicts",
            pos=g.target,
            token=tokens[g.target],
            predicted=predicted,
            threshold=f"{threshold:.2f}",
        )
    kinds = {k: sum(e.kind == k for e in g.edges) for k in ("attn", "residual", "mlp")}
    kinds["mlp"] //= 2  # an MLP node has an edge in and one out
    counted = {k: _count(T, k, n) for k, n in (("nodes", len(g.nodes)), *kinds.items())}
    notes += [
        T("graph_counts", **counted),
        T(
            f"exactness{_unbiased(tm)}",
            error=signed(f"{an.exactness:.1e}"),
            relative=signed(f"{an.relative:.1e}"),
            layers=an.dec.num_layers,
            tokens=an.dec.num_tokens,
        ),
    ]
    fig = vf.route_graph(
        g.nodes,
        [(e.source, e.target, e.kind, e.weight) for e in g.edges],
        tokens,
        g.num_layers,
        node_hover=hover,
        edge_hover=edge_hover,
        names={k: T(f"legend_{k}") for k in ("attn", "residual", "mlp")},
        title=html.escape(title, quote=False),
        x_title=T("axis_tokens"),
        y_title=T("axis_layers"),
        layer_label=T("axis_layer_tick"),
        final_label=T("axis_final_tick"),
        layer_marks=marks,  # as the layers × heads maps name them
    )
    data = {"attn_tokens": an.imp.attn_tokens, "mlp": an.imp.mlp, "attn_residual": an.imp.attn_residual}
    return Route((Panel("flow_graph", fig, data),), tuple(notes), edge=flow.heaviest_edge(g))


def edge_intro(tm: TextModel, *, lang: str = "en") -> str:
    """The edge section's intro: with norms frozen after the sub-layers (Gemma 3), the write norm it defines is of
    the write through that norm's scale, as the figure and the table measure it, not of ``a_ij v_j W_O^h`` alone
    (the scale ``w / rms(a_i)`` weighs the dimensions unequally, so it can reorder the heads)."""
    return texts(PAGE, lang)("edge_intro_frozen" if flow.frozen_norms(tm) else "edge_intro")


def edge(
    tm: TextModel, an: Analysis, layer: int, query: int, key: int, target: int = -1, *, lang: str = "en"
) -> Result:
    """One layer's heads on the edge key → query: attention weight beside each head's share of the update, the
    three views (weight, write norm, causal effect) as a scatter and a table, and their rank correlations."""
    T = texts(PAGE, lang)
    at = (layer, query, key, flow.position(target, an.dec.num_tokens))
    token = _predicted(tm, an, at[-1]) if tm.kind == "causal" else None
    e: flow.EdgeHeads = an.remembered(("edge", *at), lambda: flow.edge_heads(tm, an.dec, *at, token=token))
    heads = [f"H{h}" for h in range(len(e.weight))]
    groups = tm.attention_module(layer).groups
    where = dict(layer=layer, j=key, i=query, source=an.tokens[key], token=an.tokens[query])
    # the block's mark in the views' title, always two lines at half the page: the bars' beside it, often one line,
    # would wrap with it ("Block 5 (global): 0: <bos> → 11: ., per head")
    mark = _mark(T, model_facts.layer_marks(tm.config.global_layers, lang), layer)
    split = charts.bars(
        heads,
        {T("series_weight"): e.weight, T("series_share"): e.share},
        title=html.escape(T("title_edge", **where), quote=False),
        x_title=T("axis_head"),
        y_title=T("axis_value"),
        height=vf.EDGE_HEIGHT,  # beside the views: one height
    )
    scatter = vf.edge_views(
        e.weight,
        e.norm,
        e.effect,
        title=html.escape(T("title_views", **where, mark=mark), quote=False),
        x_title=T("axis_weight"),
        y_title=T("axis_norm_frozen" if flow.frozen_norms(tm) else "axis_norm"),
        colour_title=html.escape(e.metric, quote=False),
    )
    rho = {k: "—" if np.isnan(v) else signed(f"{v:+.2f}") for k, v in e.correlations.items()}
    notes = [
        T("correlations", heads=len(heads), wn=rho["weight~norm"], we=rho["weight~effect"], ne=rho["norm~effect"]),
        _verdict(T, e.weight, e.effect, e.metric),
    ]
    table = {
        T("col_head"): heads,
        T("col_kv"): [f"KV{g}" for g in groups],
        T("col_weight"): [round(float(v), 4) for v in e.weight],
        T("col_norm"): [round(float(v), 4) for v in e.norm],
        T("col_share"): [round(float(v), 4) for v in e.share],
        T("col_effect", metric=e.metric): [round(float(v), 4) for v in e.effect],
    }
    data = {"weight": e.weight, "norm": e.norm, "share": e.share, "effect": e.effect}
    return Result((Panel("flow_edge", split, data), Panel("flow_views", scatter, data)), tuple(notes), table)


def _leaders(values: np.ndarray) -> np.ndarray:
    """The heads whose |value| is the largest, within float32 rounding: at query 0 every head's weight is 1."""
    size = np.abs(values)
    return np.flatnonzero(np.isclose(size, size.max(), rtol=1e-5, atol=1e-9))


def _verdict(T, weight: np.ndarray, effect: np.ndarray, metric: str) -> str:
    """Whether the head with the largest weight also has the largest causal effect; no verdict where either
    ranking is tied at its top (argmax would name the first of the tied heads as if it led alone)."""
    heads, top_w, top_e = len(weight), _leaders(weight), _leaders(effect)
    w, e = int(top_w[0]), int(top_e[0])
    effect_e = signed(f"{effect[e]:+.3f}")
    said = dict(heads=heads, weight_head=w, weight=f"{weight[w]:.3f}", effect_head=e, effect=effect_e)
    if len(top_e) > 1:
        return T("tied_effect", tied=len(top_e), metric=metric, **said)
    if len(top_w) > 1:
        return T("tied_weight", tied=len(top_w), metric=metric, **said)
    return T("agree" if w == e else "disagree", metric=metric, **said)


def node(tm: TextModel, an: Analysis, kind: str, layer: int, pos: int, *, lang: str = "en") -> Result:
    """The logit lens at a node's residual and the tokens its block's heads and MLP push up and down."""
    T = texts(PAGE, lang)
    r: flow.NodeReadout = an.remembered(
        ("node", kind, layer, pos), lambda: flow.node_readout(tm, an.dec, (kind, layer, pos))
    )
    marks = model_facts.layer_marks(tm.config.global_layers, lang)
    # the lens's title unmarked: "（全局）" wrapped a third of Gemma 3's 中文 titles onto a second line; the table
    # below marks the block's heads, the graph's hover the node
    name = _node_name(T, (kind, layer, pos % an.dec.num_tokens), an, {})
    lens = bars.topk_bars(
        tm.labels(r.lens_ids.tolist()),
        r.lens_probs,
        title=html.escape(T("title_lens", node=name), quote=False),
        x_title=T("axis_probability"),
    )

    def fmt(ids, values) -> str:  # every token found, the strongest first, each cut to a few characters
        words = [t if len(t) <= CELL_CHARS else t[: CELL_CHARS - 1] + "…" for t in tm.labels(ids.tolist())]
        return ", ".join(f"{t} {signed(f'{v:+.2f}')}" for t, v in zip(words, values))  # a token may hold "-"

    table = None
    notes = [T("lens_note")]
    if r.parts:
        # a global layer's heads marked ("L5 H0 · global"), as the head science page names heads; its MLP not
        heads = {i: marks[r.layer] for i, p in enumerate(r.parts) if p != "MLP"} if r.layer in marks else {}
        table = {
            T("col_part"): style.marked([f"L{r.layer} {p}" for p in r.parts], heads),
            T("col_up"): [fmt(i, v) for i, v in zip(r.up_ids, r.up)],
            T("col_down"): [fmt(i, v) for i, v in zip(r.down_ids, r.down)],
        }
        notes.append(T("dla_note", layer=r.layer, pos=pos % an.dec.num_tokens))
        if (cap := tm.config.final_softcap) is not None:  # the intro's "the parts add up to the logits", qualified
            notes.append(T("dla_capped", model=tm.name, cap=f"{cap:g}"))
    else:
        notes.append(T("dla_embeddings"))
    return Result((Panel("flow_lens", lens, r.lens_probs),), tuple(notes), table)
