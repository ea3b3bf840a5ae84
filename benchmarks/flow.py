"""Information flow: the route graph's time and memory, beside activation patching's time for the same
question (which heads carry the prediction).

On SmolLM2-135M-Instruct (tiny-llama where it is not registered), at 64 and 128 tokens of the bundled held-out
text: CPU time (process time, one thread: other jobs on a shared machine inflate wall-clock time, not this) and
wall time of ``decompose + importance + routes`` (what the page computes for a new text), of one edge's heads with
their causal effects (a click), and the peak bytes of tensors allocated by the graph's computation
(``analysis.memory.peak_memory``: above the model, which existed before). Activation patching of every layer's
residual and heads (``analysis.head_science.activation_patching``, the clean text against a copy with its middle
token changed) is timed once at 64 tokens. Medians of ``--repeats``.

``python -m benchmarks flow [--repeats 3] [--threads 1] [--no-write]``
"""

from __future__ import annotations

import functools
import time

import torch

from benchmarks import machine, median_seconds, parse, parser, publish, verdict
from tx_explorer import models
from tx_explorer.analysis import flow
from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis.memory import format_bytes, peak_memory
from tx_explorer.views import flow as view

LENGTHS = (64, 128)
PATCHING_LENGTH = 64
TARGET_S = 2.0  # decomposition + graph at 64 tokens, server side, the page's target
TARGET_BYTES = 300e6  # above the model at 128 tokens


def measure(repeats: int) -> tuple[list[dict], dict, str]:
    name = view.default_model() or "tiny-llama"
    tm = hs.text_model(models.load_model(name))
    windows, _ = hs.heldout_windows(tm, length=max(LENGTHS), count=1)
    rows = []
    for n in LENGTHS:
        ids = windows[0, :n].tolist()
        graph = lambda ids=ids: flow.graph(tm, ids, target=-1, threshold=flow.THRESHOLD)  # noqa: E731
        g, peak = peak_memory(graph)
        dec = flow.decompose(tm, ids)
        click = functools.partial(flow.edge_heads, tm, dec, *flow.heaviest_edge(g))
        rows.append(
            {
                "tokens": n,
                "graph": median_seconds(graph, repeats),
                "edge": median_seconds(click, repeats),
                "peak": peak,
                "nodes": len(g.nodes),
                "edges": len(g.edges),
            }
        )
    ids = windows[0, :PATCHING_LENGTH].tolist()
    corrupt = list(ids)
    corrupt[PATCHING_LENGTH // 2] = corrupt[PATCHING_LENGTH // 2 - 1]  # one token changed mid-text
    top = tm.run(ids)[0, -1].topk(2).indices.tolist()  # the clean prediction against the runner-up
    c0, w0 = time.process_time(), time.perf_counter()
    hs.activation_patching(tm, ids, corrupt, answers=(top[0], top[1]))
    patching = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0}
    return rows, patching, name


def section(rows: list[dict], patching: dict, name: str, repeats: int, command: str) -> str:
    at64 = next(r for r in rows if r["tokens"] == PATCHING_LENGTH)
    at128 = next(r for r in rows if r["tokens"] == max(LENGTHS))
    lines = [
        "## Information flow: route graph vs activation patching",
        "",
        f"{name}; the bundled held-out text, the last token's routes at threshold {flow.THRESHOLD}; medians of "
        f"{repeats} runs after a warm-up, CPU (process) time with one thread and wall time. *graph* = decomposition "
        "into every head's, bias's and MLP's writes + proximity shares + the walk back from the target (what the "
        "page computes for a new text); *one edge* = an edge's heads with their causal effects (one batched rerun "
        "from its layer, a row per head: a click); *peak above the model* = bytes of tensors allocated by the graph's "
        "computation (`analysis.memory.peak_memory`). Activation patching answers the same question (which heads and "
        f"positions carry the prediction) by rerunning: every layer's residual and heads, the text against a copy with "
        f"its middle token changed, timed once at {PATCHING_LENGTH} tokens. Command: `{command}`.",
        "",
        "| tokens | graph: CPU s | graph: wall s | one edge: CPU s | peak above the model | nodes | edges |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tokens']} | {r['graph'][1]:.2f} | {r['graph'][0]:.2f} | {r['edge'][1]:.2f} | "
            f"{format_bytes(r['peak'])} | {r['nodes']} | {r['edges']} |"
        )
    speedup = patching["cpu"] / at64["graph"][1]  # (wall, CPU) medians
    lines += [
        "",
        f"Activation patching at {PATCHING_LENGTH} tokens: {patching['cpu']:.1f} CPU s "
        f"({patching['wall']:.1f} s wall), {speedup:.0f}× the graph's CPU time.",
        "",
        f"Targets: graph at {PATCHING_LENGTH} tokens ≤ {TARGET_S:.0f} s server-side: "
        f"{verdict(at64['graph'][0], TARGET_S, 's')} (wall), {verdict(at64['graph'][1], TARGET_S, 's')} (CPU); peak "
        f"above the model at {max(LENGTHS)} tokens ≤ 300 MB: "
        f"{verdict(at128['peak'] / 1e6, TARGET_BYTES / 1e6, 'MB')}. Input → chart in Chromium: the `browser` section.",
        "",
        f"Machine: {machine(torch.device('cpu'))}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = parser("flow", __doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args, command = parse(p, argv)
    torch.set_num_threads(args.threads)
    rows, patching, name = measure(args.repeats)
    publish("flow", section(rows, patching, name, args.repeats, command), no_write=args.no_write)
