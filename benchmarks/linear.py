"""SmolLM2's forward pass over a few tokens: the few-rows fast path of ``modules.linear`` against ``F.linear``.

A reader feeds SmolLM2 a few tokens at a time (a decoding step is one, a typed sentence a handful); each pass reads
the 135M float32 weights. This times one pass without the cache at N tokens and 24 decoding steps with it, every
product through :func:`tx_explorer.modules.linear.linear` (its fast path up to ``FEW_ROWS`` rows) and through
``F.linear`` alone, side by side in one run; medians of ``--repeats`` after a warm-up.

``python -m benchmarks linear [--repeats 7] [--threads 2] [--no-write]``
"""

from __future__ import annotations

import torch

from benchmarks import median_seconds, parse, parser, publish, with_machine
from tx_explorer import models
from tx_explorer.modules import linear as lin
from tx_explorer.modules.cache import KVCache

MODEL = "smollm2-135m-instruct"
NS = (1, 2, 4, 8, 16, 64)
STEPS = 24


def _plain(run):
    """``run`` with every product through ``F.linear`` (the fast path's threshold at zero rows)."""

    def plain():
        few, lin.FEW_ROWS = lin.FEW_ROWS, 0
        try:
            return run()
        finally:
            lin.FEW_ROWS = few

    return plain


def main(argv: list[str] | None = None) -> None:
    args, command = parse(parser("linear", __doc__, repeats=7, threads=2), argv)
    model = models.load_model(MODEL).model.eval()
    rows, worst = [], 0.0
    with torch.no_grad():
        for n in NS:
            ids = torch.arange(100, 100 + n)[None]  # (1, n)
            fast = lambda ids=ids: model(ids)  # noqa: E731
            plain = _plain(fast)
            worst = max(worst, float((fast() - plain()).abs().max()))
            rows.append((f"one pass, {n} token{'s' * (n > 1)}", fast, plain))

        def decode():
            cache = KVCache()
            for t in range(STEPS):
                model(torch.tensor([[100 + t]]), cache=cache)

        rows.append((f"{STEPS} decoding steps with the cache (one token each)", decode, _plain(decode)))
        timed = [(label, *(median_seconds(run, args.repeats)[0] for run in pair)) for label, *pair in rows]
    lines = [
        "## Few rows on the CPU: SmolLM2's products through W · xᵀ or F.linear",
        "",
        f"Command: `{command}`. SmolLM2-135M-Instruct (float32), medians of {args.repeats} runs after a warm-up, "
        f"{torch.get_num_threads()} torch thread(s), both paths in the same run. The fast path takes up to "
        f"{lin.FEW_ROWS} rows; beyond that both columns run F.linear. Largest |Δ logit| between them: {worst:.1e}.",
        "",
        "| run | fast path ms | F.linear ms | F.linear / fast |",
        "|---|---:|---:|---:|",
        *(f"| {label} | {f * 1e3:,.1f} | {p * 1e3:,.1f} | {p / f:.2f} |" for label, f, p in timed),
    ]
    publish("linear", with_machine(lines), no_write=args.no_write)
