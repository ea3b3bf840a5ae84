"""Seq2Seq page (lecture §1, §2.5): three translators of a generated English → Italian language, their alignment
matrices against the gold alignment, one Bahdanau decoder step, and quality by sentence length."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tx_explorer import models
from tx_explorer.analysis import seq2seq_claims as claims
from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.data import translation as tr
from tx_explorer.families.translation import MAX_WORDS
from tx_explorer.views import Panel, listed, rounding, sentences, signed, subscripted, texts
from tx_explorer.viz import charts
from tx_explorer.viz import seq2seq as vs
from tx_explorer.viz.style import safe_labels

PAGE = "seq2seq"
KINDS = ("fixed", "attention", "transformer")  # the page compares one translator of each kind
RETRAIN = "python -m tx_explorer.train seq2seq --model all"
# The encoder and s₀ as tx_explorer.modules.seq2seq computes them, then one Bahdanau step: maths only, the same in
# both languages; the fixed model's one c and the stop at <eos> are said in words beside it (formula_caption).
LATEX = (
    r"\begin{gathered} h_i = [\overrightarrow{h}_i;\ \overleftarrow{h}_i],\qquad"
    r" s_0 = \tanh\!\big(W_s\,[\overrightarrow{h}_T;\ \overleftarrow{h}_1]\big),"
    r"\qquad y_0 = \langle\mathrm{bos}\rangle \\"
    r" e_{t,i} = v^\top \tanh(W s_{t-1} + U h_i),\qquad a_{t,i} = \frac{\exp e_{t,i}}{\sum_j \exp e_{t,j}},"
    r"\qquad c_t = \sum_i a_{t,i}\, h_i,\qquad s_t = \mathrm{GRU}([y_{t-1}; c_t],\, s_{t-1}) \end{gathered}"
)
BUCKET_METRICS = (  # (result key, title key, in percent)
    ("token_accuracy", "token_accuracy", True),
    ("exact_match", "exact_match", True),
    ("bleu", "bleu", False),
    ("aer", "aer_curve", True),
)
LECTURE_EXAMPLE, DEMO_SENTENCES = tr.LECTURE_EXAMPLE, tr.DEMO_SENTENCES


def labels(lang: str = "en") -> dict[str, str]:
    T = texts(PAGE, lang)
    return {k: T(f"model_{k}") for k in KINDS}


def load_translators(load: Callable[[str], Any], *, lang: str = "en") -> tuple[dict | None, str | None]:
    """The three bundled translators by kind through ``load`` (the page's shared cache), or None and why not."""
    T = texts(PAGE, lang)
    names = {models.REGISTRY[n].kind: n for n in models.available_models("translation")}
    if missing := [labels(lang)[k] for k in KINDS if k not in names]:
        return None, T("no_models", names=", ".join(missing), command=RETRAIN)
    try:
        return {k: load(names[k]) for k in KINDS}, None
    except models.BundleError as exc:
        return None, T("bundle_problem", reason=str(exc))


def input_problem(check: tr.SourceCheck, *, lang: str = "en") -> str:
    """Why a sentence cannot be translated: empty, no words in it, too long, or words outside the vocabulary (with
    suggestions)."""
    T = texts(PAGE, lang)
    if check.problem in ("empty", "no_words"):
        return T(check.problem)
    if check.problem == "too_long":
        return T("too_long", n=len(check.tokens), max=MAX_WORDS)
    words = [
        T("unknown_word", word=f"`{w}`", near=listed((f"`{s}`" for s in sug), lang, "or") or T("no_suggestion"))
        for w, sug in check.unknown.items()
    ]
    return T("unknown", words=T("unknown_sep").join(words))


def gold(check: tr.SourceCheck) -> tr.Example | None:
    """The grammar's reference translation and alignment, when the sentence parses."""
    try:
        return tr.parse(check.tokens)
    except tr.ParseError:
        return None


def translate(translators: Mapping, text: str, beam: int = 1) -> dict:
    """Every model's translation of ``text`` (by kind)."""
    return {k: t.translate(text, beam=beam) for k, t in translators.items()}


@dataclass(frozen=True)
class Output:
    label: str  # the model, in words
    text: str
    verdict: str | None  # against the reference, when there is one
    aer: float | None  # alignment error rate of a model with an alignment


def outputs(translators: Mapping, out: Mapping, reference: tr.Example | None, *, lang: str = "en") -> list[Output]:
    """Each model's translation, checked against the reference."""
    T, names = texts(PAGE, lang), labels(lang)
    rows = []
    for k, o in out.items():
        verdict = aer = None
        if reference is not None:
            verdict = T("correct") if o.tokens == reference.target else T("differs")
            if translators[k].has_alignment:
                aer = ev.sentence_aer(translators[k], reference)
        rows.append(Output(names[k], o.text or "∅", verdict, aer))
    return rows


@dataclass(frozen=True)
class Alignments:
    bahdanau: Panel
    transformer: Panel  # one layer's cross-attention (one head or their mean)
    off_gold: tuple[bool, bool]  # per panel: the output differs from the reference, so no gold is drawn
    mosaic: Panel | None  # every layer × head of the Transformer's cross-attention (None: not asked for)


def alignments(
    out: Mapping,
    reference: tr.Example | None,
    layer: int = 0,
    head: int | None = None,
    *,
    lang: str = "en",
    mosaic: bool = True,
) -> Alignments:
    """Bahdanau's alignment beside the Transformer's cross-attention (``head`` None: the mean of the heads);
    ``mosaic=False`` skips :func:`cross_mosaic` (a page that shows it on demand)."""
    T = texts(PAGE, lang)
    cross = with_eos(out["transformer"].cross, out["transformer"].eos_cross, axis=2)  # (L, H, T_out + 1, T_in)
    tfm_map = cross[layer].mean(axis=0) if head is None else cross[layer, head]
    # One head is named as every page names it, L1 H2; the mean keeps the layer's own words.
    cross_title = (
        T("cross_title", layer=layer, head=T("head_mean"))
        if head is None
        else T("cross_title_head", layer=layer, head=head)
    )
    ax = {"x_title": T("axis_source"), "y_title": T("axis_output"), "gold_label": T("gold")}
    panels, off = [], []
    for key, weights, title in (
        ("attention", with_eos(out["attention"].alignment, out["attention"].eos_alignment), T("bahdanau_title")),
        ("transformer", tfm_map, cross_title),
    ):
        o = out[key]
        matches = reference is not None and o.tokens == reference.target
        g = reference.alignment if matches else None
        fig = vs.alignment_figure(weights, o.source, step_labels(o.tokens), gold=g, title=title, **ax)
        panels.append(Panel(f"s2s_align_{key}", fig, weights))
        off.append(reference is not None and not matches)
    every = cross_mosaic(out, lang=lang) if mosaic else None
    return Alignments(panels[0], panels[1], (off[0], off[1]), every)


def align_intro(out: Mapping, reference: tr.Example | None, *, lang: str = "en") -> str:
    """The alignment section's intro, with where this sentence's articles look in Bahdanau's matrix (on their noun,
    whose gender and number pick the article, or on *the*): measured where the output is the gold translation and
    has articles, else something to look for."""
    T, o = texts(PAGE, lang), out["attention"]
    own = noun = n = 0
    if reference is not None and o.tokens == reference.target:
        own, noun, n = ev.article_weights(o.alignment, reference)
    if not n:
        return T("align_intro", articles=T("articles_look"))
    found = dict(n=n, noun=f"{noun:.2f}", own=f"{own:.2f}")
    return T("align_intro", articles=T("articles_noun" if noun > own else "articles_own", **found))


SHARP_GAP = 0.2  # top-word weight between the sharpest and the most spread head that the page calls a difference


def mosaic_intro(out: Mapping, *, lang: str = "en") -> str:
    """The mosaic's intro: the sharpest and the most spread head on this sentence (:func:`ev.head_sharpness`), and
    whether they differ by :data:`SHARP_GAP` or more; on a one-word source, that sharpness cannot tell them apart."""
    T = texts(PAGE, lang)
    cross = with_eos(out["transformer"].cross, out["transformer"].eos_cross, axis=2)
    sharp = ev.head_sharpness(cross)
    if cross.shape[-1] == 1:  # every weight is 1: "the sharpest, L0 H0, 1.00, the most spread, L0 H0" said nothing
        return T("mosaic_intro_one", heads=sharp.size)
    (tl, th), (bl, bh) = (np.unravel_index(f(sharp), sharp.shape) for f in (np.argmax, np.argmin))
    gap = sharp[tl, th] - sharp[bl, bh]
    return T(
        "mosaic_intro",
        heads=sharp.size,
        top=T("sv_head", layer=tl, head=th),
        top_w=f"{sharp[tl, th]:.2f}",
        low=T("sv_head", layer=bl, head=bh),
        low_w=f"{sharp[bl, bh]:.2f}",
        verdict=T("mosaic_differ" if gap >= SHARP_GAP else "mosaic_alike"),
    )


def cross_mosaic(out: Mapping, *, lang: str = "en") -> Panel:
    """Every layer × head of the Transformer's cross-attention, <eos> step included."""
    T = texts(PAGE, lang)
    cross = with_eos(out["transformer"].cross, out["transformer"].eos_cross, axis=2)  # (L, H, T_out + 1, T_in)
    fig = vs.cross_mosaic(
        cross, layer_name=T("layer"), head_name=T("head"), x_title=T("mosaic_x"), y_title=T("mosaic_y")
    )
    return Panel("s2s_cross_mosaic", fig, cross)


def step_labels(tokens: Sequence[str]) -> list[str]:
    """One label per decoder step, what it reads and what it writes: ``<bos> → w₁``, …, ``w_n → <eos>``."""
    words = [tr.BOS, *tokens, tr.EOS]
    return [f"{a} → {b}" for a, b in itertools.pairwise(words)]


def with_eos(steps: np.ndarray, eos: np.ndarray | None, axis: int = 0) -> np.ndarray:
    """The per-word rows ``steps`` with the <eos> step appended along ``axis`` (unchanged when it is absent)."""
    return steps if eos is None else np.concatenate([steps, np.expand_dims(eos, axis)], axis=axis)


def decoder_step(o, t: int = 0, *, lang: str = "en") -> Panel:
    """Bahdanau's step ``t`` (0 … T_out; the last writes <eos>): weights over the source, weighted annotations,
    and the context vector c_t."""
    T = texts(PAGE, lang)
    weights = with_eos(o.alignment, o.eos_alignment)  # (T_out + 1, T_in)
    if not 0 <= t < len(weights):
        raise ValueError(f"step must lie in [1, {len(weights)}], got {t + 1}")
    terms, context = ev.context_terms(weights[t], o.annotations)
    words = [tr.BOS, *o.tokens, tr.EOS]
    fig = vs.context_figure(
        weights[t],
        terms,
        context,
        o.source,
        title=T("step_title", t=t + 1, prev=safe_labels([words[t]])[0], word=safe_labels([words[t + 1]])[0]),
        weight_title=T("axis_weight"),
        dim_title=T("axis_dim"),
        source_title=T("axis_source"),
    )
    return Panel("s2s_step", fig, {"weights": weights[t], "terms": terms, "context": context})


RECURRENCE = (  # §1.1 as the encoder computes it, in both directions
    r"h_t = f_W(x_t,\ h_{t-1}):\qquad"
    r" \overrightarrow{h}_t = \mathrm{GRU}_{\rightarrow}(x_t,\ \overrightarrow{h}_{t-1}),"
    r"\qquad \overleftarrow{h}_t = \mathrm{GRU}_{\leftarrow}(x_t,\ \overleftarrow{h}_{t+1})"
)


STEP_PX = 360  # the height of the decoder step's two charts


def step_formulas(t: int) -> tuple[str, str]:
    """Step ``t + 1``'s query s_t and its scores e_{t+1,i}, as :data:`LATEX` computes them (maths only, the same in
    both languages)."""
    state = (
        r"$s_0 = \tanh\!\big(W_s\,[\overrightarrow{h}_T;\ \overleftarrow{h}_1]\big)$"
        if t == 0
        else rf"$s_{{{t}}} = \mathrm{{GRU}}([y_{{{t - 1}}}; c_{{{t}}}],\, s_{{{t - 1}}})$"
    )
    scores = rf"$e_{{{t + 1},i}} = v^\top \tanh(W s_{{{t}}} + U h_i)$"
    return state, scores


@dataclass(frozen=True)
class StepQuery:
    """Step t seen from the query side: s_{t−1} (s₀ at the first step), the scores before the softmax, the
    encoder recurrence rebuilt word by word, and the generic operator's a_t and c_t against the decoder's."""

    state: Panel
    scores: Panel
    formulas: tuple[str, str]  # above each chart, in Markdown: how its numbers are computed at this step
    text: str  # the recurrences rebuilt (h_t, s_t) and the operator's a_t, c_t against the decoder's, in words


def step_query(translator, o, t: int = 0, *, lang: str = "en") -> StepQuery:
    """§1.1, §1.3, §2.1–2.2 for Bahdanau's step ``t`` (0 … T_out) of the translation ``o``."""
    T = texts(PAGE, lang)
    steps = claims.decoder_steps(translator, list(o.source), list(o.tokens))
    if not 0 <= t < len(steps.scores):
        raise ValueError(f"step must lie in [1, {len(steps.scores)}], got {t + 1}")
    _, delta = claims.encoder_recurrence(translator, list(o.source))
    da, dc = steps.operator_gap
    # Short one-line titles (step t + 1 reads s_t), the formulas above the charts in KaTeX: a formula in a
    # half-width title wraps to three lines and covers its chart. Both charts share one height, so they line up.
    state = charts.signed_heatmap(
        steps.states[t][None],
        [subscripted("s", t)],  # a tick label is plain text (escaped): s₀, s₁ … in Unicode
        [str(i) for i in range(steps.states.shape[1])],
        title=T("state_title", i=t, t=t + 1),
        x_title=T("axis_state_dim"),
        y_title=T("axis_state"),
        height=STEP_PX,  # one row: tall enough for its colour bar's ticks and the y-axis title beside it
    )
    scores = charts.bars(
        [f"{i}: {w}" for i, w in enumerate(o.source)],
        {T("axis_score"): steps.scores[t]},
        title=T("scores_title", t=t + 1),
        x_title=T("axis_source"),
        y_title=T("axis_score"),
        height=STEP_PX,
    )
    return StepQuery(
        Panel("s2s_state", state, steps.states[t]),
        Panel("s2s_scores", scores, steps.scores[t]),
        step_formulas(t),
        T(
            "recurrence_check",
            delta=rounding(delta),
            words=T("source_words_one" if len(o.source) == 1 else "source_words", n=len(o.source)),
        )
        + "\n\n"
        + T("state_check", delta=rounding(steps.state_gap), n=len(steps.scores))
        + "\n\n"
        # an exact 0 reads "0", not "0.0e+00": on a one-word source a_t = 1 exactly, so Δa = Δc = 0
        + T("operator_check", da=rounding(da), dc=rounding(dc), t=t + 1),
    )


def zero_start(translators: Mapping, per_set: int = 120) -> dict[str, claims.ZeroStart]:
    """§1.1: both RNN translators decoding held-out sentences with s₀ from the encoder and with s₀ = 0."""
    examples = claims.claim_set(per_set)
    return {k: claims.zero_start(translators[k], examples) for k in ("fixed", "attention")}


def zero_start_text(results: Mapping[str, claims.ZeroStart], *, lang: str = "en") -> tuple[dict[str, str], str]:
    """The metrics (token accuracy, s₀ from the encoder → s₀ = 0) and the verdict in words."""
    T, names = texts(PAGE, lang), labels(lang)
    pct = lambda x: f"{x:.1%}"  # noqa: E731
    metrics = {names[k]: f"{pct(r.token_accuracy[0])} → {pct(r.token_accuracy[1])}" for k, r in results.items()}
    a = results["attention"]
    text = T(
        "s0_result",
        n=a.sentences,
        acc=pct(a.token_accuracy[0]),
        acc0=pct(a.token_accuracy[1]),
        exact=pct(a.exact_match[0]),
        exact0=pct(a.exact_match[1]),
        fixed=pct(results["fixed"].token_accuracy[0]),
        fixed0=pct(results["fixed"].token_accuracy[1]),
    )
    return metrics, text


@dataclass(frozen=True)
class SubjectVerb:
    scores: claims.SubjectVerbHeads
    errors: dict  # None (nothing ablated) or (layer, head) → (errors, pairs)
    control: tuple[int, int]  # the head with the least verb → subject preference, ablated for comparison


def subject_verb(translator, per_set: int = 80) -> SubjectVerb:
    """§4.1 on the Transformer translator: every encoder head scored, the best and the weakest ablated."""
    examples = claims.claim_set(per_set)
    scores = claims.subject_verb_heads(translator, examples)
    lift = scores.subject - scores.baseline
    control = tuple(int(i) for i in np.unravel_index(np.argmin(lift), lift.shape))
    return SubjectVerb(scores, claims.ablation_errors(translator, examples, [scores.best, control]), control)


def subject_verb_view(sv: SubjectVerb, *, lang: str = "en") -> Measured:
    """Each head's verb → subject weight minus its distance-matched baseline, and the verdict with its numbers."""
    T, sc = texts(PAGE, lang), sv.scores
    lift = sc.subject - sc.baseline
    layers, heads = [T("sv_layer_n", l=i) for i in range(lift.shape[0])], [str(h) for h in range(lift.shape[1])]
    fig = charts.signed_heatmap(
        lift, layers, heads, title=T("sv_title"), x_title=T("head"), y_title=T("sv_layer"), height=260
    )
    (bl, bh), (cl, ch) = sc.best, sv.control
    base_err, pairs = sv.errors[None]
    best_err, ctrl_err = sv.errors[sc.best][0], sv.errors[sv.control][0]
    verdict = "sv_ablation_matters" if best_err > max(base_err, ctrl_err) else "sv_ablation_no_effect"
    result = T(
        "sv_result",
        pairs=sc.pairs,
        layer=bl,
        head=bh,
        weight=f"{sc.subject[bl, bh]:.3f}",
        base=f"{sc.baseline[bl, bh]:.3f}",
        ratio=f"{sc.subject[bl, bh] / sc.baseline[bl, bh]:.1f}",
    )
    ablation = T(
        verdict, pairs=pairs, none=base_err, best=best_err, layer=bl, head=bh, c_layer=cl, c_head=ch, control=ctrl_err
    )
    text = sentences([result, ablation], lang)
    metrics = {
        T("sv_m_head"): T("sv_head", layer=bl, head=bh),
        T("sv_m_weight"): f"{sc.subject[bl, bh]:.3f} / {sc.baseline[bl, bh]:.3f}",
        T("sv_m_errors"): f"{base_err} → {best_err} / {pairs}",
    }
    return Measured(metrics, Panel("s2s_subject_verb", fig, {"subject": sc.subject, "baseline": sc.baseline}), text)


@dataclass(frozen=True)
class Measured:
    """A claim measured once per server, as its section shows it: metrics or a figure, and the numbers in words."""

    metrics: dict[str, str]
    panel: Panel | None
    text: str


def decoding_ends(translators: Mapping, per_set: int = 120) -> dict[str, claims.Ends]:
    """§1.1: every translator decoding the same held-out pairs greedily, from <bos> until it writes <eos>."""
    examples = claims.claim_set(per_set)
    return {k: claims.decoding_ends(translators[k], examples) for k in KINDS}


def decoding_ends_text(results: Mapping[str, claims.Ends], *, lang: str = "en") -> tuple[dict[str, str], str]:
    """Each translator's decodes that ended with <eos> (the metrics) and T, T′ and the lengths in words."""
    T, names = texts(PAGE, lang), labels(lang)
    # The bare count: "120 / 120 ended with <eos>" is cut in a third of the page; ends_intro says what it counts.
    metrics = {names[k]: f"{r.ended} / {r.sentences}" for k, r in results.items()}
    first = next(iter(results.values()))  # the pairs are the same for every translator
    text = T(
        "ends_result",
        n=first.sentences,
        t_lo=first.source_lengths[0],
        t_hi=first.source_lengths[1],
        u_lo=first.target_lengths[0],
        u_hi=first.target_lengths[1],
        differ=first.differ,
        limit=first.limit,
        lengths=T("list_sep").join(
            T("ends_length", model=names[k], same=r.same_length, gap=f"{r.length_gap:.2f}") for k, r in results.items()
        ),
    )
    return metrics, text


CLAIMS: dict[str, Callable[[Mapping], Any]] = {  # section → its computation from the three translators (slow)
    "ends": decoding_ends,
    "s0": zero_start,
    "sv": lambda translators: subject_verb(translators["transformer"]),
}


def claim_view(name: str, result: Any, *, lang: str = "en") -> Measured:
    """The section ``name`` of :data:`CLAIMS` drawn from its ``result``."""
    if name in ("s0", "ends"):
        metrics, text = (zero_start_text if name == "s0" else decoding_ends_text)(result, lang=lang)
        return Measured(metrics, None, text)
    return subject_verb_view(result, lang=lang)


def evaluate(
    translators: Mapping,
    per_bucket: int = 10,
    *,
    progress: Callable[..., None] = lambda f, text: None,
    lang: str = "en",
) -> dict:
    """Every model on a fresh evaluation set of ``per_bucket`` sentences per length bucket."""
    T, names = texts(PAGE, lang), labels(lang)
    buckets, scores = ev.eval_set(per_bucket), {}
    for i, (k, t) in enumerate(translators.items()):
        say = T("running", model=names[k])
        progress(i / len(translators), text=say)
        step = lambda f, i=i, say=say: progress((i + f) / len(translators), text=say)  # noqa: E731
        scores[k] = ev.evaluate(t, buckets, progress=step)
    return scores


def by_length(results: Mapping, *, lang: str = "en") -> list[Panel]:
    """Token accuracy, exact match, BLEU and AER against source length, one line per model."""
    T = texts(PAGE, lang)
    return [
        Panel(
            f"s2s_{metric}",
            vs.bucket_curves(
                results,
                metric,
                labels={**labels(lang), "fixed": T("fig_model_fixed")},  # a legend: Plotly's italic, not $c$
                title=T(key),
                percent=percent,
                floor_label=T("aer_floor"),
                x_title=T("axis_length"),
            ),
            {k: np.array(r[metric], dtype=float) for k, r in results.items() if r.get(metric) is not None},
        )
        for metric, key, percent in BUCKET_METRICS
    ]


def bottleneck_verdict(results: Mapping, *, lang: str = "en") -> str:
    """Lecture §1.2's two claims against ``results`` (:func:`evaluate`'s or the bundles'): does attention lose
    quality more slowly with length than the fixed vector, and does it lose any at all?"""
    T, names = texts(PAGE, lang), labels(lang)
    trends = {k: ev.length_trend(r) for k, r in results.items()}
    first = next(iter(trends.values()))
    pct = lambda x: f"{x:.0%}"  # noqa: E731
    points = lambda x: signed(f"{100 * x:.1f}")  # noqa: E731  (a drop below 0 is a rise: −1.2)
    rows = T("bn_sep").join(
        T(
            "bn_row",
            model=names[k],
            acc0=f"{t.token_accuracy[0]:.1%}",
            acc1=f"{t.token_accuracy[1]:.1%}",
            exact0=pct(t.exact_match[0]),
            exact1=pct(t.exact_match[1]),
        )
        for k, t in trends.items()
    )
    parts = [T("bn_result", n=first.sentences[0], first=first.buckets[0], last=first.buckets[1], rows=rows)]
    attention = {k: t for k, t in trends.items() if k != "fixed"}
    loss = {k: t.token_accuracy[0] - t.token_accuracy[1] for k, t in trends.items()}
    if "fixed" in trends and attention:
        slower = all(loss[k] < loss["fixed"] for k in attention)
        drops = T("list_sep").join(T("bn_drop", model=names[k], drop=points(loss[k])) for k in attention)
        parts.append(T("bn_slower" if slower else "bn_not_slower", drops=drops, fixed=points(loss["fixed"])))
    if attention:  # "with attention it does not fall" fails on any model whose fall exceeds its sampling noise
        falling = {k: t for k, t in attention.items() if t.falls}
        falls = T("bn_sep").join(
            T("bn_fall", model=names[k], drop=points(t.exact_match[0] - t.exact_match[1]), se=points(t.exact_se))
            for k, t in (falling or attention).items()
        )
        parts.append(T("bn_falls" if falling else "bn_flat", falls=falls))
    return sentences(parts, lang)
