"""Train the block variants side by side: ``python -m tx_explorer.train variants``.

Lecture §5.2–5.3 and §8.1–8.3 claim that Pre-Norm trains more stably than Post-Norm (most visibly when
deep), that RMSNorm drops the mean and still works, and that SwiGLU at hidden 8D/3 matches the classic
MLP's parameters and usually does better. This command checks those claims at CPU scale:

* four shallow variants (4 blocks × D 64): Post-LN, Pre-LN, Pre-RMSNorm, Pre-RMSNorm + SwiGLU;
* a deep, narrow pair (16 blocks × D 32, the same 12·L·D² non-embedding budget): Post-LN vs Pre-LN, trained
  without warm-up so that the Post-Norm difficulty (Xiong et al. 2020; Liu et al. 2020) can show.

Every variant sees the same batches (one seeded generator each, same seed), the same number of steps and the
same initialisation seed; the whole set is trained at each of ``--seeds`` (0, 1, 2), so that a claim can tell a
gap from seed noise (:mod:`tx_explorer.analysis.spread`). Data, tokenizer, optimiser (AdamW, β₂ 0.95, decay on
matrices), warm-up/cosine schedule and evaluation are the language model's (:mod:`tx_explorer.train.lm`); by
default the corpus is ``"stdlib"`` and the tokenizer the one in this bundle, which reproduce the bundled run. Each
step records the training loss, the learning rate, the global and per-block gradient norms (before clipping) and
the residual stream's RMS after every block; validation loss every ``--eval-every`` steps (first seed).

The bundle folder receives ``history.json`` (every step of every variant at the first seed), ``summary.json``
(settings, parameter counts, every seed's final losses and wall-clock), ``profiles.json`` (depth profiles at
initialisation and after training on one fixed batch, first seed), ``model.safetensors`` (the first seed's
weights under ``<variant>.``, float16),
``tokens.safetensors`` (a slice of the token stream for the page's live mini-run), ``config.json``,
``tokenizer.json`` and ``manifest.json``; it is rewritten after every seed (an interrupted run keeps the seeds it
finished), the ``variants`` section of BENCHMARKS.md at the end.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor

from tx_explorer import locales, report
from tx_explorer.analysis import spread
from tx_explorer.analysis.norm_lab import count_parameters, depth_profile, forward_with_stats, grad_norms
from tx_explorer.analysis.seeding import seeded_init
from tx_explorer.analysis.variant_claims import claims
from tx_explorer.config import TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.families.text import unique_state
from tx_explorer.families.variants import BUNDLE, RETRAIN, load_results, write_bundle
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train.common import begin, lr_at, make_optimizer, sample_batch, train_loop
from tx_explorer.train.lm import bundled_or_new_tokenizer, encode_stream, evaluate, windows

log = logging.getLogger("tx_explorer.train.variants")
ROOT = Path(__file__).resolve().parents[2]

# Shallow: 4 blocks × D 64 (4 heads of 16). Deep: 16 blocks × D 32 (2 heads of 16) — the same 12·L·D².
SHALLOW = TransformerConfig(vocab_size=2048, max_len=64, dim=64, num_layers=4, num_heads=4)
DEEP = SHALLOW.replace(dim=32, num_layers=16, num_heads=2)


@dataclass(frozen=True)
class Settings:
    """One training recipe, for :mod:`tx_explorer.train.common`'s schedule, optimiser and loop."""

    steps: int = 160
    batch_size: int = 8
    seq_len: int = 64
    lr: float = 2e-3  # peak
    warmup: int = 30  # linear warm-up steps (0 = start at the peak)
    weight_decay: float = 0.1
    clip: float = 1.0  # max global gradient norm (measured norms are recorded before clipping)
    seed: int = 0  # of one run: initial weights and batches
    eval_every: int = 40
    eval_windows: int = 16  # validation windows of seq_len tokens during training (more at the end)


@dataclass(frozen=True)
class Variant:
    """A named change to the shallow or deep base config, and to the training recipe."""

    label: str
    changes: Mapping[str, Any]  # TransformerConfig overrides
    deep: bool = False
    recipe: Mapping[str, Any] = field(default_factory=dict)  # Settings overrides


SEEDS = (0, 1, 2)  # three seeds: a claim's gap must exceed the spread between them

# Post-Norm blocks already end in a norm, so (as in the original Transformer and BERT) no final norm.
POST = {"norm_position": "post", "final_norm": False}
VARIANTS: dict[str, Variant] = {
    "post-ln": Variant("Post-LN", POST),
    "pre-ln": Variant("Pre-LN", {}),
    "pre-rms": Variant("Pre-RMSNorm", {"norm": "rmsnorm"}),
    "pre-rms-swiglu": Variant("Pre-RMSNorm + SwiGLU", {"norm": "rmsnorm", "mlp": "swiglu"}),
    "deep-post-ln": Variant("Deep Post-LN (16 × 32)", POST, deep=True, recipe={"warmup": 0}),
    "deep-pre-ln": Variant("Deep Pre-LN (16 × 32)", {}, deep=True, recipe={"warmup": 0}),
}


def variant_config(
    name: str, *, vocab_size: int = SHALLOW.vocab_size, max_len: int = SHALLOW.max_len
) -> TransformerConfig:
    """The :class:`TransformerConfig` of a named variant (see :data:`VARIANTS`)."""
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    v = VARIANTS[name]
    return (DEEP if v.deep else SHALLOW).replace(vocab_size=vocab_size, max_len=max_len, **v.changes)


def variant_settings(name: str, base: Settings) -> Settings:
    return replace(base, **VARIANTS[name].recipe)


def build(
    name: str, *, seed: int = 0, vocab_size: int = SHALLOW.vocab_size, max_len: int = SHALLOW.max_len
) -> CausalLM:
    """A freshly initialised variant, drawn from its own generator (the norms page builds these in the server,
    where the global RNG is shared by every session): the same ``seed`` gives the same weights."""
    return seeded_init(CausalLM(variant_config(name, vocab_size=vocab_size, max_len=max_len)), seed)


@dataclass(frozen=True)
class StepRecord:
    """What one optimiser step measured. Gradient norms are before clipping; RMS is of the forward pass."""

    step: int  # 1-based: the number of updates done
    lr: float
    train_loss: float
    grad_norm: float
    layer_grad_norm: list[float]  # [L]
    residual_rms: list[float]  # [L + 1]: after the embeddings, then after each block
    val_loss: float | None = None


def train_steps(
    model: CausalLM,
    train_ids: Tensor,
    settings: Settings,
    *,
    val_pairs: Sequence[tuple[Tensor, Tensor]] = (),
    desc: str | None = None,
) -> Iterator[StepRecord]:
    """Train ``model`` in place, yielding a :class:`StepRecord` after every step.

    The batch sequence depends only on ``settings.seed``, so variants trained with equal settings see
    identical data. A non-finite loss ends the run after its record (the run has diverged).
    """
    opt = make_optimizer(model, lr=settings.lr, weight_decay=settings.weight_decay)
    gen = torch.Generator().manual_seed(settings.seed)
    schedule = partial(lr_at, steps=settings.steps, peak=settings.lr, warmup=settings.warmup)

    def loss_fn(step: int) -> tuple[Tensor, dict[str, Any]]:
        x, y = sample_batch(train_ids, settings.seq_len, settings.batch_size, gen)
        logits, rms = forward_with_stats(model, x)
        return model.loss(logits, y), {"residual_rms": rms.tolist()}

    def norms_before_clipping(m: CausalLM) -> dict[str, Any]:
        total, per_layer = grad_norms(m)
        return {"grad": total, "layer_grad_norm": per_layer}

    steps = train_loop(
        model,
        opt,
        loss_fn,
        steps=settings.steps,
        schedule=schedule,
        clip=settings.clip,
        desc=desc,
        on_gradients=norms_before_clipping,
    )
    for s in steps:
        finite = math.isfinite(s.loss)
        val = None
        if val_pairs and finite and (s.step % settings.eval_every == 0 or s.step == settings.steps):
            val = evaluate(model, list(val_pairs))
        yield StepRecord(s.step, s.lr, s.loss, s.info["grad"], s.info["layer_grad_norm"], s.info["residual_rms"], val)
        if not finite:
            return


def live_run(
    names: Sequence[str],
    train_ids: Tensor,
    settings: Settings,
    *,
    time_budget: float = 30.0,
    should_stop: Callable[[], bool] = lambda: False,
    vocab_size: int = SHALLOW.vocab_size,
) -> Iterator[tuple[str, StepRecord]]:
    """Train fresh copies of ``names`` in lock-step with one recipe, yielding ``(name, record)``.

    Lock-step: one step of each variant in turn, so every variant sees the same batches.

    Stops after ``settings.steps`` steps, when ``time_budget`` seconds have passed, or as soon as
    ``should_stop()`` is true — so a page can draw the curves as they grow and cancel at any time.
    """
    if not names:
        raise ValueError("choose at least one variant to train")
    runs = {
        name: train_steps(
            build(name, seed=settings.seed, vocab_size=vocab_size, max_len=settings.seq_len), train_ids, settings
        )
        for name in names
    }
    deadline = time.monotonic() + time_budget
    while runs:
        for name in list(runs):
            if should_stop() or time.monotonic() > deadline:
                return
            record = next(runs[name], None)
            if record is None:
                del runs[name]
                continue
            yield name, record


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tx_explorer.train variants", description=__doc__.splitlines()[0])
    d = Settings()
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-len", type=int, default=d.seq_len, help="context of every variant")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (all variants)")
    p.add_argument(
        "--warmup", type=int, default=d.warmup, help="warm-up of the shallow variants (the deep pair has none)"
    )
    p.add_argument("--eval-every", type=int, default=d.eval_every)
    p.add_argument("--eval-windows", type=int, default=d.eval_windows)
    p.add_argument("--final-windows", type=int, default=128, help="validation windows for the final loss")
    p.add_argument("--live-tokens", type=int, default=100_000, help="training tokens shipped for the page's mini-run")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="train every variant at each seed")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: these tiny models gain nothing from more, "
        "and on a shared CPU extra threads spin-wait)",
    )
    # The bundled run used the stdlib corpus and the tokenizer tiny-gpt had then, kept in this bundle.
    p.add_argument(
        "--corpus", default="stdlib", choices=sorted(corpus.SOURCES), help="text source (tx_explorer.data.corpus)"
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        default=BUNDLE / "tokenizer.json",
        help="reuse this tokenizer when it exists (else train one on the corpus, as the LM trainer does)",
    )
    p.add_argument("--out", type=Path, default=BUNDLE, help="bundle folder")
    p.add_argument(
        "--keep", type=Path, default=None, help="a bundle of this command whose runs (same seed and recipe) are reused"
    )
    p.add_argument(
        "--benchmarks",
        type=Path,
        default=ROOT / "BENCHMARKS.md",
        help="file whose variants section is rewritten ('' = none)",
    )
    return p.parse_args(argv)


@dataclass(frozen=True)
class Kept:
    """A bundle written earlier by this command (``--keep``), whose runs are reused where seed and recipe match:
    adding seeds then trains only the new ones. A bundle from before seeds were added holds one run per variant,
    at the seed in its settings."""

    summary: dict = field(default_factory=lambda: {"variants": {}})
    history: dict = field(default_factory=dict)
    profiles: dict = field(default_factory=dict)
    folder: Path | None = None

    @classmethod
    def read(cls, folder: Path) -> Kept:
        res = load_results(folder)  # checksums verified
        return cls(res.summary, res.history, res.profiles, Path(folder))

    def entry(self, name: str, settings: Settings) -> dict[int, dict]:
        """``{seed: run}`` of ``name`` trained with ``settings`` (whatever its seed); empty when none was."""
        r = self.summary["variants"].get(name)
        if r is None:
            return {}
        recipe = {k: v for k, v in r["settings"].items() if k != "seed"}
        if recipe != {k: v for k, v in asdict(settings).items() if k != "seed"}:
            return {}
        runs = r.get("seeds") or [{"seed": r["settings"]["seed"], **{k: r[k] for k in RUN_FIELDS}}]
        return {run["seed"]: run for run in runs}

    def state(self, name: str) -> dict[str, Tensor]:
        """The float16 weights of ``name`` at the kept bundle's first seed, under their bundle keys ``<name>.…``."""
        return {k: v for k, v in load_file(str(self.folder / "model.safetensors")).items() if k.startswith(f"{name}.")}


RUN_FIELDS = ("final_val_loss", "final_train_loss_avg20", "max_grad_norm", "diverged_at", "seconds")  # per seed


def _round(values: Sequence[float | None], digits: int = 5) -> list[float | None]:
    """Significant digits only: the history stays small. Non-finite values become None (JSON has no NaN)."""
    return [None if v is None or not math.isfinite(v) else float(f"{v:.{digits}g}") for v in values]


def history_table(records: Sequence[StepRecord]) -> dict[str, list]:
    """Column-wise history (what ``history.json`` stores per variant)."""
    return {
        "step": [r.step for r in records],
        "lr": _round([r.lr for r in records], 4),
        "train_loss": _round([r.train_loss for r in records]),
        "val_step": [r.step for r in records if r.val_loss is not None],
        "val_loss": _round([r.val_loss for r in records if r.val_loss is not None]),
        "grad_norm": _round([r.grad_norm for r in records], 4),
        "layer_grad_norm": [_round(r.layer_grad_norm, 4) for r in records],
        "residual_rms": [_round(r.residual_rms, 4) for r in records],
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0, _ = begin(args.threads)
    base = Settings(
        steps=args.steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        lr=args.lr,
        warmup=args.warmup,
        eval_every=args.eval_every,
        eval_windows=args.eval_windows,
    )

    docs = corpus.documents(args.corpus)
    parts = corpus.split(docs)
    tok = bundled_or_new_tokenizer(
        args.tokenizer, parts.train, SHALLOW.vocab_size, "python -m tx_explorer.train variants"
    )
    vocab = tok.get_vocab_size()
    train_ids, val_ids = encode_stream(tok, parts.train), encode_stream(tok, parts.val)
    val_pairs = windows(val_ids, args.seq_len)
    probe = torch.Generator().manual_seed(args.seeds[0] + 1)
    probe_x, probe_y = sample_batch(val_ids, args.seq_len, args.batch_size, probe)  # one fixed batch for depth profiles
    log.info("corpus: %d / %d train / val tokens, vocabulary %d", len(train_ids), len(val_ids), vocab)

    history, results, profiles, weights = {}, {}, {}, {}
    kept = Kept.read(args.keep) if args.keep else Kept()
    if args.keep and kept.summary["corpus"]["sha256"] != corpus.describe(docs, args.corpus)["sha256"]:
        raise SystemExit(f"{args.keep} was trained on other text: its runs cannot be kept")
    for seed in args.seeds:
        first = seed == args.seeds[0]  # the page's curves, depth profiles and models are the first seed's
        for name in args.variants:
            settings = variant_settings(name, replace(base, seed=seed))
            entry = kept.entry(name, settings)
            if seed in entry:  # trained by an earlier run of this command with the same recipe: reused as it is
                run = entry[seed]
                if first:
                    history[name], profiles[name] = kept.history[name], kept.profiles[name]
                    weights.update(kept.state(name))
                entry_fields = kept.summary["variants"][name]
            else:
                model = build(name, seed=seed, vocab_size=vocab, max_len=settings.seq_len)
                init = depth_profile(model, probe_x, probe_y) if first else None
                start = time.time()
                val = val_pairs[: settings.eval_windows] if first else ()  # the curves are drawn from the first seed
                records = list(train_steps(model, train_ids, settings, val_pairs=val, desc=f"{name} seed {seed}"))
                diverged = not math.isfinite(records[-1].train_loss)
                final_val = float("nan") if diverged else evaluate(model, val_pairs[: args.final_windows])
                if first:
                    profiles[name] = {"init": init, "final": depth_profile(model, probe_x, probe_y)}
                    history[name] = history_table(records)
                last20 = [r.train_loss for r in records[-20:]]
                run = {
                    "seed": seed,
                    "final_val_loss": _round([final_val])[0],
                    "final_train_loss_avg20": _round([sum(last20) / len(last20)])[0],
                    "max_grad_norm": _round([max(r.grad_norm for r in records)])[0],
                    "diverged_at": records[-1].step if diverged else None,
                    "seconds": round(time.time() - start, 1),
                }
                if first:  # the page's models; the other seeds ship their numbers (the bundle stays small)
                    weights.update({f"{name}.{k}": v.half() for k, v in unique_state(model).items()})
                entry_fields = {
                    "config": model.cfg.to_dict(),
                    "parameters": count_parameters(model),
                    "non_embedding_parameters": count_parameters(model, non_embedding=True),
                }
            results[name] = {
                "label": VARIANTS[name].label,
                "config": entry_fields["config"],
                "settings": {k: v for k, v in asdict(settings).items() if k != "seed"},  # each run has its own
                "parameters": entry_fields["parameters"],
                "non_embedding_parameters": entry_fields["non_embedding_parameters"],
                "seeds": [*results.get(name, {}).get("seeds", []), run],
            }
            log.info("%s seed %d: val %s (%.0f s)", name, seed, run["final_val_loss"], run["seconds"])

        summary = {
            "variants": results,
            "seeds": args.seeds[: args.seeds.index(seed) + 1],
            "validation_tokens_final": min(len(val_pairs), args.final_windows) * args.seq_len,
            "train_tokens": len(train_ids),
            "corpus": corpus.describe(docs, args.corpus),
            "tokenizer": args.tokenizer.name
            if args.tokenizer.is_file()
            else "trained by this run (tiny-gpt's was absent)",
            "threads": torch.get_num_threads(),
            "minutes": round((time.time() - t0) / 60, 2),
            "command": " ".join([RETRAIN, *(argv or [])]),
        }
        write_bundle(
            args.out,
            summary=summary,
            history=history,
            profiles=profiles,
            weights=weights,
            tokenizer=tok,
            live_tokens={"train": train_ids[: args.live_tokens], "val": val_ids[: args.live_tokens // 10]},
        )
        log.info("seed %d done, bundle written to %s", seed, args.out)
    if str(args.benchmarks):
        update_benchmarks(args.benchmarks, {**summary, "profiles": profiles})
    log.info("bundle written to %s in %.1f min", args.out, summary["minutes"])


def _pm(values: Sequence[float | None]) -> str:
    """Mean ± standard deviation over seeds; a diverged seed makes the variant "diverged"."""
    x = spread.stat(values)
    return "diverged" if not math.isfinite(x.mean) else x.plus_minus()


VERDICT_WORDS = {"holds": "holds", "not_holds": "does not hold", "noise": "within noise"}


def update_benchmarks(path: Path, summary: dict) -> None:
    """Rewrite only the text between ``<!-- variants:start -->`` and ``<!-- variants:end -->``."""
    runs, seeds = summary["variants"], summary["seeds"]
    rows = []
    for name, r in runs.items():
        c, s, per_seed = r["config"], r["settings"], r["seeds"]
        diverged = [f"seed {x['seed']} at step {x['diverged_at']}" for x in per_seed if x["diverged_at"]]
        val = _pm([x["final_val_loss"] for x in per_seed]) + (f" (diverged: {', '.join(diverged)})" if diverged else "")
        g = summary["profiles"][name]["final"]["grad_norm"] if "profiles" in summary else None
        rows.append(
            f"| {r['label']} | {c['num_layers']} × {c['dim']} | "
            f"{r['non_embedding_parameters']:,} / {r['parameters']:,} | "
            f"{s['lr']:g}, warm-up {s['warmup']} | {val} | {_pm([x['final_train_loss_avg20'] for x in per_seed])} | "
            f"{max(x['max_grad_norm'] for x in per_seed):.3g} | "
            f"{'—' if g is None else f'{g[0]:.2g} / {g[-1]:.2g}'} | "
            f"{spread.stat([x['seconds'] for x in per_seed]).mean:.0f} s |"
        )
    s0 = next(iter(runs.values()))["settings"]
    body = "\n".join(
        [
            "## Block variants: Post-LN vs Pre-LN, LayerNorm vs RMSNorm, MLP vs SwiGLU",
            "",
            f"Same data (identical batches) and initialisation for every variant at each seed "
            f"({', '.join(map(str, seeds))}); {s0['steps']} steps × {s0['batch_size']} × {s0['seq_len']} tokens, "
            f"AdamW with clipping at {s0['clip']:g}. Losses are the mean ± the standard deviation over the seeds: "
            f"validation loss in nats per token on {summary['validation_tokens_final']:,} held-out tokens; train "
            "loss averaged over the last 20 steps; gradient norm measured before clipping (largest over the seeds); "
            "first/last-block gradient norms on one fixed held-out batch (first seed); time per seed.",
            "",
            "| variant | blocks × D | parameters (non-embedding / all) | peak lr, warm-up | validation loss "
            "| train loss | max grad norm | grad norm, first / last block, after training | time |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Claims of the lecture, checked on these numbers: a claim holds (or does not) only when the gap between "
            "the means exceeds the spread, the sum of the two standard deviations over the seeds; otherwise it is "
            "within noise:",
            "",
            *[
                f"- {locales.text('norms', 'claim_' + c['key'], 'en')}: **{VERDICT_WORDS[c['state']]}** "
                f"(gap {c['comparison'].gap:.3g} vs spread {c['comparison'].spread:.3g}; "
                + "; ".join(
                    f"{runs[n]['label']} {_pm(c['losses'][n].values)}, {c['params'][n]:,} non-embedding parameters"
                    for n in c["variants"]
                )
                + ")"
                for c in claims(summary)
            ],
            "",
            f"Whole run: {summary['minutes']:.1f} min wall-clock on this machine's CPU "
            f"({summary['threads']} thread(s), shared with other jobs). Rebuild: `{summary['command']}`.",
        ]
    )
    report.write_section(path, "variants", body)
