"""Seq2Seq page (lecture §1, §2.5): three translators of a generated English → Italian language, their alignment
matrices against the gold alignment, one Bahdanau decoder step, and quality by sentence length."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.data import translation as tr
from tx_explorer.families.translation import MAX_WORDS
from tx_explorer.views import Panel, texts
from tx_explorer.viz import seq2seq as vs
from tx_explorer.viz.style import safe_labels

PAGE = "seq2seq"
KINDS = ("fixed", "attention", "transformer")  # the page compares one translator of each kind
RETRAIN = "python -m tx_explorer.train seq2seq --model all"
LATEX = (  # the encoder and s₀ as tx_explorer.modules.seq2seq computes them, then one Bahdanau step
    r"\begin{gathered} h_i = [\overrightarrow{h}_i;\ \overleftarrow{h}_i],\qquad"
    r" s_0 = \tanh\!\big(W_s\,[\overrightarrow{h}_T;\ \overleftarrow{h}_1]\big),"
    r"\qquad y_0 = \langle\mathrm{bos}\rangle \\"
    r" e_{t,i} = v^\top \tanh(W s_{t-1} + U h_i),\qquad a_{t,i} = \frac{\exp e_{t,i}}{\sum_j \exp e_{t,j}},"
    r"\qquad c_t = \sum_i a_{t,i}\, h_i,\qquad s_t = \mathrm{GRU}([y_{t-1}; c_t],\, s_{t-1}) \\"
    r" \text{fixed context: } c_t = c = [\overrightarrow{h}_T;\ \overleftarrow{h}_1]\ \text{at every step;}"
    r"\quad \text{decoding stops at } y_t = \langle\mathrm{eos}\rangle \end{gathered}"
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


def input_problem(check: tr.SourceCheck, *, lang: str = "en") -> str:
    """Why a sentence cannot be translated: empty, too long, or words outside the vocabulary (with suggestions)."""
    T = texts(PAGE, lang)
    if check.problem == "empty":
        return T("empty")
    if check.problem == "too_long":
        return T("too_long", n=len(check.tokens), max=MAX_WORDS)
    words = [f"`{w}` ({', '.join(f'`{s}`' for s in sug) or T('no_suggestion')})" for w, sug in check.unknown.items()]
    return T("unknown", words="; ".join(words))


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
    head_name = T("head_mean") if head is None else str(head)
    ax = {"x_title": T("axis_source"), "y_title": T("axis_output"), "gold_label": T("gold")}
    panels, off = [], []
    for key, weights, title in (
        ("attention", with_eos(out["attention"].alignment, out["attention"].eos_alignment), T("bahdanau_title")),
        ("transformer", tfm_map, T("cross_title", layer=layer, head=head_name)),
    ):
        o = out[key]
        matches = reference is not None and o.tokens == reference.target
        g = reference.alignment if matches else None
        fig = vs.alignment_figure(weights, o.source, step_labels(o.tokens), gold=g, title=title, **ax)
        panels.append(Panel(f"s2s_align_{key}", fig, weights))
        off.append(reference is not None and not matches)
    every = cross_mosaic(out, lang=lang) if mosaic else None
    return Alignments(panels[0], panels[1], (off[0], off[1]), every)


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
                labels=labels(lang),
                title=T(key),
                percent=percent,
                floor_label=T("aer_floor"),
                x_title=T("axis_length"),
            ),
            {k: np.array(r[metric], dtype=float) for k, r in results.items() if r.get(metric) is not None},
        )
        for metric, key, percent in BUCKET_METRICS
    ]
