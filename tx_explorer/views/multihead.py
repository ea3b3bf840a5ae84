"""Multi-head attention page (lecture §4.1–4.3, §9.2): every layer × head of a text model, one head through
three lenses, heads compared, and the query/key inspector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tx_explorer import locales
from tx_explorer.analysis import heads
from tx_explorer.analysis.head_science import INDUCTION_THRESHOLD, SINK_THRESHOLD
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, axes, listed, model_facts, texts
from tx_explorer.viz import charts
from tx_explorer.viz import heads as vh
from tx_explorer.viz.style import safe_labels

PAGE = "multihead"
EXAMPLES = ("example_code", "example_prose", "example_long")
VIEWS = ("grid", "head", "search", "compare", "qk")
SEARCHES = ("pair", "pattern")  # rank the heads by one query's weight on one key, or by a pattern's score
DIRECTIONS = ("to", "from")  # the text coloured by what the token attends to, or by what attends to it
CLICKS = ("query", "key")  # what a click on a token of the text picks
TOP = 3  # the best-ranked heads whose maps are shown beside the ranking, and that colour the text
TABLE_ROWS = 10
TIE = 1e-6  # scores this close to the top one tie it: float32 weights of at most 1, rounding apart
LENSES = ("raw", "norm", "rollout")
SMALL_SIDE = 256  # maps shown side by side: half the detail view's resolution
QK_X_TICKS = 16  # the inspector's half-width Q, K, V maps: every 4th of 64 dimensions labelled
SMALL_TICKS = 8  # key labels a third of the page holds without overlap, turned upright, in either language
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
    return {**locales.words("common", vh.WORDS, lang), **locales.words(PAGE, vh.SEARCH_WORDS, lang)}


@dataclass(frozen=True)
class Shown:
    """The maps as the page shows them: special tokens kept or hidden."""

    maps: np.ndarray  # [L, H, n, n] of the kept tokens
    labels: list[str]  # the kept tokens
    keep: list[bool]  # per token of the text
    head_names: list[str]  # "L0 H0", … one per (layer, head), row-major
    no_special: bool  # hiding was asked for but the text has no special token
    ids: list[int]  # the kept tokens' ids
    causal: bool = False  # a causal model's: no query sees a key after it
    global_layers: tuple[int, ...] = ()  # the model's global layers among local ones (Gemma 3), named in figures
    windows: tuple[int | None, ...] = ()  # per layer, the keys back it sees (a sliding window), None: all

    @property
    def flat(self) -> np.ndarray:
        return self.maps.reshape(-1, *self.maps.shape[-2:])  # (L·H, n, n)


def shown(
    data: heads.TextAttention,
    hide_special: bool = False,
    *,
    causal: bool = False,
    global_layers: Sequence[int] = (),
    windows: Sequence[int | None] = (),
) -> Shown:
    """Keep every token, or drop the special ones ([CLS], [SEP], <|endoftext|>) from rows and columns; ``causal``:
    the maps are a causal model's; ``global_layers``: its config's, set apart in the figures' layer names;
    ``windows``: its layers' sliding windows, which a query/key search past them says (:func:`search_pair`)."""
    keep = [not s for s in data.special] if hide_special and any(data.special) else [True] * len(data.tokens)
    if not any(keep):  # a text of special tokens alone ("[CLS] [SEP]", a zero-width space): nothing left to show
        raise InputError("heads_all_special", tokens=" ".join(dict.fromkeys(data.tokens)))
    layers, num_heads = data.maps.shape[:2]
    return Shown(
        heads.keep_tokens(data.maps, keep),
        [t for t, k in zip(data.tokens, keep) if k],
        keep,
        heads.head_labels(layers, num_heads),
        hide_special and not any(data.special),
        [i for i, k in zip(data.ids, keep) if k],
        causal,
        tuple(global_layers),
        tuple(windows),
    )


def shown_for(tm: TextModel, data: heads.TextAttention, hide_special: bool = False) -> Shown:
    """:func:`shown` with the model's own facts: causal or not, its global layers and its layers' windows."""
    cfg = tm.config
    return shown(data, hide_special, causal=tm.kind == "causal", global_layers=cfg.global_layers, windows=cfg.windows)


def kv_groups(tm: TextModel) -> list[int] | None:
    """The key/value head each query head reads in a grouped-query model (None when every head has its own)."""
    return tm.attention_module(0).groups if tm.config.kv_heads < tm.config.num_heads else None


def names(s: Shown, groups: Sequence[int] | None = None, *, lang: str = "en") -> list[list[str]]:
    """Each head as hovers name it, ``[L][H]``: layer, head and (grouped-query models) its key/value head."""
    return vh.head_names(*s.maps.shape[:2], groups, _words(lang))


def grid(s: Shown, groups: Sequence[int] | None = None, *, lang: str = "en") -> Panel:
    """Every layer × head as small multiples (``groups``: the KV head of each query head, grouped-query models);
    a thumbnail's hover names its head and its share on the first token, and a click reports [layer, head]."""
    T, w = texts(PAGE, lang), _words(lang)
    layers, num_heads = s.maps.shape[:2]
    title = T("grid_title", layers=layers, heads=num_heads)
    first = heads.pattern_scores(s.maps, s.ids)["first"]  # (L, H)
    hover = [  # a one-token text has no query after the first token: no share to say
        [
            name + (f"<br>{T('first_share', value=first[i, h])}" if np.isfinite(first[i, h]) else "")
            for h, name in enumerate(row)
        ]
        for i, row in enumerate(names(s, groups, lang=lang))
    ]
    marks = model_facts.layer_marks(s.global_layers, lang)
    fig = vh.head_grid(s.maps, title=title, words=w, groups=groups, hover=hover, layer_marks=marks)
    return Panel("mh_grid", fig, s.maps)


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


def lens_help(tm: TextModel, lens: str, *, lang: str = "en") -> str:
    """What lens ``lens`` shows; for the norm-weighted lens what the chosen model changes in it: values read from a
    shared key/value head, and a norm after the attention block that the lens leaves out (Gemma 3, OLMo 2)."""
    T = texts(PAGE, lang)
    said = [T(f"lens_{lens}_help")]
    if lens == "norm" and tm.config.kv_heads < tm.config.num_heads:
        said.append(T("lens_norm_shared", model=tm.name))
    if lens == "norm" and tm.config.norm_position in ("sandwich", "after"):
        said.append(T("lens_norm_after", model=tm.name))
    return " ".join(said)


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


def _heatmap(
    key: str, values: np.ndarray, title: str, hover_names: list[list[str]], lang: str, global_layers: Sequence[int]
) -> Panel:
    finite = values[np.isfinite(values)]
    top = 1.0 if finite.size == 0 or finite.max() <= 1.0 else float(finite.max())  # shares on 0…1, the rest 0…max
    marks = model_facts.layer_marks(global_layers, lang)
    fig = vh.head_heatmap(values, hover_names, title=title, words=_words(lang), zmax=top, layer_marks=marks)
    return Panel(key, fig, values)


def metric(
    per_head: dict[str, np.ndarray],
    name: str = "entropy",
    groups: Sequence[int] | None = None,
    *,
    global_layers: Sequence[int] = (),
    lang: str = "en",
) -> Panel:
    """One head metric (of :func:`heads.head_metrics`) for every head, as a layers × heads heatmap (a click on a
    cell reports its [layer, head]; ``global_layers`` named as such)."""
    T, v = texts(PAGE, lang), per_head[name]
    title = T("metric_title", metric=T(f"metric_{name}"), unit=T(f"metric_{name}_unit"))
    return _heatmap("mh_metric", v, title, vh.head_names(*v.shape, groups, _words(lang)), lang, global_layers)


def metric_note(per_head: dict[str, np.ndarray], name: str, s: Shown, *, lang: str = "en") -> str | None:
    """Why the heatmap of metric ``name`` is empty, where no query of the text has what it needs; else None."""
    if np.isfinite(per_head[name]).any():
        return None
    return _nothing_scored(texts(PAGE, lang), name, s, skip_first=False)


def _nothing_scored(T, pattern: str, s: Shown, *, skip_first: bool, repeated: bool = False) -> str:
    """Why no query of the text is scored on ``pattern``: no earlier copy of its token (duplicate, induction; with
    the text written twice, one left out with the first token), or a text too short for a query after the first
    token (previous, first, self; previous from token 2 with the first token left out)."""
    name = T(f"metric_{pattern}")
    if pattern in ("duplicate", "induction"):
        return T("pattern_none_skip" if repeated and skip_first else "pattern_none", pattern=name)
    start = 2 if skip_first and pattern == "previous" else 1
    return T(
        "pattern_none_short" if start == 1 else "pattern_none_short_skip", pattern=name, start=start, n=len(s.labels)
    )


@dataclass(frozen=True)
class Sink:
    """How much the model parks on the first token of this text (Xiao et al. 2023's attention sink)."""

    heads: int  # heads whose mean share on token 0 is at least SINK_THRESHOLD
    total: int
    mean: float  # mean share on token 0 over every head and query 1…; NaN for a one-token text (no query 1)

    @property
    def used(self) -> bool:
        return self.heads > 0


def sink(s: Shown) -> Sink:
    """The first token's share per head, counted against :data:`SINK_THRESHOLD`."""
    first = heads.pattern_scores(s.maps, s.ids)["first"]  # (L, H), NaN when only the first token is shown
    mean = float(first.mean()) if np.isfinite(first).all() and first.size else float("nan")
    return Sink(int((first >= SINK_THRESHOLD).sum()), first.size, mean)


def sink_note(found: Sink, token: str, *, lang: str = "en") -> str:
    """The verdict on the first token, with its numbers (a one-token text: that there is none to measure)."""
    T = texts(PAGE, lang)
    key = "sink_used" if found.used else "sink_unused" if np.isfinite(found.mean) else "sink_alone"
    return T(key, heads=found.heads, total=found.total, mean=found.mean, threshold=SINK_THRESHOLD, token=token)


@dataclass(frozen=True)
class LearnedSinks:
    """A model that learned a sink logit per head (gpt-oss): its traced rows' sums on this text, in words and per
    head."""

    rows: heads.RowSums
    note: str  # the sums and the sink's share, measured, and how this sink differs from the first token's
    panel: Panel  # the sink's mean share of a row, per layer × head


def learned_sinks(
    tm: TextModel, data: heads.TextAttention, groups: Sequence[int] | None = None, *, lang: str = "en"
) -> LearnedSinks | None:
    """The rows of every map of ``data`` (every token, special ones too) summed, where ``tm`` has learned sinks;
    None for a model without them, whose rows sum to 1."""
    if not tm.config.attention_sinks:
        return None
    T, r = texts(PAGE, lang), heads.head_row_sums(data.maps)
    note = T("learned_sinks", model=tm.name, **r.summary())
    names = vh.head_names(*r.share.shape, groups, _words(lang))
    # the scale ends at the largest share: a sink taking a few percent would be invisible on 0…1
    fig = vh.head_heatmap(
        r.share,
        names,
        title=T("learned_sinks_title"),
        words=_words(lang),
        zmax=float(r.share.max()),
        layer_marks=model_facts.layer_marks(tm.config.global_layers, lang),
    )
    return LearnedSinks(r, note, Panel("mh_learned_sinks", fig, r.share))


def repeated(text: str) -> str:
    """The typed text written twice, on two lines: the second copy repeats the first one's tokens."""
    return f"{text.strip()}\n{text.strip()}"


def repeat_help(*, lang: str = "en") -> str:
    """The help of "Repeat my text": the induction bar and the pages that set it, by their titles."""
    return texts(PAGE, lang)("repeat_help", threshold=INDUCTION_THRESHOLD, **_bar_pages(lang))


def _bar_pages(lang: str) -> dict[str, str]:
    """The titles of the pages that count induction heads at :data:`INDUCTION_THRESHOLD`."""
    return {
        k: texts("common", lang)(f"page_{page}") for k, page in (("science", "head_science"), ("circuit", "circuit"))
    }


def copy_tokens(tm: TextModel, text: str) -> int:
    """The tokens of one copy of ``text`` (its own, special tokens aside), however many the page keeps."""
    enc = tm.encode(text)
    return enc.num_tokens - sum(enc.special)


def repeat_queries(tm: TextModel, text: str, s: Shown) -> list[int]:
    """The queries of the second copy of ``text`` in :func:`repeated` ``(text)``, as indices of the kept tokens."""
    return _copies(tm, text, s.keep)[1]


def _copies(tm: TextModel, text: str, keep: Sequence[bool]) -> tuple[list[int], list[int]]:
    """The first and the second copy of ``text`` in :func:`repeated` ``(text)`` whose tokens are kept as ``keep``
    says, each as indices of the kept tokens (the second cut short where the page's token limit cuts it)."""
    enc = tm.encode(text, heads.max_tokens(tm))
    specials = sum(enc.special)  # an encoder's [CLS] … [SEP] wrap the whole text once, not each copy
    plain, lead = len(enc) - specials, next((i for i, sp in enumerate(enc.special) if not sp), 0)
    last = len(keep) - (specials - lead)  # the closing special tokens are no copy's
    between = max(0, tm.encode(repeated(text)).num_tokens - 2 * plain - specials)  # the line break, unless merged
    kept = np.cumsum(keep) - 1  # (N,): each token's index among the kept ones
    first = sorted({int(kept[i]) for i in range(lead, min(lead + plain, last)) if keep[i]})
    return first, sorted({int(kept[i]) for i in range(lead + plain + between, last) if keep[i]})


def _kept(tm: TextModel, text: str, hide_special: bool) -> list[bool]:
    """Which tokens of ``text`` the page keeps (:func:`shown`), from its tokens alone."""
    special = tm.encode(text, heads.max_tokens(tm)).special
    return [not sp for sp in special] if hide_special and any(special) else [True] * len(special)


def query_on_repeat(tm: TextModel, text: str, query: int, *, repeat: bool, hide_special: bool = False) -> int:
    """Where the query picked on the typed ``text`` (``repeat``) or on it written twice (not ``repeat``) goes when
    "write my text twice" is switched: a token of one copy to the same token of the other copy (the student looking
    for induction finds it on the second copy, where induction heads act), a closing special token ([SEP]) to the
    closing one, a leading one (<bos>, [CLS]) where it is. Indices are of the kept tokens."""
    once, twice = _kept(tm, text, hide_special), _kept(tm, repeated(text), hide_special)
    first, second = _copies(tm, text, twice)
    typed = _copies(tm, text, once)[0]  # the typed text's own tokens, between its specials
    n_once, n_twice = sum(once), sum(twice)
    closing = n_once - 1 - typed[-1] if typed else 0  # [SEP] after the text (and after the second copy)
    old, new, n_old, n_new = (typed, second, n_once, n_twice) if repeat else (second, first, n_twice, n_once)
    if query >= n_old - closing:
        return max(0, n_new - (n_old - query))
    if query in old and new:
        return new[min(old.index(query), len(new) - 1)]
    if not repeat and first and query > first[-1]:  # the line break between the copies: the first copy's end
        return first[-1]
    return min(query, n_new - 1)


@dataclass(frozen=True)
class Search:
    """Every head ranked: the layers × heads heatmap of the ranked number, the best heads' maps, notes, a table."""

    panels: tuple[Panel, ...]
    notes: tuple[str, ...]
    table: dict[str, list] | None
    best: list[tuple[int, int]]  # the TOP best heads, best first


def _ranked(
    key: str, values: np.ndarray, title: str, s: Shown, groups: Sequence[int] | None, lang: str, skip_first: bool
) -> tuple[list[Panel], dict[str, list], list[tuple[int, int]]]:
    """``skip_first``: the best heads' maps drawn as the ranking read them, rows renormalised without the first
    token (the raw map of a head ranked on 0.70 showed 1.00 on the sink and 0.00 on the key it was ranked for)."""
    T, hover_names = texts(PAGE, lang), names(s, groups, lang=lang)
    ranked = heads.top_heads(values)
    best = [(layer, head) for layer, head, _ in ranked[:TOP]]
    panels = [_heatmap(key, values, title, hover_names, lang, s.global_layers)]
    num_heads = s.maps.shape[1]
    for r, (layer, head) in enumerate(best):
        m, name = s.maps[layer, head], s.head_names[layer * num_heads + head]
        if skip_first:
            m, name = heads.without_first(m), name + T("skip_title")
        small = _small(f"{key}_top{r}", m, s.labels, name, lang, causal=s.causal)
        small.figure.update_traces(showscale=False)  # three maps a row: their one scale, 0…1, is the ranking's
        panels.append(small)
    rows = ranked[:TABLE_ROWS]
    table = {
        T("rank"): list(range(1, len(rows) + 1)),
        T("head_column"): [hover_names[layer][head] for layer, head, _ in rows],
        T("score_column"): [round(w, 4) for *_, w in rows],
    }
    return panels, table, best


def _tied(values: np.ndarray) -> int:
    """How many heads score within :data:`TIE` of the top score of ``values [L, H]`` (NaN: no score)."""
    finite = values[np.isfinite(values)]
    return int((finite >= finite.max() - TIE).sum()) if finite.size else 0


def search_pair(
    s: Shown,
    query: int,
    key: int,
    *,
    skip_first: bool = False,
    causal: bool = True,
    groups: Sequence[int] | None = None,
    lang: str = "en",
) -> Search:
    """Every head ranked by the weight ``query`` puts on ``key`` (:func:`heads.rank`; ``skip_first``: rows
    renormalised without the first token), the best heads' maps beside it. Where every head ties (the only key the
    query sees gets all its weight) there is no ranking, and the notes say so: no best head, no maps."""
    T, labels = texts(PAGE, lang), safe_labels(s.labels)
    weights = heads.query_key_weights(s.maps, query, key, skip_first=skip_first, causal=causal)  # (L, H)
    count, top = _tied(weights), float(np.nanmax(weights))
    seen = (query + 1 if causal else len(s.labels)) - skip_first  # keys the query's row is spread over
    words = dict(q=query, k=key, weight=top, count=count, total=weights.size)
    why = _past_window_note(s, query, key, lang) if causal else ()  # a window's 0 is the mask's
    # A lone head ties with itself: said as ranked, unless its query sees one key (learned sinks keep rows apart)
    if count == weights.size and (seen == 1 or count > 1):
        only = "pair_only_key_skip" if skip_first else "pair_only_key"
        return Search((), (T(only if seen == 1 else "pair_tie_all", **words), *why), None, [])
    title = T("pair_title", q=f"{query}: {labels[query]}", k=f"{key}: {labels[key]}")
    panels, table, best = _ranked("mh_rank", weights, title, s, groups, lang, skip_first)
    layer, head = best[0]
    notes = [T("pair_tie" if count > 1 else "pair_best", layer=layer, head=head, **words), *why]
    if skip_first:
        notes.append(T("skip_note"))
    return Search(tuple(panels), tuple(notes), table, best)


def _past_window_note(s: Shown, query: int, key: int, lang: str) -> tuple[str, ...]:
    """Where ``key`` lies farther back from ``query`` in the text than some layers' window, that their heads put 0 on
    it whatever they do, the mask's 0: a model whose window is shorter than the tokens the page keeps (a gpt-oss
    folder's 128) ranked those heads last, or tied every head, without a word."""
    at = [i for i, kept in enumerate(s.keep) if kept]  # positions in the text: hidden special tokens still count
    back = at[query] - at[key]
    layers = [layer for layer, w in enumerate(s.windows) if w is not None and back >= w]
    if not layers:
        return ()
    every = len(layers) == len(s.windows)  # Mistral's shape: no global layer to name
    return (
        texts(PAGE, lang)(
            "pair_window_all" if every else "pair_window",
            q=query,
            k=key,
            back=back,
            window=s.windows[layers[0]],
            layers=len(layers),
            total=len(s.windows),
            which=listed(map(str, layers), lang, "and"),
        ),
    )


def search_pattern(
    s: Shown,
    pattern: str,
    *,
    skip_first: bool = False,
    queries: Sequence[int] | None = None,
    groups: Sequence[int] | None = None,
    lang: str = "en",
    copy: int | None = None,
) -> Search:
    """Every head ranked by a pattern's score on this text (:func:`heads.pattern_scores`; ``queries``: the rows
    scored, e.g. the second copy of a repeated text, whose copy holds ``copy`` tokens (:func:`copy_tokens`)).

    The verdict carries its numbers: the best score, what a head spreading its weight evenly would score
    (:func:`heads.uniform_scores`) and, for induction, how many heads reach :data:`INDUCTION_THRESHOLD`."""
    T = texts(PAGE, lang)
    scores = heads.pattern_scores(s.maps, s.ids, skip_first=skip_first, queries=queries)[pattern]  # (L, H)
    if queries is not None and not len(queries):  # the first copy fills every token kept: no second copy to score
        said = T("repeat_past_cap_plain" if copy is None else "repeat_past_cap", copy=copy, kept=len(s.labels))
        return Search((), (said,), None, [])
    if np.isnan(scores).all():  # no query has such a key: no token repeats, or too few tokens
        why = _nothing_scored(T, pattern, s, skip_first=skip_first, repeated=queries is not None)
        return Search((), (why,), None, [])
    count, name = _tied(scores), T(f"metric_{pattern}")
    words = dict(pattern=name, score=float(np.nanmax(scores)), count=count, total=scores.size)
    if count == scores.size > 1:
        return Search((), (T("pattern_tie_all", **words),), None, [])
    title = T("pattern_title", pattern=name)
    # the first token's share is scored raw (pattern_scores), so its heads' maps are drawn raw too
    panels, table, best = _ranked("mh_rank", scores, title, s, groups, lang, skip_first and pattern != "first")
    layer, head = best[0]
    notes = [T("pattern_tie" if count > 1 else "pattern_best", layer=layer, head=head, **words)]
    even = heads.uniform_scores(s.ids, causal=s.causal, skip_first=skip_first, queries=queries)[pattern]
    notes.append(T("pattern_uniform", score=even))
    if pattern == "induction":
        above = int((scores >= INDUCTION_THRESHOLD).sum())
        notes.append(
            T("induction_count", count=above, total=scores.size, threshold=INDUCTION_THRESHOLD, **_bar_pages(lang))
        )
    if queries is not None:
        cut = copy is not None and len(queries) < copy
        notes.append(T("repeat_note_cut" if cut else "repeat_note", count=len(queries), copy=copy, kept=len(s.labels)))
    if skip_first and pattern != "first":
        notes.append(T("skip_note"))
    return Search(tuple(panels), tuple(notes), table, best)


def text_picture(
    s: Shown,
    token: int,
    best: Sequence[tuple[int, int]],
    direction: str = "to",
    *,
    skip_first: bool = False,
    lang: str = "en",
) -> Panel:
    """The text coloured by what ``token`` attends to (``direction`` "to") or by what attends to it ("from"),
    averaged over the heads ``best``; a click on a token reports its index. ``skip_first``: the weights the ranking
    used, rows renormalised over keys 1… (the first token gets 0), so the colours agree with the ranked numbers."""
    T, labels = texts(PAGE, lang), safe_labels(s.labels)
    if not 0 <= token < len(labels):
        raise InputError("heads_token_range", index=token, last=len(labels) - 1)
    rows = np.stack([s.maps[layer, head] for layer, head in best])  # (K, N, N)
    if skip_first:
        rows = heads.without_first(rows)
    weights = (rows[:, token, :] if direction == "to" else rows[:, :, token]).mean(0)  # (N,)
    which = ", ".join(f"L{layer} H{head}" for layer, head in best)
    one = "_one" if len(best) == 1 else ""  # one head's weights: no mean to speak of
    title = T(f"text_{direction}_title{one}", token=f"{token}: {labels[token]}", heads=which)
    if skip_first:
        title += T("skip_title")
    hover = [T("text_hover", i=i, token=t, weight=w) for i, (t, w) in enumerate(zip(labels, weights))]
    return Panel("mh_text", vh.token_text(s.labels, weights, picked=token, title=title, hover=hover), weights)


def similarity(dist: np.ndarray, s: Shown, *, lang: str = "en") -> Panel:
    """Distances between every pair of heads' maps (:func:`heads.head_similarity`)."""
    title = texts(PAGE, lang)("similarity_title")
    return Panel("mh_similarity", vh.similarity_matrix(dist, s.head_names, title=title, words=_words(lang)), dist)


def _small(
    key: str, m: np.ndarray, labels: list[str], title: str, lang: str, signed: bool = False, causal: bool = False
) -> Panel:
    """A map a third or half of the page wide; ``causal``: the keys after each query drawn as gaps, masked, where
    they were written as weights of 0.00."""
    if causal:
        m = np.where(np.tri(*m.shape, dtype=bool), m, np.nan)
    fig = vh.attention_map(
        m, labels, labels, title=title, signed=signed, max_side=SMALL_SIDE, words=_words(lang), **axes(lang)
    )
    ticks = fig.layout.xaxis.tickvals
    if ticks is not None and len(ticks) > SMALL_TICKS:  # every k-th key named; the hover names each cell
        step = -(-len(ticks) // SMALL_TICKS)
        fig.update_xaxes(tickvals=ticks[::step], ticktext=(fig.layout.xaxis.ticktext or ticks)[::step])
    return Panel(key, fig, m)


def pair(s: Shown, a: int, b: int, *, lang: str = "en") -> tuple[Panel, Panel, Panel]:
    """Two heads (flat indices into ``s.head_names``) and their difference."""
    T, n = texts(PAGE, lang), s.head_names
    diff = s.flat[a] - s.flat[b]
    return (
        _small("mh_pair_a", s.flat[a], s.labels, n[a], lang, causal=s.causal),
        _small("mh_pair_b", s.flat[b], s.labels, n[b], lang, causal=s.causal),
        _small("mh_pair_diff", diff, s.labels, T("difference", a=n[a], b=n[b]), lang, signed=True, causal=s.causal),
    )


def same_head(
    s: Shown, other: heads.TextAttention, pick: int, hide_special: bool = False, *, lang: str = "en"
) -> tuple[Panel, Panel]:
    """One head (flat index) on the page's text and on another text."""
    T, s2 = texts(PAGE, lang), shown(other, hide_special, causal=s.causal)
    return (
        _small("mh_same_1", s.flat[pick], s.labels, T("sentence_1"), lang, causal=s.causal),
        _small("mh_same_2", s2.flat[pick], s2.labels, T("sentence_2"), lang, causal=s2.causal),
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
    projection: str  # §2.4's k = x·W_K and v = x·W_V, checked from the weight's rows, and which heads share them


def inspector(
    tm: TextModel, text: str, tokens: list[str], layer: int, head: int, query: int, *, lang: str = "en"
) -> Inspector:
    """One query of one head, opened: its scores and weights over the keys and the vectors behind them."""
    T = texts(PAGE, lang)
    qk = heads.inspect_text(tm, text, layer, head, query)
    keys = [f"{j}: {t}" for j, t in enumerate(tokens)]
    dims = [f"d{i}" for i in range(len(qk.q))]  # keys stay raw: the charts escape their labels themselves
    scores = np.where(np.isfinite(qk.scores), qk.scores, np.nan)
    title = T("scores_title", token=safe_labels(tokens)[query])
    # Half the page beside the keys' labels and a colour bar: ~400 px of plot, where "d63" upright takes ~25 px.
    kw = {"x_title": T("dims"), "y_title": T("keys_rows"), "x_ticks": QK_X_TICKS}
    check = heads.projection_text(tm, text, layer, head)
    # nn.Linear stores the fused weight as [out, in]; the table writes it as x·W multiplies it, [in, out]: the
    # check's rows of the stored tensor are the table's columns
    stored = list(tm.attention_module(layer).qkv.weight.shape)
    projection = (
        T(
            "projection_holds" if check.holds else "projection_differs",
            k_cols=f"{check.k_rows[0]}–{check.k_rows[1] - 1}",
            v_cols=f"{check.v_rows[0]}–{check.v_rows[1] - 1}",
            shape=stored[::-1],
            stored=stored,
            g=check.kv_head,
            k_diff=f"{check.k_diff:.1e}",
            v_diff=f"{check.v_diff:.1e}",
            scale=f"{check.scale:.3g}",
            bias=T("projection_bias") if tm.config.attention_bias[0] else "",  # Llama, Gemma: x·W alone
        )
        + (" " + T("projection_qk_norm") if check.qk_norm else "")
        + " "
        + T(
            "projection_own"
            if len(check.readers) == 1
            else "projection_shared_all"  # multi-query attention (Gemma 3): one key/value head for the layer
            if tm.config.kv_heads == 1
            else "projection_shared",
            head=head,
            g=check.kv_head,
            n=len(check.readers),
            heads=", ".join(map(str, check.readers)),
        )
    )
    return Inspector(
        {T("step"): [T(f"step_{s}") for s, _ in qk.shapes], T("shape"): [d for _, d in qk.shapes]},
        Panel("qk_scores", charts.bars(keys, {T("scores"): scores}, title=title, x_title=T("keys")), qk.scores),
        Panel(
            "qk_weights",
            charts.bars(keys, {T("weights"): qk.weights}, title=T("weights_title"), x_title=T("keys")),
            qk.weights,
        ),
        Panel(
            "qk_q",
            vh.vector_rows(
                {T("q_row"): qk.q, T("y_row"): qk.out},
                dims,
                title=T("q_title"),
                x_title=T("dims"),
                x_ticks=QK_X_TICKS,
            ),
            np.vstack([qk.q, qk.out]),
        ),
        Panel("qk_k", charts.signed_heatmap(qk.k, keys, dims, title=T("k_title", g=qk.kv_head), **kw), qk.k),
        Panel("qk_v", charts.signed_heatmap(qk.v, keys, dims, title=T("v_title", g=qk.kv_head), **kw), qk.v),
        Panel(
            "qk_weighted",
            charts.signed_heatmap(qk.weighted, keys, dims, title=T("weighted_title"), **kw),
            qk.weighted,
        ),
        projection,
    )
