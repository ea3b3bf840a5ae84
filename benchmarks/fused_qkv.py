"""One fused ``Linear(D, 3D)`` against three ``Linear(D, D)`` with the same weights (lecture §3.1).

The lecture writes [Q K V] = X[W_Q W_K W_V] and says one large product uses the hardware better than three. The
cost page times the same sweep once per server (:func:`tx_explorer.analysis.cost.fused_qkv_sweep`); this records
it: medians of ``--repeats`` calls after a warm-up, CPU float32, no autograd, over N tokens and widths D.

``python -m benchmarks fused_qkv [--repeats 9] [--threads 1] [--no-write]``
"""

from __future__ import annotations

from benchmarks import parse, parser, publish, with_machine
from tx_explorer.analysis.cost import FusedTiming, fused_qkv_sweep

NS, DS = (16, 128, 1024, 4096), (64, 256, 512, 1024)


def section(r: FusedTiming, repeats: int, threads: int) -> str:
    lines = [
        "## Fused [Q K V] projection: one Linear(D, 3D) or three Linear(D, D)",
        "",
        f"Median of {repeats} calls after a warm-up, CPU float32 without autograd, {threads} thread(s); both compute "
        f"the same numbers (max |Δ| = {r.max_diff:.1e}). The ratio is three calls' time over the fused call's "
        "(above 1: fusing pays). Rebuild: `python -m benchmarks fused_qkv`.",
        "",
        "| D | N | fused ms | three ms | ratio |",
        "|---|---|---|---|---|",
    ]
    for i, d in enumerate(r.ds):
        for j, n in enumerate(r.ns):
            f, s = r.fused[i, j] * 1e3, r.separate[i, j] * 1e3
            lines.append(f"| {d} | {n} | {f:.3f} | {s:.3f} | {s / f:.2f} |")
    return with_machine(lines)


def main(argv: list[str] | None = None) -> None:
    args, _ = parse(parser("fused_qkv", __doc__, repeats=9, threads=1), argv)
    result = fused_qkv_sweep(NS, DS, repeats=args.repeats)
    publish("fused-qkv", section(result, args.repeats, args.threads), no_write=args.no_write)
