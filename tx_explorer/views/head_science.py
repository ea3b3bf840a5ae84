"""Head science page: what each head does, measured — ablation, activation patching, a sub-layer logit lens,
a head taxonomy with attention sinks, and attribution beside attention."""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np

from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis.heads import head_labels
from tx_explorer.edit import HeadMeans
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, Result, listed, model_facts, sentences, signed, split_bytes_note, texts
from tx_explorer.viz import charts, style
from tx_explorer.viz import head_science as vhs
from tx_explorer.viz import heads as vh

PAGE = "head_science"
LIMIT = 128  # tokens analysed: the budget of the all-head jobs (MiniLM at 128 tokens takes seconds)
LENS_QUANTITIES = ("kl", "entropy", "top1", "cosine")
KL_FLOOR = 0.01  # nats: the logit lens's KL drawn on a log scale from here (below it a read-out agrees with the output)
SCORE_DECIMALS = 3  # every score column of the taxonomy's table, so that 7.2 reads 7.200 beside 9.922


@dataclass(frozen=True)
class Ranked(Result):
    """A layer × head map's result and the head to open first."""

    focus: tuple[int, int] = (0, 0)  # (layer, head): the largest effect in either direction


def _tokens(tm: TextModel, ids: list[int]) -> list[str]:
    return tm.labels(ids)


def head_names(tm: TextModel, layers: int, heads: int, lang: str = "en") -> list[str]:
    """Every head's label, layer by layer ("L5 H0"), a global layer's heads marked ("L5 H0 · global") as the
    layers × heads maps mark their rows: the taxonomy's bars, hovers and table named none on Gemma 3."""
    marks = model_facts.layer_marks(tm.config.global_layers, lang)
    at = {layer * heads + h: word for layer, word in marks.items() for h in range(heads)}  # layer-major, as labelled
    return style.marked(head_labels(layers, heads), at)


def _strongest(values: np.ndarray) -> tuple[int, int]:
    """The cell of the largest |value|: the darkest of a signed map (a head whose removal lowers the loss by 2.5
    nats outweighs one that raises it by 1.6)."""
    layer, head = np.unravel_index(int(np.argmax(np.abs(values))), values.shape)
    return int(layer), int(head)


def focus_note(delta_loss: np.ndarray, *, lang: str = "en") -> str:
    """The head the pattern opens at (:func:`_strongest` of ``delta_loss [L, H]``) with its Δ loss, and, where
    removing it lowers the loss, the head whose removal raises it most."""
    T = texts(PAGE, lang)
    layer, head = _strongest(delta_loss)
    value = float(delta_loss[layer, head])
    delta = signed(f"{value:+.3f}")  # "−2.500 nats": a true minus, as the prose writes it
    said = T("focus_raises" if value >= 0 else "focus_lowers", layer=layer, head=head, delta=delta)
    if value >= 0:
        return said
    up_layer, up_head = np.unravel_index(int(np.argmax(delta_loss)), delta_loss.shape)
    up = float(delta_loss[up_layer, up_head])
    also = (
        T("raise_most", layer=int(up_layer), head=int(up_head), delta=signed(f"{up:+.3f}"))
        if up > 0
        else T("raise_none")
    )
    return sentences([said, also], lang)


def _encode(tm: TextModel, text: str) -> tuple[list[int], int | None]:
    """The ids of ``text`` (at most :data:`LIMIT`) and, where its end was cut, its whole token count."""
    ids, enc = hs.encode(tm, text, LIMIT), tm.encode(text, limit=LIMIT)
    return ids, enc.num_tokens if enc.truncated else None


def _bytes(tokens: list[str], lang: str) -> list[str]:
    """What a ``\\xNN`` token on an axis is, where there is one: a Chinese text in SmolLM2 is mostly bytes."""
    note = split_bytes_note(tokens, lang)
    return [] if note is None else [note]


def _cut(whole: int | None, kept: int, lang: str) -> list[str]:
    """The note that only ``kept`` of the text's ``whole`` tokens were analysed (none where nothing was cut)."""
    return [] if whole is None else [texts(PAGE, lang)("truncated", n=whole, limit=kept)]


# Each view is two steps: its numbers, in no language (the model's work, memoised once for both languages), and
# their wording in ``lang`` (figures, notes, tables: cheap), so that a language switch only rewords.
@dataclass(frozen=True)
class Ablated:
    """Head importance's numbers."""

    r: hs.HeadImportance
    shape: tuple[int, int]  # (sequences, tokens) ablated over: (1, N) for the text, else the held-out windows
    heldout: bool
    cut: int | None  # the text's whole token count, where its end was cut
    reference: HeadMeans | None  # mean ablation's per-head means and the set they were taken over
    reference_shape: tuple[int, int] = (0, 0)  # its (windows, tokens), worded in the language shown


def importance_numbers(
    tm: TextModel, text: str, *, heldout: bool = False, mode: str = "zero", progress: hs.Progress = hs.no_progress
) -> Ablated:
    """Every head ablated in turn on the text or the held-out windows (the long job: a pass per layer)."""
    reference = hs.reference_means(tm) if mode == "mean" else None
    windows = tuple(hs.heldout_windows(tm)[0].shape) if reference is not None else (0, 0)  # the means' set
    if heldout:
        ids, cut = hs.heldout_windows(tm)[0], None
        shape = tuple(ids.shape)
    else:
        ids, cut = _encode(tm, text)
        shape = (1, len(ids))
    r = hs.head_importance(tm, ids, mode=mode, reference=reference, progress=progress)
    return Ablated(r, shape, heldout, cut, reference, windows)


def importance_words(tm: TextModel, m: Ablated, *, lang: str = "en") -> Ranked:
    """The layer × head map of the change when each head is ablated, with its notes, in ``lang``."""
    T = texts(PAGE, lang)
    r, (count, length) = m.r, m.shape
    source = T("source_heldout", count=count, length=length) if m.heldout else T("source_text", n=length)
    axes = dict(  # Gemma 3's global layers named as such in the maps
        x_title=T("axis_head"),
        y_title=T("axis_layer"),
        layer_marks=model_facts.layer_marks(tm.config.global_layers, lang),
    )
    # 中文 spaces "在 8 个留出窗口 × 64 个 token 上测量", not "在你的文本（34 个 token）上测量"
    said = T("importance_source_heldout" if m.heldout else "importance_source", source=source, mode=T(f"mode_{r.mode}"))
    notes = [*_cut(m.cut, length, lang), said]
    if m.reference is not None:
        # the set named here, not the analysis's English description of it (m.reference.source)
        windows = T("source_heldout", count=m.reference_shape[0], length=m.reference_shape[1])
        notes.append(T("mean_reference", source=windows, count=m.reference.count))
    if tm.kind == "encoder":
        fig = vhs.layer_head_map(r.cosine_change, title=T("title_cosine"), clickable=True, **axes)
        layer, head = _strongest(r.cosine_change)
        delta = signed(f"{r.cosine_change[layer, head]:.4f}")
        notes.append(T("focus_cosine", layer=layer, head=head, delta=delta))
        return Ranked((Panel("hs_importance_cos", fig, r.cosine_change),), tuple(notes), focus=(layer, head))
    notes.append(T("base_numbers", loss=signed(f"{r.base_loss:.3f}"), logit=signed(f"{r.base_logit:.2f}")))
    panels = (
        Panel(
            "hs_importance_loss",
            vhs.layer_head_map(r.delta_loss, title=T("title_dloss"), clickable=True, **axes),
            r.delta_loss,
        ),
        Panel(
            "hs_importance_logit",
            vhs.layer_head_map(r.delta_logit, title=T("title_dlogit"), clickable=True, **axes),
            r.delta_logit,
        ),
    )
    notes.append(focus_note(r.delta_loss, lang=lang))
    return Ranked(panels, tuple(notes), focus=_strongest(r.delta_loss))


def importance(
    tm: TextModel,
    text: str,
    *,
    heldout: bool = False,
    mode: str = "zero",
    lang: str = "en",
    progress: hs.Progress = hs.no_progress,
) -> Ranked:
    """The layer × head map of the change when each head is ablated (text or held-out windows)."""
    return importance_words(tm, importance_numbers(tm, text, heldout=heldout, mode=mode, progress=progress), lang=lang)


@dataclass(frozen=True)
class Pattern:
    """One head's attention on the text, and the tokens it is drawn over."""

    layer: int
    head: int
    weights: np.ndarray  # [N, N]
    tokens: list[str]
    global_layers: tuple[int, ...] = ()  # the model's (its config's), so that the title names a global layer


def pattern_numbers(tm: TextModel, text: str, layer: int, head: int) -> Pattern:
    """One head's attention weights on the text (a forward pass: 0.5 s on SmolLM2 at 128 tokens, so the page keeps
    them per model, text and head, and a language switch or a click elsewhere only redraws)."""
    hs.check_head(tm, layer, head)
    ids = hs.encode(tm, text, LIMIT)
    weights = tm.maps(ids).stack(name_contains="attn")[layer, 0, head].numpy()
    return Pattern(layer, head, weights, _tokens(tm, ids), tm.config.global_layers)


def pattern_words(m: Pattern, *, lang: str = "en") -> Panel:
    """The pattern's map, titled and labelled in ``lang``."""
    axes = texts("common", lang)
    fig = vh.attention_map(
        m.weights,
        m.tokens,
        m.tokens,
        title=_pattern_title(m, lang),
        x_title=axes("axis_keys"),
        y_title=axes("axis_queries"),
    )
    return Panel("hs_pattern", fig, m.weights)


def _pattern_title(m: Pattern, lang: str) -> str:
    """The pattern's title, a global layer's named in it ("Layer 5 (global), head 1: …", "第 5 层（全局）第 1 个头的注意
    力"): a sentence, where style.marked's " · " join reads badly. Its 中文 drops "在你的文本上" to stay on one line
    (17 px a character: "第 17 层（全局）第 3 个头：在你的文本上的注意力" wrapped where the unmarked title did not)."""
    word = model_facts.layer_marks(m.global_layers, lang).get(m.layer)
    key, more = ("pattern_title_global", {"word": word}) if word else ("pattern_title", {})
    return texts(PAGE, lang)(key, layer=m.layer, head=m.head, **more)


def pattern(tm: TextModel, text: str, layer: int, head: int, *, lang: str = "en") -> Panel:
    """One head's attention on the text (the cell chosen under the importance map)."""
    return pattern_words(pattern_numbers(tm, text, layer, head), lang=lang)


@dataclass(frozen=True)
class Patched:
    """Activation patching's numbers and the two prompts' ids."""

    p: hs.Patching
    clean: list[int]
    corrupt: list[int]


def patching_numbers(
    tm: TextModel,
    clean: str,
    corrupt: str,
    answers: tuple[str, str] | None = None,
    *,
    progress: hs.Progress = hs.no_progress,
) -> Patched:
    """The residual stream at every layer and position, then every head, patched from the clean run (the long job)."""
    a, b = hs.encode(tm, clean, LIMIT), hs.encode(tm, corrupt, LIMIT)
    ids = hs.answer_ids(tm, answers) if answers and tm.kind == "causal" else None
    return Patched(hs.activation_patching(tm, a, b, answers=ids, progress=progress), a, b)


def patching_words(tm: TextModel, m: Patched, *, lang: str = "en") -> Result:
    """The logit difference recovered as two maps, residual (layer × position) and heads, in ``lang``."""
    T = texts(PAGE, lang)
    p = m.p
    marks = model_facts.layer_marks(tm.config.global_layers, lang)  # Gemma 3's global layers, in both maps
    rows = style.marked([f"L{i}" for i in range(p.residual.shape[0])], marks)
    pairs = list(zip(_tokens(tm, m.clean), _tokens(tm, m.corrupt)))
    tokens = [f"{x} → {y}" if x != y else x for x, y in pairs]
    residual = vhs.position_map(
        p.residual,
        rows,
        tokens,
        title=T("title_patch_residual"),
        x_title=T("axis_position"),
        y_title=T("axis_layer_input"),
        sep=T("hover_sep"),
    )
    heads = vhs.layer_head_map(
        p.heads, title=T("title_patch_heads"), x_title=T("axis_head"), y_title=T("axis_layer"), layer_marks=marks
    )
    metric = p.metric if tm.kind == "causal" else T("metric_cosine")  # a decoder's names two tokens
    clean, corrupt = (signed(f"{v:.3f}") for v in (p.clean_metric, p.corrupt_metric))  # "corrupted −9.238"
    note = T("patch_numbers", metric=metric, clean=clean, corrupt=corrupt)
    notes = (*_bytes([t for pair in pairs for t in pair], lang), note)
    return Result((Panel("hs_patch_residual", residual, p.residual), Panel("hs_patch_heads", heads, p.heads)), notes)


def patching(
    tm: TextModel,
    clean: str,
    corrupt: str,
    answers: tuple[str, str] | None = None,
    *,
    lang: str = "en",
    progress: hs.Progress = hs.no_progress,
) -> Result:
    """Logit difference recovered by patching the residual stream (layer × position) and each head."""
    return patching_words(tm, patching_numbers(tm, clean, corrupt, answers, progress=progress), lang=lang)


@dataclass(frozen=True)
class Lensed:
    """The sub-layer logit lens's numbers, and (decoder) each read-out's top tokens as hover text."""

    r: hs.LogitLens
    ids: list[int]
    cut: int | None  # the text's whole token count, where its end was cut
    hover: np.ndarray | None  # [2L, N] "token p, …" (decoder)


def lens_numbers(tm: TextModel, text: str) -> Lensed:
    """The read-out after every attention and MLP sub-layer, every quantity at once."""
    ids, cut = _encode(tm, text)
    r = hs.logit_lens(tm, ids)
    hover = None
    if tm.kind == "causal":
        # only the tokens on show labelled: Gemma 3's 262 144 labels took longer than the lens itself
        shown, where = np.unique(r.top_ids, return_inverse=True)
        words = np.array(tm.labels(shown.tolist()), dtype=object)[where.reshape(r.top_ids.shape)]  # (2L, N, 5)
        hover = np.array(
            [
                [", ".join(f"{w} {p:.2f}" for w, p in zip(words[i, j], r.top_probs[i, j])) for j in range(len(ids))]
                for i in range(len(r.rows))
            ]
        )
    return Lensed(r, ids, cut, hover)


def lens_words(tm: TextModel, m: Lensed, quantity: str = "kl", *, lang: str = "en") -> Result:
    """One quantity of the lens as a map, top-5 tokens on hover, in ``lang``."""
    T = texts(PAGE, lang)
    if quantity not in LENS_QUANTITIES:
        raise ValueError(f"unknown lens quantity {quantity!r}; choose one of {LENS_QUANTITIES}")
    r = m.r
    if tm.kind == "encoder":
        quantity = "cosine"  # an encoder has no vocabulary head: how close each read-out is to the final one
    values = {"kl": r.kl_to_final, "entropy": r.entropy, "cosine": r.cosine_to_final}.get(quantity)
    if tm.kind == "causal" and quantity == "top1":
        values = r.top_probs[..., 0]
    tokens = _tokens(tm, m.ids)
    rows = lens_rows(tm, len(r.rows) // 2, lang)
    log = quantity == "kl"
    fig = vhs.position_map(
        values,
        rows,
        tokens,
        title=T(f"title_lens_{quantity}"),
        x_title=T("axis_position"),
        y_title=T("axis_readout"),
        hover=m.hover,
        signed=False,
        sep=T("hover_sep"),
        log_floor=KL_FLOOR if log else None,
        colorbar_title=T("lens_log_bar") if log else "",
    )
    notes = (
        *_cut(m.cut, len(m.ids), lang),
        *_bytes(tokens, lang),
        *((_log_scale(values, rows, tokens, lang),) if log else ()),
        T("lens_exact", diff=signed(f"{r.final_max_diff:.2e}")),
    )
    return Result((Panel("hs_lens", fig, values),), notes)


def lens_rows(tm: TextModel, layers: int, lang: str = "en") -> list[str]:
    """The lens's rows, after the attention and after the MLP of each layer; a global layer's attention row marked
    (:func:`~tx_explorer.views.model_facts.layer_marks`), the sub-layer that sees every token: Gemma 3's rows named
    no global layer where the page's layers × heads maps beside them did."""
    T, marks = texts(PAGE, lang), model_facts.layer_marks(tm.config.global_layers, lang)
    rows = [T(f"row_{part}", layer=layer) for layer in range(layers) for part in ("attn", "mlp")]
    return style.marked(rows, {2 * layer: word for layer, word in marks.items()})


def _log_scale(kl: np.ndarray, rows: list[str], tokens: list[str], lang: str) -> str:
    """Why the KL map's colours are on a log scale, from this map's numbers: its range, where its largest value is,
    and how many cells a linear scale would have drawn in its lowest tenth (one colour)."""
    T = texts(PAGE, lang)
    row, col = np.unravel_index(int(np.argmax(kl)), kl.shape)
    top = float(kl[row, col])
    return T(
        "lens_log",
        low=f"{float(kl.min()):.3g}",
        high=f"{top:.3g}",
        row=rows[row],
        position=str(col),
        token=tokens[col],  # the sentence quotes it: notes are shown escaped, a code span kept its backticks
        median=f"{float(np.median(kl)):.3g}",
        tenth=f"{top / 10:.3g}",
        share=f"{float(np.mean(kl < top / 10)):.0%}",
        floor=f"{KL_FLOOR:g}",
    )


def lens(tm: TextModel, text: str, quantity: str = "kl", *, lang: str = "en") -> Result:
    """The read-out after every attention and MLP sub-layer, one quantity as a map, top-5 tokens on hover."""
    return lens_words(tm, lens_numbers(tm, text), quantity, lang=lang)


@dataclass(frozen=True)
class Scored:
    """The taxonomy's per-head scores and, for a decoder's text of 8 tokens or more, the sink three ways."""

    r: hs.Taxonomy
    ids: list[int]
    cut: int | None  # the text's whole token count, where its end was cut
    windows: hs.SinkWindows | None


def taxonomy_numbers(tm: TextModel, text: str) -> Scored:
    """Every head's six scores, the attention sinks, and the sink per layer, dropped and under windowed eviction."""
    ids, cut = _encode(tm, text)
    windows = None
    if tm.kind == "causal" and len(ids) >= 8:
        windows = hs.sink_windows(tm, ids, window=max(2, len(ids) // 4))
    return Scored(hs.taxonomy(tm, ids), ids, cut, windows)


def taxonomy_words(tm: TextModel, m: Scored, score: str = "induction", *, lang: str = "en") -> Result:
    """A table, one score's bars (sinks in red), the 2-D map, and the sink renormalisation, in ``lang``."""
    T = texts(PAGE, lang)
    if score not in hs.SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {hs.SCORES}")
    r, notes = m.r, _cut(m.cut, len(m.ids), lang)
    layers, heads = r.sinks.shape
    names = head_names(tm, layers, heads, lang)  # Gemma 3's global layers' heads marked ("L5 H0 · global")
    columns = {k: T(f"score_{k}") for k in hs.SCORES}
    table = {
        T("col_head"): names,
        **{columns[k]: np.round(r.scores[k].ravel(), SCORE_DECIMALS).tolist() for k in hs.SCORES},
    }
    table[T("col_sink")] = ["✓" if f else "" for f in r.sinks.ravel()]
    bars = vhs.score_bars(
        r.scores[score],
        names,
        title=T(f"score_{score}"),
        x_title=T("axis_head"),
        y_title=T(f"score_{score}"),
        flagged=r.sinks,
    )
    hover = [
        " · ".join(f"{T(f'score_{k}')} {r.scores[k].ravel()[i]:.2f}" for k in hs.SCORES) for i in range(len(names))
    ]
    scatter = vhs.head_scatter(
        r.coords,
        head_labels(layers, heads),  # the points' own names unmarked: 30 of them share the plot (the hover marks)
        r.sinks,
        [f"{n}<br>{h}" for n, h in zip(names, hover)],
        title=T("title_map"),
        x_title=T("axis_pc1", **_axis_words(r, 0, columns)),
        y_title=T("axis_pc2", **_axis_words(r, 1, columns)),
        names=(T("legend_heads"), T("legend_sinks")),
    )
    found, verdict = induction_verdict(tm, r.scores["induction"], r.repeat_length, lang=lang)
    notes.append(verdict)
    for kind in ("induction", "previous", "duplicate") if found else ("previous", "duplicate"):  # with their scores
        best = hs.strongest(r.scores[kind])  # 中文 lists them as "L5 H1（0.91）、…", not "L5 H1 (0.91), …"
        heads = listed(
            (T("head_score", layer=layer, head=head, score=f"{value:.2f}") for layer, head, value in best), lang
        )
        notes.append(T(f"strongest_{kind}", heads=heads))  # a sentence a kind: 中文 spaces "token 头", not "归纳 头"
    if r.sink_effect is None:
        notes.append(T("no_sinks", threshold=f"{hs.SINK_THRESHOLD:.0%}"))
    else:  # "the 1 sink head(s)" was the English of one
        count = int(r.sinks.sum())
        key = ("sink_effect_cos" if tm.kind == "encoder" else "sink_effect_loss") + ("_one" if count == 1 else "")
        effect = signed(f"{r.sink_effect:.4f}" if tm.kind == "encoder" else f"{r.sink_effect:+.3f}")
        loss = signed(f"{r.base_loss:.3f}") if r.base_loss is not None else ""
        notes.append(T(key, count=count, effect=effect, loss=loss))
    data = np.stack([r.scores[k].ravel() for k in hs.SCORES], axis=1)
    panels = [Panel("hs_scores", bars, r.scores[score]), Panel("hs_map", scatter, data)]
    if (w := m.windows) is not None:  # the sink three ways: per layer, first token dropped, windows
        series = {T("sink_as_is"): w.share, T("sink_dropped"): w.share_dropped}
        fig = charts.bars(
            model_facts.layer_names(tm, lang),
            series,
            title=T("sink_title"),
            x_title=T("axis_layer"),
            y_title=T("sink_axis"),
        )
        panels.append(Panel("hs_sink_layers", fig, np.stack([w.share, w.share_dropped], axis=1)))
        full, evicted, kept = (signed(f"{w.losses[k]:.2f}") for k in ("full", "window", "window_sink"))
        notes.append(
            T("sink_windows", window=w.window, scored=w.scored, full=full, window_loss=evicted, window_sink=kept)
        )
    return Result(tuple(panels), tuple(notes), table, decimals=dict.fromkeys(columns.values(), SCORE_DECIMALS))


def taxonomy(tm: TextModel, text: str, score: str = "induction", *, lang: str = "en") -> Result:
    """Per-head scores: a table, one score's bars (sinks in red), the 2-D map, and the sink renormalisation."""
    return taxonomy_words(tm, taxonomy_numbers(tm, text), score, lang=lang)


def _axis_words(r: hs.Taxonomy, axis: int, columns: dict[str, str]) -> dict[str, str]:
    """An axis of the map in words: its share of the variance and its two heaviest scores with their signed weights
    (a principal axis alone did not say what it measures)."""
    weights = r.loadings[axis]
    first, second = (
        signed(f"{weights[i]:+.2f}") + f" × {columns[hs.SCORES[i]]}" for i in np.argsort(-np.abs(weights))[:2]
    )
    return dict(share=f"{r.explained[axis]:.0%}", first=first, second=second)


def induction_verdict(tm: TextModel, scores: np.ndarray, n: int, *, lang: str = "en") -> tuple[bool, str]:
    """Whether any head's induction score ``[L, H]`` (on ``n`` random tokens twice) reaches
    :data:`~tx_explorer.analysis.head_science.INDUCTION_THRESHOLD`, and the verdict with the best head, its score,
    the threshold and what uniform attention would score."""
    (layer, head, best), *_ = hs.strongest(scores, 1)
    found = best >= hs.INDUCTION_THRESHOLD
    chance = hs.uniform_induction(n, encoder=tm.kind == "encoder")
    return found, texts(PAGE, lang)(
        "induction_found" if found else "induction_none",
        model=tm.name,
        layer=layer,
        head=head,
        score=f"{best:.3f}",
        threshold=f"{hs.INDUCTION_THRESHOLD:.1f}",
        chance=f"{chance:.3f}",
        n=n,
    )


@dataclass(frozen=True)
class Attributed:
    """Attribution's numbers and the tokens they score."""

    r: hs.Attribution
    ids: list[int]
    cut: int | None  # the text's whole token count, where its end was cut


def attribution_numbers(tm: TextModel, text: str) -> Attributed:
    """Every method's per-token scores and deletion curve, and the integrated-gradients check."""
    ids, cut = _encode(tm, text)
    return Attributed(hs.attribution(tm, ids), ids, cut)


def attribution_words(tm: TextModel, m: Attributed, *, lang: str = "en") -> Result:
    """The attribution bars, the deletion curves and the faithfulness table, in ``lang``."""
    T = texts(PAGE, lang)
    r, ids = m.r, m.ids
    methods = {m: T(f"method_{m}") for m in hs.ATTRIBUTION_METHODS}
    if not r.converged:  # its bars and faithfulness stay, named for what they are
        methods["integrated_gradients"] = T("not_converged", method=methods["integrated_gradients"])
    target = html.escape(r.target, quote=False) if tm.kind == "causal" else T("target_encoder")  # Plotly markup
    tokens = _tokens(tm, ids)
    bars = vhs.attribution_bars(
        {methods[m]: s for m, s in r.scores.items()},
        tokens,
        title=T("title_attribution", target=target),
        x_title=T("axis_position"),
        y_title=T("axis_scaled"),
    )
    curves = vhs.deletion_curves(
        r.removed,
        {methods[m]: d for m, d in r.deletion.items()},
        title=T("title_deletion"),
        x_title=T("axis_removed"),
        y_title=target,
    )
    table = {
        T("col_method"): [*methods.values(), T("method_random")],
        # written out, each to 4 decimals with a true minus (an encoder's projection may fall below 0)
        T("col_auc"): [signed(f"{v:.4f}") for v in (*(r.faithfulness[m] for m in methods), r.random_auc)],
    }
    data = {"scores": np.stack(list(r.scores.values())), "deletion": np.stack(list(r.deletion.values()))}
    panels = (Panel("hs_attribution", bars, data["scores"]), Panel("hs_deletion", curves, data))
    notes = (*_cut(m.cut, len(ids), lang), *_bytes(tokens, lang), completeness_verdict(r, lang=lang))
    return Result(panels, notes, table)


def attribution(tm: TextModel, text: str, *, lang: str = "en") -> Result:
    """Gradient × input, integrated gradients, attention and rollout per token, and their deletion curves."""
    return attribution_words(tm, attribution_numbers(tm, text), lang=lang)


def completeness_verdict(r: hs.Attribution, *, lang: str = "en") -> str:
    """Whether integrated gradients converged: the sizes of the path's pieces' completeness errors added, against
    :data:`~tx_explorer.analysis.head_science.IG_TOLERANCE` of |f(x) − f(0)|, with the worst piece where not. The
    whole path's error is the pieces' signed sum: within the tolerance beside pieces that are not, it passed only
    because they cancel, and says so (a student read "completeness holds" next to "not converged")."""
    T = texts(PAGE, lang)
    sizes = np.abs(r.piece_errors)
    error, change = float(sizes.sum()), abs(r.f_input - r.f_baseline)
    share = lambda e: f"{e / change:.0%}" if change else "∞"  # noqa: E731
    worst = int(np.argmax(sizes))
    gap = r.completeness_gap
    whole = dict(  # "−7.79e−02": a true minus in the exponent too
        gap=signed(f"{gap:.2e}"), gap_ratio=share(gap), fx=signed(f"{r.f_input:.4f}"), f0=signed(f"{r.f_baseline:.4f}")
    )
    if r.converged:
        overall = ""
    elif gap <= hs.IG_TOLERANCE * change:
        over, under = r.piece_errors[r.piece_errors > 0].sum(), r.piece_errors[r.piece_errors < 0].sum()
        overall = T("ig_overall_cancels", over=signed(f"{over:+.2e}"), under=signed(f"{under:+.2e}"), **whole)
    else:
        overall = T("ig_overall_fails", **whole)
    return T(
        "ig_converged" if r.converged else "ig_not_converged",
        gradients=r.gradients,
        pieces=len(sizes),
        error=signed(f"{error:.2e}"),
        ratio=share(error),
        tolerance=f"{hs.IG_TOLERANCE:.0%}",
        a=signed(f"{r.path[worst]:.4g}"),
        b=signed(f"{r.path[worst + 1]:.4g}"),
        worst=signed(f"{sizes[worst]:.2e}"),
        overall=overall,
        **whole,
    )
