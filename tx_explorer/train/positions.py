"""Train the position lab: ``python -m tx_explorer.train positions``.

Five small causal LMs that differ only in ``TransformerConfig.positions`` — none, sinusoidal, learned, rotary,
ALiBi — trained on tiny-gpt's corpus and tokenizer with a 64-token context, the same initial weights (every
parameter they share is copied from one seeded initialisation; the learned table is the only extra), the same
batches (one generator, the same seed) and the same recipe (the language model's AdamW and warm-up/cosine
schedule, :mod:`tx_explorer.train.lm`). Then each is measured by :mod:`tx_explorer.analysis.position_lab`:
loss at every position of held-out windows 4× the training length, attention weight by query–key distance,
a shuffled-context probe and the first layer's relative-score spread; the claims are checked on those numbers.

The bundle ``tx_explorer/weights/positions`` holds ``summary.json`` (settings, results, verdicts),
``model.safetensors`` (each scheme's weights under ``<scheme>.``, float16), ``replay.safetensors`` (the first
batches and the losses they gave, for the reproduction test), ``config.json``, ``tokenizer.json`` and
``manifest.json``. The ``positions`` section of BENCHMARKS.md is rewritten.
"""

from __future__ import annotations

import argparse
import logging
import math
import resource
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from tx_explorer import locales, report
from tx_explorer.analysis import position_lab as lab
from tx_explorer.config import TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.families.positions import BASE, BUNDLE, RETRAIN, TOKENIZER, write_bundle
from tx_explorer.families.text import unique_state
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train.common import lr_at, make_optimizer, train_loop
from tx_explorer.train.lm import bundled_or_new_tokenizer, encode_stream

log = logging.getLogger("tx_explorer.train.positions")
ROOT = Path(__file__).resolve().parents[2]
REPLAY_STEPS = 3  # batches (and their losses) shipped so a test can replay the start of every run


@dataclass(frozen=True)
class Settings:
    """One recipe for every scheme (nanoGPT's, :mod:`tx_explorer.train.common`)."""

    steps: int = 1600
    batch_size: int = 16
    seq_len: int = 64  # the training context
    lr: float = 3e-3  # peak
    warmup: int = 50  # linear warm-up steps
    weight_decay: float = 0.1
    clip: float = 1.0  # max global gradient norm
    seed: int = 0
    eval_factor: int = 4  # loss by position on windows of eval_factor × seq_len tokens
    eval_windows: int = 128  # held-out windows for loss by position and the order probe
    attention_windows: int = 16  # held-out windows for attention by distance
    probe_stride: int = 32  # the order probe reads held-out windows of seq_len + 1 tokens starting this far apart


def scheme_config(scheme: str, vocab_size: int = BASE.vocab_size, max_len: int = BASE.max_len) -> TransformerConfig:
    if scheme not in lab.SCHEMES:
        raise KeyError(f"unknown position scheme {scheme!r}; choose from {', '.join(lab.SCHEMES)}")
    return BASE.replace(positions=scheme, vocab_size=vocab_size, max_len=max_len)


def build(scheme: str, *, seed: int = 0, vocab_size: int = BASE.vocab_size) -> CausalLM:
    """A fresh model whose shared parameters equal every other scheme's at the same seed."""
    torch.manual_seed(seed)
    shared = CausalLM(scheme_config("none", vocab_size)).state_dict()
    model = CausalLM(scheme_config(scheme, vocab_size))
    missing = set(model.state_dict()) - set(shared)
    model.load_state_dict(shared, strict=False)
    assert missing <= {"embed.pos_embed.weight"}, missing  # only the learned table is the scheme's own
    return model


def batches(train_ids: Tensor, settings: Settings) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """``(starts [B], x [B, N], y [B, N])`` for every step: random windows drawn by one seeded generator."""
    gen = torch.Generator().manual_seed(settings.seed)
    n = settings.seq_len
    for _ in range(settings.steps):
        starts = torch.randint(0, len(train_ids) - n - 1, (settings.batch_size,), generator=gen)
        yield (
            starts,
            torch.stack([train_ids[s : s + n] for s in starts]),
            torch.stack([train_ids[s + 1 : s + n + 1] for s in starts]),
        )


def train(model: CausalLM, data: Iterator[tuple[Tensor, Tensor]], settings: Settings) -> Iterator[float]:
    """Train ``model`` in place on ``(x, y)`` batches (those of :func:`batches`), yielding each step's loss."""
    opt = make_optimizer(model, lr=settings.lr, weight_decay=settings.weight_decay)

    def loss_fn(_: int) -> Tensor:
        x, y = next(data)
        return model.loss(model(x), y)

    schedule = partial(lr_at, steps=settings.steps, peak=settings.lr, warmup=settings.warmup)
    for step in train_loop(model, opt, loss_fn, steps=settings.steps, schedule=schedule, clip=settings.clip):
        yield step.loss


def measure(model: CausalLM, val_ids: Tensor, settings: Settings) -> dict:
    """Everything the page and the verdicts read about one trained model."""
    n, long = settings.seq_len, settings.seq_len * settings.eval_factor
    count = min(settings.eval_windows, (len(val_ids) - 1) // (long + 1))
    long_windows = val_ids[: count * (long + 1)].view(count, long + 1)  # (W, 4N + 1)
    short = long_windows[:, : n + 1]  # (W, N + 1): the same text, inside the context
    loss = lab.loss_by_position(model, long_windows)
    probe = val_ids.unfold(0, n + 1, settings.probe_stride)  # (W', N + 1), overlapping
    original, shuffled = lab.order_probe(model, probe, seed=settings.seed)
    x = short[: settings.attention_windows, :n]
    vocab = model.cfg.vocab_size
    probe_tokens = torch.randint(0, vocab, (8,), generator=torch.Generator().manual_seed(settings.seed)).tolist()
    inside, beyond = lab.inside_beyond(loss.tolist(), n)
    return {
        "loss_by_position": _round(loss.tolist()),
        "loss_inside": round(inside, 4),
        "loss_beyond": None if math.isnan(beyond) else round(beyond, 4),
        "reach": lab.reach(model, long),
        "attention_by_distance": [
            [_round(h, 4) for h in layer] for layer in lab.attention_by_distance(model, x).tolist()
        ],
        "order_probe": {"original": round(original, 6), "shuffled": round(shuffled, 6), "windows": len(probe)},
        "relative": lab.relative_spread(model, probe_tokens, n),
    }


def _round(values: list[float], digits: int = 5) -> list[float | None]:
    return [None if not math.isfinite(v) else float(f"{v:.{digits}g}") for v in values]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = Settings()
    p = argparse.ArgumentParser(prog=RETRAIN, description=__doc__.splitlines()[0])
    p.add_argument("--schemes", nargs="+", default=list(lab.SCHEMES), choices=lab.SCHEMES)
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--eval-windows", type=int, default=d.eval_windows)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (tiny models gain nothing from more)")
    p.add_argument("--corpus", default="full", choices=sorted(corpus.SOURCES), help="tiny-gpt's corpus by default")
    p.add_argument("--tokenizer", type=Path, default=TOKENIZER, help="tiny-gpt's tokenizer by default")
    p.add_argument("--out", type=Path, default=BUNDLE, help="bundle folder")
    p.add_argument("--benchmarks", type=Path, default=ROOT / "BENCHMARKS.md", help="section rewritten ('' = none)")
    return p.parse_args(argv)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    t0, c0 = time.time(), cpu_seconds()
    settings = Settings(
        steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed, eval_windows=args.eval_windows
    )
    docs = corpus.documents(args.corpus)
    parts = corpus.split(docs)
    tok = bundled_or_new_tokenizer(args.tokenizer, parts.train, BASE.vocab_size, RETRAIN)
    vocab = tok.get_vocab_size()
    train_ids, val_ids = encode_stream(tok, parts.train), encode_stream(tok, parts.val)
    log.info(
        "corpus: %d / %d train / val tokens, vocabulary %d (%.0f s)",
        len(train_ids),
        len(val_ids),
        vocab,
        time.time() - t0,
    )

    replay = {}
    for i, (starts, x, y) in enumerate(batches(train_ids, settings)):
        if i == REPLAY_STEPS:
            break
        replay[f"batch{i}.starts"], replay[f"batch{i}.x"], replay[f"batch{i}.y"] = starts, x, y

    results, weights = {}, {}
    for scheme in args.schemes:
        start, cpu = time.time(), cpu_seconds()
        model = build(scheme, seed=settings.seed, vocab_size=vocab)
        losses = []
        for loss in train(model, ((x, y) for _, x, y in batches(train_ids, settings)), settings):
            losses.append(loss)
            if len(losses) % 100 == 0:
                log.info("%s step %d loss %.3f", scheme, len(losses), sum(losses[-100:]) / 100)
        seconds = time.time() - start
        results[scheme] = {
            "config": model.cfg.to_dict(),
            "train_loss": _round(losses[9::10], 4),  # every 10th step
            "replay_loss": losses[:REPLAY_STEPS],
            **measure(model, val_ids, settings),
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu_seconds() - cpu, 1),
        }
        weights.update({f"{scheme}.{k}": v.half() for k, v in unique_state(model).items()})
        log.info(
            "%s: in-context loss %.3f, beyond %s, %.0f s",
            scheme,
            results[scheme]["loss_inside"],
            results[scheme]["loss_beyond"],
            seconds,
        )

    summary = {
        "settings": asdict(settings),
        "schemes": results,
        "verdicts": verdict_dicts(results, settings.seq_len),
        "train_tokens": len(train_ids),
        "validation_tokens": len(val_ids),
        "corpus": corpus.describe(docs, args.corpus),
        "threads": torch.get_num_threads(),
        "minutes": round((time.time() - t0) / 60, 2),
        "cpu_minutes": round((cpu_seconds() - c0) / 60, 2),
        "command": " ".join([RETRAIN, *(argv or [])]),
    }
    write_bundle(args.out, summary, weights, replay, args.tokenizer if args.tokenizer.is_file() else tok)
    if str(args.benchmarks):
        update_benchmarks(args.benchmarks, summary)
    log.info("bundle written to %s: %.1f min, %.1f CPU-min", args.out, summary["minutes"], summary["cpu_minutes"])


def verdict_dicts(results: dict, context: int) -> list[dict]:
    """The verdicts as JSON: numbers a scheme cannot produce (a learned table past its length) become null."""
    return [
        {**asdict(v), "numbers": {k: x if math.isfinite(x) else None for k, x in v.numbers.items()}}
        for v in lab.verdicts(results, context)
    ]


def update_benchmarks(path: Path, summary: dict) -> None:
    """Rewrite only the text between ``<!-- positions:start -->`` and ``<!-- positions:end -->``."""
    s, runs = summary["settings"], summary["schemes"]
    n = s["seq_len"]
    rows = [
        f"| {name} | {r['loss_inside']:.3f} | "
        + (
            "— (a learned table has no row past " + str(n) + ")"
            if r["loss_beyond"] is None
            else f"{r['loss_beyond']:.3f}"
        )
        + f" | {r['order_probe']['original']:.3f} → {r['order_probe']['shuffled']:.3f} | "
        f"{r['relative']['spread'] / r['relative']['scale']:.1e} | "
        f"{r['seconds']:.0f} s ({r['cpu_seconds']:.0f} s CPU) |"
        for name, r in runs.items()
    ]
    verdict_lines = [
        f"- {locales.text('position_lab', 'claim_' + v['key'], 'en')}: "
        f"**{'holds' if v['holds'] else 'does not hold'}** ("
        + ", ".join(f"{k} —" if x is None else f"{k} {x:.3g}" for k, x in v["numbers"].items())
        + ")"
        for v in verdict_dicts(runs, n)  # recomputed from the numbers: the verdicts' rules live in the library
    ]
    body = "\n".join(
        [
            "## Position lab: none, sinusoidal, learned, rotary, ALiBi",
            "",
            f"Causal LMs of {BASE.num_layers} blocks × D {BASE.dim} ({BASE.num_heads} heads) differing only in the "
            f"position scheme; same initial weights, same batches, seed {s['seed']}, {s['steps']} steps × "
            f"{s['batch_size']} × {n} tokens of tiny-gpt's corpus and tokenizer. Losses in nats per token on "
            f"{s['eval_windows']} held-out windows of {n * s['eval_factor']} tokens: mean over positions 0–{n - 1} "
            f"(inside the training context) and {n}–{n * s['eval_factor'] - 1} (beyond it). Order probe: loss at "
            "the last of 64 positions with the context as written → shuffled. Relative spread: the first layer's "
            "scores on one repeated token, largest spread along a diagonal i − j = d over the largest |score| "
            "(0 when scores depend only on i − j).",
            "",
            "| scheme | loss inside | loss beyond | order probe | relative spread | time |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "Claims checked on these numbers (order probe: shuffled − original; ALiBi: rise of the mean loss past the "
            "context over the mean inside it, and ALiBi must also have the lower loss beyond; "
            "relative: spread / scale):",
            "",
            *verdict_lines,
            "",
            f"Whole run: {summary['minutes']:.1f} min wall-clock, {summary['cpu_minutes']:.1f} CPU-minutes "
            f"({summary['threads']} thread(s)). Rebuild: `{summary['command']}`.",
        ]
    )
    report.write_section(path, "positions", body)
