"""Naive vs tiled ("flash", ours) vs PyTorch SDPA attention: median forward time and peak tensor memory.

    python -m benchmarks attention                       # CPU: N = 512 … 16384, H = 8, D_H = 64, float32
    python -m benchmarks attention --threads 1 --sizes 512 1024

Writes the section ``attention-<device>`` of BENCHMARKS.md (a GPU run sits beside the CPU one).
Naive attention runs only where ``memory.check_naive_fits`` allows it and N ≤ ``--naive-max``.
"""

from __future__ import annotations

import argparse
import logging

import torch

from benchmarks import machine, parse, parser, publish
from tx_explorer.analysis import cost, memory

log = logging.getLogger("benchmarks.attention")


def _parser() -> argparse.ArgumentParser:
    p = parser("attention", __doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--block-size", type=int, default=256, help="tile side of our kernel (CPU likes large tiles)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per point; the median is reported")
    p.add_argument("--large-n", type=int, default=8192, help="from this N on, use --large-repeats")
    p.add_argument("--large-repeats", type=int, default=2)
    p.add_argument("--naive-max", type=int, default=8192, help="never run naive attention above this N")
    p.add_argument("--fraction", type=float, default=0.5, help="naive may use this share of the free memory")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32")
    return p


def _ms(r: cost.Measurement | None) -> str:
    return f"{1000 * r.seconds:,.1f}" if r else "—"


def _mb(r: cost.Measurement | None) -> str:
    return memory.format_bytes(r.peak_bytes) if r else "—"


def _x(value: float | None) -> str:
    return f"{value:.2f}×" if value else "—"


def table(results: list[cost.Measurement], sizes: list[int]) -> str:
    """Markdown: per N the three times and peaks, with naive/flash and flash/SDPA ratios side by side."""
    lines = [
        "| N | naive ms | flash ms | SDPA ms | naive/flash time | flash/SDPA time "
        "| naive peak | flash peak | SDPA peak | naive/flash peak | flash/SDPA peak |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        r = {m.method: m for m in results if m.n == n}
        naive, flash, sdpa = r.get("naive"), r.get("flash"), r.get("sdpa")
        lines.append(
            f"| {n:,} | {_ms(naive)} | {_ms(flash)} | {_ms(sdpa)} "
            f"| {_x(cost.ratio(results, n, 'naive', 'flash'))} | {_x(cost.ratio(results, n, 'flash', 'sdpa'))} "
            f"| {_mb(naive)} | {_mb(flash)} | {_mb(sdpa)} "
            f"| {_x(cost.ratio(results, n, 'naive', 'flash', 'peak_bytes'))} "
            f"| {_x(cost.ratio(results, n, 'flash', 'sdpa', 'peak_bytes'))} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args, command = parse(_parser(), argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    header = machine(device)  # before the run: the load average is the one the numbers were taken under
    itemsize = torch.empty(0, dtype=getattr(torch, args.dtype)).element_size()
    results: list[cost.Measurement] = []
    refused: list[str] = []
    for n in args.sizes:
        repeats = args.repeats if n < args.large_n else args.large_repeats
        for method in cost.METHODS:
            if method == "naive":
                if n > args.naive_max:
                    refused.append(f"N={n:,}: above --naive-max {args.naive_max:,}")
                    continue
                try:
                    memory.check_naive_fits(
                        n, args.heads, args.head_dim, itemsize=itemsize, device=device, fraction=args.fraction
                    )
                except memory.MemoryBudgetError as exc:
                    refused.append(str(exc))
                    continue
            r = cost.measure(
                method,
                n,
                heads=args.heads,
                head_dim=args.head_dim,
                repeats=repeats,
                block_size=args.block_size,
                device=device,
                dtype=args.dtype,
            )
            log.info("N=%d %-5s %.3f s  peak %s", n, method, r.seconds, memory.format_bytes(r.peak_bytes))
            results.append(r)

    how = "peak = max over the call of bytes held by tensors allocated during it " + (
        "(CUDA allocator high-water mark)"
        if device.type == "cuda"
        else "(TorchDispatchMode storage tracker; SDPA's internal per-thread scratch is not visible to it)"
    )
    text = "\n".join(
        [
            f"## Attention on {device.type.upper()}: naive vs tiled (ours) vs PyTorch SDPA",
            "",
            f"Command: `{command.strip()}` (from the repository root; `make bench` runs every benchmark).",
            "",
            f"Machine: {header}.",
            "",
            f"Forward pass only, no autograd; inputs `[1, {args.heads}, N, {args.head_dim}]` {args.dtype}; "
            f"our kernel with {args.block_size}×{args.block_size} tiles; time = median of {args.repeats} runs "
            f"({args.large_repeats} from N = {args.large_n:,}) after a warm-up; {how}.",
            "",
            table(results, args.sizes),
            "",
            *([f"Naive not run: {'; '.join(refused)}.", ""] if refused else []),
            "Targets (CPU): naive/flash peak ≥ 50× at N = 8192 — measured "
            f"{_x(cost.ratio(results, 8192, 'naive', 'flash', 'peak_bytes'))}; flash time within 3× of SDPA at "
            f"N = 4096 — measured {_x(cost.ratio(results, 4096, 'flash', 'sdpa'))}.",
        ]
    )
    publish(f"attention-{device.type}", text, no_write=args.no_write)


if __name__ == "__main__":
    main()
