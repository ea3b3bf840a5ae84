"""Train the position lab: ``python -m tx_explorer.train positions``.

Five small causal LMs that differ only in ``TransformerConfig.positions`` — none, sinusoidal, learned, rotary,
ALiBi — trained on tiny-gpt's corpus and tokenizer with a 64-token context, the same initial weights (every
parameter they share is copied from one seeded initialisation; the learned table is the only extra), the same
batches (one generator, the same seed) and the same recipe (the language model's AdamW and warm-up/cosine
schedule, :mod:`tx_explorer.train.lm`). Every scheme is trained at each of ``--seeds`` (0, 1, 2), so that a
verdict can tell a gap from seed noise (:mod:`tx_explorer.analysis.spread`). Each run is measured by
:mod:`tx_explorer.analysis.position_lab`: loss at every position of held-out windows 4× the training length,
attention weight by query–key distance, a shuffled-context probe and the first layer's relative-score spread;
the claims are checked on those numbers.

The bundle ``tx_explorer/weights/positions`` holds ``summary.json`` (settings, every seed's results, verdicts),
``model.safetensors`` (float16; the first seed's weights under ``<scheme>.``, seed k's under ``<scheme>@k.``),
``replay.safetensors`` (each seed's first batches, for the reproduction test), ``config.json``,
``tokenizer.json`` and ``manifest.json``. The bundle is rewritten after every seed (an interrupted run keeps the
seeds it finished), the ``positions`` section of BENCHMARKS.md at the end.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from tx_explorer import locales, report
from tx_explorer.analysis import position_lab as lab
from tx_explorer.analysis import spread
from tx_explorer.analysis.bigram import bigram_baseline, bigram_counts, pair_nll
from tx_explorer.config import TransformerConfig
from tx_explorer.data import corpus
from tx_explorer.families.positions import BASE, BUNDLE, RETRAIN, SINUSOIDAL_SCALE, TOKENIZER, Results, write_bundle
from tx_explorer.families.text import unique_state
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train.common import add_bundle_args, begin, cpu_seconds, lr_at, make_optimizer, train_loop
from tx_explorer.train.lm import bundled_or_new_tokenizer, encode_stream
from tx_explorer.views import position_lab as position_view

log = logging.getLogger("tx_explorer.train.positions")
REPLAY_STEPS = 3  # batches (and their losses) shipped so a test can replay the start of every run
SEEDS = (0, 1, 2)  # three seeds: a verdict's gap must exceed the spread between them


@dataclass(frozen=True)
class Settings:
    """One recipe for every scheme (nanoGPT's, :mod:`tx_explorer.train.common`)."""

    steps: int = 400  # × 3 seeds × 5 schemes (a single seed once had 1600: three of those overran a shared CPU)
    batch_size: int = 16
    seq_len: int = 64  # the training context
    lr: float = 3e-3  # peak
    warmup: int = 50  # linear warm-up steps
    weight_decay: float = 0.1
    clip: float = 1.0  # max global gradient norm
    seed: int = 0  # of one run: initial weights, batches and the probes' draws
    eval_factor: int = 4  # loss by position on windows of eval_factor × seq_len tokens
    eval_windows: int = 128  # held-out windows for loss by position and the order probe
    attention_windows: int = 16  # held-out windows for attention by distance
    probe_stride: int = 32  # the order probe reads held-out windows of seq_len + 1 tokens starting this far apart


def scheme_config(scheme: str, vocab_size: int = BASE.vocab_size, max_len: int = BASE.max_len) -> TransformerConfig:
    if scheme not in lab.SCHEMES:
        raise KeyError(f"unknown position scheme {scheme!r}; choose from {', '.join(lab.SCHEMES)}")
    scaled = {"sinusoidal_scale": SINUSOIDAL_SCALE} if scheme == "sinusoidal" else {}
    return BASE.replace(positions=scheme, vocab_size=vocab_size, max_len=max_len, **scaled)


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


def held_out_windows(val_ids: Tensor, settings: Settings) -> Tensor:
    """The held-out windows of ``eval_factor × seq_len`` tokens (+ the last one's next token) → ``[W, 4N + 1]``."""
    long = settings.seq_len * settings.eval_factor
    count = min(settings.eval_windows, (len(val_ids) - 1) // (long + 1))
    return val_ids[: count * (long + 1)].view(count, long + 1)


def bigram(train_ids: Tensor, val_ids: Tensor, settings: Settings, vocab_size: int) -> dict:
    """A bigram model's loss at every position of the same held-out windows the schemes are read on: the bar
    below which a language model has learned more than pairs of tokens (k chosen on training text only)."""
    k = bigram_baseline(train_ids, val_ids, vocab_size)["k"]
    w = held_out_windows(val_ids, settings)
    loss = pair_nll(bigram_counts(train_ids, vocab_size), w[:, :-1], w[:, 1:], k).mean(0)  # (4N,)
    return {"k": k, "loss_by_position": _round(loss.tolist())}


def measure(model: CausalLM, val_ids: Tensor, settings: Settings) -> dict:
    """Everything the page and the verdicts read about one trained model."""
    n = settings.seq_len
    long_windows = held_out_windows(val_ids, settings)  # (W, 4N + 1)
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
        "reach": lab.reach(model, long_windows.shape[1] - 1),
        "attention_by_distance": [
            [_round(h, 4) for h in layer] for layer in lab.attention_by_distance(model, x).tolist()
        ],
        "order_probe": {"original": round(original, 6), "shuffled": round(shuffled, 6), "windows": len(probe)},
        "relative": lab.relative_spread(model, probe_tokens, n),
    }


def train_one(
    scheme: str, train_ids: Tensor, val_ids: Tensor, settings: Settings, vocab_size: int
) -> tuple[CausalLM, dict]:
    """Train one scheme at ``settings.seed`` and measure it: the model and its results (one seed's entry)."""
    start, cpu = time.time(), cpu_seconds()
    model = build(scheme, seed=settings.seed, vocab_size=vocab_size)
    losses = []
    for loss in train(model, ((x, y) for _, x, y in batches(train_ids, settings)), settings):
        losses.append(loss)
        if len(losses) % 100 == 0:
            log.info("%s seed %d step %d loss %.3f", scheme, settings.seed, len(losses), sum(losses[-100:]) / 100)
    return (
        model,
        {
            "seed": settings.seed,
            "train_loss": _round(losses[9::10], 4),  # every 10th step
            "replay_loss": losses[:REPLAY_STEPS],
            **measure(model, val_ids, settings),
            "seconds": round(time.time() - start, 1),
            "cpu_seconds": round(cpu_seconds() - cpu, 1),
        },
    )


def _round(values: list[float], digits: int = 5) -> list[float | None]:
    return [None if not math.isfinite(v) else float(f"{v:.{digits}g}") for v in values]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = Settings()
    p = argparse.ArgumentParser(prog=RETRAIN, description=__doc__.splitlines()[0])
    p.add_argument("--schemes", nargs="+", default=list(lab.SCHEMES), choices=lab.SCHEMES)
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="train every scheme at each seed")
    p.add_argument("--eval-windows", type=int, default=d.eval_windows)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (tiny models gain nothing from more)")
    add_bundle_args(p, tokenizer=TOKENIZER, out=BUNDLE)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0, c0 = begin(args.threads)
    settings = Settings(steps=args.steps, batch_size=args.batch_size, lr=args.lr, eval_windows=args.eval_windows)
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

    baseline = bigram(train_ids, val_ids, settings, vocab)
    results: dict[str, dict] = {scheme: {"seeds": []} for scheme in args.schemes}
    weights, replay = {}, {}
    for seed in args.seeds:
        run_settings = replace(settings, seed=seed)
        for i, (starts, x, y) in zip(range(REPLAY_STEPS), batches(train_ids, run_settings)):
            replay |= {f"seed{seed}.batch{i}.starts": starts, f"seed{seed}.batch{i}.x": x, f"seed{seed}.batch{i}.y": y}
        for scheme in args.schemes:
            model, run = train_one(scheme, train_ids, val_ids, run_settings, vocab)
            results[scheme] = {"config": model.cfg.to_dict(), "seeds": [*results[scheme]["seeds"], run]}
            prefix = scheme if seed == args.seeds[0] else f"{scheme}@{seed}"  # the first seed's is the page's model
            weights.update({f"{prefix}.{k}": v.half() for k, v in unique_state(model).items()})
            log.info(
                "%s seed %d: in-context loss %.3f, beyond %s", scheme, seed, run["loss_inside"], run["loss_beyond"]
            )
        summary = {
            "settings": {k: v for k, v in asdict(settings).items() if k != "seed"},  # each run has its own
            "seeds": args.seeds[: args.seeds.index(seed) + 1],
            "schemes": results,
            "bigram": baseline,
            "verdicts": verdict_dicts(results, settings.seq_len, baseline["loss_by_position"]),
            "train_tokens": len(train_ids),
            "validation_tokens": len(val_ids),
            "corpus": corpus.describe(docs, args.corpus),
            "threads": torch.get_num_threads(),
            "minutes": round((time.time() - t0) / 60, 2),
            "cpu_minutes": round((cpu_seconds() - c0) / 60, 2),
            "command": " ".join([RETRAIN, *(argv or [])]),
        }
        write_bundle(args.out, summary, weights, replay, args.tokenizer if args.tokenizer.is_file() else tok)
        log.info("seed %d done, bundle written to %s", seed, args.out)
    if args.benchmarks:
        update_benchmarks(Path(args.benchmarks), summary)
    log.info("bundle written to %s: %.1f min, %.1f CPU-min", args.out, summary["minutes"], summary["cpu_minutes"])


def verdict_dicts(results: dict, context: int, bigram_loss: list[float]) -> list[dict]:
    """The verdicts as JSON (each scheme's number per seed, mean and std; each comparison's gap and spread):
    numbers a scheme cannot produce (a learned table past its length) become null."""
    return [
        {
            "key": v.key,
            "scheme": v.scheme,
            "state": v.state,
            "numbers": {k: {f: _json(getattr(x, f)) for f in ("values", "mean", "std")} for k, x in v.numbers.items()},
            "comparisons": [{"gap": _json(c.gap), "spread": _json(c.spread), "state": c.state} for c in v.comparisons],
        }
        for v in lab.verdicts(results, context, bigram_loss)
    ]


def _json(x: float | tuple[float, ...]) -> float | list[float | None] | None:
    if isinstance(x, tuple):
        return [_json(v) for v in x]
    return x if math.isfinite(x) else None


def _pm(x: spread.Stat, digits: int = 3) -> str:
    return "—" if not math.isfinite(x.mean) else x.plus_minus(digits)


def update_benchmarks(path: Path, summary: dict) -> None:
    """Rewrite only the text between ``<!-- positions:start -->`` and ``<!-- positions:end -->``."""
    s, runs, seeds = summary["settings"], summary["schemes"], summary["seeds"]
    n = s["seq_len"]
    split = {
        k: lab.per_seed(runs, lambda r, i=i: lab.inside_beyond(r["loss_by_position"], n)[i])
        for k, i in (("in", 0), ("out", 1))
    }
    harm, rel = lab.per_seed(runs, lab.order_harm), lab.per_seed(runs, lab.relative)
    cpu = lab.per_seed(runs, lambda r: r["cpu_seconds"])
    rows = [
        f"| {name} | {_pm(spread.stat(split['in'][name]))} | "
        + (f"— (a learned table has no row past {n})" if name == "learned" else _pm(spread.stat(split["out"][name])))
        + f" | {_pm(spread.stat(harm[name]))} | {max(rel[name]):.1e} | {spread.stat(cpu[name]).mean:.0f} s |"
        for name in runs
    ]
    # The page's own rows (the rules live in the library, the words in the locale): what it says, this says.
    claim, verdict, numbers = (locales.text("position_lab", f"col_{c}") for c in ("claim", "verdict", "numbers"))
    verdict_lines = [
        f"- {row[claim]}: **{row[verdict]}** — {row[numbers]}"
        for row in position_view.verdict_rows(Results(summary=summary, folder=BUNDLE))
    ]
    body = "\n".join(
        [
            "## Position lab: none, sinusoidal, learned, rotary, ALiBi",
            "",
            f"Causal LMs of {BASE.num_layers} blocks × D {BASE.dim} ({BASE.num_heads} heads) differing only in the "
            f"position scheme (the sinusoidal table scaled to the token embeddings' size, see the page); at each "
            f"seed ({', '.join(map(str, seeds))}) the same initial weights and batches for every scheme; "
            f"{s['steps']} steps × {s['batch_size']} × {n} tokens of tiny-gpt's corpus and tokenizer. Every number "
            "is the mean ± the standard deviation over the seeds. Losses in nats per token on "
            f"{s['eval_windows']} held-out windows of {n * s['eval_factor']} tokens: mean over positions 0–{n - 1} "
            f"(inside the training context) and {n}–{n * s['eval_factor'] - 1} (beyond it). Order probe: rise of "
            f"the loss at the last of {n} positions when the context before it is shuffled. Relative spread (largest "
            "over the seeds): the first layer's scores on one repeated token, largest spread along a diagonal "
            "i − j = d over the largest |score| (0 when scores depend only on i − j). Time: CPU seconds per run.",
            "",
            "| scheme | loss inside | loss beyond | order probe | relative spread | time |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "Claims checked on these numbers, in the page's words: a claim holds (or does not) only when the gap "
            "between the means exceeds the spread, the sum of the two standard deviations over the seeds, else it is "
            "within noise; each line ends with what it reads and its rule (the bigram: "
            f"{lab.inside_beyond(summary['bigram']['loss_by_position'], n)[0]:.3f} nats inside the context, add-k "
            f"smoothing with k = {summary['bigram']['k']:g}):",
            "",
            *verdict_lines,
            "",
            f"Whole run: {summary['minutes']:.1f} min wall-clock, {summary['cpu_minutes']:.1f} CPU-minutes "
            f"({summary['threads']} thread(s)). Rebuild: `{summary['command']}`.",
        ]
    )
    report.write_section(path, "positions", body)
