"""Train the Mixture-of-Experts LM and its dense counterpart: ``python -m tx_explorer.train moe``.

Lecture §8.4 claims a MoE grows parameters about E-fold while compute grows with k. This command trains
``tiny-moe`` (the tiny LM's attention and embeddings; every MLP replaced by E = 8 experts of hidden 2D, top-2)
and a dense LM with the same *active* parameters (one MLP of hidden 4D = the two chosen experts together),
on the same corpus, tokenizer, batches, schedule and initialisation seed, in lock-step (one step each in
turn, so a cut-short run still compares like with like).

Data, tokenizer, AdamW recipe, warm-up/cosine schedule and evaluation are the language model's
(:mod:`tx_explorer.train.lm`); by default the corpus is ``"stdlib"`` and the tokenizer the one in this
bundle (tiny-gpt's first release), which reproduce the bundled run. The MoE's loss adds
α·balance + β·z (Switch / ST-MoE coefficients 1e-2 and 1e-3); training routes with capacity factor 1.25 and
counts drops, evaluation is dropless. Every step records the loss, the cumulative training FLOPs
(3 × forward matmul FLOPs per token × tokens, :func:`tx_explorer.analysis.routing.moe_flops_per_token`) and
wall-clock seconds; validation loss every ``--eval-every`` steps.

The bundle ``tx_explorer/weights/tiny-moe/`` receives ``model.safetensors`` (the MoE), ``config.json``,
``tokenizer.json``, ``curves.json`` (both models' curves against steps, tokens, FLOPs and seconds),
``heldout.json`` (validation token windows for the page's routing statistics), ``training.json`` and
``manifest.json``.

The page judges MoE against dense over seeds, as the norms and position pages judge their claims. A run's
``training.json`` lists under ``seeds`` the final losses of every seed trained with its recipe: its own, and
those of other runs added by ``--record-seeds`` (``python -m tx_explorer.train moe --seed 1 --out DIR``, then
``python -m tx_explorer.train moe --record-seeds DIR …``), which checks that each run used the same recipe,
corpus and tokenizer and rewrites only ``training.json`` and the manifest (the model stays the bundle's own).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tx_explorer.analysis.params import flops_per_token
from tx_explorer.analysis.routing import moe_flops_per_token, moe_params
from tx_explorer.bundle import WEIGHTS_DIR, save_bundle, sha256, verify, write_manifest
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.families.moe import RETRAIN
from tx_explorer.families.text import unique_state
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train.common import (
    LossFn,
    add_run_args,
    begin,
    clear_outputs,
    cpu_seconds,
    lr_at,
    make_optimizer,
    sample_batch,
    train_loop,
)
from tx_explorer.train.lm import bundled_or_new_tokenizer, encode_stream, evaluate, windows

log = logging.getLogger("tx_explorer.train.moe")
# What this trainer writes to --out: all it ever deletes there.
BUNDLE_FILES = (
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "curves.json",
    "heldout.json",
    "training.json",
    "manifest.json",
)
# What a run at another seed must share with the bundle's before --record-seeds puts its losses beside the
# bundle's: every recorded setting and count except the seed, the clocks and the losses themselves.
RECIPE = (
    "config",
    "dense_config",
    "parameters",
    "train_flops_per_token",
    "validation_tokens_final",
    "steps",
    "batch_size",
    "seq_len",
    "lr",
    "tokens_seen",
    "train_tokens",
    "corpus",
)
# Options that may differ between the runs of one recipe: where a run writes, its seed, its CPU threads.
NOT_RECIPE = ("--seed", "--out", "--threads")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tx_explorer.train moe", description=__doc__.splitlines()[0])
    p.add_argument("--experts", type=int, default=8, help="E experts per block")
    p.add_argument("--top-k", type=int, default=2, help="k experts per token")
    p.add_argument("--expert-ratio", type=float, default=2.0, help="expert hidden = ratio·D (dense MLP: k·ratio·D)")
    p.add_argument("--capacity-factor", type=float, default=1.25, help="training capacity factor")
    each = "optimiser steps (each model)"
    add_run_args(p, steps=200, steps_help=each, batch_size=8, lr=3e-3, warmup=20, weight_decay=0.1, eval_every=20)
    p.add_argument("--seq-len", type=int, default=128, help="context (the model's max_len)")
    p.add_argument("--eval-windows", type=int, default=16, help="validation windows during training")
    p.add_argument("--final-windows", type=int, default=128, help="validation windows for the final losses")
    p.add_argument(
        "--heldout-windows", type=int, default=16, help="validation windows shipped for the routing statistics"
    )
    # The bundled run used the stdlib corpus and the tokenizer tiny-gpt had then, kept in this bundle.
    p.add_argument(
        "--corpus", default="stdlib", choices=sorted(corpus.SOURCES), help="text source (tx_explorer.data.corpus)"
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        default=WEIGHTS_DIR / "tiny-moe" / "tokenizer.json",
        help="reuse this tokenizer when it exists (else train one on the corpus, as the LM trainer does)",
    )
    p.add_argument("--out", type=Path, default=WEIGHTS_DIR / "tiny-moe", help="bundle folder")
    p.add_argument(
        "--record-seeds",
        type=Path,
        nargs="+",
        default=None,
        metavar="RUN",
        help="train nothing: add the final losses of these finished runs (other seeds, same recipe) to --out's record",
    )
    return p.parse_args(argv)


def build(cfg: MoEConfig, dense: bool, seed: int) -> CausalLM:
    """The MoE LM or its dense counterpart, freshly initialised from ``seed``."""
    torch.manual_seed(seed)
    return CausalLM(cfg.dense_counterpart()) if dense else MoECausalLM(cfg)


def loss_fn(model: CausalLM, ids: Tensor, args: argparse.Namespace, gen: torch.Generator) -> LossFn:
    """Next-token loss on random windows of ``ids``, logged as ``ce``; the MoE adds its auxiliary losses."""

    def step_loss(step: int) -> tuple[Tensor, dict[str, float]]:
        x, y = sample_batch(ids, args.seq_len, args.batch_size, gen)
        if isinstance(model, MoECausalLM):
            return model.training_loss(x, y)
        loss = model.loss(model(x), y)
        return loss, {"ce": loss.item()}

    return step_loss


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.record_seeds:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        record_seeds(args.out, args.record_seeds, " ".join([RETRAIN, *(argv or [])]))
        return
    t0, c0 = begin(args.threads)
    docs = corpus.documents(args.corpus)
    parts = corpus.split(docs)
    tok = bundled_or_new_tokenizer(
        args.tokenizer, parts.train, PRESETS["tiny"].vocab_size, "python -m tx_explorer.train moe"
    )
    train_ids, val_ids = encode_stream(tok, parts.train), encode_stream(tok, parts.val)
    val_pairs = windows(val_ids, args.seq_len)
    log.info("corpus: %d / %d train / val tokens", len(train_ids), len(val_ids))

    base = PRESETS["tiny"].replace(vocab_size=tok.get_vocab_size(), max_len=args.seq_len)
    cfg = MoEConfig(
        transformer=base,
        num_experts=args.experts,
        top_k=args.top_k,
        expert_ratio=args.expert_ratio,
        capacity_factor=args.capacity_factor,
    )
    flops = {  # training FLOPs per token: forward + backward ≈ 3 × forward
        "moe": 3 * moe_flops_per_token(cfg, args.seq_len)["total"],
        "dense": 3 * flops_per_token(cfg.dense_counterpart(), args.seq_len)["total"],
    }
    models = {"moe": build(cfg, False, args.seed), "dense": build(cfg, True, args.seed)}
    curves = {
        name: {"step": [], "tokens": [], "flops": [], "seconds": [], "train_loss": [], "val_step": [], "val_loss": []}
        for name in models
    }
    curves["moe"].update(balance_loss=[], z_loss=[], drop_rate=[])
    seconds = dict.fromkeys(models, 0.0)
    tokens_per_step = args.batch_size * args.seq_len
    schedule = partial(lr_at, steps=args.steps, peak=args.lr, warmup=args.warmup)
    # One model after the other: each has its own optimiser and an identically seeded batch generator, and
    # training draws no other randomness, so both see the same batches and the runs do not interact.
    for name, model in models.items():
        opt = make_optimizer(model, lr=args.lr, weight_decay=args.weight_decay)
        step_loss = loss_fn(model, train_ids, args, torch.Generator().manual_seed(args.seed))
        c, clock = curves[name], time.time()
        for s in train_loop(model, opt, step_loss, steps=args.steps, schedule=schedule, desc=name):
            seconds[name] += time.time() - clock
            c["step"].append(s.step)
            c["tokens"].append(s.step * tokens_per_step)
            c["flops"].append(s.step * tokens_per_step * flops[name])
            c["seconds"].append(round(seconds[name], 2))
            c["train_loss"].append(round(s.info["ce"], 4))
            for key in ("balance_loss", "z_loss", "drop_rate"):
                if key in s.info:
                    c[key].append(round(s.info[key], 4))
            if s.step % args.eval_every == 0 or s.step == args.steps:
                c["val_step"].append(s.step)
                c["val_loss"].append(round(evaluate(model, val_pairs[: args.eval_windows]), 4))
            clock = time.time()

    final = {name: evaluate(m, val_pairs[: args.final_windows]) for name, m in models.items()}
    log.info("final validation loss: MoE %.3f, dense %.3f nats", final["moe"], final["dense"])
    heldout = [x.tolist() for x, y in val_pairs[: args.heldout_windows] if len(x) == args.seq_len]
    summary = {
        "config": cfg.to_dict(),
        "dense_config": cfg.dense_counterpart().to_dict(),
        "parameters": {"moe": moe_params(cfg), "dense": sum(p.numel() for p in unique_state(models["dense"]).values())},
        "train_flops_per_token": flops,
        "final_val_loss": final,
        "validation_tokens_final": min(len(val_pairs), args.final_windows) * args.seq_len,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "lr": args.lr,
        "seed": args.seed,
        "tokens_seen": args.steps * tokens_per_step,
        "train_tokens": len(train_ids),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "minutes": round((time.time() - t0) / 60, 2),
        "cpu_minutes": round((cpu_seconds() - c0) / 60, 2),
        "threads": torch.get_num_threads(),
        "corpus": corpus.describe(docs, args.corpus),
        "command": " ".join([RETRAIN, *(argv or [])]),
    }
    summary["seeds"] = [seed_record(summary)]  # other seeds' runs join it with --record-seeds
    clear_outputs(args.out, BUNDLE_FILES)
    tok.save(str(args.out / "tokenizer.json"))
    save_bundle(
        args.out,
        unique_state(models["moe"]),
        {**cfg.to_dict(), "architecture": "MoECausalLM"},
        curves=curves,
        heldout={"seq_len": args.seq_len, "group_size": tokens_per_step, "windows": heldout},
        training=summary,
    )
    log.info(
        "bundle written to %s in %.1f min (perplexity MoE %.1f, dense %.1f)",
        args.out,
        summary["minutes"],
        math.exp(final["moe"]),
        math.exp(final["dense"]),
    )


def seed_record(summary: dict[str, Any]) -> dict[str, Any]:
    """One run's entry in a bundle's ``seeds``: its seed, final losses, clocks and the command that trained it."""
    keys = ("seed", "final_val_loss", "seconds", "minutes", "cpu_minutes", "threads", "command")
    return {k: summary[k] for k in keys if k in summary}


def recipe(summary: dict[str, Any]) -> dict[str, Any]:
    """A record's :data:`RECIPE` settings, its configs read back through their classes: a record written before a
    config gained a field (at its default) describes the same model as one written after."""
    out = {k: summary.get(k) for k in RECIPE}
    out["config"] = MoEConfig.from_dict(summary["config"]).to_dict()
    out["dense_config"] = TransformerConfig.from_dict(summary["dense_config"]).to_dict()
    return out


def recipe_options(command: str) -> list[str]:
    """A run's command without the options that may differ between the seeds of one recipe (:data:`NOT_RECIPE`)."""
    words, kept = command.split(), []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w.split("=")[0] in NOT_RECIPE:
            skip = "=" not in w
        else:
            kept.append(w)
    return kept


def record_seeds(bundle: Path, runs: Sequence[Path], command: str) -> list[dict[str, Any]]:
    """Add to ``bundle``'s ``training.json`` the final losses of ``runs`` (bundles this command wrote at other
    seeds), after checking each one trained with the bundle's recipe, corpus and tokenizer; the manifest is
    rewritten, the model left as it is. Returns the seeds' records, sorted by seed."""
    verify(bundle, RETRAIN)
    summary = json.loads((bundle / "training.json").read_text())
    # rebuilt from the bundle's own run and ``runs``: a second call replaces the first's list
    records = {summary["seed"]: seed_record(summary)}
    for run in runs:
        verify(run, RETRAIN)
        other = json.loads((run / "training.json").read_text())
        mine, theirs = recipe(summary), recipe(other)
        differ = [k for k in RECIPE if theirs.get(k) != mine.get(k)]
        if recipe_options(other["command"]) != recipe_options(summary["command"]):
            differ.append("command")
        if sha256(run / "tokenizer.json") != sha256(bundle / "tokenizer.json"):
            differ.append("tokenizer")
        if differ:
            raise SystemExit(f"{run} was not trained with {bundle}'s recipe: {', '.join(differ)} differ")
        if other["seed"] in records:
            raise SystemExit(f"{run}: seed {other['seed']} is already recorded")
        records[other["seed"]] = seed_record(other)
    summary["seeds"] = [records[s] for s in sorted(records)]
    summary["seeds_command"] = command
    (bundle / "training.json").write_text(json.dumps(summary, indent=2) + "\n")  # as save_bundle writes it
    write_manifest(bundle)
    for r in summary["seeds"]:
        loss = r["final_val_loss"]
        log.info("seed %d: MoE %.4f, dense %.4f nats", r["seed"], loss["moe"], loss["dense"])
    return summary["seeds"]
