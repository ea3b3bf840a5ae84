"""Benchmarks (not timed tests): each module ``benchmarks/<name>.py`` has ``main(argv)`` and writes its own
keyed section of ``BENCHMARKS.md`` with :func:`write_section`, leaving the other sections as they are."""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from tx_explorer import report

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
log = logging.getLogger("benchmarks")
FILE_ENV = "BENCHMARKS_FILE"  # smoke runs write to a scratch copy: BENCHMARKS_FILE=/tmp/b.md python -m benchmarks …


def report_path() -> Path:
    """Where sections go: ``$BENCHMARKS_FILE`` when set, else the repository's ``BENCHMARKS.md``."""
    return Path(os.environ.get(FILE_ENV) or BENCHMARKS_MD)


def write_section(key: str, text: str, path: Path | None = None) -> None:
    """Replace this benchmark's keyed section of ``BENCHMARKS.md`` (or ``path``), leaving the others as they are."""
    report.write_section(path or report_path(), key, text)


def parser(name: str, doc: str, *, repeats: int | None = None, threads: int | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m benchmarks <name>``, described by the first line of ``doc`` (the module's
    docstring), with the ``--no-write`` flag of every benchmark (see :func:`publish`); given their defaults, the
    ``--repeats`` (timed runs) and ``--threads`` (torch CPU threads, applied by :func:`parse`) of a timed one."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=doc.splitlines()[0])
    p.add_argument("--no-write", action="store_true", help="print the section instead of writing BENCHMARKS.md")
    if repeats is not None:
        p.add_argument("--repeats", type=int, default=repeats, help="timed runs (the median is reported)")
    if threads is not None:
        p.add_argument("--threads", type=int, default=threads, help="torch CPU threads")
    return p


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, str]:
    """``argv`` (default: the process's arguments) parsed, and the command that repeats the run, for the section;
    torch runs on ``--threads`` CPU threads where the command has that option and it is set."""
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    return args, f"{p.prog} {shlex.join(argv)}"


def median_seconds(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall-clock and process CPU seconds of ``repeats`` calls of ``run`` after one untimed call (first-call
    allocations); the CPU time barely moves when other jobs share the cores, the wall-clock time does."""
    run()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def publish(key: str, text: str, *, no_write: bool = False) -> None:
    """Write section ``key`` (see :func:`write_section`), or print it instead with ``--no-write``."""
    if no_write:
        sys.stdout.write(text + "\n")
        return
    write_section(key, text)
    log.info("wrote section %s", key)


def before(benchmark: str) -> dict:
    """The reference run ``benchmark``'s table sets beside today's numbers (``benchmarks/before.json``: measured once,
    before the work the table judges; data, not code)."""
    return json.loads(Path(__file__).with_name("before.json").read_text(encoding="utf-8"))[benchmark]


def verdict(value: float, target: float, unit: str = "ms") -> str:
    """``"met (120 ms under)"`` or ``"missed by 80 ms (1.27×)"`` for a value that should stay ≤ ``target``."""
    digits = 0 if unit == "ms" else 1 if unit == "s" else 2
    gap = abs(value - target)
    if value <= target:
        return f"met ({gap:,.{digits}f} {unit} under)"
    return f"missed by {gap:,.{digits}f} {unit} ({value / target:.2f}×)"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine(device: torch.device) -> str:
    """One Markdown line describing where the numbers come from."""
    from tx_explorer.analysis.memory import format_bytes, total_bytes

    parts = [
        f"{datetime.date.today().isoformat()}",
        f"{platform.system()} {platform.machine()}",
        f"{_cpu_model()} ({os.cpu_count()} logical cores, torch threads: {torch.get_num_threads()})",
        f"RAM {format_bytes(total_bytes('cpu'))}",
        f"Python {platform.python_version()}, torch {torch.__version__}",
    ]
    if device.type == "cuda":
        parts.insert(2, f"GPU {torch.cuda.get_device_name(device)} ({format_bytes(total_bytes(device))})")
    if hasattr(os, "getloadavg"):
        parts.append(f"load average before the run {os.getloadavg()[0]:.1f}")
    return " · ".join(parts)


def with_machine(lines: list[str], device: torch.device | None = None) -> str:
    """A section's text: its ``lines``, then where the numbers come from (:func:`machine`; default: the CPU)."""
    return "\n".join([*lines, "", f"Machine: {machine(device or torch.device('cpu'))}."])
