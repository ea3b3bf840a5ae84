"""Gemma 3 270M (issue 41's targets): load beside transformers' GGUF loader, forward beside SmolLM2, the atlas's memory.

1. Load, file → ready model, of the same ``gemma-3-270m-q4_k_m.gguf``: ours (``load_model("gemma3-270m")``) and
   transformers' (``from_pretrained(…, gguf_file=…)``, float32, eager), each load in a fresh interpreter (so one
   side's caches and memory never help the other), the two sides alternating ``--repeats`` times; medians.
   Target: ours ≤ 0.25 × theirs.
2. Forward with every attention map (``model(ids, Trace())``: the blocks and the LM head, as the pages run it) at
   512 tokens of the bundled corpus, Gemma 3 beside SmolLM2-135M-Instruct in this interpreter: median wall-clock and
   CPU seconds of ``--repeats`` runs after one untimed run. Target: Gemma 3 ≤ 2 × SmolLM2.
3. The atlas (``analysis.atlas.head_stats``) on Gemma 3 at ``--lengths`` tokens: the peak of tensors allocated during
   the call above the loaded model, measured as ``benchmarks/atlas.py`` does (``analysis.memory.peak_memory``: on
   the CPU the storage tracker, which does not see scratch buffers inside fused kernels), and that run's seconds.
   Target: ≤ 1 GB at 8 192 tokens. The section is written after each step (a long run publishes as it goes).

``python -m benchmarks gemma3 [--repeats 3] [--threads 1] [--lengths 2048 4096 8192] [--no-write]``
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import torch

from benchmarks import median_seconds, parse, parser, publish, with_machine
from tx_explorer import models
from tx_explorer.analysis import atlas
from tx_explorer.analysis.memory import format_bytes, peak_memory
from tx_explorer.trace import Trace

MODEL, REFERENCE = "gemma3-270m", "smollm2-135m-instruct"
FORWARD = 512
LENGTHS = (2048, 4096, 8192)
LOAD_TARGET, FORWARD_TARGET, MEMORY_TARGET = 0.25, 2.0, 1e9


def _load(which: str, threads: int) -> float:
    """Seconds from the file to a ready model, in this (fresh) interpreter."""
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    if which == "ours":
        models.load_model(MODEL)
    else:
        from transformers import AutoModelForCausalLM

        from tx_explorer.interop.assemble import GEMMA3_PATH

        AutoModelForCausalLM.from_pretrained(
            str(GEMMA3_PATH.parent), gguf_file=GEMMA3_PATH.name, dtype=torch.float32, attn_implementation="eager"
        ).eval()
    return time.perf_counter() - t0


def loads(repeats: int, threads: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"ours": [], "transformers": []}
    for _ in range(repeats):  # alternating, so a change in the machine's load falls on both sides
        for which in out:
            code = f"import benchmarks.gemma3 as b; print(b._load({which!r}, {threads}))"
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            out[which].append(float(run.stdout.strip().splitlines()[-1]))
    return out


def forwards(repeats: int) -> dict[str, tuple[float, float]]:
    """(wall, CPU) median seconds of a forward with every map at ``FORWARD`` tokens, per model."""
    out = {}
    for name in (MODEL, REFERENCE):
        tm = models.load_model(name)
        idx = torch.tensor([atlas.corpus_ids(tm, FORWARD)])

        def run(tm=tm, idx=idx) -> None:
            trace = Trace()
            with torch.no_grad():
                tm.model(idx, trace)
            assert len(trace) == len(tm.model.blocks)

        out[name] = median_seconds(run, repeats)
        del tm
    return out


def section(r: dict, command: str, repeats: int, threads: int) -> str:
    lines = [
        "## Gemma 3 270M: load, forward with every map, the atlas's memory",
        "",
        f"`{command}`, {threads} torch thread(s), float32 on the CPU. The file: `gemma-3-270m-q4_k_m.gguf` "
        "(Q4_K_M, assembled by `make run`).",
    ]
    if "load" in r:
        ours, theirs = (statistics.median(r["load"][k]) for k in ("ours", "transformers"))
        ratio = ours / theirs
        runs = lambda k: ", ".join(f"{s:.1f}" for s in r["load"][k])  # noqa: E731
        lines += [
            "",
            f"**Load**, file → ready model, each load in a fresh interpreter, the sides alternating, median of "
            f"{repeats}: ours (`load_model({MODEL!r})`) {ours:.1f} s (runs {runs('ours')}), transformers' GGUF loader "
            f"(`from_pretrained(…, gguf_file=…)`, float32, eager) {theirs:.1f} s (runs {runs('transformers')}): "
            f"{ratio:.2f}× — target ≤ {LOAD_TARGET}×, {'met' if ratio <= LOAD_TARGET else 'missed'}.",
        ]
    if "forward" in r:
        (gw, gc), (sw, sc) = r["forward"][MODEL], r["forward"][REFERENCE]
        lines += [
            "",
            f"**Forward with every attention map** at {FORWARD} tokens of the bundled corpus (`model(ids, Trace())`: "
            f"blocks and LM head, as the pages run it), median of {repeats} after one untimed run:",
            "",
            "| model | wall s | CPU s |",
            "|---|---:|---:|",
            f"| Gemma 3 270M | {gw:.2f} | {gc:.2f} |",
            f"| SmolLM2-135M-Instruct | {sw:.2f} | {sc:.2f} |",
            f"| Gemma 3 ÷ SmolLM2 | {gw / sw:.2f}× | {gc / sc:.2f}× |",
            "",
            f"Target ≤ {FORWARD_TARGET:.0f}× (CPU time, which other jobs on the shared cores move least): "
            f"{'met' if gc / sc <= FORWARD_TARGET else 'missed'}.",
        ]
    if r.get("atlas"):
        lines += [
            "",
            "**The atlas** (`analysis.atlas.head_stats`) on Gemma 3 over the bundled corpus: peak of tensors "
            "allocated during the call above the loaded model (`analysis.memory.peak_memory`, the storage tracker on "
            "the CPU, as `benchmarks/atlas.py` measures), and that one run's wall-clock seconds. Target ≤ 1 GB at "
            "8 192 tokens.",
            "",
            "| tokens | atlas peak | seconds | dense maps would take | target |",
            "|---|---:|---:|---:|---|",
        ]
        for row in r["atlas"]:
            target = f"≤ 1 GB {'met' if row['peak'] <= MEMORY_TARGET else 'missed'}" if row["n"] >= 8192 else "(none)"
            lines.append(
                f"| {row['n']:,} | {format_bytes(row['peak'])} | {row['s']:.0f} | {format_bytes(row['dense'])} "
                f"| {target} |"
            )
        missing = [n for n in r["lengths"] if n not in {row["n"] for row in r["atlas"]}]
        if missing:
            lines += ["", f"Not measured in this run: {', '.join(f'{n:,}' for n in missing)} tokens."]
    return with_machine(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser("gemma3", __doc__, repeats=3, threads=1)
    p.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    p.add_argument("--skip", nargs="*", default=[], choices=["load", "forward", "atlas"])
    args, command = parse(p, argv)
    r: dict = {"lengths": args.lengths, "atlas": []}
    write = lambda: publish("gemma3", section(r, command, args.repeats, args.threads), no_write=args.no_write)  # noqa: E731
    if "load" not in args.skip:
        r["load"] = loads(args.repeats, args.threads)
        write()
    if "forward" not in args.skip:
        r["forward"] = forwards(args.repeats)
        write()
    if "atlas" not in args.skip:
        tm = models.load_model(MODEL)
        layers, heads = len(tm.model.blocks), tm.config.num_heads
        for n in args.lengths:
            ids = atlas.corpus_ids(tm, n)
            t0 = time.perf_counter()
            _, peak = peak_memory(lambda ids=ids: atlas.head_stats(tm, ids), torch.device("cpu"))
            seconds, dense = time.perf_counter() - t0, layers * heads * n * n * 4  # dense: float32 maps
            r["atlas"].append({"n": n, "peak": peak, "s": seconds, "dense": dense})
            write()
