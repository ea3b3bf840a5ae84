"""SmolLM2-135M-Instruct from its GGUF file: our reader and modules beside transformers' GGUF loader, in one run.

Each side runs in a fresh interpreter (so each load and each memory figure is its own): load (file → ready model),
a forward pass over 128 tokens returning every attention map (ours through ``Trace``, transformers' eager attention
with ``output_attentions``), and greedy generation from a 192-token prompt to 256 tokens (ours with our KV cache,
transformers' ``generate`` with its own), tokens per second counting the new ones. Medians of ``--repeats`` runs
(the load once per interpreter); resident memory after loading. Both sides must generate the same tokens (checked).

``python -m benchmarks gguf [--repeats 3] [--threads 2] [--no-write]``
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import torch

from benchmarks import parse, parser, publish, with_machine

PROMPT, TOTAL, FORWARD = 192, 256, 128
TEXT = (
    "Attention lets every token look at every other token and decide, with learned queries and keys, how much of "
    "each value to take. A language model predicts the next token from the ones before it, one step at a time. "
)


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def _side(which: str, repeats: int, threads: int) -> dict:
    """One side's numbers, measured in this interpreter."""
    torch.set_num_threads(threads)
    from tx_explorer.interop import gguf

    path = gguf.locate_smollm2() / gguf.SMOLLM2_FILE
    tokenizer, _ = gguf.tokenizer(gguf.read_header(path))  # both sides read the same token ids
    t0 = time.perf_counter()
    if which == "ours":
        tm = gguf.load_smollm2(path.parent)
        model = tm.model
    else:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
        ).eval()
    load = time.perf_counter() - t0
    rss = _rss_mb()
    ids = tokenizer.encode(TEXT * 8).ids[:TOTAL]
    forward, generate = [], []
    with torch.no_grad():
        for _ in range(repeats):
            idx = torch.tensor([ids[:FORWARD]])
            t0 = time.perf_counter()
            if which == "ours":
                from tx_explorer.trace import Trace

                trace = Trace()
                model(idx, trace)
                assert len(trace) == 30
            else:
                assert len(model(idx, output_attentions=True).attentions) == 30
            forward.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            if which == "ours":
                new = list(tm.stream(ids[:PROMPT], TOTAL - PROMPT))
            else:
                out = model.generate(
                    torch.tensor([ids[:PROMPT]]),
                    max_new_tokens=TOTAL - PROMPT,
                    min_new_tokens=TOTAL - PROMPT,
                    do_sample=False,
                )
                new = out[0, PROMPT:].tolist()
            generate.append((TOTAL - PROMPT) / (time.perf_counter() - t0))
    return {
        "load": load,
        "rss": rss,
        "forward": statistics.median(forward),
        "tokens_s": statistics.median(generate),
        "new": new,
    }


def measure(repeats: int, threads: int) -> dict[str, dict]:
    out = {}
    for which in ("ours", "transformers"):
        code = f"import json, benchmarks.gguf as b; print(json.dumps(b._side({which!r}, {repeats}, {threads})))"
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        out[which] = json.loads(run.stdout.strip().splitlines()[-1])
    if out["ours"]["new"] != out["transformers"]["new"]:
        raise RuntimeError("our greedy tokens differ from transformers' generate")
    return out


def section(r: dict[str, dict], command: str, repeats: int, threads: int) -> str:
    ours, theirs = r["ours"], r["transformers"]
    rows = [
        ("load: file → ready model (s)", "load", ".2f"),
        ("forward, 128 tokens, every map (s)", "forward", ".3f"),
        (f"greedy generation, {PROMPT} → {TOTAL} tokens (new tokens / s)", "tokens_s", ".1f"),
        ("resident memory after loading (MB)", "rss", ".0f"),
    ]
    lines = [
        "## SmolLM2-135M-Instruct (GGUF): our reader and modules beside transformers",
        "",
        f"`{command}`: each side in a fresh interpreter, {threads} torch thread(s), float32 on the CPU, median of "
        f"{repeats} runs (one load each). Ours: `tx_explorer.interop.gguf` (header parsed and checked, "
        "`gguf.quants` dequantisation, our `CausalLM`, generation with our `KVCache`); transformers 5: "
        "`from_pretrained(…, gguf_file=…)`, eager attention, `generate`. Both generated the same tokens (checked).",
        "",
        "| measure | ours | transformers | ours / transformers |",
        "|---|---:|---:|---:|",
    ]
    for label, key, fmt in rows:
        ratio = ours[key] / theirs[key]
        lines.append(f"| {label} | {ours[key]:{fmt}} | {theirs[key]:{fmt}} | {ratio:.2f}× |")
    return with_machine(lines)


def main(argv: list[str] | None = None) -> None:
    args, command = parse(parser("gguf", __doc__, repeats=3, threads=2), argv)  # --threads: on each side
    publish(
        "gguf",
        section(measure(args.repeats, args.threads), command, args.repeats, args.threads),
        no_write=args.no_write,
    )
