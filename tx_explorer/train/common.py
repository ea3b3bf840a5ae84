"""What every trainer shares: the learning-rate schedule, AdamW, one optimiser step and the training loop.

The recipe is nanoGPT's at CPU scale: linear warm-up, cosine decay to a floor, AdamW with weight decay on
matrices only, the global gradient norm clipped before each step. :func:`train_loop` runs it with a progress
bar on stderr and hands each step's numbers back to the trainer, which evaluates, logs or stops as it likes.
"""

from __future__ import annotations

import argparse
import logging
import math
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from tx_explorer.bundle import MANIFEST
from tx_explorer.data import corpus

# The cosine ends at 10 % of the peak rather than at 0 or 1 %: the Chinchilla study (Hoffmann et al. 2022)
# decays by 10×, nanoGPT's min_lr = lr / 10 follows it, and our short CPU runs still learn in their last
# steps. Every trainer uses it except the image classifier, whose bundled run decayed to 1 % and passes that.
DECAY_FLOOR = 0.1


def cpu_seconds() -> float:
    """CPU time of this process (user + system): a trainer's record of its cost, independent of the machine's load."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def clear_outputs(out: Path, names: Iterable[str]) -> Path:
    """Create ``out`` and delete from it the files ``names`` that this trainer writes (an earlier run's bundle) and
    the manifest: nothing else. ``--out`` may name a folder that holds other files, which must survive a run."""
    out.mkdir(parents=True, exist_ok=True)
    for name in {*names, MANIFEST}:
        (out / name).unlink(missing_ok=True)
    return out


def add_run_args(
    p: argparse.ArgumentParser,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    eval_every: int,
    warmup: int | None = None,
    steps_help: str = "optimiser steps",
    threads: int = 0,
) -> None:
    """The flags every trainer takes, with that trainer's defaults: --steps, --batch-size, --lr, --warmup (when
    it warms up), --weight-decay, --eval-every, --seed and --threads (1 for a model too small to gain from more)."""
    p.add_argument("--steps", type=int, default=steps, help=steps_help)
    p.add_argument("--batch-size", type=int, default=batch_size, help="examples per step")
    p.add_argument("--lr", type=float, default=lr, help="peak learning rate")
    if warmup is not None:
        p.add_argument("--warmup", type=int, default=warmup, help="linear warm-up steps")
    p.add_argument("--weight-decay", type=float, default=weight_decay, help="AdamW decay of the weight matrices")
    p.add_argument("--eval-every", type=int, default=eval_every, help="steps between held-out evaluations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=threads, help="torch CPU threads (0: torch's default)")


def begin(threads: int) -> tuple[float, float]:
    """A trainer's start: its progress logged line by line, torch's CPU threads (0: torch's default), and the
    wall-clock and CPU clocks it reports its minutes from."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if threads:
        torch.set_num_threads(threads)
    return time.time(), cpu_seconds()


BENCHMARKS = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"


def add_bundle_args(p: argparse.ArgumentParser, *, tokenizer: Path, out: Path) -> None:
    """Where a trainer on tiny-gpt's corpus reads and writes: --corpus, --tokenizer, --out and --benchmarks (the
    file whose section it rewrites; '' for none)."""
    p.add_argument("--corpus", default="full", choices=sorted(corpus.SOURCES), help="tiny-gpt's corpus by default")
    p.add_argument("--tokenizer", type=Path, default=tokenizer, help="tiny-gpt's tokenizer by default")
    p.add_argument("--out", type=Path, default=out, help="bundle folder")
    p.add_argument("--benchmarks", default=str(BENCHMARKS), help="file whose section is rewritten ('' = none)")


def lr_at(step: int, *, steps: int, peak: float, warmup: int, floor: float = DECAY_FLOOR) -> float:
    """The learning rate before update ``step`` (0-based) of ``steps``.

    Linear warm-up from ``peak / warmup`` to ``peak`` over ``warmup`` steps (0: start at the peak), then
    cosine decay from ``peak`` to ``floor · peak`` at the last step.
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.9, 0.95),
    decay_vectors: bool = False,
) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: norm gains and biases are not pulled towards 0.

    ``decay_vectors=True`` decays every parameter (the bundled translator's recipe, kept so it retrains
    to the same weights).
    """
    params = list(model.parameters())  # a tied weight appears once
    decay = [p for p in params if decay_vectors or p.dim() >= 2]
    other = [p for p in params if not (decay_vectors or p.dim() >= 2)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas)


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def optimizer_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    loss: Tensor,
    *,
    clip: float = 1.0,
    on_gradients: Callable[[nn.Module], dict[str, Any]] | None = None,
) -> tuple[float, dict[str, Any]]:
    """Backward, clip the global gradient norm at ``clip``, update.

    Returns the norm before clipping and what ``on_gradients(model)`` measured between backward and
    clipping (an empty dict without it).
    """
    opt.zero_grad(set_to_none=True)
    loss.backward()
    measured = on_gradients(model) if on_gradients is not None else {}
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return float(norm), measured


def sample_batch(ids: Tensor, n: int, batch_size: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random windows of ``n`` tokens from ``ids [T]`` and their next tokens: ``(x, y)``, each ``[B, n]``."""
    if len(ids) < n + 2:
        raise ValueError(f"need more than {n + 1} tokens to sample windows of {n}, got {len(ids)}")
    starts = torch.randint(0, len(ids) - n - 1, (batch_size,), generator=gen)
    return torch.stack([ids[s : s + n] for s in starts]), torch.stack([ids[s + 1 : s + n + 1] for s in starts])


@dataclass(frozen=True)
class Step:
    """One update of :func:`train_loop`."""

    step: int  # 1-based: the number of updates done
    lr: float  # the learning rate it used
    loss: float  # the loss it descended
    grad_norm: float  # global gradient norm before clipping
    info: dict[str, Any] = field(default_factory=dict)  # what the loss function and on_gradients returned


LossFn = Callable[[int], "Tensor | tuple[Tensor, dict[str, Any]]"]


def train_loop(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    loss_fn: LossFn,
    *,
    steps: int,
    schedule: Callable[[int], float],
    clip: float = 1.0,
    start: int = 0,
    desc: str | None = None,
    on_gradients: Callable[[nn.Module], dict[str, Any]] | None = None,
) -> Iterator[Step]:
    """Steps ``start … steps − 1``: set the rate ``schedule(step)``, ``loss_fn(step)``, :func:`optimizer_step`.

    ``loss_fn`` draws its own batch and returns the loss, or ``(loss, info)`` with numbers to log; plain
    numbers in ``info`` join the loss on the progress bar. ``desc`` names a tqdm bar on stderr (None: no bar,
    as in the app). Stop early by leaving the ``for`` loop: the bar closes with the generator.
    """
    model.train()
    bar = tqdm(
        range(start, steps), initial=start, total=steps, desc=desc, unit="step", file=sys.stderr, disable=desc is None
    )
    try:
        for step in bar:
            lr = schedule(step)
            set_lr(opt, lr)
            out = loss_fn(step)
            loss, info = out if isinstance(out, tuple) else (out, {})
            grad_norm, measured = optimizer_step(model, opt, loss, clip=clip, on_gradients=on_gradients)
            shown = {k: v for k, v in info.items() if isinstance(v, int | float)}
            bar.set_postfix({"loss": f"{loss.item():.3f}", **{k: f"{v:.3g}" for k, v in shown.items()}})
            yield Step(step + 1, lr, loss.item(), grad_norm, {**info, **measured})
    finally:
        bar.close()
