"""Every page's figures from Python, without Streamlit: for Jupyter notebooks and scripts.

    from tx_explorer import explore
    figs = explore.heads("minilm-l6", "The cat sat on the mat.")
    figs["mh_grid"].show()            # a Plotly figure; every key is the page's download name
    figs.save("heads.html")           # all of them in one self-contained HTML file (works offline)
    explore.operator(lang="zh")       # the same words as the app's 中文 pages

Each function runs what the page's sections run (:mod:`tx_explorer.views`), with the page's defaults, and returns
:class:`Figures`: a dict of named Plotly figures. A section that declares its inputs (:mod:`tx_explorer.views.inputs`)
is drawn by its page's function (:data:`PAGE_FUNCTIONS`) with no edit here; its inputs go by its prefix,
``norms(identity={"n": 8})``.
Models are given by registry name (``models.available_models()``) or as a loaded object, and a name is loaded once
per process.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch

from tx_explorer import locales, models
from tx_explorer.analysis.head_science import example_pairs, text_model
from tx_explorer.views import Panel
from tx_explorer.views import atlas as v_atlas
from tx_explorer.views import block_roles as v_roles
from tx_explorer.views import circuit as v_circuit
from tx_explorer.views import cost_of_attention as v_cost
from tx_explorer.views import flash_io as v_io
from tx_explorer.views import flow as v_flow
from tx_explorer.views import head_science as v_hs
from tx_explorer.views import kv_cache as v_kv
from tx_explorer.views import language_model as v_lm
from tx_explorer.views import masks as v_masks
from tx_explorer.views import model_sizes as v_sizes
from tx_explorer.views import moe as v_moe
from tx_explorer.views import multihead as v_heads
from tx_explorer.views import norms as v_norms
from tx_explorer.views import operator as v_op
from tx_explorer.views import position_lab as v_pos
from tx_explorer.views import self_attention as v_self
from tx_explorer.views import seq2seq as v_s2s
from tx_explorer.views import vision_transformer as v_vit
from tx_explorer.views.inputs import declared, panels
from tx_explorer.viz import style

__all__ = [
    "Figures",
    "atlas",
    "attribution",
    "block_roles",
    "circuit",
    "cost",
    "flash_io",
    "flow",
    "head_importance",
    "head_taxonomy",
    "heads",
    "inspector",
    "kv_cache",
    "logit_lens",
    "masks",
    "moe",
    "next_token",
    "norms",
    "operator",
    "patching",
    "position_lab",
    "positions",
    "self_attention",
    "seq2seq",
    "sizes",
    "vit",
]


# The function that draws each page of the app (pages/<page>.py) where its name is not the page's; it draws every
# section declared for that page. The home page has none.
PAGE_FUNCTIONS = {
    "multihead": "heads",
    "language_model": "next_token",
    "vision_transformer": "vit",
    "head_science": "head_importance",
    "cost_of_attention": "cost",
    "model_sizes": "sizes",
}


class Figures(dict[str, go.Figure]):
    """Named Plotly figures (the page's keys: ``"mh_grid"``, ``"scores"``, …) with a way to save them all."""

    def save(self, path: str | Path, *, title: str = "Transformer Explorer") -> Path:
        """Write every figure into one HTML file (Plotly's JavaScript embedded once: it opens offline)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n".join(
            fig.to_html(full_html=False, include_plotlyjs=i == 0, default_width="100%")
            for i, fig in enumerate(self.values())
        )
        page = f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
        path.write_text(f"{page}<body>\n{body}\n</body></html>\n", encoding="utf-8")
        return path


def _figures(*panels: Panel | None) -> Figures:
    """The panels' figures laid out as the pages show them (one legend placement, titles wrapped)."""
    return Figures({p.key: style.tidy(p.figure) for p in panels if p is not None})


_load = functools.cache(models.load_model)  # loaders return models in eval mode


def _model(model: str | Any) -> Any:
    """A registry name, loaded once per process, or an already loaded model as is."""
    return _load(model) if isinstance(model, str) else model


def _default(page: str, key: str, lang: str) -> str:
    return locales.text(page, key, lang)


def _sections(
    page: str,
    lang: str,
    inputs: Mapping[str, Mapping[str, Any]],
    given: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The result of every section declared for ``page`` (:mod:`tx_explorer.views.inputs`), by prefix in declaration
    order, on their defaults with ``inputs[prefix]`` overriding some and ``given[prefix]`` handed to the compute as
    the page hands it (a model, another section's values): a section declared later is drawn here with no edit."""
    sections = [s for s in declared() if s.page == page]
    unknown = set(inputs) - {s.prefix for s in sections}
    if unknown:
        raise TypeError(f"{page}: no declared section {sorted(unknown)}; there are {[s.prefix for s in sections]}")
    given = given or {}
    return {s.prefix: s(lang=lang, given=given.get(s.prefix), **inputs.get(s.prefix, {})) for s in sections}


def _declared(
    page: str,
    lang: str,
    inputs: Mapping[str, Mapping[str, Any]],
    given: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Panel]:
    """The panels of :func:`_sections`, in order."""
    return _panels(_sections(page, lang, inputs, given))


def _panels(results: Mapping[str, Any]) -> list[Panel]:
    """Every panel of some sections' results, in order."""
    return [p for result in results.values() for p in panels(result)]


def _given(**values: Any) -> dict[str, Any]:
    """The inputs a caller set (None stands for the section's declared default)."""
    return {k: v for k, v in values.items() if v is not None}


# ---- the foundations: operator, self-attention and positions, masks --------------------------------------------


def operator(
    nq: int = 4,
    nk: int = 6,
    d: int = 8,
    dv: int = 4,
    *,
    seed: int = 0,
    scaled: bool = True,
    replace: str = "V",
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """Random Q, K, V; E = QKᵀ/√D, A = softmax(E), Y = AV; A and Y after drawing a new V (or K); the √D curves
    (``sqrt={"n_keys": 32}``); cross-attention (``cross``: its inputs ``nq``, ``nx``, ``dim``, ``heads``, ``seed``)."""
    q, k, v = v_op.random_qkv(nq, nk, d, dv, seed)
    steps = v_op.steps(q, k, v, scaled, lang=lang)
    r = v_op.replace(q, k, v, replace, seed=seed + 1, scaled=scaled, lang=lang)
    return _figures(
        *v_op.inputs(q, k, v, lang=lang),
        steps.scores,
        steps.weights,
        steps.out,
        r.weights,
        r.out,
        *_declared("operator", lang, sections),
    )


def self_attention(*, lang: str = "en", **sections: Mapping[str, Any]) -> Figures:
    """One attention layer on tokens and on the same tokens shuffled, equal up to the order without positions
    (``layer``: ``n``, ``dim``, ``heads``, ``seed``, ``kind``), and how much each word's output changes between two
    word orders per kind of position (``sentence``: ``a``, ``b``; through the layer's width, heads and seed, as on the
    page), e.g. ``self_attention(layer={"kind": "sinusoidal"})``."""
    layer = v_self.LAYER.defaults() | dict(sections.get(v_self.LAYER.prefix, {}))
    given = {v_self.ORDER.prefix: v_self.handed_on(layer)}  # as the page hands its layer on to the word order
    return _figures(*_declared("self_attention", lang, sections, given))


def positions(kind: str = "sinusoidal", n: int = 64, dim: int = 64, *, seed: int = 0, lang: str = "en") -> Figures:
    """A position table ("sinusoidal" or "learned" at initialisation) and the similarity of its rows."""
    table, similarity, _ = v_self.encodings(kind, n, dim, seed, lang=lang)
    return _figures(table, similarity)


def masks(sentence: str | None = None, kind: str = "causal", *, seed: int = 0, lang: str = "en", **options) -> Figures:
    """Scores with −∞ where the mask hides a key and the weights after the softmax, for one kind of mask
    (causal, padding, sliding_window, prefix_lm, block_diagonal, custom; ``options`` as the page's inputs)."""
    sentence = _default("masks", "sentence_default", lang) if sentence is None else sentence
    m = v_masks.sentence_mask(sentence, kind, seed, lang=lang, **options)
    return _figures(m.scores, m.weights, *_declared("masks", lang, {}))


# ---- real models: heads, language model, MoE, seq2seq, ViT ---------------------------------------------------


def heads(
    model: str | Any = "tiny-gpt",
    text: str | None = None,
    *,
    layer: int | None = None,
    head: int = 0,
    lens: str = "raw",
    hide_special: bool = False,
    metric: str = "entropy",
    pattern: str = "induction",
    repeat: bool = False,
    skip_first: bool = False,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """Every layer × head of a text model on ``text``; one head (default: last layer) through a lens ("raw",
    "norm", "rollout"), as a map and as lines; one head metric for every head; every head ranked by a ``pattern``
    (:data:`tx_explorer.analysis.heads.PATTERNS`) with the best heads' maps (``repeat``: on the text written twice,
    scored after its first copy; ``skip_first``: the first token left out as a sink); the heads' similarity."""
    tm = _model(model)
    text = _default("multihead", "example_prose_text", lang) if text is None else text
    used = v_heads.repeated(text) if repeat else text
    data = v_heads.analyse(tm, used)
    s = v_heads.shown_for(tm, data, hide_special)
    layer = data.maps.shape[0] - 1 if layer is None else layer
    both = v_heads.lens_maps(tm, used, data) if lens != "raw" else None
    groups, queries = v_heads.kv_groups(tm), v_heads.repeat_queries(tm, text, s) if repeat else None
    return _figures(
        v_heads.grid(s, groups, lang=lang),
        v_heads.detail(s, layer, head, lens, both, lang=lang),
        v_heads.lines(s, layer, head, lens, both, lang=lang),
        v_heads.metric(
            v_heads.head_metrics(data.maps, data.ids), metric, groups, global_layers=s.global_layers, lang=lang
        ),
        *v_heads.search_pattern(s, pattern, skip_first=skip_first, queries=queries, groups=groups, lang=lang).panels,
        v_heads.similarity(v_heads.head_similarity(data.maps), s, lang=lang),
        *_declared("multihead", lang, sections),
    )


def inspector(
    model: str | Any = "tiny-gpt",
    text: str | None = None,
    *,
    layer: int = 0,
    head: int = 0,
    query: int | None = None,
    lang: str = "en",
) -> Figures:
    """One query of one head opened: scores and weights over the keys, q and y, the keys, values and α·v."""
    tm = _model(model)
    text = _default("multihead", "example_prose_text", lang) if text is None else text
    tokens = v_heads.analyse(tm, text).tokens
    qk = v_heads.inspector(tm, text, tokens, layer, head, len(tokens) - 1 if query is None else query, lang=lang)
    return _figures(qk.scores, qk.weights, qk.query, qk.keys, qk.values, qk.weighted)


def next_token(
    model: str | Any = "tiny-gpt",
    text: str | None = None,
    *,
    position: int | None = None,
    layer: int = 0,
    head: int = 0,
    new: int = 24,
    method: str = "greedy",
    seed: int = 0,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """A causal language model on ``text``: embeddings, the causal mask beside one head, the next-token candidates
    at ``position`` (default: the last), per-token loss; then ``new`` generated tokens and where they looked."""
    tm = _model(model)
    text = _default("language_model", "default_text", lang) if text is None else text
    r = v_lm.read(tm, text)
    causal = v_lm.causal(r, layer, head, lang=lang)
    loss = v_lm.losses(r, lang=lang)
    g = v_lm.generate(tm, text, new, method, seed=seed)
    return _figures(
        v_lm.embeddings(r, tm.config.dim, lang=lang),
        causal.mask,
        causal.weights,
        v_lm.next_token(r, position, lang=lang).candidates,
        loss[1] if loss else None,
        *v_lm.generation(g, 1, layer, None, lang=lang),
        *_declared("language_model", lang, sections),
    )


def moe(
    text: str | None = None,
    *,
    factor: float | None = None,
    layer: int = 0,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """The bundled MoE model's declared sections: cost against E (``moe_cost``: ``experts``, ``top_k``), dense vs MoE
    training (``moe_loss``: ``axis``), each typed token's experts and gates (``text``, or ``moe={"sentence": …}``),
    held-out load, drops against the capacity factor (``factor``) and routing entropy; then one layer's expert
    co-occurrence, e.g. ``moe(moe_cost={"experts": 32})``."""
    bundle = v_moe.shipped()  # the declared sections' model, loaded once per process
    inputs = {prefix: dict(values) for prefix, values in sections.items()}
    inputs.setdefault(v_moe.TYPED.prefix, {}).update(_given(sentence=text))
    inputs.setdefault(v_moe.HELDOUT.prefix, {}).update(_given(factor=factor))
    routed = v_moe.heldout_routing(bundle)  # routed once, as the page does, for the held-out section and the layer
    return _figures(
        *_declared("moe", lang, inputs, given={v_moe.HELDOUT.prefix: {"bundle": bundle, "routed": routed}}),
        v_moe.layer(bundle, routed[0][layer], lang=lang)[0],
    )


def seq2seq(
    text: str | None = None,
    *,
    beam: int = 1,
    layer: int | None = None,
    head: int | None = None,
    step: int = 0,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """The three bundled translators on an English sentence: Bahdanau's alignment beside the Transformer's
    cross-attention (gold drawn when the output is right), every cross-attention head, one decoder step, and the
    shipped quality-by-length curves."""
    translators = {models.REGISTRY[n].kind: _model(n) for n in models.available_models("translation")}
    text = v_s2s.LECTURE_EXAMPLE[0] if text is None else text
    check = translators["attention"].check(text)
    if not check.ok:
        raise ValueError(v_s2s.input_problem(check, lang=lang))
    out = v_s2s.translate(translators, text, beam)
    layer = translators["transformer"].align_layer or 0 if layer is None else layer
    al = v_s2s.alignments(out, v_s2s.gold(check), layer, head, lang=lang)
    shipped = {k: t.results for k, t in translators.items() if t.results}
    attention = out["attention"]
    return _figures(
        al.bahdanau,
        al.transformer,
        al.mosaic,
        v_s2s.decoder_step(attention, step, lang=lang) if attention.tokens else None,
        *(v_s2s.by_length(shipped, lang=lang) if shipped else ()),
        *_declared("seq2seq", lang, sections),
    )


def vit(
    model: str | Any = "vit-shapes",
    image: str | np.ndarray | None = None,
    *,
    label: int = 0,
    seed: int = 7,
    query: str = "cls",
    layer: int | None = None,
    row: int | None = None,
    col: int | None = None,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """An image classifier on a generated shape (``label``, ``seed``) or your ``image`` (a path or an
    ``[H, W, 3]`` uint8 array): one patch projected, per-head attention of a query ("cls", "mean" or "patch" at
    ``row``, ``col``), the layer × head mosaic, the prediction, the rollout, position similarity, shuffled patches."""
    clf = _model(model)
    g = clf.model.cfg.grid
    row, col = g // 2 if row is None else row, g // 2 if col is None else col
    picture, mask = v_vit.sample(clf, label, seed) if image is None else (image, None)
    picture, pixels = v_vit.model_input(clf, picture)
    result = clf.classify(pixels)
    model_side = v_vit.patches(clf, picture, row, col, model if isinstance(model, str) else "", lang=lang)[1]
    att = v_vit.attention(clf, result, pixels, query, row * g + col, layer, mask, lang=lang)
    own, sincos = v_vit.positions(clf, lang=lang)
    return _figures(
        model_side.grid,
        model_side.values,
        model_side.projection,
        att.overlays,
        att.mosaic,
        att.prediction,
        att.rollout,
        own,
        sincos,
        v_vit.shuffle(clf, pixels, result, lang=lang).chart,
        *_declared("vision_transformer", lang, sections),
    )


# ---- blocks and cost ----------------------------------------------------------------------------------------


def norms(*, lang: str = "en", **sections: Mapping[str, Any]) -> Figures:
    """LayerNorm and RMSNorm of a vector step by step (``norm``: its inputs ``x``, ``gamma``, ``beta``, ``eps``), the
    zero-branch identity argument (``identity``: ``norm``, ``n``, ``scale``, ``offset``), MLP vs SwiGLU parameters
    (``mlp``: ``dim``, ``ratio``, ``bias``), e.g. ``norms(identity={"norm": "rmsnorm"})``; and, when the variants
    bundle is present, the shipped runs' validation curves and depth profiles."""
    shipped: list[Panel | None] = []
    try:
        res = v_norms.load_results()
    except v_norms.BundleError:
        res = None
    if res is not None:
        picks = v_norms.defaults(res)
        shipped = [v_norms.runs(res, picks["runs"], lang=lang).curves, v_norms.depth(res, picks["depth"], lang=lang)[0]]
    return _figures(*_declared("norms", lang, sections), *shipped)


def sizes(*, share: bool = True, lang: str = "en", **own_model: Any) -> Figures:
    """Parameters of the lecture's models (lecture, published, counted), where each preset's parameters sit, and
    a causal model of your own counted by part: the page's inputs (``layers``, ``dim``, ``heads``, ``vocab``,
    ``context``, ``mlp``, ``pos``, ``tie``; default GPT-2 small's shape), e.g. ``sizes(layers=24, dim=1024)``."""
    return _figures(
        v_sizes.lecture_table(lang=lang)[1],
        v_sizes.breakdown(share, lang=lang),
        *_declared("model_sizes", lang, {v_sizes.OWN_MODEL.prefix: own_model}),
    )


def cost(
    n: int | None = None,
    d: int | None = None,
    h: int | None = None,
    *,
    heads: int = 8,
    head_dim: int = 64,
    block: int = 128,
    tile_n: int | None = None,
    tile_block: int | None = None,
    causal: bool | None = None,
    lang: str = "en",
) -> Figures:
    """FLOPs of the four matmuls against N (``n``, ``d``, ``h``), the tiled kernel tile by tile (``tile_n``,
    ``tile_block``, ``causal``), each unset input at the page's default; analytic peak memory of naive / tiled /
    PyTorch attention against N (nothing is measured: see :func:`tx_explorer.analysis.cost.measure`)."""
    inputs = {
        v_cost.MATMULS.prefix: _given(n=n, d=d, h=h),
        v_cost.TILES.prefix: _given(n=tile_n, b=tile_block, causal=causal),
    }
    return _figures(
        *_declared("cost_of_attention", lang, inputs),
        v_cost.curves(heads, head_dim, block, "float32", torch.device("cpu"), lang=lang).memory,
    )


# ---- head science: what a head does, measured ----------------------------------------------------------------------


def _text_model(model: str | Any) -> Any:
    return text_model(_model(model))  # tiny-moe loads as a bundle holding its TextModel


def head_importance(
    model: str | Any = "tiny-gpt",
    text: str | None = None,
    *,
    heldout: bool = False,
    mode: str = "zero",
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """Δ loss and Δ target logit (decoder) or 1 − cos of the sentence embedding (encoder) per ablated head, on
    ``text`` or held-out corpus windows; ``mode="mean"`` uses per-head means over those windows."""
    text = text or _default("head_science", "text_default", lang)
    importance = v_hs.importance(_text_model(model), text, heldout=heldout, mode=mode, lang=lang)
    return _figures(*importance.panels, *_declared("head_science", lang, sections))


def patching(
    model: str | Any = "tiny-gpt",
    clean: str | None = None,
    corrupt: str | None = None,
    answers: tuple[str, str] | None = None,
    *,
    lang: str = "en",
) -> Figures:
    """Logit difference recovered by patching the residual stream and each head (the model's first shipped pair
    by default; prompts of unequal token length are refused)."""
    if clean is None or corrupt is None:
        pair = example_pairs(model if isinstance(model, str) else "*")[0]
        clean, corrupt, answers = pair.clean, pair.corrupt, pair.answers
    return _figures(*v_hs.patching(_text_model(model), clean, corrupt, answers, lang=lang).panels)


def logit_lens(
    model: str | Any = "tiny-gpt", text: str | None = None, quantity: str = "kl", *, lang: str = "en"
) -> Figures:
    """The read-out after every attention and MLP sub-layer (KL to the final distribution, entropy, top-1)."""
    text = text or _default("head_science", "text_default", lang)
    return _figures(*v_hs.lens(_text_model(model), text, quantity, lang=lang).panels)


def head_taxonomy(
    model: str | Any = "tiny-gpt", text: str | None = None, score: str = "induction", *, lang: str = "en"
) -> Figures:
    """Per-head scores (induction, previous/duplicate token, distance, sink share, entropy) and the 2-D map."""
    text = text or _default("head_science", "text_default", lang)
    return _figures(*v_hs.taxonomy(_text_model(model), text, score, lang=lang).panels)


def attribution(model: str | Any = "tiny-gpt", text: str | None = None, *, lang: str = "en") -> Figures:
    """Gradient × input, integrated gradients, attention and rollout per token, and their deletion curves."""
    text = text or _default("head_science", "text_default", lang)
    return _figures(*v_hs.attribution(_text_model(model), text, lang=lang).panels)


# ---- positions, the KV cache, what a block mixes, FlashAttention's IO (§3.3, §4.4, §5, §6.3, §9.3) -------------


def position_lab(
    schemes: tuple[str, ...] | None = None,
    *,
    layer: int = 0,
    smoothing: int = 8,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """The shipped position-scheme runs: loss by position in and beyond the training context, attention by
    query–key distance, and rotary's rotation with its relative-position check (``rot``: its inputs ``dh``,
    ``theta``, ``pos``, ``pairs``, ``seed``, ``double``, e.g. ``rot={"dh": 64}``)."""
    res = _model(v_pos.BUNDLE)
    schemes = list(schemes or res.schemes)
    return _figures(
        v_pos.loss_by_position(res, schemes, smoothing, lang=lang),
        v_pos.attention_by_distance(res, schemes, layer, lang=lang),
        *_declared("position_lab", lang, sections),
    )


def kv_cache(
    model: str | Any = v_kv.MODEL,
    prompt: str | None = None,
    new_tokens: int | None = None,
    *,
    layer: int = 0,
    lang: str = "en",
) -> Figures:
    """Decode ``prompt`` token by token with our KV cache (the declared section ``kv``: ``prompt``, ``new``, each unset
    input at the page's default): bytes per step beside the formula, the cached keys and values of ``layer`` after
    the last step, which query head reads which KV head, and published configurations."""
    tm = _text_model(model)
    inputs = {v_kv.DECODE.prefix: _given(prompt=prompt, new=new_tokens)}
    results = _sections("kv_cache", lang, inputs, given={v_kv.DECODE.prefix: {"tm": tm}})
    decoded = results[v_kv.DECODE.prefix]
    cv = v_kv.cache_view(tm, decoded.decoding.ids, decoded.labels, len(decoded.decoding.ids) - 1, layer, lang=lang)
    return _figures(
        *_panels(results),
        cv.keys,
        cv.values,
        cv.groups,
        v_kv.published(lang=lang)[0],
    )


def block_roles(
    model: str | Any = "tiny-gpt",
    text: str = "The module is ready.",
    token: int = 1,
    *,
    layer: int = 0,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """Change one token's input to a block: ‖Δh‖ of every token after each of its stages, in the block's own order
    (its norms, attention, the MLP, the residual sums), and each part fed alone (§5, §9.5)."""
    probe = v_roles.probe(_text_model(model), text, token, layer, lang=lang)
    return _figures(probe.bars, *_declared("block_roles", lang, sections))


def flow(
    model: str | Any | None = None,
    text: str | None = None,
    target: int = -1,
    threshold: float = 0.04,
    *,
    edge: tuple[int, int, int] | None = None,
    node: tuple[str, int, int] | None = None,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """Information-flow routes to ``target``'s prediction (Ferrando & Voita 2024), one edge's heads — attention
    weight, write norm, causal effect — and a node's logit lens. ``edge`` = (layer, query, key), default
    the heaviest attention edge of the graph; ``node`` = ("x" | "m" | "mlp", layer, position), default the target's
    final residual; ``model`` defaults to the page's (SmolLM2 when registered)."""
    tm = _text_model(model or v_flow.default_model())
    an = v_flow.analyse(tm, text or _default("flow", "text_default", lang))
    route = v_flow.route(tm, an, target, threshold, lang=lang)
    edge = edge or route.edge
    node = node or ("x", an.dec.num_layers, target)
    return _figures(
        *route.panels,
        *(v_flow.edge(tm, an, *edge, target, lang=lang).panels if edge else ()),
        *(v_flow.node(tm, an, *node, lang=lang).panels if tm.kind == "causal" else ()),
        *_declared("flow", lang, sections),
    )


def flash_io(d: int = 64, tile: int = 128, n: int = 4096, *, lang: str = "en") -> Figures:
    """Bytes moved between slow and fast memory by naive and tiled attention (Dao et al. 2022, Theorem 2)."""
    fio = v_io.io(d, tile, n, lang=lang)
    return _figures(fio.by_n, fio.by_tile)


def atlas(
    model: str | Any | None = None,
    text: str | None = None,
    *,
    tokens: int = v_atlas.DEFAULT_TOKENS,
    window: int = 64,
    statistic: str = "first",
    layer: int | None = None,
    head: int = 0,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """Every head's habits over a long text, from tiles: the layers × heads grid of ``statistic`` and
    one head's values along the positions (default: the strongest first-token sink). ``text`` (up to the context)
    or else the first ``tokens`` of the bundled corpus; ``model`` defaults to the first causal text model
    (SmolLM2 when installed)."""
    tm = _text_model(model or models.available_models("text", kind="causal")[0])
    source = (
        dict(source="paste", text=text) if text is not None else dict(source="corpus", tokens=min(tokens, tm.max_len))
    )
    stats = v_atlas.compute(tm, v_atlas.source_ids(tm, **source), window=window, lang=lang)
    layer, head = v_atlas.focus(stats) if layer is None else (layer, head)
    return _figures(
        *v_atlas.overview(stats, statistic, global_layers=tm.config.global_layers, lang=lang).panels,
        v_atlas.head_along(stats, statistic, layer, head, lang=lang),
        *_declared("atlas", lang, sections),
    )


def circuit(
    step: int | None = None,
    *,
    compare: str | Any | Sequence[str | Any] | None = None,
    lang: str = "en",
    **sections: Mapping[str, Any],
) -> Figures:
    """The shipped induction circuit: its training curves with the phase change marked, the previous-token and
    induction heads' maps at checkpoint ``step`` (default: the last), and with ``compare`` (a model or several, e.g.
    ``["smollm2-135m-instruct", "gemma3-270m"]``, as the page compares its pretrained models) every head of each
    beside the shipped model's, by their two scores."""
    bundle = _model(v_circuit.BUNDLE)
    others = [] if compare is None else list(compare) if isinstance(compare, (list, tuple)) else [compare]
    other = v_circuit.compare(bundle, *map(_text_model, others), lang=lang).scatter if others else None
    return _figures(
        v_circuit.formation(bundle, lang=lang).curves,
        v_circuit.step_maps(bundle, bundle.steps[-1] if step is None else step, lang=lang).maps,
        other,
        *_declared("circuit", lang, sections),
    )
