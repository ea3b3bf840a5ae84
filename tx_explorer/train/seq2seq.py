"""Train the bundled English → Italian models: ``python -m tx_explorer.train seq2seq --model all``.

The fixed-context and the attention GRU share every size and the same number of steps, so the only
difference is c = h_T versus c_t = Σ a_{t,i} h_i. A length curriculum (short sentences first) speeds up
the start; afterwards source lengths are uniform in 1–40. Each run ends with the bucketed evaluation,
stored in the bundle as ``eval.json``.
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from functools import partial
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer.analysis.seq2seq_eval import aer_counts, eval_set, evaluate, hard_alignment
from tx_explorer.bundle import WEIGHTS_DIR, save_bundle
from tx_explorer.config import TransformerConfig
from tx_explorer.data.translation import (
    LECTURE_EXAMPLE,
    Example,
    Vocab,
    generate_examples,
    parse,
    source_words,
    target_words,
)
from tx_explorer.families.translation import Translator
from tx_explorer.modules.seq2seq import RNNConfig, RNNSeq2Seq, TransformerSeq2Seq
from tx_explorer.train.common import begin, lr_at, make_optimizer, train_loop

log = logging.getLogger("tx_explorer.train.seq2seq")
NAMES = ("fixed", "attention", "transformer")
TRANSFORMER = TransformerConfig(
    vocab_size=1, max_len=64, dim=128, num_layers=2, num_heads=4, mlp_ratio=2.0, dropout=0.0
)


def make_model(kind: str, src_vocab: int, tgt_vocab: int, score: str) -> tuple[nn.Module, dict]:
    """A fresh model and the ``config.json`` that rebuilds it."""
    if kind == "transformer":
        return TransformerSeq2Seq(TRANSFORMER, src_vocab, tgt_vocab), {
            "family": "transformer",
            "model": TRANSFORMER.to_dict(),
        }
    cfg = RNNConfig(src_vocab=src_vocab, tgt_vocab=tgt_vocab, context="fixed" if kind == "fixed" else score)
    return RNNSeq2Seq(cfg), {"family": "rnn", "model": cfg.to_dict()}


class Batches:
    """Random batches of similar source length (little padding), about ``tokens`` source words each.

    A length L is drawn uniformly from those up to the current longest, then sentences of length L ± 1.
    """

    def __init__(self, pool: list[Example], src: Vocab, tgt: Vocab, tokens: int, rng: random.Random) -> None:
        self.src, self.tgt, self.tokens, self.rng = src, tgt, tokens, rng
        self.by_len: dict[int, list[Example]] = {}
        for ex in pool:
            self.by_len.setdefault(len(ex.source), []).append(ex)
        self.lengths = sorted(self.by_len)

    def sample(self, longest: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(src ``[B, T]``, src_len ``[B]``, tgt_in ``[B, N]``, tgt_out ``[B, N]``), 0 = padding."""
        length = self.rng.choice([n for n in self.lengths if n <= longest] or self.lengths[:1])
        near = [ex for n in (length - 1, length, length + 1) if n <= longest for ex in self.by_len.get(n, [])]
        chosen = [self.rng.choice(near) for _ in range(max(8, self.tokens // length))]
        t, n = max(len(ex.source) for ex in chosen), max(len(ex.target) for ex in chosen) + 1
        src = torch.zeros(len(chosen), t, dtype=torch.long)
        tgt = torch.zeros(len(chosen), n + 1, dtype=torch.long)
        for b, ex in enumerate(chosen):
            src[b, : len(ex.source)] = torch.tensor(self.src.encode(ex.source))
            ids = [self.tgt.bos, *self.tgt.encode(ex.target), self.tgt.eos]
            tgt[b, : len(ids)] = torch.tensor(ids)
        lengths = (src != 0).sum(dim=1)
        return src, lengths, tgt[:, :-1], tgt[:, 1:]


def train_one(
    kind: str, args: argparse.Namespace, pool: list[Example], src: Vocab, tgt: Vocab
) -> tuple[nn.Module, dict]:
    torch.manual_seed(args.seed)
    model, config = make_model(kind, len(src), len(tgt), args.score)
    transformer = kind == "transformer"
    base_lr = args.lr or (1e-3 if transformer else 3e-3)
    # Weight decay on every parameter (the Transformer's biases and norm gains too), as the bundled
    # translators were trained; the RNNs use none.
    opt = make_optimizer(
        model, lr=base_lr, weight_decay=0.01 if transformer else 0.0, betas=(0.9, 0.98), decay_vectors=True
    )
    batches = Batches(pool, src, tgt, args.tokens, random.Random(args.seed))
    curriculum = int(args.curriculum * args.steps)

    def loss_fn(step: int) -> tuple[Tensor, dict[str, float]]:
        longest = args.max_words if step >= curriculum else 8 + (args.max_words - 8) * step // max(1, curriculum)
        s, s_len, y_in, y_out = batches.sample(longest)
        logits = model(s, s_len, y_in)  # (B, T, V)
        real = y_out != 0
        acc = ((logits.argmax(-1) == y_out) & real).sum().item() / real.sum().item()
        return F.cross_entropy(logits.flatten(0, 1), y_out.flatten(), ignore_index=0), {"acc": acc, "len": longest}

    start, cpu = time.time(), time.process_time()
    schedule = partial(lr_at, steps=args.steps, peak=base_lr, warmup=args.warmup)
    *_, last = train_loop(model, opt, loss_fn, steps=args.steps, schedule=schedule, desc=f"seq2seq-{kind}")
    config["training"] = {
        "steps": args.steps,
        "tokens_per_batch": args.tokens,
        "seed": args.seed,
        "lr": base_lr,
        "pool": len(pool),
        "curriculum": args.curriculum,
        "wall_seconds": round(time.time() - start),
        "cpu_seconds": round(time.process_time() - cpu),
        "threads": args.threads,
        "final_loss": round(last.loss, 4),
    }
    return model.eval(), config


def pick_align_layer(translator: Translator, seed: int) -> int:
    """The Transformer layer whose head-averaged cross-attention best matches gold alignments (validation)."""
    val = generate_examples(64, seed + 7, min_words=5, max_words=40, split="train")
    layers = translator.model.cfg.num_layers
    best = []
    for layer in range(layers):
        translator.align_layer = layer
        forced, _ = translator.force([ex.source for ex in val], [ex.target for ex in val])
        inter = pred = gold = 0
        for ex, tr in zip(val, forced):
            i, a, s = aer_counts(hard_alignment(tr.alignment), ex.alignment)
            inter, pred, gold = inter + i, pred + a, gold + s
        best.append(1 - 2 * inter / (pred + gold))
    log.info("validation AER per decoder layer: %s", [round(b, 3) for b in best])
    return min(range(layers), key=best.__getitem__)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tx_explorer.train seq2seq", description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=(*NAMES, "all"), default="all")
    p.add_argument("--steps", type=int, default=1000, help="optimiser steps (the same for every model)")
    p.add_argument("--tokens", type=int, default=1000, help="source words per batch (short sentences → more of them)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 3e-3 RNN, 1e-3 Transformer)")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument(
        "--curriculum", type=float, default=0.3, help="fraction of steps over which the longest length grows"
    )
    p.add_argument("--pool", type=int, default=30000, help="training pairs generated up front")
    p.add_argument("--max-words", type=int, default=40)
    p.add_argument("--score", choices=("additive", "dot", "general"), default="additive", help="attention score")
    p.add_argument("--per-bucket", type=int, default=50, help="held-out sentences per length bucket")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (small matrices: 1 is usually fastest)")
    p.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = p.parse_args(argv)
    begin(args.threads)

    src, tgt = Vocab(source_words()), Vocab(target_words())
    log.info("generating %d training pairs (seed %d)…", args.pool, args.seed)
    pool = generate_examples(args.pool, args.seed, max_words=args.max_words, split="train")
    pool.append(parse(LECTURE_EXAMPLE[0].split()))  # the lecture's "we see the sky" is always seen
    buckets = eval_set(args.per_bucket)
    for kind in NAMES if args.model == "all" else (args.model,):
        model, config = train_one(kind, args, pool, src, tgt)
        config.update(src_vocab=len(src), tgt_vocab=len(tgt))
        translator = Translator(f"seq2seq-{kind}", model, src, tgt)
        if kind == "transformer":
            config["align_layer"] = translator.align_layer = pick_align_layer(translator, args.seed)
        results = evaluate(translator, buckets, progress=None)
        log.info("%s token accuracy by bucket: %s", kind, [round(x, 3) for x in results["token_accuracy"]])
        vocab = {"source": src.words, "target": tgt.words}
        save_bundle(args.out / f"seq2seq-{kind}", model.state_dict(), config, vocab=vocab, eval=results)
        log.info("saved %s", args.out / f"seq2seq-{kind}")


if __name__ == "__main__":
    main()
