"""The circuit page's live run: how long until its phase change, per seed.

The page's run (:data:`tx_explorer.train.induction.LIVE`, on the tokens shipped with ``induction-2l``) from each
seed, as the job pool runs it (:class:`tx_explorer.views.circuit.LiveRun`, one torch thread): wall-clock and CPU
seconds until the first measurement where the second copy's loss is below half of the first copy's, and the load
average of the machine while it ran (other jobs on a shared machine stretch the wall-clock time, not the CPU time).
Target: the phase change within 90 s of wall-clock time.

``python -m benchmarks circuit_live [--seeds 0 1 2] [--no-write]``
"""

from __future__ import annotations

import os
import time

import torch

from benchmarks import machine, parse, parser, publish, verdict
from tx_explorer import models
from tx_explorer.views import circuit as view

TARGET_S = 90.0


class _PhaseFound(Exception):
    """Raised from the job's report: the run stops there, as a page's Stop stops it."""


def measure(seed: int) -> dict:
    """One live run to its phase change (or its end): seconds, CPU seconds, steps, the load average."""
    run = view.LiveRun(models.load_model(view.BUNDLE), seed=seed)
    t0, c0 = time.monotonic(), time.process_time()
    found: dict = {}

    def report(fraction: float, text: str) -> None:
        if not found and run.records and view.live_phase(run.records) is not None:
            found.update(seconds=time.monotonic() - t0, cpu=time.process_time() - c0, step=run.records[-1][1].step)
            raise _PhaseFound

    try:
        run(report)
    except _PhaseFound:
        pass
    ran = {"total": time.monotonic() - t0, "total_cpu": time.process_time() - c0}
    return {"seed": seed, "load": os.getloadavg()[0], "steps": run.records[-1][1].step, **ran, **found}


def section(rows: list[dict], command: str) -> str:
    lines = [
        "## Watch a circuit form: the live run",
        "",
        f"The page's run from scratch ({view.LIVE_MAX_STEPS} steps at most, measured every "
        f"{view.trainer.LIVE.eval_every} steps), one torch thread, per seed: time until the phase change (second-copy "
        f"loss below half of the first copy's). Target: ≤ {TARGET_S:.0f} s wall-clock. Rebuild: `{command}`.",
        "",
        "| seed | phase change at step | wall-clock | CPU time | 1-min load average | target |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "seconds" in r:
            lines.append(
                f"| {r['seed']} | {r['step']} | {r['seconds']:.0f} s | {r['cpu']:.0f} s | {r['load']:.1f} | "
                f"{verdict(r['seconds'], TARGET_S, 's')} |"
            )
        else:
            lines.append(
                f"| {r['seed']} | none in {r['steps']} steps | ({r['total']:.0f} s for all) | "
                f"({r['total_cpu']:.0f} s) | {r['load']:.1f} | missed |"
            )
    lines += ["", f"Machine: {machine(torch.device('cpu'))}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser("circuit_live", __doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--repeats", type=int, default=1, help="runs per seed (each seed's run is deterministic)")
    args, command = parse(p, argv)
    torch.set_num_threads(1)
    rows = [measure(seed) for seed in args.seeds for _ in range(args.repeats)]
    publish("circuit-live", section(rows, command), no_write=args.no_write)
