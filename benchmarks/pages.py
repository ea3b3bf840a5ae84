"""Per page of app.py: compute + figure time of its main interaction (function level), and model load times.

    python -m benchmarks pages                 # median of 5 runs after a warm-up; 3 fresh processes for loads
    python -m benchmarks pages --repeats 1 --load-repeats 1 --only masks operator

Each interaction calls the same ``tx_explorer.views`` functions, with the same arguments, as the page's section
that the input drives (read ``pages/<page>.py``), on the page's default inputs; every section that declares its
inputs (``tx_explorer/views/inputs.py``) gets a row ``<page>/<prefix>`` of its own on its declared defaults, with no
edit here. The figures are serialised as ``st.plotly_chart`` does (``plotly.io.to_json``). Models are loaded once
before timing; their load times are measured separately, each in a fresh Python process. Writes the section
``pages`` of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import torch

from benchmarks import ROOT, machine, parse, parser, publish, verdict
from tx_explorer import locales, models, viz
from tx_explorer.views import Panel
from tx_explorer.views.inputs import Section, declared, panels

log = logging.getLogger("benchmarks.pages")
TARGET_MS = 300.0  # every main interaction on bundled models at ≤ 64 tokens
VIZ_DIR = str(Path(viz.__file__).parent)
LIBRARY = str(Path(viz.__file__).parents[1])  # tx_explorer/: the views call the figure builders
Models = dict[str, Any]


@dataclass(frozen=True)
class Result:
    figures: list[go.Figure]
    detail: str = ""  # the input's size, e.g. "12 tokens"


def _result(panels: list[Panel | None], detail: str) -> Result:
    return Result([p.figure for p in panels if p is not None], detail)


@dataclass(frozen=True)
class Interaction:
    page: str  # pages/<page>.py
    action: str  # what the user does
    timed: str  # what the page then computes (what this benchmark calls)
    run: Callable[[Models], Result]
    models: tuple[str, ...] = ()  # registry names, or "variants:…" for the norms page's bundle (see load)


def _en(page: str, key: str, **fmt: object) -> str:
    return locales.text(page, key, "en", **fmt)


# ---- one function per page: the section its main input drives, through the same tx_explorer.views calls ---------


def home(m: Models) -> Result:
    from tx_explorer.views import home as view

    return _result([view.example()], "3 tokens")


def operator(m: Models) -> Result:
    from tx_explorer.views import operator as view

    q, k, v = view.random_qkv(4, 6, 8, 4, 0)
    steps = view.steps(q, k, v, True)
    r = view.replace(q, k, v, "V", seed=1, scaled=True)
    return _result(
        [*view.inputs(q, k, v), steps.scores, steps.weights, steps.out, r.weights, r.out], "N_Q 4, N_K 6, D 8"
    )


def self_attention(m: Models) -> Result:
    from tx_explorer.views import self_attention as view

    p = view.LAYER.compute(**view.LAYER.defaults(), perm_seed=2)  # the first press of Shuffle
    return _result([p.out, p.weights, p.out_shuffled, p.weights_shuffled], "6 tokens, D 16, 4 heads")


def masks_page(m: Models) -> Result:
    from tx_explorer.analysis import mask_gallery as mg
    from tx_explorer.views import masks as view

    toks = mg.tokens(_en("masks", "sentence_default"))
    n = len(toks)
    options = {  # st.tabs runs every tab's body on each rerun: all six masks are built
        "causal": {},
        "padding": {"length": max(1, n - 3), "causal": False},
        "sliding_window": {"window": min(3, n)},
        "prefix_lm": {"prefix": n // 2},
        "block_diagonal": {"sizes": mg.parse_sizes(", ".join(str(s) for s in mg.even_split(n)), n), "causal": False},
        "custom": {"grid": mg.start_grid(mg.GRID_STARTS[0], n)},
    }
    shown = [view.masked(kind, mg.build_mask(kind, n, **kw), toks, 0) for kind, kw in options.items()]
    return _result([p for r in shown for p in (r.scores, r.weights)], f"{n} tokens, 6 masks")


def multihead(name: str) -> Callable[[Models], Result]:
    def run(m: Models) -> Result:
        from tx_explorer.views import multihead as view

        data = view.analyse(m[name], _en("multihead", "example_code_text"))
        layers, heads = data.maps.shape[:2]
        grid = view.grid(view.shown(data), view.kv_groups(m[name]))
        return _result([grid], f"{len(data.tokens)} tokens, {layers} × {heads} heads")

    return run


def head_science(m: Models) -> Result:
    from tx_explorer.analysis import head_science as hs
    from tx_explorer.views import head_science as view

    text = _en("head_science", "text_default")
    return _result([view.pattern(hs.text_model(m["tiny-gpt"]), text, 0, 0)], "one head's pattern, tiny-gpt")


def moe(m: Models) -> Result:
    from tx_explorer.views import moe as view

    typed = view.typed(m["tiny-moe"], _en("moe", "sentence_default"))
    return _result([typed.tokens, typed.gates], f"{typed.tokens.data.shape[-1]} tokens")


def norms_page(m: Models) -> Result:
    from tx_explorer.views import norms as view

    a, b = m["variants:pre-ln"], m["variants:post-ln"]
    panel, _ = view.pair(m["variants:results"], a, b, _en("norms", "sentence_default"), 0, 0)
    return _result([panel], f"{len(panel.data[0])} tokens, 2 variants")


def flow(m: Models) -> Result:
    from tx_explorer.views import flow as view

    tm = m["tiny-llama"]
    an = view.analyse(tm, _en("flow", "text_default"))
    route = view.route(tm, an)
    edge = view.edge(tm, an, *route.edge)
    node = view.node(tm, an, "x", an.dec.num_layers, len(an.ids) - 1)
    return _result([*route.panels, *edge.panels, *node.panels], f"{len(an.ids)} tokens, tiny-llama")


def atlas(m: Models) -> Result:
    from tx_explorer.views import atlas as view

    tm = m["tiny-llama"]
    stats = view.compute(tm, view.source_ids(tm, "corpus", tokens=64))
    layer, head = view.focus(stats)
    return _result(
        [*view.overview(stats, "entropy").panels, view.head_along(stats, "entropy", layer, head)],
        "64 tokens, tiny-llama",
    )


def block_roles(m: Models) -> Result:
    from tx_explorer.views import block_roles as view

    probe = view.probe(m["tiny-gpt"], _en("block_roles", "text_default"), 2)
    return _result([probe.bars], f"{len(probe.bars.data)} tokens, 4 stages")


def circuit(m: Models) -> Result:
    from tx_explorer.views import circuit as view

    bundle = m["induction-2l"]
    maps = view.step_maps(bundle, bundle.steps[0], lang="en")
    return _result([maps.maps], f"checkpoint {bundle.steps[0]}: 2 maps + scores on the held-out sequences")


def language_model(m: Models) -> Result:
    from tx_explorer.views import language_model as view

    tm, text, new = m["tiny-gpt"], _en("language_model", "default_text"), 24  # the page's defaults: greedy, 24
    r = view.read(tm, text)
    causal, loss = view.causal(r), view.losses(r)
    g = view.generate(tm, text, new)
    panels = [view.embeddings(r, tm.config.dim), causal.mask, causal.weights, view.next_token(r).candidates]
    panels += [loss[1] if loss else None, *view.generation(g)]
    return _result(panels, f"{len(r.tokens)} tokens + {new} generated")


def vision_transformer(m: Models) -> Result:
    from tx_explorer.views import vision_transformer as view

    clf = m["vit-shapes"]
    cfg, g = clf.model.cfg, clf.model.cfg.grid
    picture, mask = view.sample(clf, 0, 7)
    picture, pixels = view.model_input(clf, picture)
    sides = view.patches(clf, picture, g // 2, g // 2, "vit-shapes")
    att = view.attention(clf, clf.classify(pixels), pixels, view.queries(clf)[0], 0, None, mask)
    panels = [p for s in sides for p in (s.grid, s.values, s.projection)]
    return _result([*panels, att.overlays, att.mosaic, att.prediction, att.rollout], f"{cfg.image_size}² px")


def seq2seq(m: Models) -> Result:
    from tx_explorer.views import seq2seq as view

    ts = {k: m[f"seq2seq-{k}"] for k in view.KINDS}
    text = view.LECTURE_EXAMPLE[0]
    check = ts["attention"].check(text)
    gold = view.gold(check)
    out = view.translate(ts, text)
    view.outputs(ts, out, gold)
    al = view.alignments(out, gold, ts["transformer"].align_layer or 0)
    step = view.decoder_step(out["attention"]) if out["attention"].tokens else None
    return _result([al.bahdanau, al.transformer, al.mosaic, step], f"{len(check.tokens)} words, beam 1, 3 models")


def cost_of_attention(m: Models) -> Result:
    import torch

    from tx_explorer.views import cost_of_attention as view

    n, d, h = 2048, 512, 8
    tiles = view.tiles(12, 4)
    panels = [view.matmuls(n, d, h).flops, view.curves(8, 64, 128, "float32", torch.device("cpu")).memory]
    return _result([*panels, tiles.grid, tiles.running_max, tiles.running_sum], f"N {n:,}, D {d}, H {h}")


def kv_cache(m: Models) -> Result:
    from tx_explorer.views import kv_cache as view

    tm = m["tiny-gpt"]
    decoded = view.decode(tm, _en("kv_cache", "prompt_default"), 8)
    cv = view.cache_view(tm, decoded.decoding.ids, decoded.labels, len(decoded.decoding.steps) - 1, 0)
    return _result([cv.keys, cv.values, cv.groups, decoded.growth, decoded.diff], "8 new tokens, tiny-gpt")


SEQ2SEQ = tuple(f"seq2seq-{k}" for k in ("fixed", "attention", "transformer"))
VARIANTS = ("variants:results", "variants:pre-ln", "variants:post-ln")
INTERACTIONS: dict[str, list[Interaction]] = {
    "home": [Interaction("home", "open the page", "causal example: masked attention + heatmap", home)],
    "operator": [
        Interaction(
            "operator", "move a slider (N_K)", "random Q, K, V; the three steps; replace V; 8 heatmaps", operator
        )
    ],
    "self_attention": [
        Interaction("self_attention", "press Shuffle", "permutation check (6 tokens) + 4 heatmaps", self_attention)
    ],
    "masks": [
        Interaction("masks", "type a sentence", "all six masks (st.tabs runs every tab) + 12 heatmaps", masks_page)
    ],
    "multihead": [
        Interaction(
            "multihead",
            "type a text (tiny-gpt)",
            "forward with trace + layer × head grid",
            multihead("tiny-gpt"),
            ("tiny-gpt",),
        ),
        Interaction(
            "multihead",
            "type a text (MiniLM-L6, not bundled)",
            "forward with trace + layer × head grid",
            multihead("minilm-l6"),
            ("minilm-l6",),
        ),
    ],
    "head_science": [
        Interaction(
            "head_science", "pick a head", "forward with trace + one head's pattern", head_science, ("tiny-gpt",)
        )
    ],
    "moe": [
        Interaction("moe", "type a sentence", "forward with routing trace + token and gate figures", moe, ("tiny-moe",))
    ],
    "norms": [
        Interaction(
            "norms",
            "type a sentence (two variants)",
            "two forwards with trace + side-by-side maps",
            norms_page,
            VARIANTS,
        )
    ],
    "block_roles": [
        Interaction(
            "block_roles",
            "type a text",
            "one token changed at block 0: 4 sub-layers run twice + 1 figure",
            block_roles,
            ("tiny-gpt",),
        )
    ],
    "flow": [
        Interaction(
            "flow",
            "type a text",
            "decomposition + shares + route graph, one edge's heads rerun (causal effects), a node's lens + 4 figures",
            flow,
            ("tiny-llama",),
        )
    ],
    "atlas": [
        Interaction(
            "atlas",
            "read a text, pick a statistic",
            "every layer's attention by tiles + per-head statistics, grid + one head along the positions",
            atlas,
            ("tiny-llama",),
        )
    ],
    "circuit": [
        Interaction(
            "circuit",
            "move the checkpoint slider",
            "one checkpoint loaded: its previous-token and induction heads' maps, its scores and losses",
            circuit,
            ("induction-2l",),
        )
    ],
    "language_model": [
        Interaction(
            "language_model",
            "type a text",
            "read (embeddings, maps, next token, losses) + 24 greedy tokens + 7 figures",
            language_model,
            ("tiny-gpt",),
        )
    ],
    "vision_transformer": [
        Interaction(
            "vision_transformer",
            "pick another sample image",
            "two patch views, classify with trace, maps, rollout + 10 figures",
            vision_transformer,
            ("vit-shapes",),
        )
    ],
    "seq2seq": [
        Interaction(
            "seq2seq", "type a sentence", "three translations, AER, alignments, mosaic, one step", seq2seq, SEQ2SEQ
        )
    ],
    "cost_of_attention": [
        Interaction(
            "cost_of_attention",
            "change N",
            "FLOP table, analytic memory curves, tile trace + 5 figures (the Measure button's timing run is a "
            "progress-bar job, not timed)",
            cost_of_attention,
        )
    ],
    "kv_cache": [
        Interaction(
            "kv_cache",
            "type a prompt",
            "8 cached decoding steps checked against a full forward + 5 figures",
            kv_cache,
            ("tiny-gpt",),
        )
    ],
}


def section_run(section: Section) -> Callable[[Models], Result]:
    """A declared section on its defaults: what its page computes when one of its inputs changes."""

    def run(m: Models) -> Result:
        return _result(panels(section()), ", ".join(f"{k}={v!r}" for k, v in section.defaults().items()))

    return run


for _section in declared():  # a section declared later gets its row here with no edit
    INTERACTIONS.setdefault(_section.page, []).append(
        Interaction(
            _section.page,
            f"{_section.page}/{_section.prefix}",
            "the declared section on its defaults: compute + figures",
            section_run(_section),
        )
    )


def load(name: str) -> Any:
    """A registry model; ``variants:results`` is the norms page's bundle, ``variants:<name>`` one trained variant."""
    if name.startswith("variants:"):
        results = models.load_model("variants")
        return results if name == "variants:results" else results.text_model(name.split(":", 1)[1])
    return models.load_model(name)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    json_ms: float  # of which: serialising the figures
    figure_share: float  # of the rest: building the figures (from a profiled run)
    chart_bytes: int
    charts: int
    runs: int
    detail: str


def figure_share(run: Callable[[Models], Result], loaded: Models) -> float:
    """Share of one profiled call spent building figures: ``tx_explorer.viz`` functions called by the library
    outside viz (the views) or by ``run`` (viz helpers called by viz, or by Plotly, are counted inside those)."""
    profile = cProfile.Profile()
    profile.runcall(run, loaded)
    stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, primitive, own s, cumulative s, callers)}
    code = run.__code__
    total = stats[(code.co_filename, code.co_firstlineno, code.co_name)][3]
    figures = sum(
        caller_stats[3]
        for (file, _, _), (*_, callers) in stats.items()
        if file.startswith(VIZ_DIR)
        for (caller_file, _, _), caller_stats in callers.items()
        if (caller_file.startswith(LIBRARY) and not caller_file.startswith(VIZ_DIR)) or caller_file == code.co_filename
    )
    return figures / total if total else 0.0


def time_interaction(run: Callable[[Models], Result], loaded: Models, repeats: int) -> Timing:
    """Median over ``repeats`` calls after one warm-up: the call plus ``plotly.io.to_json`` of its figures."""
    share = figure_share(run, loaded)  # also the warm-up
    totals, jsons = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run(loaded)
        t1 = time.perf_counter()
        specs = [pio.to_json(f, validate=False) for f in result.figures]
        t2 = time.perf_counter()
        totals.append(t2 - t0)
        jsons.append(t2 - t1)
    size = sum(len(s.encode()) for s in specs)
    return Timing(
        1000 * statistics.median(totals),
        1000 * statistics.median(jsons),
        share,
        size,
        len(specs),
        repeats,
        result.detail,
    )


LOAD_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import torch
from tx_explorer import models
out = {"(import torch + tx_explorer.models)": time.perf_counter() - t0}
for name in sys.argv[1:]:
    t0 = time.perf_counter()
    if name.startswith("variants:"):
        models.load_model("variants").text_model(name.split(":", 1)[1])
    else:
        models.load_model(name)
    out[name] = time.perf_counter() - t0
print(json.dumps(out))
"""


def load_times(names: list[str], repeats: int) -> dict[str, list[float]]:
    """Seconds per model, each in ``repeats`` fresh processes (cold: first load there, module imports included)."""
    times: dict[str, list[float]] = {}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TIMM_FUSED_ATTN": "0"}  # as `make run`
    for _ in range(repeats):
        proc = subprocess.run(
            [sys.executable, "-c", LOAD_CHILD, *names],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        for name, seconds in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            times.setdefault(name, []).append(seconds)
    return times


def _parser() -> argparse.ArgumentParser:
    p = parser("pages", __doc__)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per interaction (after one warm-up)")
    p.add_argument("--load-repeats", type=int, default=3, help="fresh processes for the model load times")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's, as the app)")
    p.add_argument("--only", nargs="+", default=None, help="page names to run (default: every page of app.py)")
    return p


def main(argv: list[str] | None = None) -> None:
    args, command = parse(_parser(), argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    header = machine(torch.device("cpu"))
    available = set(models.available_models()) | set(VARIANTS)
    chosen = [i for page in (args.only or list(INTERACTIONS)) for i in INTERACTIONS[page]]
    runnable = [i for i in chosen if set(i.models) <= available]
    skipped = [i for i in chosen if i not in runnable]
    needed = sorted({n for i in runnable for n in i.models})
    loaded = {name: load(name) for name in needed}
    rows = []
    for it in runnable:
        t = time_interaction(it.run, loaded, args.repeats)
        log.info("%s / %s: %.1f ms (%s)", it.page, it.action, t.median_ms, t.detail)
        rows.append((it, t))
    loads = load_times([*models.available_models(), "variants:pre-ln"], args.load_repeats) if args.load_repeats else {}

    lines = [
        "## Pages: compute + figures of each page's main interaction (function level)",
        "",
        f"Command: `{command.strip()}` (from the repository root; `make bench` runs every benchmark).",
        "",
        f"Machine: {header}.",
        "",
        f"Each row calls the `tx_explorer.views` functions that the page's section runs after the "
        f"input, with the page's default inputs, then serialises every figure as `st.plotly_chart` does "
        f"(`plotly.io.to_json`); time = median of {args.repeats} runs after one warm-up, models loaded before "
        "timing. Not included: Streamlit's own work (widgets, deltas, the websocket) and the page's other sections "
        "that rerun too; the browser section below measures input → chart rendered for the whole rerun. "
        f"Target (bundled models, ≤ 64 tokens): ≤ {TARGET_MS:.0f} ms.",
        "",
        "Compute and figure building split the rest of the median by their shares in one profiled run "
        "(`tx_explorer.viz` calls = figures).",
        "",
        "| page | interaction | what is computed | input | median ms | compute | figures | JSON | charts "
        f"| chart bytes | target {TARGET_MS:.0f} ms |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for it, t in rows:
        target = verdict(t.median_ms, TARGET_MS) if it.models != ("minilm-l6",) else "— (not bundled)"
        rest = t.median_ms - t.json_ms
        lines.append(
            f"| {it.page} | {it.action} | {it.timed} | {t.detail} | {t.median_ms:,.1f} "
            f"| {rest * (1 - t.figure_share):,.1f} | {rest * t.figure_share:,.1f} | {t.json_ms:,.1f} "
            f"| {t.charts} | {t.chart_bytes / 1e3:,.0f} kB | {target} |"
        )
    if skipped:
        absent = "; ".join(f"{i.page} ({', '.join(i.models)})" for i in skipped)
        lines += ["", f"Not run (model not on this machine): {absent}."]
    missed = [(it, t) for it, t in rows if t.median_ms > TARGET_MS and it.models != ("minilm-l6",)]
    lines += [
        "",
        f"Targets met: {len(rows) - len(missed)} of {len(rows)} rows"
        + ("; missed: " + ", ".join(f"{it.page} ({t.median_ms:,.0f} ms)" for it, t in missed) + "." if missed else "."),
    ]
    if loads:
        lines += [
            "",
            f"### Model load times (cold: the first load in a fresh Python process, median of {args.load_repeats})",
            "",
            "`tx_explorer.models.load_model(name)` for every available model, checksums verified, the model family's "
            "module imports included; the operating system's file cache is warm after the first process. The app "
            "loads each model once per server process (`ui.cached_model`).",
            "",
            "| model | median s | runs |",
            "|---|---:|---:|",
        ]
        for name, secs in loads.items():
            lines.append(f"| {name} | {statistics.median(secs):.2f} | {len(secs)} |")
    text = "\n".join(lines)
    publish("pages", text, no_write=args.no_write)


if __name__ == "__main__":
    main()
