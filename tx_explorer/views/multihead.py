"""Multi-head attention page (lecture §4.1–4.3, §9.2): every layer × head of a text model, one head through
three lenses, heads compared, and the query/key inspector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tx_explorer import locales
from tx_explorer.analysis import heads
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, axes, texts
from tx_explorer.viz import charts
from tx_explorer.viz import heads as vh
from tx_explorer.viz.style import safe_labels

PAGE = "multihead"
EXAMPLES = ("example_code", "example_prose", "example_long")
VIEWS = ("grid", "head", "compare", "qk")
LENSES = ("raw", "norm", "rollout")
SMALL_SIDE = 256  # maps shown side by side: half the detail view's resolution
HEAVY_TOKENS = 128  # longer texts go through the job pool: MiniLM's maps, lenses and metrics take 1–4 s at 512
LATEX = {
    "multihead": r"\mathrm{MultiHead}(X)=\mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_H)\,W_O,\quad "
    r"\mathrm{head}_h=\mathrm{softmax}\!\left(\frac{XW_Q^h\,(XW_K^h)^\top}{\sqrt{D_H}}\right)XW_V^h",
    "qk": r"e_{ij}=\frac{q_i\cdot k_j}{\sqrt{D_H}},\qquad \alpha_{ij}=\frac{e^{e_{ij}}}{\sum_{j'}e^{e_{ij'}}},"
    r"\qquad y_i=\sum_j \alpha_{ij}\,v_j",
}
METRICS = heads.METRICS
analyse = heads.analyse  # (text model, text) -> TextAttention: tokens and every layer's and head's map
head_metrics = heads.head_metrics  # maps -> {metric: [L, H]}
head_similarity = heads.head_similarity  # maps -> distances between every pair of heads


def heavy(tm: TextModel, text: str) -> bool:
    """Whether analysing ``text`` is a long job (more than :data:`HEAVY_TOKENS` tokens, as the page keeps them).

    The work grows as L·H·N²: short texts take milliseconds and run at once, rather than queue behind long ones."""
    return len(tm.encode(text, heads.max_tokens(tm))) > HEAVY_TOKENS


def _words(lang: str) -> dict[str, str]:
    return locales.words("common", vh.WORDS, lang)


@dataclass(frozen=True)
class Shown:
    """The maps as the page shows them: special tokens kept or hidden."""

    maps: np.ndarray  # [L, H, n, n] of the kept tokens
    labels: list[str]  # the kept tokens
    keep: list[bool]  # per token of the text
    head_names: list[str]  # "L0 H0", … one per (layer, head), row-major
    no_special: bool  # hiding was asked for but the text has no special token

    @property
    def flat(self) -> np.ndarray:
        return self.maps.reshape(-1, *self.maps.shape[-2:])  # (L·H, n, n)


def shown(data: heads.TextAttention, hide_special: bool = False) -> Shown:
    """Keep every token, or drop the special ones ([CLS], [SEP], <|endoftext|>) from rows and columns."""
    keep = [not s for s in data.special] if hide_special and any(data.special) else [True] * len(data.tokens)
    layers, num_heads = data.maps.shape[:2]
    return Shown(
        heads.keep_tokens(data.maps, keep),
        [t for t, k in zip(data.tokens, keep) if k],
        keep,
        heads.head_labels(layers, num_heads),
        hide_special and not any(data.special),
    )


def kv_groups(tm: TextModel) -> list[int] | None:
    """The key/value head each query head reads in a grouped-query model (None when every head has its own)."""
    return tm.attention_module(0).groups if tm.config.kv_heads < tm.config.num_heads else None


def grid(s: Shown, groups: Sequence[int] | None = None, *, lang: str = "en") -> Panel:
    """Every layer × head as small multiples (``groups``: the KV head of each query head, grouped-query models)."""
    T = texts(PAGE, lang)
    layers, num_heads = s.maps.shape[:2]
    title = T("grid_title", layers=layers, heads=num_heads)
    return Panel("mh_grid", vh.head_grid(s.maps, title=title, words=_words(lang), groups=groups), s.maps)


def lens_map(
    s: Shown, layer: int, head: int, lens: str = "raw", lenses: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """One head's map through a lens: raw weights, norm-weighted (``lenses[0]``) or the rollout (``lenses[1]``)."""
    if lens == "raw":
        return s.maps[layer, head]
    if lens not in LENSES or lenses is None:
        raise ValueError(f"lens {lens!r} needs the norm-weighted maps and the rollout (see lens_maps)")
    norm_maps, roll = lenses
    return heads.keep_tokens(norm_maps[layer, head] if lens == "norm" else roll[layer], s.keep)


def lens_maps(tm: TextModel, text: str, data: heads.TextAttention) -> tuple[np.ndarray, np.ndarray]:
    """(norm-weighted maps [L, H, N, N], rollout [L, N, N]) of every token."""
    return heads.norm_weighted_maps(tm, text, data.maps), heads.rollout_maps(data.maps)


def detail(
    s: Shown,
    layer: int,
    head: int,
    lens: str = "raw",
    lenses: tuple[np.ndarray, np.ndarray] | None = None,
    *,
    lang: str = "en",
) -> Panel:
    """One head, large, through a lens."""
    T = texts(PAGE, lang)
    view = lens_map(s, layer, head, lens, lenses)
    title = T(f"lens_{lens}_title", layer=layer, head=head)
    fig = vh.attention_map(view, s.labels, s.labels, title=title, words=_words(lang), **axes(lang))
    return Panel("mh_detail", fig, view)


def lines(
    s: Shown,
    layer: int,
    head: int,
    lens: str = "raw",
    lenses: tuple[np.ndarray, np.ndarray] | None = None,
    focus: int | None = None,
    *,
    lang: str = "en",
) -> Panel:
    """The same head as lines from each query to the keys it reads (one query when ``focus`` is set)."""
    view = lens_map(s, layer, head, lens, lenses)
    fig = vh.attention_lines(view, s.labels, title=texts(PAGE, lang)("lines_title"), focus=focus, words=_words(lang))
    return Panel("mh_lines", fig, view)


def metric(per_head: dict[str, np.ndarray], name: str = "entropy", *, lang: str = "en") -> Panel:
    """One head metric (of :func:`heads.head_metrics`) for every head, as bars."""
    T = texts(PAGE, lang)
    fig = vh.metric_bars(
        per_head[name],
        title=T(f"metric_{name}"),
        x_title=T("head"),
        y_title=T(f"metric_{name}_unit"),
        words=_words(lang),
    )
    return Panel("mh_metric", fig, per_head[name])


def similarity(dist: np.ndarray, s: Shown, *, lang: str = "en") -> Panel:
    """Distances between every pair of heads' maps (:func:`heads.head_similarity`)."""
    title = texts(PAGE, lang)("similarity_title")
    return Panel("mh_similarity", vh.similarity_matrix(dist, s.head_names, title=title, words=_words(lang)), dist)


def _small(key: str, m: np.ndarray, labels: list[str], title: str, lang: str, signed: bool = False) -> Panel:
    fig = vh.attention_map(
        m, labels, labels, title=title, signed=signed, max_side=SMALL_SIDE, words=_words(lang), **axes(lang)
    )
    return Panel(key, fig, m)


def pair(s: Shown, a: int, b: int, *, lang: str = "en") -> tuple[Panel, Panel, Panel]:
    """Two heads (flat indices into ``s.head_names``) and their difference."""
    T, n = texts(PAGE, lang), s.head_names
    diff = s.flat[a] - s.flat[b]
    return (
        _small("mh_pair_a", s.flat[a], s.labels, n[a], lang),
        _small("mh_pair_b", s.flat[b], s.labels, n[b], lang),
        _small("mh_pair_diff", diff, s.labels, T("difference", a=n[a], b=n[b]), lang, signed=True),
    )


def same_head(
    s: Shown, other: heads.TextAttention, pick: int, hide_special: bool = False, *, lang: str = "en"
) -> tuple[Panel, Panel]:
    """One head (flat index) on the page's text and on another text."""
    T, s2 = texts(PAGE, lang), shown(other, hide_special)
    return (
        _small("mh_same_1", s.flat[pick], s.labels, T("sentence_1"), lang),
        _small("mh_same_2", s2.flat[pick], s2.labels, T("sentence_2"), lang),
    )


@dataclass(frozen=True)
class Inspector:
    shapes: dict[str, list[str]]  # each step and its tensor's shape (translated columns)
    scores: Panel  # e_ij of the chosen query against every key
    weights: Panel  # α_ij
    query: Panel  # q_i and the output y_i
    keys: Panel
    values: Panel
    weighted: Panel  # α_ij · v_j


def inspector(
    tm: TextModel, text: str, tokens: list[str], layer: int, head: int, query: int, *, lang: str = "en"
) -> Inspector:
    """One query of one head, opened: its scores and weights over the keys and the vectors behind them."""
    T = texts(PAGE, lang)
    qk = heads.inspect_text(tm, text, layer, head, query)
    keys = [f"{j}: {t}" for j, t in enumerate(tokens)]
    safe_keys, dims = safe_labels(keys), [f"d{i}" for i in range(len(qk.q))]
    scores = np.where(np.isfinite(qk.scores), qk.scores, np.nan)
    title = T("scores_title", token=safe_labels(tokens)[query])
    kw = {"x_title": T("dims"), "y_title": T("key")}
    q_out = np.vstack([qk.q, qk.out])
    return Inspector(
        {T("step"): [T(f"step_{s}") for s, _ in qk.shapes], T("shape"): [d for _, d in qk.shapes]},
        Panel("qk_scores", charts.bars(keys, {T("scores"): scores}, title=title, x_title=T("key")), qk.scores),
        Panel(
            "qk_weights",
            charts.bars(keys, {T("weights"): qk.weights}, title=T("weights_title"), x_title=T("key")),
            qk.weights,
        ),
        Panel(
            "qk_q",
            charts.signed_heatmap(
                q_out, [T("q_row"), T("y_row")], dims, title=T("q_title"), x_title=T("dims"), y_title="", height=260
            ),
            q_out,
        ),
        Panel("qk_k", charts.signed_heatmap(qk.k, safe_keys, dims, title=T("k_title", g=qk.kv_head), **kw), qk.k),
        Panel("qk_v", charts.signed_heatmap(qk.v, safe_keys, dims, title=T("v_title", g=qk.kv_head), **kw), qk.v),
        Panel(
            "qk_weighted",
            charts.signed_heatmap(qk.weighted, safe_keys, dims, title=T("weighted_title"), **kw),
            qk.weighted,
        ),
    )
