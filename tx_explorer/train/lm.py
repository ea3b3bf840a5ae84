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
from functools import partial
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor
from tqdm import tqdm

from tx_explorer import report
from tx_explorer.analysis.bigram import bigram_baseline
from tx_explorer.bundle import WEIGHTS_DIR, save_bundle, verify
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.data.tokenizer import EOT, train_bpe
from tx_explorer.families.text import unique_state
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train.common import add_run_args, begin, clear_outputs, lr_at, make_optimizer, sample_batch, train_loop

log = logging.getLogger("tx_explorer.train.lm")
ROOT = Path(__file__).resolve().parents[2]
BUNDLES = {"tiny": "tiny-gpt", "tiny-llama": "tiny-llama"}  # preset → bundle folder; others: lm-<preset>
SIBLINGS = ("tiny-llama",)  # presets trained with tiny-gpt's tokenizer and reported beside it
BUNDLE_FILES = (
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "training.json",
    "loss_curve.csv",
    "manifest.json",
)  # what this trainer writes to --out: all it ever deletes there


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tx_explorer.train lm", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny", choices=sorted(PRESETS), help="model size (tx_explorer.config.PRESETS)")
    p.add_argument(
        "--corpus", default="full", choices=sorted(corpus.SOURCES), help="text source (tx_explorer.data.corpus)"
    )
    epochs = "optimiser steps (about 2 epochs of the full corpus)"
    add_run_args(p, steps=2400, steps_help=epochs, batch_size=12, lr=3e-3, warmup=30, weight_decay=0.1, eval_every=50)
    p.add_argument(
        "--max-minutes",
        type=float,
        default=0.0,
        help="stop at the next checkpoint after this long (still writing the bundle); 0 = never",
    )
    p.add_argument(
        "--eval-windows", type=int, default=32, help="validation windows used during training (all of them at the end)"
    )
    p.add_argument("--run-dir", type=Path, default=None, help="checkpoints (default: runs/lm-<preset>)")
    p.add_argument("--out", type=Path, default=None, help="bundle folder (default: tiny-gpt's, tiny-llama's …)")
    p.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="reuse this bundled tokenizer.json; '' = train a new BPE on the training split (default: tiny-gpt's "
        f"for {', '.join(SIBLINGS)}, so that their losses compare; else new)",
    )
    p.add_argument(
        "--benchmarks", default=str(ROOT / "BENCHMARKS.md"), help="file whose lm section is rewritten ('' = none)"
    )
    p.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    args = p.parse_args(argv)
    args.run_dir = args.run_dir or ROOT / "runs" / f"lm-{args.preset}"
    args.out = args.out or WEIGHTS_DIR / bundle_name(args.preset)
    if args.tokenizer is None:
        args.tokenizer = WEIGHTS_DIR / BUNDLES["tiny"] / "tokenizer.json" if args.preset in SIBLINGS else Path("")
    return args


def bundled_or_new_tokenizer(path: Path, texts: tuple[str, ...], vocab_size: int, command: str) -> Tokenizer:
    """The tokenizer at ``path`` (its bundle verified first), else a new BPE on ``texts``.

    ``command`` is the retrain command the error message names when the bundle is damaged.

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


def bundle_name(preset: str) -> str:
    """The bundle folder (under tx_explorer/weights) and model name of a preset."""
    return BUNDLES.get(preset, f"lm-{preset}")


def describe(s: dict) -> str:
    """One table cell naming a trained model's architecture from its training summary."""
    c = s["config"]
    kv = c.get("num_kv_heads")
    heads = f"{c['num_heads']} heads" + (f" sharing {kv} key/value heads" if kv and kv != c["num_heads"] else "")
    parts = [f"{c['num_layers']} layers × {heads}", f"D {c['dim']}", f"context {c['max_len']}"]
    if s["preset"] in SIBLINGS:  # tiny-gpt's row stays as it was; its siblings say how they differ from it
        parts += [f"{c['positions']} positions", c["norm"], c["mlp"], "biases" if c["bias"] else "no biases"]
    return f"{bundle_name(s['preset'])} ({', '.join(parts)})"


def update_benchmarks(path: Path, summary: dict) -> None:
    """Rewrite only this run's section of BENCHMARKS.md: ``lm``, or ``lm-<name>`` for a sibling of tiny-gpt
    (:data:`SIBLINGS`), which also lists tiny-gpt's bundled result (same corpus, split and tokenizer)."""
    s = summary
    name = bundle_name(s["preset"])
    rows = [s]
    reference = WEIGHTS_DIR / BUNDLES["tiny"] / "training.json"
    if s["preset"] in SIBLINGS and reference.is_file():
        rows.insert(0, json.loads(reference.read_text()))
    table = [
        f"| {describe(r)} | {r['parameters']:,} | {r['val_loss']:.3f} | {math.exp(r['val_loss']):.1f} |" for r in rows
    ]
    verdict = []
    if len(rows) == 2:
        gap = s["val_loss"] - rows[0]["val_loss"]
        better = f"{name} is better" if gap < 0 else "tiny-gpt is better" if gap > 0 else "they tie"
        same = "Same corpus, split, tokenizer, steps and batches"
        verdict = ["", f"{same}: {better} by {abs(gap):.3f} nats per token on the validation split (one seed each)."]
    title = f"{name} beside tiny-gpt and a bigram" if s["preset"] in SIBLINGS else f"{name} vs a bigram baseline"
    retrain = "python -m tx_explorer.train lm --preset " + s["preset"]
    body = "\n".join(
        [
            f"## Language model: {title}",
            "",
            f"Validation split of the prose corpus ({s['corpus']['source']}; {s['val_tokens']:,} validation tokens, "
            f"{s['corpus']['documents']:,} documents and {s['corpus']['characters'] / 1e6:.1f} MB in all, "
            f"Python {s['corpus']['python']}); "
            f"BPE vocabulary {s['config']['vocab_size']}. Losses are mean cross-entropy in nats per token.",
            "",
            "| model | parameters | validation loss | perplexity |",
            "|---|---|---|---|",
            f"| bigram, add-k smoothed (k = {s['bigram']['k']}, chosen on training text) | "
            f"{s['config']['vocab_size'] ** 2:,} counts | {s['bigram']['val_loss']:.3f} | "
            f"{s['bigram']['val_ppl']:.1f} |",
            *table,
            *verdict,
            "",
            f"Training{'' if len(rows) == 1 else f' ({name})'}: {s['steps']} steps"
            + (f" (stopped early; {s['planned_steps']} planned)" if s["steps"] < s["planned_steps"] else "")
            + f" × {s['batch_size']} × {s['config']['max_len']} tokens "
            f"({s['tokens_seen']:,} tokens, {s['tokens_seen'] / s['train_tokens']:.1f} epochs), seed {s['seed']}, "
            f"{s['minutes']:.1f} min wall-clock on this machine's CPU, {s['cpu_minutes']:.1f} min of CPU time with "
            f"{s['threads']} torch thread(s) (the wall-clock time of an idle core when that is 1). "
            f"Rebuild: `{retrain}`.",
        ]
    )
    report.write_section(path, f"lm-{name}" if s["preset"] in SIBLINGS else "lm", body)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0, _ = begin(args.threads)
    cfg: TransformerConfig = PRESETS[args.preset]
    args.run_dir.mkdir(parents=True, exist_ok=True)

    docs = corpus.documents(args.corpus)
    parts = corpus.split(docs)
    tok_path = args.run_dir / "tokenizer.json"
    if args.resume and tok_path.is_file():
        tok = Tokenizer.from_file(str(tok_path))
    else:
        command = f"python -m tx_explorer.train lm --preset {args.preset}"
        tok = bundled_or_new_tokenizer(args.tokenizer, parts.train, cfg.vocab_size, command)
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
    opt = make_optimizer(model, lr=args.lr, weight_decay=args.weight_decay)
    gen = torch.Generator().manual_seed(args.seed)
    state = {"step": 0, "log": [], "elapsed": 0.0}
    if args.resume and (args.run_dir / "checkpoint.safetensors").is_file():
        state = load_checkpoint(args.run_dir, model, opt, gen)
        log.info("resumed at step %d", state["step"])

    n = cfg.max_len

    def loss_fn(step: int) -> Tensor:
        x, y = sample_batch(train_ids, n, args.batch_size, gen)  # (B, N) each
        return model.loss(model(x), y)

    schedule = partial(lr_at, steps=args.steps, peak=args.lr, warmup=args.warmup)
    t_run = time.time() - state["elapsed"]
    for s in train_loop(model, opt, loss_fn, steps=args.steps, schedule=schedule, start=state["step"], desc="lm"):
        done = s.step
        if done % args.eval_every == 0 or done == args.steps:
            val = evaluate(model, val_pairs[: args.eval_windows])
            row = {
                "step": done,
                "tokens": done * args.batch_size * n,
                "lr": f"{s.lr:.3g}",
                "train_loss": f"{s.loss:.4f}",
                "val_loss": f"{val:.4f}",
            }
            state["log"].append(row)
            state.update(step=done, elapsed=time.time() - t_run)
            settings = {k: str(v) for k, v in vars(args).items()}
            save_checkpoint(args.run_dir, model, opt, gen, {**state, "args": settings})
            tqdm.write(f"step {done}: train {s.loss:.3f}  val {val:.3f}")
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
    out = clear_outputs(args.out, BUNDLE_FILES)
    write_curve(out / "loss_curve.csv", state["log"])
    save_bundle(
        out,
        unique_state(model),
        {**cfg.to_dict(), "architecture": "CausalLM"},
        tokenizer=json.loads(tok.to_str()),
        training=summary,
    )
    if args.benchmarks:  # a string: Path("") would be "." and never empty
        update_benchmarks(Path(args.benchmarks), summary)
    log.info("bundle written to %s", out)
