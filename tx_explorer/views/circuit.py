"""Watch a circuit form (lecture §4.1: heads learn relations): the bundled two-layer attention-only model's
training record with its phase change, its previous-token and induction heads at each shipped checkpoint,
K-composition measured by ablation, the same scores for the heads of the pretrained LLMs installed (SmolLM2, Gemma 3
270M), and the run again, live."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from tx_explorer import models
from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis import induction as ind
from tx_explorer.errors import InputError
from tx_explorer.families.circuit import CircuitBundle
from tx_explorer.families.text import TextModel
from tx_explorer.train import induction as trainer
from tx_explorer.views import Panel, axes, sentences, signed, texts
from tx_explorer.viz import circuit as vc
from tx_explorer.viz.norm_figures import side_by_side

PAGE = "circuit"
BUNDLE = "induction-2l"  # the registry's name of the shipped run
COMPARE_SEQUENCES = 4  # repeated random sequences a real LLM is scored on (SmolLM2's 30 layers: small for the CPU)
MAP_LENGTH = 12  # the maps' sequence: a first token, then 12 random tokens twice (25 rows, readable)
MAX_SEED = 1_000_000


def _formation_panel(key: str, record: dict[str, list], marks: list[int], lang: str) -> tuple[Panel, int | None]:
    T = texts(PAGE, lang)
    steps = record["step"]
    phase = ind.phase_change(steps, record["loss_first"], record["loss_second"])
    fig = vc.formation(
        steps,
        {T("loss_first"): record["loss_first"], T("loss_second"): record["loss_second"]},
        {T("score_induction"): record["induction"], T("score_previous"): record["previous"]},
        phase=phase,
        phase_label=T("phase_mark", step=phase),
        marks=marks,
        x_title=T("axis_step"),
        loss_title=T("axis_loss"),
        score_title=T("axis_score"),
    )
    data = {
        k: np.asarray(record[k], dtype=float) for k in ("step", "loss_first", "loss_second", "induction", "previous")
    }
    return Panel(key, fig, data), phase


@dataclass(frozen=True)
class Formation:
    curves: Panel
    verdict: str  # where the phase change is, with its numbers (or that there is none)
    settings: str  # the model and the recipe, read from the bundle


def formation(bundle: CircuitBundle, *, lang: str = "en") -> Formation:
    """The shipped record's curves, the phase change found on them and marked, the checkpoints ticked."""
    T = texts(PAGE, lang)
    record = bundle.record
    panel, phase = _formation_panel("circuit_formation", record, bundle.steps, lang)
    cfg, s = bundle.text.config, bundle.training["settings"]
    settings = T(
        "settings",
        layers=cfg.num_layers,
        heads=cfg.num_heads,
        dim=cfg.dim,
        positions=T(f"pos_{cfg.positions}"),
        vocab=cfg.vocab_size,
        steps=s["steps"],
        batch=s["batch_size"],
        seq=s["seq_len"],
        seed=s["seed"],
        share=f"{100 * s['repeat_share']:.0f}",
        # "0 % of the windows from tiny-gpt's corpus, the others random" for a run of random windows only
        windows=T("windows_text", text=f"{100 * s['text_share']:.0f}") if s["text_share"] else T("windows_random"),
        min_len=s["min_segment"],
        max_len=s["max_segment"],
        count=s["eval_count"],
        n=s["eval_length"],
        cpu=f"{bundle.training['train_cpu_minutes']:.1f}",
    )
    return Formation(panel, _phase_words(record, phase, lang=lang), settings)


def _phase_words(record: dict[str, list], phase: int | None, seconds: float | None = None, *, lang: str = "en") -> str:
    """Where the phase change is, over how many steps the induction score rose (:func:`induction.rise_span`) and
    what moved at the phase change; ``seconds``: a live run's time to it, said in the same sentence."""
    T = texts(PAGE, lang)
    if phase is None:
        return T("no_phase", ratio=f"{100 * ind.PHASE_RATIO:.0f}")
    i = record["step"].index(phase)
    when = T("phase_at", step=phase) if seconds is None else T("phase_after", step=phase, seconds=f"{seconds:.0f}")
    steps, scores = record["step"], record["induction"]
    words = [
        T(
            "phase_verdict",
            when=when,
            first=f"{record['loss_first'][i]:.2f}",
            second=f"{record['loss_second'][i]:.2f}",
            ratio=f"{100 * ind.PHASE_RATIO:.0f}",
        )
    ]
    if span := ind.rise_span(steps, scores):  # the whole rise: one interval around the phase shows only its slope
        words.append(
            T(
                "induction_rise",
                start=f"{scores[0]:.2f}",
                step_start=steps[0],
                end=f"{scores[-1]:.2f}",
                step_end=steps[-1],
                share=f"{100 * ind.RISE_SHARE:.0f}",
                rise_from=span[0],
                rise_to=span[1],
            )
        )
    before = max(0, i - 1)
    # "from 0.18 to 0.18" read as a change: a score the same to the digits shown is said to stay
    prev_before, prev_after = (f"{record['previous'][j]:.2f}" for j in (before, i))
    words.append(
        T(
            "phase_interval",
            step=phase,
            step_before=steps[before],
            ind_before=f"{scores[before]:.2f}",
            ind_after=f"{scores[i]:.2f}",
            previous=T(
                "previous_moved" if prev_before != prev_after else "previous_steady",
                before=prev_before,
                after=prev_after,
                start=f"{record['previous'][0]:.2f}",
            ),
        )
    )
    return sentences(words, lang)


@dataclass(frozen=True)
class StepMaps:
    maps: Panel  # the previous-token head's and the induction head's maps side by side
    caption: str


def step_maps(bundle: CircuitBundle, step: int, *, lang: str = "en") -> StepMaps:
    """At the checkpoint ``step``: the final model's previous-token head (layer 0) and induction head (last
    layer), the same two heads every step, on one held-out repeated sequence, and their scores then."""
    T = texts(PAGE, lang)
    final = ind.bundle_k_composition(bundle)
    tm = bundle.checkpoint(step)
    ids = ind.held_out(bundle, 1, length=MAP_LENGTH)  # (1, 1 + 2n)
    w = ind.attention_maps(tm.model, ids)  # (L, H, M, M)
    (pl, ph), (il, ih) = final.previous_head, final.induction_head
    labels = [f"{i}·{t}" for i, t in enumerate(tm.labels(ids[0].tolist()))]
    names = {T("map_previous", layer=pl, head=ph): w[pl, ph], T("map_induction", layer=il, head=ih): w[il, ih]}
    fig = side_by_side(names, row_labels=labels, col_labels=labels, **axes(lang), height=460)
    c = ind.measure(tm.model, ind.held_out(bundle))
    caption = T(
        "step_caption",
        step=step,
        prev=f"{c.previous[pl, ph]:.2f}",
        induction=f"{c.induction[il, ih]:.2f}",
        first=f"{c.loss_first:.2f}",
        second=f"{c.loss_second:.2f}",
        n=MAP_LENGTH,
    )
    return StepMaps(Panel("circuit_maps", fig, np.stack(list(names.values()))), caption)


def _percent(change: float, lang: str) -> str:
    """A signed change in per cent, with a real minus sign: "−96 %", "+4 %" ("−96%" in Chinese, as its locale
    writes per cent)."""
    return signed(f"{100 * change:+.0f}{'' if lang == 'zh' else ' '}%")


@dataclass(frozen=True)
class Composition:
    table: list[dict[str, str]]  # intact vs previous-token head ablated: induction score, losses
    verdict: str


def k_composition(bundle: CircuitBundle, *, lang: str = "en") -> Composition:
    """K-composition measured on the shipped final weights: zero the layer-0 previous-token head and read the
    induction head's score and the copies' losses again."""
    T = texts(PAGE, lang)
    k = ind.bundle_k_composition(bundle)
    (pl, ph), (il, ih) = k.previous_head, k.induction_head
    intact, ablated = T("col_intact"), T("col_ablated", layer=pl, head=ph)
    rows = [
        (T("row_induction", layer=il, head=ih), k.induction_before, k.induction_after, "{:.3f}"),
        (T("row_previous", layer=pl, head=ph), k.clean.previous[pl, ph], k.ablated.previous[pl, ph], "{:.3f}"),
        (
            T("row_previous_first", layer=pl, head=ph),
            k.clean.previous_first[pl, ph],
            k.ablated.previous_first[pl, ph],
            "{:.3f}",
        ),
        (T("row_second"), k.clean.loss_second, k.ablated.loss_second, "{:.2f}"),
        (T("row_first"), k.clean.loss_first, k.ablated.loss_first, "{:.2f}"),
    ]
    table = [{T("col_measure"): name, intact: f.format(a), ablated: f.format(b)} for name, a, b, f in rows]
    verdict = T(
        "k_verdict" if k.induction_drop >= 0.5 else "k_verdict_weak",
        prev=f"L{pl} H{ph}",
        induction=f"L{il} H{ih}",
        before=f"{k.induction_before:.2f}",
        after=f"{k.induction_after:.2f}",
        change=_percent(-k.induction_drop, lang),
        second=f"{k.clean.loss_second:.2f}",
        second_after=f"{k.ablated.loss_second:.2f}",
        first=f"{k.clean.loss_first:.2f}",
    )
    return Composition(table, verdict)


def pretrained(*, installed: bool = True) -> list[str]:
    """The registry's pretrained causal text models (not trained here: SmolLM2, Gemma 3 270M …), in its order; with
    ``installed`` only those whose files are on this machine."""
    names = models.available_models("text", kind="causal") if installed else list(models.REGISTRY)
    entries = {n: models.REGISTRY[n] for n in names}
    return [n for n, e in entries.items() if e.family == "text" and e.kind == "causal" and not e.bundled]


@dataclass(frozen=True)
class Scores:
    """Every head's previous-token and induction scores of the shipped model and of each compared LLM: numbers
    only, worded by :func:`comparison` in the language shown."""

    ours_name: str
    ours: ind.Circuit  # the shipped model's clean circuit
    theirs: dict[str, ind.Circuit]  # per compared model, in the order given
    length: int  # n: each sequence's tokens, repeated once


def score_heads(bundle: CircuitBundle, *others: TextModel) -> Scores:
    """The same two scores for every head of each of ``others`` (SmolLM2, Gemma 3 270M), on repeated random
    sequences of its own vocabulary of the same length, beside the shipped model's (seconds per LLM)."""
    s = bundle.training["settings"]
    theirs = {}
    for other in others:
        batch = ind.random_repeats(
            other.config.vocab_size,
            other.special_ids,
            length=s["eval_length"],
            count=COMPARE_SEQUENCES,
            seed=s["eval_seed"],
        )
        theirs[other.name] = ind.measure(other.model, batch)
    return Scores(bundle.text.name, ind.bundle_k_composition(bundle).clean, theirs, s["eval_length"])


@dataclass(frozen=True)
class Comparison:
    scatter: Panel  # every head of every model: previous-token vs induction score
    captions: list[str]  # one per compared model, in the order given


def comparison(scores: Scores, *, lang: str = "en") -> Comparison:
    """The scores as one scatter of every head, and a caption per compared model: its best heads and losses."""
    T = texts(PAGE, lang)
    ours = scores.ours
    points = {scores.ours_name: (ours.previous, ours.induction)}
    data = {"ours_previous": ours.previous, "ours_induction": ours.induction}
    captions = []
    for name, theirs in scores.theirs.items():
        points[name] = (theirs.previous, theirs.induction)
        data |= {f"{name}_previous": theirs.previous, f"{name}_induction": theirs.induction}
        (il, ih), (pl, ph) = theirs.best("induction"), theirs.best("previous")
        captions.append(
            T(
                "compare_caption",
                model=name,
                heads=theirs.induction.size,
                ind_head=f"L{il} H{ih}",
                ind=f"{theirs.induction[il, ih]:.2f}",
                prev_head=f"L{pl} H{ph}",
                prev=f"{theirs.previous[pl, ph]:.2f}",
                many=int((theirs.induction >= hs.INDUCTION_THRESHOLD).sum()),
                threshold=f"{hs.INDUCTION_THRESHOLD:.1f}",  # the head-science page's verdict: the same bar
                ours=f"{ours.induction.max():.2f}",
                second=f"{theirs.loss_second:.2f}",
                first=f"{theirs.loss_first:.2f}",
                n=scores.length,
                count=COMPARE_SEQUENCES,
            )
        )
    fig = vc.head_scores(points, x_title=T("score_previous"), y_title=T("score_induction"))
    return Comparison(Panel("circuit_compare", fig, data), captions)


def compare(bundle: CircuitBundle, *others: TextModel, lang: str = "en") -> Comparison:
    """:func:`score_heads` worded by :func:`comparison` (the page keeps the scores and words them per run)."""
    return comparison(score_heads(bundle, *others), lang=lang)


# --- the live run ---------------------------------------------------------------------------------------------
Records = list[tuple[float, trainer.Record]]  # (seconds since the start, record) of a live run
# The live run follows the shipped run's schedule (seed 0 retraces its record) and stops this many steps after its
# phase change, or at the cap: the lesson is the drop, not the 8 000 steps of polishing after it.
LIVE_AFTER_PHASE = 500
LIVE_MAX_STEPS = 4000


def live_settings(seed: int) -> trainer.Settings:
    """The page's run (:data:`~tx_explorer.train.induction.LIVE`) from ``seed``, a whole number ≥ 0."""
    if int(seed) != seed or not 0 <= seed <= MAX_SEED:
        raise InputError("seed_range", seed=seed)
    return replace(trainer.LIVE, seed=int(seed))


def live_intro(bundle: CircuitBundle, *, lang: str = "en") -> str:
    """What the live run does, with its settings."""
    return texts(PAGE, lang)(
        "live_intro",
        steps=min(LIVE_MAX_STEPS, trainer.LIVE.steps),
        after=LIVE_AFTER_PHASE,
        shipped=bundle.training["settings"]["steps"],
        every=trainer.LIVE.eval_every,
    )


def _columns(records: Records) -> dict[str, list]:
    rows = [r for _, r in records]
    return {k: [getattr(r, k) for r in rows] for k in ("step", "loss_first", "loss_second", "induction", "previous")}


def live_phase(records: Records) -> int | None:
    """The step of a live run's phase change so far (:func:`~tx_explorer.analysis.induction.phase_change`)."""
    r = _columns(records)
    return ind.phase_change(r["step"], r["loss_first"], r["loss_second"])


def live_curves(records: Records, *, lang: str = "en") -> tuple[Panel, str]:
    """The live run's curves so far, its phase change marked (found on them), and a line saying where it is."""
    T = texts(PAGE, lang)
    record = _columns(records)
    panel, phase = _formation_panel("circuit_live", record, [], lang)
    if phase is None:
        return panel, T("live_waiting", step=record["step"][-1], seconds=f"{records[-1][0]:.0f}")
    seconds = next(t for t, r in records if r.step == phase)
    return panel, _phase_words(record, phase, seconds, lang=lang)


@dataclass
class LiveRun:
    """The training run from scratch as a job for the pool (``run(report)``): a worker trains and leaves its
    latest curves here, the page's thread draws them (Streamlit draws only from the page's thread)."""

    bundle: CircuitBundle
    seed: int = 0
    lang: str = "en"
    records: Records = field(default_factory=list)  # filled in place: a stop keeps what was trained
    latest: Panel | None = None  # curves not drawn yet

    def __call__(self, report: Callable[[float, str], None]) -> Records:
        T = texts(PAGE, self.lang)
        settings = live_settings(self.seed)
        most = min(LIVE_MAX_STEPS, settings.steps)
        start = time.monotonic()

        def step(n: int) -> None:
            report(n / most, T("progress", step=n, steps=most))

        for rec, _ in trainer.run(self.bundle.tokens(), settings, self.bundle.text.config, on_step=step):
            self.records.append((time.monotonic() - start, rec))
            self.latest = live_curves(self.records, lang=self.lang)[0]
            phase = live_phase(self.records)
            if rec.step >= most or (phase is not None and rec.step >= phase + LIVE_AFTER_PHASE):
                break
        return self.records

    def draw_latest(self, draw: Callable[[Panel], None]) -> None:
        """``draw`` the curves the worker left, if any since the last call."""
        panel, self.latest = self.latest, None
        if panel is not None:
            draw(panel)
