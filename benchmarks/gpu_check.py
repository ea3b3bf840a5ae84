"""Everything that only a GPU can show, in one command of at most 8 minutes (``make gpu-check``).

    python -m benchmarks gpu_check                 # the four steps below, then BENCHMARKS.md's section ``gpu``
    python -m benchmarks gpu_check --no-write      # print the section instead
    python -m benchmarks gpu_check --rehearse      # every step on the CPU at toy sizes: does this machine have
                                                   # what the check needs? (benchmarks/_gpu_bundle.py)

A GPU machine may be lent for minutes only, so each step runs in its own process under a share of one budget
(``--budget``, 480 s), and a step that fails or runs out of time is reported as such while the others still run:

1. the tests that skip without CUDA (found in tests/ by their ``skipif(not torch.cuda.is_available() …)``);
2. naive vs tiled vs SDPA attention, time and peak memory, at N = 1k … 32k (``benchmarks/attention.py``);
3. the long-context atlas at SmolLM2's full 8k context beside its plain forward (``benchmarks/atlas.py``);
4. 30 protocol sessions arriving within 5 s on ``serve.py`` (``benchmarks/load.py``), with the GPU memory the
   server held (``nvidia-smi``): whether the pages' models went to the GPU (``ui.device()`` is CUDA there, but the
   bundled models load into the shared cache on the CPU; of the pages, the atlas and the cost page move work over).

The section names the device, its driver and CUDA, then each step's figures. Without a GPU it prints that it skipped
and why, writes nothing and exits 0; with a GPU that torch cannot use (a CPU-only build, a driver too old for it) it
says so and exits 1, since the lent minutes would otherwise pass with nothing measured.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks import ROOT, machine, parse, parser, publish

log = logging.getLogger("benchmarks.gpu_check")
BUDGET_S = 480.0  # the whole check, make gpu-check's promise
WRITE_S = 10.0  # kept back from the budget for stopping a step and writing the section
SIZES = (1024, 2048, 4096, 8192, 16384, 32768)  # attention's N, up to 32k
ATLAS_LENGTHS = (1024, 2048, 4096, 8192)  # SmolLM2's context is 8k
SESSIONS, ARRIVALS_S, INPUTS_S = 30, 5.0, 20.0  # the burst: a class opening at once, 20 s of inputs each


@dataclass(frozen=True)
class Sizes:
    """What the steps measure; :data:`REHEARSAL`'s toy sizes prove on a CPU that each step's code and packages run."""

    device: str = "cuda"
    attention: tuple[int, ...] = SIZES
    atlas: tuple[int, ...] = ATLAS_LENGTHS
    sessions: int = SESSIONS
    arrivals_s: float = ARRIVALS_S
    inputs_s: float = INPUTS_S
    collect_only: bool = False  # the CUDA tests would skip on a CPU: collecting them proves they import


REHEARSAL = Sizes("cpu", (256, 512), (256,), 2, 1.0, 5.0, True)


@dataclass
class Step:
    """One part of the check: a command run from the repository root, its most seconds, what its output means."""

    title: str
    argv: list[str]
    cap_s: float
    section: bool = True  # its standard output is a BENCHMARKS.md section (printed by --no-write), else a log
    rc: int | None = None  # None: not run, or stopped at its time limit
    seconds: float = 0.0
    output: str = ""
    note: str = ""
    gpu_mib: list[int] = field(default_factory=list)  # the GPU's used memory before it, then every second (MiB)


def cuda_tests(tests: Path = ROOT / "tests") -> list[str]:
    """The node ids of the tests that skip without CUDA: test functions (module level or in a class) with a
    decorator that asks ``torch.cuda.is_available()``."""
    found = []
    for path in sorted(tests.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes = [([], tree.body)] + [([n.name], n.body) for n in tree.body if isinstance(n, ast.ClassDef)]
        for prefix, body in scopes:
            for node in body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                    if any("cuda.is_available" in ast.unparse(d) for d in node.decorator_list):
                        found.append("::".join([f"tests/{path.name}", *prefix, node.name]))
    return found


def nvidia_smi(*query: str) -> list[list[str]]:
    """``nvidia-smi --query-<what>=<fields> --format=csv,noheader,nounits`` as rows of fields; [] when absent."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, *query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [[f.strip() for f in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def device_line() -> str:
    """The GPU as torch and the driver see it: name, memory, compute capability, driver, CUDA runtime."""
    props = torch.cuda.get_device_properties(0)
    driver = next(iter(nvidia_smi("--query-gpu=driver_version")), ["unknown (no nvidia-smi)"])[0]
    count = torch.cuda.device_count()
    return (
        f"{props.name} ({props.total_memory / 2**30:.0f} GiB, compute capability {props.major}.{props.minor}"
        f"{f', device 0 of {count}' if count > 1 else ''}) · driver {driver} · torch {torch.__version__} "
        f"on CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    )


def steps(python: str = sys.executable, sizes: Sizes = Sizes()) -> list[Step]:
    bench, tests = [python, "-m", "benchmarks"], cuda_tests()
    ns, top = " ".join(map(str, sizes.attention)), sizes.attention[-1]
    # 1024² tiles: on a GPU each tile costs a few kernel launches; fewer, larger tiles keep it busy
    attention = f"attention --device {sizes.device} --sizes {ns} --naive-max {top} --block-size {min(1024, top)}"
    atlas = f"atlas --lengths {' '.join(map(str, sizes.atlas))} --repeats 3"
    burst = f"load --sessions {sizes.sessions} --arrivals {sizes.arrivals_s} --duration {sizes.inputs_s} --alone 0"
    pytest = [python, "-m", "pytest", "-q", "-p", "no:xdist", "-rs", *(["--collect-only"] * sizes.collect_only)]
    return [
        # with no test found, pytest would run the whole suite: an empty command is reported as not run instead
        Step("CUDA tests", [*pytest, *tests] if tests else [], 120, False),
        Step(f"Attention up to N = {top:,}", [*bench, *attention.split(), "--large-n", "16384", "--no-write"], 150),
        Step(f"The atlas up to {sizes.atlas[-1]:,} tokens on SmolLM2", [*bench, *atlas.split(), "--no-write"], 150),
        Step(
            f"{sizes.sessions} sessions within {sizes.arrivals_s:.0f} s on serve.py, on the GPU's machine",
            [*bench, *burst.split(), "--no-write"],
            240,
        ),
    ]


def gpu_used_mib() -> int | None:
    """Memory in use on the GPU, every process's (a container may not show whose), MiB; None without nvidia-smi."""
    used = [row[0] for row in nvidia_smi("--query-gpu=memory.used") if row[0].isdigit()]
    return int(used[0]) if used else None


def _watch_gpu_memory(into: list[int], stop: threading.Event, period_s: float = 1.0) -> None:
    """The GPU's used memory now, then every ``period_s`` until ``stop``: the first value is the step's baseline."""
    while (used := gpu_used_mib()) is not None:
        into.append(used)
        if stop.wait(period_s):
            return


def run(step: Step, seconds: float) -> Step:
    """Run ``step`` for at most ``seconds``; on time, its whole process group (a server it started too) is stopped."""
    if not step.argv or seconds <= 0:
        step.note = "not run: " + ("nothing to run" if not step.argv else "the budget was spent")
        return step
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_gpu_memory, args=(step.gpu_mib, stop), daemon=True)
    watcher.start()
    while watcher.is_alive() and not step.gpu_mib:  # the baseline, before the step allocates anything
        time.sleep(0.05)
    t0 = time.monotonic()
    proc = subprocess.Popen(step.argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        step.output, _ = proc.communicate(timeout=min(step.cap_s, seconds))
        step.rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            step.output, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            step.output, _ = proc.communicate()
        step.note = f"stopped at its limit of {min(step.cap_s, seconds):.0f} s"
    finally:
        stop.set()
        watcher.join()
        step.seconds = time.monotonic() - t0
    if step.rc not in (None, 0):
        step.note = f"failed (exit status {step.rc}; its log is in make gpu-check's output)"
    elif step.rc == 0 and not step.section and re.search(r"\d+ skipped", step.output):
        step.rc, step.note = 1, "a test skipped on a GPU"
    return step


def demoted(text: str) -> str:
    """A benchmark's section as a part of this one: each Markdown heading one level deeper."""
    return re.sub(r"^(#+) ", r"\1# ", text.strip(), flags=re.M)


def last_section(text: str) -> str:
    """The last section a benchmark printed (the atlas prints its section again after each length)."""
    starts = [m.start() for m in re.finditer(r"^## ", text, flags=re.M)]
    return text[starts[-1] :] if starts else text


def report(done: list[Step], device: str, header: str, command: str, budget_s: float) -> str:
    """The section: what ran on which device, then each step's figures, or why it has none."""
    total = sum(s.seconds for s in done)
    lines = [
        "## GPU check",
        "",
        f"Command: `make gpu-check` (= `{command.strip()}`), {total:.0f} s of its {budget_s:.0f} s budget.",
        "",
        f"Device: {device}.",
        "",
        f"Machine: {header}.",
        "",
    ]
    for step in done:
        verdict = step.note or f"{'passed, ' if not step.section else ''}{step.seconds:.0f} s"
        lines += [f"### {step.title} ({verdict})", ""]
        if len(step.gpu_mib) > 1:
            held = max(step.gpu_mib) - step.gpu_mib[0]
            lines += [
                f"GPU memory its processes held: peak {held:,} MiB above the {step.gpu_mib[0]:,} MiB in use before it "
                "(nvidia-smi's memory.used, every second).",
                "",
            ]
        if step.section and step.rc == 0:
            lines += [demoted(last_section(step.output)), ""]
        elif step.output.strip():
            tail = "\n".join(step.output.strip().splitlines()[-15:])
            lines += ["```", tail, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser("gpu_check", __doc__, repeats=1)  # --repeats: accepted for `python -m benchmarks --repeats N`
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole check")
    p.add_argument("--rehearse", action="store_true", help="every step on the CPU at toy sizes; writes nothing")
    args, command = parse(p, argv)
    if args.rehearse:
        done = [run(step, args.budget) for step in steps(sizes=REHEARSAL)]
        sys.stdout.write(
            report(done, "CPU (a rehearsal at toy sizes)", machine(torch.device("cpu")), command, args.budget)
        )
        if any(s.rc != 0 for s in done):
            raise SystemExit("gpu-check rehearsal: " + "; ".join(f"{s.title}: {s.note}" for s in done if s.rc != 0))
        return
    if not torch.cuda.is_available():
        seen = [row[0] for row in nvidia_smi("--query-gpu=name")]
        build = f"torch {torch.__version__}, " + (
            f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only"
        )
        if seen:
            raise SystemExit(
                f"gpu-check: nvidia-smi sees {', '.join(seen)} but {build}, cannot use it: install a torch built for "
                "this driver's CUDA, then run it again"
            )
        sys.stdout.write(f"gpu-check skipped: no CUDA device on this machine ({build}); BENCHMARKS.md unchanged\n")
        return
    device, header = device_line(), machine(torch.device("cuda"))  # before the run: the load it started under
    log.info("GPU: %s", device)
    deadline = time.monotonic() + args.budget - WRITE_S
    done = []
    for step in steps():
        log.info("%s: %s", step.title, " ".join(step.argv[1:]))
        done.append(run(step, deadline - time.monotonic()))
        log.info("%s: %s (%.0f s)", step.title, done[-1].note or "done", done[-1].seconds)
    publish("gpu", report(done, device, header, command, args.budget), no_write=args.no_write)
    if any(s.rc != 0 for s in done):
        raise SystemExit("gpu-check: " + "; ".join(f"{s.title}: {s.note}" for s in done if s.rc != 0))


if __name__ == "__main__":
    main()
