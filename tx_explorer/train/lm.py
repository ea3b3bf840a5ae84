"""Train the bundled causal language model: ``python -m tx_explorer.train lm --preset tiny``.

Corpus: the standard library's own prose (:mod:`tx_explorer.data.corpus`), split by document hash.
Tokenizer: byte-level BPE trained on the training split. Model: :class:`CausalLM` from a preset.
Optimiser: AdamW (β₂ 0.95, weight decay on matrices only), linear warm-up then cosine decay, gradient
clipping at 1 — the nanoGPT recipe at CPU scale.

Resumable: every ``--eval-every`` steps the run folder gets ``checkpoint.safetensors`` (weights, AdamW
moments, RNG states) and ``state.json`` (step, loss log, settings); ``--resume`` continues from them and
reaches the same result as an uninterrupted run. Nothing is pickled.

At the end the bundle folder receives ``model.safetensors``, ``config.json``, ``tokenizer.json``,
``training.json`` (settings, losses, the bigram baseline, corpus fingerprint), ``loss_curve.csv`` and
``manifest.json`` (SHA-256 of each), and the ``lm`` section of BENCHMARKS.md is rewritten.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor
from tqdm import tqdm

from tx_explorer import report
from tx_explorer.analysis.bigram import bigram_baseline
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.data.tokenizer import EOT, train_bpe
from tx_explorer.models import WEIGHTS_DIR, save_bundle, verify
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.textmodel import unique_state

log = logging.getLogger("tx_explorer.train.lm")
ROOT = Path(__file__).resolve().parents[2]
BUNDLE_FILES = (
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "training.json",
    "loss_curve.csv",
    "manifest.json",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tx_explorer.train lm", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny", choices=sorted(PRESETS), help="model size (tx_explorer.config.PRESETS)")
    p.add_argument(
        "--corpus", default="full", choices=sorted(corpus.SOURCES), help="text source (tx_explorer.data.corpus)"
    )
    p.add_argument("--steps", type=int, default=2400, help="optimiser steps (about 2 epochs of the full corpus)")
    p.add_argument("--batch-size", type=int, default=12, help="sequences per step")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=30, help="linear warm-up steps")
    p.add_argument(
        "--max-minutes",
        type=float,
        default=0.0,
        help="stop at the next checkpoint after this long (still writing the bundle); 0 = never",
    )
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=50, help="validation loss and checkpoint interval")
    p.add_argument(
        "--eval-windows", type=int, default=32, help="validation windows used during training (all of them at the end)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--run-dir", type=Path, default=None, help="checkpoints (default: runs/lm-<preset>)")
    p.add_argument("--out", type=Path, default=WEIGHTS_DIR / "tiny-gpt", help="bundle folder")
    p.add_argument(
        "--benchmarks", type=Path, default=ROOT / "BENCHMARKS.md", help="file whose lm section is rewritten ('' = none)"
    )
    p.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    args = p.parse_args(argv)
    args.run_dir = args.run_dir or ROOT / "runs" / f"lm-{args.preset}"
    return args


def bundled_or_new_tokenizer(path: Path, texts: tuple[str, ...], vocab_size: int, command: str) -> Tokenizer:
    """The tokenizer at ``path`` (its bundle verified first; ``command`` retrains without it), else a new BPE on ``texts``.

    The MoE and variants trainers reuse their bundle's tokenizer, which is what reproduces the shipped runs.
    """
    if not path.is_file():
        return train_bpe(texts, vocab_size=vocab_size)
    verify(path.parent, f"{command} --tokenizer ''  (a new tokenizer)")
    return Tokenizer.from_file(str(path))


def encode_stream(tok: Tokenizer, docs: tuple[str, ...]) -> Tensor:
    """All documents as one id stream ``[N]``, each followed by the end-of-text token."""
    eot = tok.token_to_id(EOT)
    ids: list[int] = []
    for enc in tok.encode_batch(list(docs)):
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def windows(ids: Tensor, n: int) -> list[tuple[Tensor, Tensor]]:
    """Non-overlapping ``(input, target)`` windows of at most ``n`` tokens; every token but the first is a target
    exactly once."""
    return [(ids[i : i + n], ids[i + 1 : i + n + 1]) for i in range(0, len(ids) - 1, n)]


@torch.no_grad()
def evaluate(model: CausalLM, pairs: list[tuple[Tensor, Tensor]]) -> float:
    """Mean cross-entropy (nats per token) over ``pairs``, weighting every target equally."""
    if not pairs:
        raise ValueError("no validation text to evaluate on")
    model.eval()
    total, count = 0.0, 0
    full = [(x, y) for x, y in pairs if len(y) == len(x)]
    short = [[(x[: len(y)], y)] for x, y in pairs if len(y) < len(x)]  # the stream's last, shorter window
    batches = [full[i : i + 32] for i in range(0, len(full), 32)] + short
    for batch in batches:
        x = torch.stack([b[0] for b in batch])  # (B, N)
        y = torch.stack([b[1] for b in batch])
        total += float(torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum"))
        count += y.numel()
    model.train()
    return total / count


def lr_at(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up to ``lr``, cosine decay to ``lr / 10``."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: CausalLM, args: argparse.Namespace) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (norm gains and biases are not decayed)."""
    params = {id(p): p for p in model.parameters()}.values()  # tied weights once
    decay = [p for p in params if p.dim() >= 2]
    other = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))


def save_checkpoint(run_dir: Path, model: CausalLM, opt: torch.optim.AdamW, gen: torch.Generator, state: dict) -> None:
    """Weights, AdamW moments and RNG states as safetensors; step and log as JSON (no pickle)."""
    tensors = {f"model.{k}": v for k, v in unique_state(model).items()}
    opt_state = opt.state_dict()
    for idx, slots in opt_state["state"].items():
        for name, t in slots.items():
            tensors[f"opt.{idx}.{name}"] = torch.as_tensor(t)
    tensors["rng.data"] = gen.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    groups = [{k: v for k, v in g.items()} for g in opt_state["param_groups"]]
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(run_dir / "checkpoint.safetensors"))
    (run_dir / "state.json").write_text(json.dumps({**state, "param_groups": groups}, indent=1) + "\n")


def load_checkpoint(run_dir: Path, model: CausalLM, opt: torch.optim.AdamW, gen: torch.Generator) -> dict:
    tensors = load_file(str(run_dir / "checkpoint.safetensors"))
    state = json.loads((run_dir / "state.json").read_text())
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, strict=False)
    slots: dict[int, dict[str, Tensor]] = {}
    for key, t in tensors.items():
        if key.startswith("opt."):
            _, idx, name = key.split(".", 2)
            slots.setdefault(int(idx), {})[name] = t
    opt.load_state_dict({"state": slots, "param_groups": state.pop("param_groups")})
    gen.set_state(tensors["rng.data"])
    torch.set_rng_state(tensors["rng.torch"])
    return state


def write_curve(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "tokens", "lr", "train_loss", "val_loss"])
        w.writeheader()
        w.writerows(rows)


def update_benchmarks(path: Path, summary: dict) -> None:
    """Rewrite only the text between ``<!-- lm:start -->`` and ``<!-- lm:end -->`` (appending the section if absent)."""
    s = summary
    body = "\n".join(
        [
            "## Language model: tiny-gpt vs a bigram baseline",
            "",
            f"Validation split of the prose corpus ({s['corpus']['source']}; {s['val_tokens']:,} validation tokens, "
            f"{s['corpus']['documents']:,} documents and {s['corpus']['characters'] / 1e6:.1f} MB in all, "
            f"Python {s['corpus']['python']}); "
            f"BPE vocabulary {s['config']['vocab_size']}. Losses are mean cross-entropy in nats per token.",
            "",
            "| model | parameters | validation loss | perplexity |",
            "|---|---|---|---|",
            f"| bigram, add-k smoothed (k = {s['bigram']['k']}, chosen on training text) | "
            f"{s['config']['vocab_size'] ** 2:,} counts | {s['bigram']['val_loss']:.3f} | {s['bigram']['val_ppl']:.1f} |",
            f"| tiny-gpt ({s['config']['num_layers']} layers × {s['config']['num_heads']} heads, D {s['config']['dim']}, "
            f"context {s['config']['max_len']}) | {s['parameters']:,} | {s['val_loss']:.3f} | "
            f"{math.exp(s['val_loss']):.1f} |",
            "",
            f"Training: {s['steps']} steps"
            + (f" (stopped early; {s['planned_steps']} planned)" if s["steps"] < s["planned_steps"] else "")
            + f" × {s['batch_size']} × {s['config']['max_len']} tokens "
            f"({s['tokens_seen']:,} tokens, {s['tokens_seen'] / s['train_tokens']:.1f} epochs), seed {s['seed']}, "
            f"{s['minutes']:.1f} min wall-clock on this machine's CPU, {s['cpu_minutes']:.1f} min of CPU time with "
            f"{s['threads']} torch thread(s) (the wall-clock time of an idle core when that is 1). "
            "Rebuild: `python -m tx_explorer.train lm --preset tiny`.",
        ]
    )
    report.write_section(path, "lm", body)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg: TransformerConfig = PRESETS[args.preset]
    args.run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    docs = corpus.documents(args.corpus)
    parts = corpus.split(docs)
    tok_path = args.run_dir / "tokenizer.json"
    if args.resume and tok_path.is_file():
        tok = Tokenizer.from_file(str(tok_path))
    else:
        tok = train_bpe(parts.train, vocab_size=cfg.vocab_size)
        tok.save(str(tok_path))
    train_ids, val_ids = encode_stream(tok, parts.train), encode_stream(tok, parts.val)
    log.info(
        "corpus: %d train / %d val documents, %d / %d tokens",
        len(parts.train),
        len(parts.val),
        len(train_ids),
        len(val_ids),
    )
    val_pairs = windows(val_ids, cfg.max_len)

    torch.manual_seed(args.seed)
    model = CausalLM(cfg)
    opt = make_optimizer(model, args)
    gen = torch.Generator().manual_seed(args.seed)
    state = {"step": 0, "log": [], "elapsed": 0.0}
    if args.resume and (args.run_dir / "checkpoint.safetensors").is_file():
        state = load_checkpoint(args.run_dir, model, opt, gen)
        log.info("resumed at step %d", state["step"])

    n = cfg.max_len
    model.train()
    bar = tqdm(range(state["step"], args.steps), initial=state["step"], total=args.steps, desc="lm", unit="step")
    t_run = time.time() - state["elapsed"]
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        starts = torch.randint(0, len(train_ids) - n - 1, (args.batch_size,), generator=gen)
        x = torch.stack([train_ids[s : s + n] for s in starts])  # (B, N)
        y = torch.stack([train_ids[s + 1 : s + n + 1] for s in starts])
        loss = model.loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        done = step + 1
        if done % args.eval_every == 0 or done == args.steps:
            val = evaluate(model, val_pairs[: args.eval_windows])
            row = {
                "step": done,
                "tokens": done * args.batch_size * n,
                "lr": f"{lr_at(step, args):.3g}",
                "train_loss": f"{loss.item():.4f}",
                "val_loss": f"{val:.4f}",
            }
            state["log"].append(row)
            state.update(step=done, elapsed=time.time() - t_run)
            settings = {k: str(v) for k, v in vars(args).items()}
            save_checkpoint(args.run_dir, model, opt, gen, {**state, "args": settings})
            tqdm.write(f"step {done}: train {loss.item():.3f}  val {val:.3f}")
            if args.max_minutes and time.time() - t0 > 60 * args.max_minutes:
                log.warning("stopping early at step %d of %d (--max-minutes %s)", done, args.steps, args.max_minutes)
                break

    val_loss = evaluate(model, val_pairs)
    bigram = bigram_baseline(train_ids, val_ids, cfg.vocab_size)
    log.info("final validation loss %.3f nats (bigram baseline %.3f)", val_loss, bigram["val_loss"])
    summary = {
        "preset": args.preset,
        "config": cfg.to_dict(),
        "parameters": sum(p.numel() for p in unique_state(model).values()),
        "steps": state["step"],
        "planned_steps": args.steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "seed": args.seed,
        "tokens_seen": state["step"] * args.batch_size * n,
        "train_tokens": len(train_ids),
        "val_tokens": len(val_ids),
        "val_loss": val_loss,
        "bigram": bigram,
        "corpus": corpus.describe(docs, args.corpus),
        "minutes": (time.time() - t0) / 60,
        "cpu_minutes": time.process_time() / 60,  # all threads; shared machines inflate wall-clock, not this
        "threads": torch.get_num_threads(),
    }
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_FILES:  # only our own files: the folder may be shared with nothing else, but be careful
        (out / name).unlink(missing_ok=True)
    write_curve(out / "loss_curve.csv", state["log"])
    save_bundle(
        out,
        unique_state(model),
        {**cfg.to_dict(), "architecture": "CausalLM"},
        tokenizer=json.loads(tok.to_str()),
        training=summary,
    )
    if str(args.benchmarks):
        update_benchmarks(args.benchmarks, summary)
    log.info("bundle written to %s", out)
