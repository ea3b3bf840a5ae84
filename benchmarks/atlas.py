"""The long-context atlas (``tx_explorer.analysis.atlas.head_stats``) beside the same model's plain forward.

SmolLM2-135M-Instruct (or, without it, tiny-llama at the lengths it allows) reads the bundled corpus at 1k, 2k, 4k
and 8k tokens twice: with the atlas (our tiled kernel, a second pass reducing every tile to per-head statistics)
and as a plain forward (PyTorch's fused SDPA, no statistics). Both run embeddings and blocks, not the LM head (the
atlas needs no logits; SmolLM2's at 8k would be 1.6 GB). Reported: seconds (median of ``--repeats``; CPU time of
the process on the CPU, wall clock on CUDA) and seconds per 1k tokens; the peak memory of tensors allocated during
the call above the loaded model (``analysis.memory.peak_memory``: CUDA's allocator high-water mark; on the CPU a
separate run under its storage tracker, which does not see scratch buffers inside fused kernels). Then every
head's share on the first token, entropy and local share at the longest length, and what they say.

``python -m benchmarks atlas [--lengths 1024 2048 4096 8192] [--repeats 1] [--threads 1] [--no-write]``
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator

import numpy as np
import torch

from benchmarks import machine, parse, parser, publish
from tx_explorer import models
from tx_explorer.analysis import atlas
from tx_explorer.analysis.memory import format_bytes, peak_memory
from tx_explorer.families.text import TextModel

MODEL = "smollm2-135m-instruct"
LENGTHS = (1024, 2048, 4096, 8192)
TARGETS = {8192: (1e9, "1 GB"), 4096: (5e8, "0.5 GB")}  # peak above the model ≤ 1 GB at 8k, ≤ 0.5 GB at 4k
TIME_TARGET = 4.0  # the atlas ≤ 4 × the plain forward


def load(device: torch.device) -> tuple[TextModel, str]:
    name = MODEL if MODEL in models.available_models("text") else "tiny-llama"
    tm = models.load_model(name)
    tm.model.to(device)
    return tm, name


@torch.no_grad()
def plain(tm: TextModel, ids: list[int]) -> torch.Tensor:
    """Embeddings and blocks as the model runs them untraced (fused SDPA), the final norm, no LM head."""
    x = tm.model.embed(torch.tensor([ids], device=next(tm.model.parameters()).device))
    return tm.model.hidden(x, tm.model.mask(len(ids), x.device), None)


def timed(fn, device: torch.device, repeats: int) -> float:
    """Median seconds of ``fn()``: CPU time of this process on the CPU (other jobs on a shared machine inflate the
    wall clock, not this; one torch thread), wall clock on CUDA after synchronising."""
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    runs = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = clock()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        runs.append(clock() - t0)
    return statistics.median(runs)


def measure(
    tm: TextModel, lengths: list[int], device: torch.device, repeats: int
) -> Iterator[tuple[list[dict], atlas.HeadStats]]:
    """After each length, the rows so far and that length's statistics (a long run publishes as it goes)."""
    rows = []
    for n in lengths:
        ids = atlas.corpus_ids(tm, n)
        stats, atlas_peak = peak_memory(lambda ids=ids: atlas.head_stats(tm, ids), device)
        _, plain_peak = peak_memory(lambda ids=ids: plain(tm, ids), device)
        row = {
            "n": n,
            "atlas_s": timed(lambda ids=ids: atlas.head_stats(tm, ids), device, repeats),
            "plain_s": timed(lambda ids=ids: plain(tm, ids), device, repeats),
            "atlas_peak": atlas_peak,
            "plain_peak": plain_peak,
            "dense": len(tm.model.blocks) * tm.config.num_heads * n * n * 4,
            "sinks": int((stats.per_head("first") > 0.5).sum()),
        }
        rows.append(row)
        yield rows, stats


def head_table(stats: atlas.HeadStats) -> list[str]:
    """One row per layer, one cell per head: share on the first token · entropy (nats) · local share."""
    first, entropy, local = (stats.per_head(s) for s in ("first", "entropy", "local"))
    heads = first.shape[1]
    lines = ["| layer | " + " | ".join(f"H{h}" for h in range(heads)) + " |", "|---" * (heads + 1) + "|"]
    for layer in range(first.shape[0]):
        cells = [f"{first[layer, h]:.2f} · {entropy[layer, h]:.1f} · {local[layer, h]:.2f}" for h in range(heads)]
        lines.append(f"| L{layer} | " + " | ".join(cells) + " |")
    return lines


def findings(stats: atlas.HeadStats, rows: list[dict]) -> list[str]:
    """What the numbers say, computed."""
    first, entropy, local, dist = (stats.per_head(s) for s in ("first", "entropy", "local", "distance"))
    n, heads = stats.first.shape[-1], first.size
    layers_sinking = [int(i) for i in np.nonzero((first > 0.5).mean(axis=1) > 0.5)[0]]
    uniform = float(np.mean(np.log(np.arange(1, n + 1))))
    heavy = stats.received.sum(dim=(0, 1))  # (T,): attention each key receives, summed over every head
    top = torch.topk(heavy, 5).indices.tolist()
    by_length = ", ".join(f"{r['sinks']} at {r['n']:,}" for r in rows)
    return [
        f"- **Sinks:** {int((first > 0.5).sum())} of {heads} heads put over half of their attention on the first "
        f"token at {n:,} tokens (averaged over the positions), {int((first > 0.9).sum())} over 90 %; by length: "
        f"{by_length}. Layers where most heads sink: {layers_sinking or 'none'}.",
        f"- **Spread:** median entropy {np.median(entropy):.2f} nats (uniform over every key seen would average "
        f"{uniform:.2f}); the most spread head reaches {entropy.max():.2f} nats, the sharpest {entropy.min():.2f}.",
        f"- **Locality:** {int((local > 0.5).sum())} of {heads} heads keep over half of their attention within the "
        f"last {stats.window} keys; median mean distance looked back {np.median(dist):,.0f} tokens, the farthest-"
        f"looking head {dist.max():,.0f}.",
        f"- **Heavy hitters:** the keys receiving most attention over all heads are positions {top} "
        f"({float(heavy[top[0]] / heavy.sum()):.1%} of all attention on position {top[0]}).",
    ]


def section(
    tm_name: str, rows: list[dict], stats: atlas.HeadStats, device: torch.device, repeats: int, cmd: str
) -> str:
    where = "GPU" if device.type == "cuda" else "CPU"
    lines = [
        f"## Long-context attention atlas ({where})",
        "",
        f"{tm_name} reads the bundled corpus (`atlas.corpus_ids`); the atlas (`analysis.atlas.head_stats`: our tiled "
        "kernel, 256 × 256 tiles, then a second pass reducing each tile to first-token share, entropy, local share, "
        "distance and attention received per head) beside the same model's plain forward (fused SDPA, no "
        "statistics). Both run embeddings and blocks without the LM head. Seconds: "
        + ("wall clock" if device.type == "cuda" else "CPU time of the process (one thread)")
        + f", median of {repeats} run(s). Peak: tensors allocated during the call, above the loaded model (CPU: a "
        "separate run under the storage tracker). Dense maps: what every layer's N × N weights would take in float32. "
        f"Targets: peak ≤ 1 GB at 8k and ≤ 0.5 GB at 4k; atlas ≤ {TIME_TARGET:.0f}× the plain forward. "
        f"Rebuild: `{cmd.strip()}`.",
        "",
        "| tokens | atlas s | plain s | atlas ÷ plain | atlas s / 1k tokens | atlas peak | plain peak | dense maps "
        "| targets |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["atlas_s"] / r["plain_s"]
        verdicts = [f"time {'met' if ratio <= TIME_TARGET else 'missed'}"]
        if r["n"] in TARGETS:
            limit, words = TARGETS[r["n"]]
            verdicts.append(f"memory ≤ {words} {'met' if r['atlas_peak'] <= limit else 'missed'}")
        lines.append(
            f"| {r['n']:,} | {r['atlas_s']:.1f} | {r['plain_s']:.1f} | {ratio:.2f}× "
            f"| {r['atlas_s'] * 1000 / r['n']:.2f} "
            f"| {format_bytes(r['atlas_peak'])} | {format_bytes(r['plain_peak'])} | {format_bytes(r['dense'])} "
            f"| {', '.join(verdicts)} |"
        )
    n = stats.first.shape[-1]
    lines += [
        "",
        f"### Every head at {n:,} tokens: share on the first token · entropy (nats) · share within the last "
        f"{stats.window} keys (each averaged over the positions)",
        "",
        *findings(stats, rows),
        "",
        *head_table(stats),
        "",
        f"Machine: {machine(device)}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser("atlas", __doc__)
    p.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args, cmd = parse(p, argv)
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tm, name = load(device)
    lengths = [n for n in args.lengths if n <= tm.max_len] or [tm.max_len]
    for rows, stats in measure(tm, lengths, device, args.repeats):
        publish(f"atlas-{device.type}", section(name, rows, stats, device, args.repeats, cmd), no_write=args.no_write)
