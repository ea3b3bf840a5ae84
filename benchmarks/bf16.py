"""Models in bfloat16 (issue 43): the error the precision costs, and the 1–8B files it opens.

Part 1, the error: SmolLM2-135M-Instruct and Gemma 3 270M read from their GGUF files twice, weights in float32 and
in bfloat16 (``load_gguf(…, dtype=…)``), on the same 128 tokens with every attention map traced: the largest
|Δ log-probability| over every position and vocabulary entry, the largest on the token float32 ranks first, how
often both rank the same token first, the largest |Δ| of an attention weight, and how far a bfloat16 map's rows
are from summing to 1 (scores and softmax run in float32).

Part 2, the memory: synthetic GGUF files of real shapes (Llama-3.2-1B and 3B, Llama-3.1-8B: layers, widths, heads,
key/value heads, MLP width, vocabulary of 128 256), random Q8_0 weights and F32 norms, written by ``gguf``'s
``GGUFWriter`` tensor by tensor into a temporary folder and deleted afterwards. Each is loaded in bfloat16 in a
fresh interpreter: peak resident memory (``VmHWM`` from ``/proc/self/status``) after the load and after a forward
over 128 tokens with every map traced, the load's and the forward's seconds; beside it, transformers' GGUF loader
with ``dtype=torch.bfloat16`` on the same 1B file in its own interpreter (peak memory and load time).

Part 3, the atlas: the 3B-shaped file loaded in bfloat16 in a fresh interpreter, then the atlas
(``analysis.atlas.head_stats``) over 8 192 tokens of the bundled corpus (``atlas.corpus_ids``: the file's
byte-level vocabulary makes every byte of the text a token). Measured as ``benchmarks/atlas.py`` does: the peak of
tensors allocated during the call above the loaded model (``analysis.memory.peak_memory``, the storage tracker),
beside the process's peak resident memory during the call (``VmHWM``, reset after the load through
``/proc/self/clear_refs``), and the call's wall-clock and CPU seconds. Target: ≤ 1 GB above the model. Its own
section (``bf16-atlas``), so that parts 1 and 2 keep their numbers when it runs alone.

``python -m benchmarks bf16 [--parts models atlas] [--repeats 3] [--threads 2] [--shapes 1B 3B 8B]
[--atlas-tokens 8192] [--no-write]`` (the 8B file is 8.5 GB on disk and its load peaks near 18 GB of memory: it is
written only when asked for and when that much memory is available; ``--parts atlas`` runs part 3 alone).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import ROOT, parse, parser, publish, verdict, with_machine

TOKENS = 128
VOCAB = 128_256
TEXT = (
    "The heads of a transformer read the text in parallel: each query asks every earlier key how much it matters, "
    "and the answer is a weighted sum of values. Some heads look at the previous token, some copy what followed "
    "the last time the current token appeared, and some rest on the first token when nothing else fits. "
)
# name → (layers, width, query heads, key/value heads, MLP width, tied embedding), as the models' config.json say
SHAPES = {
    "1B": ("Llama-3.2-1B", 16, 2048, 32, 8, 8192, True),
    "3B": ("Llama-3.2-3B", 28, 3072, 24, 8, 8192, True),
    "8B": ("Llama-3.1-8B", 32, 4096, 32, 8, 14336, False),
}
# issue 43's targets: peak resident memory after the load (GB) and the forward with every map (s), None: no target
TARGETS = {"1B": (3.5, None), "3B": (8.0, 30.0), "8B": (18.0, 90.0)}
ATLAS_SHAPE, ATLAS_TOKENS, ATLAS_TARGET = "3B", 8192, 1.0  # issue 43: 8 192 tokens within 1 GB above the model
GB = 1e9
MARGIN = 3.0  # GB of available memory left to the machine's other users beyond a load's need, or it is not run


def _status_gb(field: str) -> float:
    """A memory field of ``/proc/self/status`` (``VmHWM``: peak resident memory so far, ``VmRSS``: now), in GB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024 / GB
    raise RuntimeError(f"no {field} in /proc/self/status")


def _peak_gb() -> float:
    """This process's peak resident memory so far (``VmHWM``), in GB."""
    return _status_gb("VmHWM")


def _maps_and_logprobs(tm, ids: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    from tx_explorer.trace import Trace

    trace = Trace()
    with torch.no_grad():
        logits = tm.model(torch.tensor([ids]), trace)
    return logits.float().log_softmax(-1)[0], [r.weights for r in trace]


def error(path: str | Path) -> dict:
    """bfloat16 weights against float32 weights of the GGUF file at ``path``, on :data:`TOKENS` tokens."""
    from tx_explorer.interop.gguf import load_gguf

    f32 = load_gguf(path, dtype=torch.float32)
    ids = f32.encode(TEXT * 4).ids[:TOKENS]
    ref, ref_maps = _maps_and_logprobs(f32, ids)
    del f32
    got, maps = _maps_and_logprobs(load_gguf(path, dtype=torch.bfloat16), ids)
    top = ref.argmax(-1)
    return {
        "tokens": len(ids),
        "logprob": (got - ref).abs().max().item(),
        "logprob_top1": (got - ref).gather(-1, top[:, None]).abs().max().item(),
        "agree": (got.argmax(-1) == top).float().mean().item(),
        "map": max((m - r).abs().max().item() for m, r in zip(maps, ref_maps, strict=True)),
        "rows": max((m.sum(-1) - 1).abs().max().item() for m in maps),
        "map_dtype": str(maps[0].dtype).removeprefix("torch."),
    }


def write_llama(path: Path, layers: int, dim: int, heads: int, kv: int, ffn: int, tied: bool, seed: int = 0) -> None:
    """A llama GGUF file of these sizes with random Q8_0 weights (scaled as 1/√fan-in) and unit F32 norms, written
    tensor by tensor so that the writer never holds more than one; a byte-level vocabulary of :data:`VOCAB` tokens
    (the 256 bytes, two spaces, then placeholders)."""
    import gguf
    from tokenizers import pre_tokenizers

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"random llama {layers}x{dim}")
    w.add_block_count(layers)
    w.add_context_length(8192)
    w.add_embedding_length(dim)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(500000.0)
    w.add_rope_dimension_count(dim // heads)
    w.add_layer_norm_rms_eps(1e-5)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(alphabet + ["ĠĠ"] + [f"<|placeholder_{i}|>" for i in range(VOCAB - len(alphabet) - 1)])
    w.add_token_merges(["Ġ Ġ"])  # one merge: the reader wants a BPE
    kv_dim = dim // heads * kv
    shapes = {"token_embd.weight": (VOCAB, dim), "output_norm.weight": (dim,)}
    if not tied:
        shapes["output.weight"] = (VOCAB, dim)
    for i in range(layers):
        block = {"attn_norm": (dim,), "attn_q": (dim, dim), "attn_k": (kv_dim, dim), "attn_v": (kv_dim, dim)}
        block |= {"attn_output": (dim, dim), "ffn_norm": (dim,), "ffn_gate": (ffn, dim), "ffn_up": (ffn, dim)}
        block |= {"ffn_down": (dim, ffn)}
        shapes |= {f"blk.{i}.{part}.weight": shape for part, shape in block.items()}
    q8 = gguf.GGMLQuantizationType.Q8_0
    block, block_bytes = gguf.GGML_QUANT_SIZES[q8]
    for name, shape in shapes.items():
        if len(shape) == 1:
            w.add_tensor_info(name, shape, np.dtype(np.float32), shape[0] * 4)
        else:
            row = shape[1] // block * block_bytes
            w.add_tensor_info(name, (shape[0], row), np.dtype(np.uint8), shape[0] * row, raw_dtype=q8)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for shape in shapes.values():
        if len(shape) == 1:
            w.write_tensor_data(np.ones(shape, dtype=np.float32))
            continue
        # Q8_0 block: a float16 scale d, then 32 int8 q; weight = d·q, uniform within ±√(3/fan-in)
        blocks = shape[0] * shape[1] // block
        scale = np.full((blocks, 1), np.sqrt(3 / shape[1]) / 127, dtype=np.float16).view(np.uint8)
        q = rng.integers(-127, 128, size=(blocks, block), dtype=np.int8).view(np.uint8)
        w.write_tensor_data(np.concatenate([scale, q], axis=1).reshape(shape[0], -1))
    w.close()


def ours(path: str, repeats: int) -> dict:
    """In a fresh interpreter: our bfloat16 load of ``path`` and a forward with every map (peak memory, seconds)."""
    from tx_explorer.interop.gguf import load_gguf
    from tx_explorer.trace import Trace

    t0 = time.perf_counter()
    tm = load_gguf(path, dtype=torch.bfloat16)
    load = time.perf_counter() - t0
    peak_load = _peak_gb()
    idx = torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(0))
    forward = []
    with torch.no_grad():
        for _ in range(repeats):
            trace = Trace()
            t0 = time.perf_counter()
            tm.model(idx, trace)
            forward.append(time.perf_counter() - t0)
            assert len(trace) == tm.config.num_layers and next(iter(trace)).weights.dtype == torch.float32
    return {"load": load, "peak_load": peak_load, "forward": statistics.median(forward), "peak": _peak_gb()}


def theirs(path: str) -> dict:
    """In a fresh interpreter: transformers' GGUF loader with ``dtype=torch.bfloat16`` on ``path``."""
    from transformers import AutoModelForCausalLM

    p = Path(path)
    t0 = time.perf_counter()
    AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.bfloat16)
    return {"load": time.perf_counter() - t0, "peak_load": _peak_gb()}


def atlas_run(path: str, tokens: int) -> dict:
    """In a fresh interpreter: ``path`` loaded in bfloat16, then the atlas over ``tokens`` tokens of the bundled
    corpus: the peak of tensors allocated during the call (storage tracker), the process's peak resident memory
    during it, its seconds."""
    from tx_explorer.analysis import atlas
    from tx_explorer.analysis.memory import peak_memory
    from tx_explorer.interop.gguf import load_gguf

    t0 = time.perf_counter()
    tm = load_gguf(path, dtype=torch.bfloat16)
    load, peak_load = time.perf_counter() - t0, _peak_gb()
    ids = atlas.corpus_ids(tm, tokens)
    layers, heads = tm.config.num_layers, tm.config.num_heads
    # the load's own peak (a layer read beside the model) must not hide the atlas's: VmHWM starts again from VmRSS
    Path("/proc/self/clear_refs").write_text("5")
    rss_model = _status_gb("VmRSS")

    def progress(layer: int, rows: int) -> None:  # a run of many minutes says where it is (the parent's stderr)
        if rows == len(ids):
            print(
                f"atlas: layer {layer + 1}/{layers}, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True
            )

    start, cpu = time.perf_counter(), time.process_time()
    stats, peak = peak_memory(lambda: atlas.head_stats(tm, ids, progress=progress))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    values = [stats.stat(name) for name in atlas.STATS]
    return {
        "tokens": len(ids),
        "layers": layers,
        "heads": heads,
        "load": load,
        "peak_load": peak_load,
        "rss_model": rss_model,
        "atlas_peak": peak / GB,
        "rss_peak": _peak_gb(),
        "wall": wall,
        "cpu": cpu,
        "dense": layers * heads * len(ids) ** 2 * 4 / GB,  # every layer's N × N maps in float32
        "stats": f"{values[0].dtype}, {'finite' if all(bool(v.isfinite().all()) for v in values) else 'NOT finite'}",
    }


def _child(call: str, threads: int, *, stream: bool = False) -> dict:
    """``call`` in a fresh interpreter, its JSON result; with ``stream`` its stderr (progress) goes to ours."""
    code = f"import json, torch, benchmarks.bf16 as b; torch.set_num_threads({threads}); print(json.dumps(b.{call}))"
    run = subprocess.run(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=None if stream else subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    if run.returncode:
        raise RuntimeError(f"{call} failed" + ("" if stream else f":\n{run.stderr[-3000:]}"))
    return json.loads(run.stdout.strip().splitlines()[-1])


def _available_gb() -> float:
    from tx_explorer.interop.common import available_memory

    return available_memory(torch.device("cpu")) / GB


def _need_gb(layers: int, dim: int, heads: int, kv: int, ffn: int, tied: bool) -> float:
    """What :func:`~tx_explorer.interop.gguf.header_needs` will say of such a file in bfloat16, before it is
    written."""
    from tx_explorer.interop.gguf import memory_needs

    fused = dim * (dim + 2 * dim // heads * kv)  # W_Q, W_K, W_V of one layer
    per_layer = fused + dim * dim + 3 * dim * ffn + 2 * dim
    numel = layers * per_layer + VOCAB * dim * (1 if tied else 2) + dim
    return memory_needs(numel, VOCAB * dim)[torch.bfloat16] / GB


def shapes(names: list[str], repeats: int, threads: int) -> dict[str, dict]:
    """Part 2 for each shape in ``names``; a shape whose file or load would not fit is reported, not run."""
    from tx_explorer.interop.gguf import header_needs, read_header

    out: dict[str, dict] = {}
    for key in names:
        label, *sizes = SHAPES[key]
        need = _need_gb(*sizes)
        if need + MARGIN > _available_gb():  # the machine is shared: its other users keep MARGIN
            out[key] = {"label": label, "need": need, "skipped": f"{_available_gb():.1f} GB available at the time"}
            continue
        folder = Path(tempfile.mkdtemp(prefix=f"bf16-{key}-", dir="/tmp"))
        try:
            path = folder / f"{label}-Q8_0.gguf"
            t0 = time.perf_counter()
            write_llama(path, *sizes)
            row = {"label": label, "file_gb": path.stat().st_size / GB, "write": time.perf_counter() - t0}
            row["need"] = header_needs(read_header(path))[torch.bfloat16] / GB
            row |= _child(f"ours({str(path)!r}, {repeats})", threads)
            if key == "1B":
                row["transformers"] = _child(f"theirs({str(path)!r})", threads)
            out[key] = row
        finally:
            shutil.rmtree(folder)
    return out


def atlas_part(tokens: int, threads: int) -> dict:
    """Part 3: the :data:`ATLAS_SHAPE` file written, the atlas run on it in a fresh interpreter; reported, not run,
    when the machine lacks the memory."""
    label, *sizes = SHAPES[ATLAS_SHAPE]
    need = _need_gb(*sizes)
    if need + ATLAS_TARGET + MARGIN > _available_gb():
        return {"label": label, "need": need, "skipped": f"{_available_gb():.1f} GB available at the time"}
    folder = Path(tempfile.mkdtemp(prefix=f"bf16-atlas-{ATLAS_SHAPE}-", dir="/tmp"))
    try:
        path = folder / f"{label}-Q8_0.gguf"
        write_llama(path, *sizes)
        return {"label": label, "need": need} | _child(f"atlas_run({str(path)!r}, {tokens})", threads, stream=True)
    finally:
        shutil.rmtree(folder)


def atlas_section(r: dict, command: str, threads: int) -> str:
    lines = [
        f"## The atlas on a {r['label']}-shaped file in bfloat16 (issue 43: 8 192 tokens within 1 GB above the model)",
        "",
        f"`{command}`, {threads} torch thread(s). Part 2's synthetic {r['label']} file (random Q8_0 weights) loaded "
        "in bfloat16 in a fresh interpreter, then the atlas (`analysis.atlas.head_stats`: tiles of 256 × 256, "
        "scores, weights and statistics in float32, never an N × N map) over the bundled corpus's first tokens "
        "(`atlas.corpus_ids`; the file's byte-level vocabulary makes each byte a token; the weights are random, so "
        "the statistics say nothing about a real model). Above the model: the peak of tensors allocated during the "
        "call (`analysis.memory.peak_memory`, the storage tracker, as `benchmarks/atlas.py` measures; it does not "
        "see scratch buffers inside fused kernels); for context the process's peak resident memory during the call "
        "(`VmHWM`, reset after the load) less its resident memory before it. One run, under the tracker; "
        "GB = 10⁹ bytes.",
        "",
    ]
    if "skipped" in r:
        why = f"not run: the file needs {r['need']:.1f} GB + {ATLAS_TARGET:.0f} GB + {MARGIN:.0f} GB left to others"
        return with_machine([*lines, f"{why}; {r['skipped']}."])
    target = (
        f"≤ {ATLAS_TARGET:.0f} GB: {verdict(r['atlas_peak'], ATLAS_TARGET, 'GB')}"
        if r["tokens"] == ATLAS_TOKENS
        else f"— (the target is at {ATLAS_TOKENS:,} tokens)"
    )
    lines += [
        "| tokens | layers × heads | load (s) | resident after load (GB) | atlas peak above the model (GB) | target "
        "| resident peak during the atlas, above the model (GB) | dense maps would take (GB) | wall (min) "
        "| CPU (min) | statistics |",
        "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|",
        f"| {r['tokens']:,} | {r['layers']} × {r['heads']} | {r['load']:.1f} | {r['rss_model']:.2f} "
        f"| {r['atlas_peak']:.3f} | {target} | {r['rss_peak'] - r['rss_model']:.2f} | {r['dense']:,.0f} "
        f"| {r['wall'] / 60:.1f} | {r['cpu'] / 60:.1f} | {r['stats']} |",
    ]
    return with_machine(lines)


def section(errors: dict[str, dict], rows: dict[str, dict], command: str, threads: int) -> str:
    lines = [
        "## Models in bfloat16: the error it costs, the 1–8B files it opens",
        "",
        f"`{command}`. Part 1: each model read from its GGUF file with weights in float32 and in bfloat16, the same "
        f"{TOKENS} tokens of English, every attention map traced (scores and softmax in float32 in both).",
        "",
        "| model | max abs Δ log-prob, every token of the vocabulary | max abs Δ log-prob of float32's top-1 "
        "| same top-1 | max abs Δ attention weight | max abs (row sum − 1), bfloat16 maps | maps |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, e in errors.items():
        lines.append(
            f"| {name} | {e['logprob']:.3f} | {e['logprob_top1']:.3f} | {e['agree']:.1%} | {e['map']:.4f} "
            f"| {e['rows']:.1e} | {e['map_dtype']} |"
        )
    lines += [
        "",
        "Part 2: synthetic files of real shapes (random Q8_0 weights, F32 norms, 128 256-token vocabulary) written by "
        f"`gguf.GGUFWriter` into /tmp and deleted after; each load in bfloat16 in a fresh interpreter, {threads} torch "
        "thread(s); peak resident memory is `VmHWM` (GB = 10⁹ bytes); the forward reads "
        f"{TOKENS} tokens with every map traced (median of the repeats). Float32 would need twice the weights' bytes.",
        "",
        "| shape | file (GB) | memory needed, from the header (GB) | load (s) | peak after load (GB) | target "
        "| forward, every map (s) | target | peak after forward (GB) |",
        "|---|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    for key, r in rows.items():
        peak_target, fwd_target = TARGETS[key]
        if "skipped" in r:
            why = f"not run: it needs {r['need']:.1f} GB + {MARGIN:.0f} GB left to others; {r['skipped']}"
            lines.append(f"| {r['label']} | — | {r['need']:.2f} | {why} |||||| ")
            continue
        lines.append(
            f"| {r['label']} | {r['file_gb']:.2f} | {r['need']:.2f} | {r['load']:.1f} | {r['peak_load']:.2f} "
            f"| ≤ {peak_target} GB: {verdict(r['peak_load'], peak_target, 'GB')} | {r['forward']:.1f} "
            f"| {'—' if fwd_target is None else f'≤ {fwd_target:.0f} s: ' + verdict(r['forward'], fwd_target, 's')} "
            f"| {r['peak']:.2f} |"
        )
    if "1B" in rows and "transformers" in rows["1B"]:
        r, t = rows["1B"], rows["1B"]["transformers"]
        lines += [
            "",
            "Side by side on the same Llama-3.2-1B-shaped file, each in a fresh interpreter:",
            "",
            "| loader | load (s) | peak resident memory after load (GB) |",
            "|---|---:|---:|",
            f"| ours, `load_gguf(path, dtype=torch.bfloat16)` | {r['load']:.1f} | {r['peak_load']:.2f} |",
            f"| transformers, `from_pretrained(…, gguf_file=…, dtype=torch.bfloat16)` | {t['load']:.1f} "
            f"| {t['peak_load']:.2f} |",
        ]
    return with_machine(lines)


def models(args: argparse.Namespace, command: str) -> None:
    """Parts 1 and 2, section ``bf16``."""
    from tx_explorer import data
    from tx_explorer.interop import gguf

    files = {
        "SmolLM2-135M-Instruct (Q4_1)": gguf.locate_smollm2() / gguf.SMOLLM2_FILE,
        "Gemma 3 270M (Q4_K_M)": gguf.locate_gemma3() / gguf.GEMMA3_PATH.name,
    }
    # each in its own interpreter: this one keeps no memory from them when the large shapes are loaded
    errors = {name: _child(f"error({str(path)!r})", args.threads) for name, path in files.items()}
    rows = shapes(args.shapes, args.repeats, args.threads)
    publish("bf16", section(errors, rows, command, args.threads), no_write=args.no_write)
    if not args.no_write:  # the model card's precision caption quotes SmolLM2's row
        smollm2 = next(iter(errors.values()))
        record = {k: smollm2[k] for k in ("tokens", "logprob_top1", "map", "agree")}
        record = {"_what": data.bf16_cost()["_what"], "model": "SmolLM2-135M-Instruct", **record}
        data.BF16_COST.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    p = parser("bf16", __doc__, repeats=3, threads=2)
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=["1B", "3B"])
    p.add_argument(
        "--parts", nargs="+", choices=["models", "atlas"], default=["models", "atlas"], help="models: parts 1 and 2"
    )
    p.add_argument("--atlas-tokens", type=int, default=ATLAS_TOKENS, help="fewer for an estimate of part 3's time")
    args, command = parse(p, argv)
    if "models" in args.parts:
        models(args, command)
    if "atlas" in args.parts:
        r = atlas_part(args.atlas_tokens, args.threads)
        publish("bf16-atlas", atlas_section(r, command, args.threads), no_write=args.no_write)
