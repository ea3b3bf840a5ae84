"""Decoding speed of tiny-llama with and without our KV cache (``tx_explorer.modules.cache.KVCache``).

From a 32-token prompt, greedy decoding to 64, 128 and 256 tokens in all: without the cache every new token
re-runs the whole sequence; with it the prompt is run once and each new token runs alone, attending to the
stored keys and values. Reported: the median (over ``--repeats`` runs) of milliseconds of CPU time per new token
(process time, one thread: other jobs on a shared machine inflate wall-clock time, not this), and the cache's
bytes at the end. Both ways must pick the same tokens (checked; the run fails otherwise).

``python -m benchmarks kv_cache [--repeats 3] [--threads 1] [--no-write]``
"""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks import parse, parser, publish, with_machine
from tx_explorer.analysis.memory import format_bytes
from tx_explorer.config import PRESETS
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.transformer import CausalLM

PROMPT = 32
LENGTHS = (64, 128, 256)  # tokens in all at the end (tiny-llama was trained on 128; rotary has no table to outgrow)


def model() -> tuple[CausalLM, str]:
    """tiny-llama's trained weights, or (bundle not built) random ones: the time does not depend on the values."""
    from tx_explorer import models

    if "tiny-llama" in models.available_models("text"):
        return models.load_model("tiny-llama").model, "tiny-llama (trained bundle)"
    torch.manual_seed(0)
    return CausalLM(PRESETS["tiny-llama"]).eval(), "tiny-llama's architecture with random weights (bundle not built)"


@torch.no_grad()
def decode(lm: CausalLM, prompt: torch.Tensor, total: int, cached: bool) -> tuple[list[int], float, int]:
    """Greedy decoding to ``total`` tokens: ``(ids, CPU seconds after the prompt's first pass, cache bytes)``."""
    ids = prompt.clone()  # (1, N)
    cache = KVCache() if cached else None
    logits = lm(ids, cache=cache)[:, -1]  # the prompt once: the same work both ways, not timed
    t0 = time.process_time()
    while ids.shape[1] < total:
        nxt = logits.argmax(-1, keepdim=True)  # (1, 1)
        ids = torch.cat([ids, nxt], dim=1)
        if ids.shape[1] == total:
            break
        logits = (lm(nxt, cache=cache) if cached else lm(ids))[:, -1]
    return ids[0].tolist(), time.process_time() - t0, cache.nbytes if cached else 0


def measure(repeats: int) -> tuple[list[dict], str]:
    lm, what = model()
    prompt = torch.randint(0, lm.cfg.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(0))
    rows = []
    for total in LENGTHS:
        new = total - PROMPT
        per = {}
        for cached in (False, True):
            runs = [decode(lm, prompt, total, cached) for _ in range(repeats)]
            per[cached] = (runs[0][0], statistics.median(r[1] for r in runs) * 1000 / new, runs[0][2])
        if per[False][0] != per[True][0]:
            raise RuntimeError(f"the cached decode picked other tokens than the full one at {total} tokens")
        rows.append({"total": total, "full": per[False][1], "cached": per[True][1], "bytes": per[True][2]})
    return rows, what


def section(rows: list[dict], what: str, repeats: int) -> str:
    lines = [
        "## KV cache: decoding speed with and without it",
        "",
        f"{what}; greedy decoding from a {PROMPT}-token prompt, median of {repeats} runs of CPU time (one thread, "
        "float32). "
        "Without the cache each new token re-runs the whole sequence (cost grows with its length); with it each "
        "new token runs alone against the stored keys and values. Both ways picked the same tokens (checked). "
        "The cache holds 2 · layers · KV heads · D_h floats per token: grouped-query attention (2 KV heads for 4 "
        "query heads) halves it. Rebuild: `python -m benchmarks kv_cache`.",
        "",
        "| tokens in all | new tokens | CPU ms / new token, no cache | CPU ms / new token, KV cache | speed-up "
        "| cache size |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['total']} | {r['total'] - PROMPT} | {r['full']:.2f} | {r['cached']:.2f} | "
            f"{r['full'] / r['cached']:.1f}× | {format_bytes(r['bytes'])} |"
        )
    return with_machine(lines)


def main(argv: list[str] | None = None) -> None:
    args, _ = parse(parser("kv_cache", __doc__, repeats=5, threads=1), argv)
    rows, what = measure(args.repeats)
    publish("kv-cache", section(rows, what, args.repeats), no_write=args.no_write)
