"""Train the bundled induction circuit: ``python -m tx_explorer.train induction``.

A two-layer attention-only causal LM (:class:`~tx_explorer.modules.transformer.AttentionOnlyLM`, no MLP) with
tiny-gpt's tokenizer, on windows of random tokens (``text_share`` of them from tiny-gpt's corpus instead), where a
share of the windows hold a random token segment twice (at random places, so only an induction circuit predicts
the second copy, never a fixed offset). Every
``eval_every`` steps the run is measured on held-out repeated random sequences (:mod:`tx_explorer.analysis.
induction`): loss on the first and second copies, the best induction score, the best layer-0 previous-token
score. The record, a few checkpoints spanning the phase change and the K-composition test (the previous-token
head ablated) go into the bundle ``tx_explorer/weights/induction-2l``:

``model.safetensors`` (the final weights), ``checkpoints.safetensors`` (``step<N>.<parameter>``, float16),
``config.json``, ``training.json`` (settings, record, checkpoint steps, phase change, K-composition numbers,
times), ``tokens.safetensors`` (a slice of the token stream for the page's live run), ``tokenizer.json``
(tiny-gpt's) and ``manifest.json``. The ``induction`` section of BENCHMARKS.md is rewritten.

The page's live run is :func:`run` with :data:`LIVE` on the shipped tokens: the same recipe, stopped sooner.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import Tensor

from tx_explorer import report
from tx_explorer.analysis import induction as ind
from tx_explorer.analysis.seeding import seeded_init
from tx_explorer.bundle import save_bundle
from tx_explorer.config import TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.families import circuit
from tx_explorer.families.text import unique_state
from tx_explorer.modules.init import skip_init
from tx_explorer.modules.transformer import AttentionOnlyLM
from tx_explorer.train.common import (
    add_bundle_args,
    add_run_args,
    begin,
    cpu_seconds,
    lr_at,
    make_optimizer,
    train_loop,
)
from tx_explorer.train.lm import bundled_or_new_tokenizer, encode_stream

log = logging.getLogger("tx_explorer.train.induction")


@dataclass(frozen=True)
class Settings:
    """One run: nanoGPT's recipe (:mod:`tx_explorer.train.common`) on windows with repeated segments."""

    steps: int = 8000  # the phase change comes at about 1 300 (seeds 0–2)
    batch_size: int = 16
    # The training context. 32 rather than 64 tokens: a step costs about half as much (27 against 45 ms on one
    # thread), which the page's live run needs (its target: a phase change within 90 s on a shared 2-core server).
    # The held-out sequences (49 tokens) are longer: ALiBi's bias (circuit.CONFIG) has no length to outgrow.
    seq_len: int = 32
    lr: float = 3e-3  # peak
    warmup: int = 30  # linear warm-up steps
    weight_decay: float = 0.1
    clip: float = 1.0  # max global gradient norm
    seed: int = 0
    init_std: float = 0.125  # N(0, std²) weight matrices, about 1/√D: GPT-2's 0.02 starts every map flat
    repeat_share: float = 1.0  # share of the windows holding a random segment twice
    # Share of the windows whose other tokens are corpus text; the rest are random tokens, like the held-out
    # sequences. With text around every segment the run learned the text's bigrams and no copying in 4 000 steps
    # (best induction 0.07); on random tokens the copy loss collapsed after about 3 000 (learned positions, then).
    text_share: float = 0.0
    # Segment length in tokens, drawn uniformly in [min_segment, max_segment]. Long segments: more of each window
    # is predictable by copying, so more of the gradient teaches it (4–16 tokens: phase change at step 2 550, seed 0;
    # 8–16: 1 550; 12–16: 1 300). The copies still sit at random places, 12 to 20 tokens apart.
    min_segment: int = 12
    max_segment: int = 16
    eval_every: int = 50  # steps between measurements
    eval_length: int = 24  # held-out repeated sequences: a first token, then this many random tokens twice
    eval_count: int = 32  # held-out sequences
    eval_seed: int = 10_000  # their generator's seed: never one a training run draws from
    checkpoints: int = 6  # checkpoints kept, spanning the phase change

    def __post_init__(self) -> None:
        if not 1 <= self.min_segment <= self.max_segment <= (self.seq_len + 1) // 2:
            raise ValueError(f"segments of {self.min_segment}–{self.max_segment} tokens do not fit twice in a window")


CONFIG = circuit.CONFIG
POSITION_NAMES = {"alibi": "ALiBi"}  # as the papers write them, in BENCHMARKS.md
LIVE = Settings(eval_every=50)  # the page's run: the shipped recipe and schedule, which the page stops sooner


@dataclass(frozen=True)
class Record:
    """One measurement of a run (see :class:`~tx_explorer.analysis.induction.Circuit`)."""

    step: int
    train_loss: float | None  # mean training loss since the previous record (None at step 0)
    loss_first: float
    loss_second: float
    induction: float  # best induction score of any head
    previous: float  # best previous-token score of a layer-0 head


def windows(train_ids: Tensor, settings: Settings, gen: torch.Generator, ordinary: Tensor) -> Tensor:
    """``[B, N + 1]`` windows: ``text_share`` of them from the token stream, the others random ``ordinary``
    tokens; ``repeat_share`` of them get one segment of random ``ordinary`` tokens written twice, at random places
    with a random gap (the second copy never sits at a fixed offset, so position alone cannot predict it)."""
    n, b = settings.seq_len, settings.batch_size
    starts = torch.randint(0, len(train_ids) - n - 1, (b,), generator=gen)
    w = torch.stack([train_ids[s : s + n + 1] for s in starts])  # (B, N + 1)
    noise = torch.rand(b, generator=gen) >= settings.text_share
    w[noise] = ordinary[torch.randint(len(ordinary), (int(noise.sum()), n + 1), generator=gen)]
    repeat = torch.rand(b, generator=gen) < settings.repeat_share
    for row in torch.nonzero(repeat)[:, 0].tolist():
        length = int(torch.randint(settings.min_segment, settings.max_segment + 1, (), generator=gen))
        first = int(torch.randint(0, n + 2 - 2 * length, (), generator=gen))
        second = first + length + int(torch.randint(0, n + 2 - 2 * length - first, (), generator=gen))
        segment = ordinary[torch.randint(len(ordinary), (length,), generator=gen)]
        w[row, first : first + length] = segment
        w[row, second : second + length] = segment
    return w


def build(cfg: TransformerConfig, seed: int, std: float) -> AttentionOnlyLM:
    """A fresh model drawn from its own generator: the page's live run builds it in the server, where the global
    RNG is shared by every session. The same seed gives the same weights."""
    with skip_init():
        model = AttentionOnlyLM(cfg)
    return seeded_init(model, seed, std=std)


def run(
    train_ids: Tensor,
    settings: Settings,
    cfg: TransformerConfig = CONFIG,
    *,
    special_ids: frozenset[int] = frozenset({0}),
    on_step: Callable[[int], None] = lambda step: None,
) -> Iterator[tuple[Record, AttentionOnlyLM]]:
    """Train a fresh model from ``settings.seed``, yielding a :class:`Record` and the model at step 0 and every
    ``eval_every`` steps (the model is trained further in place: copy what you keep). ``on_step(step)`` after each
    update: a job's progress, and where it stops when cancelled. The same seed gives the same record."""
    model = build(cfg, settings.seed, settings.init_std)
    gen = torch.Generator().manual_seed(settings.seed)
    ordinary = torch.tensor(sorted(set(range(cfg.vocab_size)) - special_ids))
    held_out = ind.random_repeats(
        cfg.vocab_size, special_ids, length=settings.eval_length, count=settings.eval_count, seed=settings.eval_seed
    )
    opt = make_optimizer(model, lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = partial(lr_at, steps=settings.steps, peak=settings.lr, warmup=settings.warmup)

    def loss_fn(_: int) -> Tensor:
        w = windows(train_ids, settings, gen, ordinary)
        return model.loss(model(w[:, :-1]), w[:, 1:])

    def record(step: int, train_loss: float | None) -> Record:
        c = ind.measure(model, held_out)
        return Record(
            step=step,
            train_loss=train_loss,
            loss_first=round(c.loss_first, 4),
            loss_second=round(c.loss_second, 4),
            induction=round(float(c.induction.max()), 4),
            previous=round(float(c.previous[0].max()), 4),
        )

    yield record(0, None), model
    losses: list[float] = []
    for s in train_loop(model, opt, loss_fn, steps=settings.steps, schedule=schedule, clip=settings.clip):
        losses.append(s.loss)
        on_step(s.step)
        if s.step % settings.eval_every == 0 or s.step == settings.steps:
            yield record(s.step, round(sum(losses) / len(losses), 4)), model
            losses = []


def pick_checkpoints(steps: list[int], phase: int | None, count: int) -> list[int]:
    """``count`` logged steps spanning the phase change: the first and the last, and the rest spread evenly
    (by log index) over twice the run up to the phase change (all of it when there is none)."""
    end = len(steps) - 1
    span = min(end, 2 * steps.index(phase)) if phase is not None else end
    picked = {round(i * span / (count - 2)) for i in range(count - 1)} | {end}
    return [steps[i] for i in sorted(picked)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = Settings()
    p = argparse.ArgumentParser(prog=circuit.RETRAIN, description=__doc__.splitlines()[0])
    add_run_args(
        p,
        steps=d.steps,
        batch_size=d.batch_size,
        lr=d.lr,
        warmup=d.warmup,
        weight_decay=d.weight_decay,
        eval_every=d.eval_every,
        threads=1,  # a model this small gains nothing from more
    )
    p.add_argument("--heads", type=int, default=CONFIG.num_heads, help="heads per layer (D stays 64)")
    p.add_argument("--stream-tokens", type=int, default=0, help="train on the first N tokens of the stream (0: all)")
    p.add_argument("--live-tokens", type=int, default=100_000, help="training tokens shipped for the live run")
    add_bundle_args(p, tokenizer=circuit.TOKENIZER, out=circuit.BUNDLE)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0, c0 = begin(args.threads)
    run_args = ("steps", "batch_size", "lr", "warmup", "weight_decay", "eval_every", "seed")
    settings = Settings(**{name: getattr(args, name) for name in run_args})
    docs = corpus.documents(args.corpus)
    texts = corpus.split(docs).train
    tok = bundled_or_new_tokenizer(args.tokenizer, texts, CONFIG.vocab_size, circuit.RETRAIN)
    train_ids = encode_stream(tok, texts)
    train_ids = train_ids[: args.stream_tokens] if args.stream_tokens else train_ids
    cfg = CONFIG.replace(num_heads=args.heads)
    log.info("corpus: %d training tokens (%.0f s)", len(train_ids), time.time() - t0)

    t1, c1 = time.time(), cpu_seconds()
    records, states = [], {}
    for rec, model in run(train_ids, settings, cfg):
        records.append(rec)
        states[rec.step] = {k: v.detach().clone() for k, v in unique_state(model).items()}
        log.info("%s", rec)
    times = {"train_minutes": (time.time() - t1) / 60, "train_cpu_minutes": (cpu_seconds() - c1) / 60}
    meta = {
        "train_tokens": len(train_ids),
        "corpus": corpus.describe(docs, args.corpus),
        "threads": torch.get_num_threads(),
        **{k: round(v, 2) for k, v in times.items()},
        "minutes": round((time.time() - t0) / 60, 2),
        "cpu_minutes": round((cpu_seconds() - c0) / 60, 2),
        "command": " ".join([circuit.RETRAIN, *(argv or [])]),
    }
    write_bundle(args.out, settings, cfg, records, states, train_ids[: args.live_tokens], args.tokenizer, meta)
    bundle = circuit.load(args.out)  # the numbers below from the shipped weights, as the page and tests read them
    log.info(
        "phase change at step %s; K-composition: %s",
        ind.recorded_phase_change(bundle),
        ind.bundle_k_composition(bundle),
    )
    if args.benchmarks:
        update_benchmarks(Path(args.benchmarks), bundle)
    log.info("bundle written to %s: %.1f min, %.1f CPU-min", args.out, meta["minutes"], meta["cpu_minutes"])


def write_bundle(
    out: Path,
    settings: Settings,
    cfg: TransformerConfig,
    records: list[Record],
    states: dict[int, dict[str, Tensor]],
    live_tokens: Tensor,
    tokenizer: Path,
    meta: dict,
) -> None:
    """The bundle's files: the last state as the model, :func:`pick_checkpoints` of ``states`` (step → weights)
    in float16, the record and ``meta`` (times, corpus, command) in ``training.json``, the live run's tokens."""
    steps = [r.step for r in records]
    phase = ind.phase_change(steps, [r.loss_first for r in records], [r.loss_second for r in records])
    kept = pick_checkpoints(steps, phase, settings.checkpoints)
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {f"step{s}.{k}": v.half().contiguous() for s in kept for k, v in states[s].items()},
        str(out / "checkpoints.safetensors"),
    )
    save_file({"train": live_tokens.to(torch.int16).contiguous()}, str(out / "tokens.safetensors"))  # ids < 2¹⁵
    shutil.copyfile(tokenizer, out / "tokenizer.json")
    training = {
        "settings": asdict(settings),
        "live_settings": asdict(LIVE),
        "record": [asdict(r) for r in records],
        "checkpoints": kept,
        "phase_change": phase,
        **meta,
    }
    save_bundle(out, states[steps[-1]], cfg.to_dict(), training=training)


def update_benchmarks(path: Path, bundle: circuit.CircuitBundle) -> None:
    """Rewrite only the text between ``<!-- induction:start -->`` and ``<!-- induction:end -->``."""
    t, s, cfg = bundle.training, bundle.training["settings"], bundle.text.config
    k = ind.bundle_k_composition(bundle)
    c = k.clean
    rows = [
        ("best induction score, held out", "≥ 0.6", f"{c.induction.max():.3f}", c.induction.max() >= 0.6),
        (
            "second-copy / first-copy loss",
            "≤ 40 %",
            f"{c.loss_second:.2f} / {c.loss_first:.2f} nats = {100 * c.loss_ratio:.0f} %",
            c.loss_ratio <= 0.4,
        ),
        (
            f"previous-token head L{k.previous_head[0]}H{k.previous_head[1]} ablated: induction score of "
            f"L{k.induction_head[0]}H{k.induction_head[1]}",
            "drop ≥ 50 %",
            f"{k.induction_before:.3f} → {k.induction_after:.3f} ({-100 * k.induction_drop:+.0f} %); second-copy "
            f"loss {c.loss_second:.2f} → {k.ablated.loss_second:.2f} nats",
            k.induction_drop >= 0.5,
        ),
        ("training", "≤ 15 CPU-min", f"{t['train_cpu_minutes']:.1f} CPU-min", t["train_cpu_minutes"] <= 15),
    ]
    body = "\n".join(
        [
            "## Induction circuit: induction-2l",
            "",
            f"A {cfg.num_layers}-layer attention-only causal LM (D {cfg.dim}, {cfg.num_heads} heads, "
            f"{POSITION_NAMES.get(cfg.positions, cfg.positions)} positions, no MLP) with tiny-gpt's tokenizer, "
            f"{s['steps']} steps × "
            f"{s['batch_size']} × {s['seq_len']} tokens, seed {s['seed']}; {100 * s['text_share']:.0f} % of the "
            f"windows from tiny-gpt's corpus ({t['train_tokens']:,} tokens of its training stream), the others random "
            f"tokens; {100 * s['repeat_share']:.0f} % of the windows hold a random segment of "
            f"{s['min_segment']}–{s['max_segment']} tokens twice. Measured on "
            f"{s['eval_count']} held-out sequences of {s['eval_length']} random tokens twice, from the shipped "
            f"weights. Phase change (second-copy loss below half of the first copy's): "
            + (f"step {t['phase_change']}." if t["phase_change"] is not None else "none within the run."),
            "",
            "| target | wanted | measured | met |",
            "|---|---|---|---|",
            *[f"| {a} | {b} | {m} | {'yes' if ok else 'no'} |" for a, b, m, ok in rows],
            "",
            f"Whole run: {t['minutes']:.1f} min wall-clock, {t['cpu_minutes']:.1f} CPU-minutes including the corpus "
            f"({t['threads']} thread). Rebuild: `{t['command']}`.",
        ]
    )
    report.write_section(path, "induction", body)
