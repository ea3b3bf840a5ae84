"""Per page of app.py: compute + figure time of its main interaction (function level), and model load times.

    python -m benchmarks pages                 # median of 5 runs after a warm-up; 3 fresh processes for loads
    python -m benchmarks pages --repeats 1 --load-repeats 1 --only masks operator

Each interaction calls the same ``tx_explorer`` analysis and figure functions, with the same arguments, as the
page's section that the input drives (read ``pages/<page>.py``), on the page's default inputs; the figures are
serialised as ``st.plotly_chart`` does (``plotly.io.to_json``). Models are loaded once before timing; their load
times are measured separately, each in a fresh Python process. Writes the section ``pages`` of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import torch

from benchmarks import ROOT, machine, publish, verdict
from tx_explorer import locales, masks, models, viz
from tx_explorer.viz import charts
from tx_explorer.viz import bars as vb
from tx_explorer.viz import heads as vh
from tx_explorer.viz.heatmap import heatmap

log = logging.getLogger("benchmarks.pages")
TARGET_MS = 300.0  # issue 11: every main interaction on bundled models at ≤ 64 tokens
AX = {"x_title": "keys", "y_title": "queries"}
VIZ_DIR = str(Path(viz.__file__).parent)
Models = dict[str, Any]


@dataclass(frozen=True)
class Result:
    figures: list[go.Figure]
    detail: str = ""  # the input's size, e.g. "12 tokens"


@dataclass(frozen=True)
class Interaction:
    page: str  # pages/<page>.py
    action: str  # what the user does
    timed: str  # what the page then computes (what this benchmark calls)
    run: Callable[[Models], Result]
    models: tuple[str, ...] = ()  # registry names, or "variants:<name>" for the norms page's bundle


def _en(page: str, key: str, **fmt: object) -> str:
    return locales.text(page, key, "en", **fmt)


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


# ---- one function per page: the section its main input drives ---------------------------------------------------


def home(m: Models) -> Result:
    from tx_explorer.analysis import mask_gallery

    words = ["Attention", "is", "very"]
    example = mask_gallery.masked_attention(masks.causal(len(words)), seed=0)
    return Result([heatmap(example.steps.weights.numpy(), words, words, title="example", **AX)], "3 tokens")


def operator(m: Models) -> Result:
    from tx_explorer.analysis import operator_lab as op

    q, k, v = op.random_qkv(4, 6, 8, 4, 0)
    figs = [
        charts.signed_heatmap(
            x.numpy(), _labels(p, x.shape[0]), _labels("d", x.shape[1]), title=name, x_title="dims", y_title=p
        )
        for name, x, p in (("Q", q, "q"), ("K", k, "k"), ("V", v, "k"))
    ]
    steps = op.operator_steps(q, k, v, True)
    rows, cols, dims = _labels("q", 4), _labels("k", 6), _labels("d", 4)
    figs += [
        charts.signed_heatmap(steps.scores.numpy(), rows, cols, title="E", **AX),
        heatmap(steps.weights.numpy(), rows, cols, title="A", **AX),
        charts.signed_heatmap(steps.out.numpy(), rows, dims, title="Y", x_title="dims", y_title="q"),
    ]
    op.summarize(steps, q.shape[1], True)
    r = op.replace_input(q, k, v, "V", seed=1, scaled=True)
    figs += [
        heatmap(r.after.weights.numpy(), rows, cols, title="A after", **AX),
        charts.signed_heatmap(r.after.out.numpy(), rows, dims, title="Y after", x_title="dims", y_title="q"),
    ]
    return Result(figs, "N_Q 4, N_K 6, D 8")


def self_attention(m: Models) -> Result:
    from tx_explorer.analysis import position

    n, dim, heads = 6, 16, 4
    check = position.permutation_check(n, dim, heads, 0, 2, position.POSITION_KINDS[0])
    names = _labels("x", n)
    shuffled = [names[i] for i in check.perm.tolist()]
    dims = _labels("d", dim)
    figs = [
        charts.signed_heatmap(check.out.numpy(), names, dims, title="out", x_title="dims", y_title="tokens"),
        heatmap(check.weights[0].numpy(), names, names, title="weights", **AX),
        charts.signed_heatmap(
            check.out_shuffled.numpy(), shuffled, dims, title="out shuffled", x_title="dims", y_title="tokens"
        ),
        heatmap(check.weights_shuffled[0].numpy(), shuffled, shuffled, title="weights shuffled", **AX),
    ]
    return Result(figs, f"{n} tokens, D {dim}, {heads} heads")


def masks_page(m: Models) -> Result:
    from tx_explorer.analysis import mask_gallery as mg

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
    figs = []
    for kind, kwargs in options.items():
        r = mg.masked_attention(mg.build_mask(kind, n, **kwargs), 0)
        figs += [
            charts.signed_heatmap(r.steps.masked.numpy(), toks, toks, title="scores", **AX),
            heatmap(r.steps.weights.numpy(), toks, toks, title="weights", **AX),
        ]
    return Result(figs, f"{n} tokens, 6 masks")


def multihead(name: str) -> Callable[[Models], Result]:
    def run(m: Models) -> Result:
        from tx_explorer.analysis import heads

        data = heads.analyse(m[name], _en("multihead", "example_code_text"))
        shown = heads.keep_tokens(data.maps, [True] * len(data.tokens))
        layers, num_heads = data.maps.shape[:2]
        return Result([vh.head_grid(shown, title="grid")], f"{len(data.tokens)} tokens, {layers} × {num_heads} heads")

    return run


def moe(m: Models) -> Result:
    from tx_explorer.analysis import routing
    from tx_explorer.viz import moe as vm

    bundle = m["tiny-moe"]
    words = {key: _en("moe", f"fig_{key}") for key in vm.WORDS}
    enc = bundle.text.encode(_en("moe", "sentence_default"))
    _, trace = bundle.text.attention(enc)
    typed = {key: v.numpy() for key, v in routing.per_layer(routing.routing_tables(trace)).items()}  # [L, T, (E)]
    figs = [
        vm.coloured_tokens(enc.tokens, typed["first"], bundle.config.num_experts, title="tokens", words=words),
        vm.gate_heatmaps(typed["gates"], typed["probs"], enc.tokens, title="gates", words=words),
    ]
    return Result(figs, f"{len(enc.tokens)} tokens")


def norms_page(m: Models) -> Result:
    from tx_explorer.analysis import norm_lab as norms
    from tx_explorer.viz import norm_figures as vn

    pair = norms.attention_pair(
        m["variants:pre-ln"], m["variants:post-ln"], _en("norms", "sentence_default"), layer=0, head=0
    )
    maps = {"pre-ln": pair.a.numpy(), "post-ln": pair.b.numpy(), "difference": pair.diff.numpy()}
    fig = vn.side_by_side(maps, row_labels=pair.tokens, col_labels=pair.tokens, diverging=["difference"], **AX)
    return Result([fig], f"{len(pair.tokens)} tokens, 2 variants")


def model_sizes(m: Models) -> Result:
    from tx_explorer.analysis import params
    from tx_explorer.config import TransformerConfig

    cfg = TransformerConfig(
        vocab_size=50_257,
        max_len=1024,
        dim=768,
        num_layers=13,
        num_heads=12,
        mlp="mlp",
        positions="learned",
        tie_embeddings=True,
    )
    c = TransformerConfig.from_dict(cfg.to_dict())  # the page's cached function takes the dict
    params.count_params(c, "causal", None)
    measured = params.measure(params.build_on_meta(c, "causal", None))
    fig = vb.stacked_parts(["your model"], {p: [measured[p]] for p in params.PARTS}, title="custom", share=False)
    return Result([fig], "13 × 768, vocabulary 50,257")


def language_model(m: Models) -> Result:
    from tx_explorer.analysis import lm

    tm = m["tiny-gpt"]
    text = _en("language_model", "default_text")
    r = lm.read(tm, text, 15)
    n = len(r.tokens)
    toks = vb.safe_labels(r.tokens)
    labels = [f"{i}: {t}" for i, t in enumerate(r.tokens)]
    rows = [f"{t} (id {i})" for t, i in zip(toks, r.ids)]
    mask = masks.causal(n).float().numpy()
    figs = [
        charts.signed_heatmap(
            r.embeddings,
            rows,
            [str(d) for d in range(r.embeddings.shape[1])],
            title="embeddings",
            x_title="dims",
            y_title="tokens",
        ),
        heatmap(mask, toks, toks, title="mask", **AX),
        heatmap(r.maps[0, 0], toks, toks, title="weights", **AX),
        vb.topk_bars(r.top_labels[n - 1], r.top_probs[n - 1], title="next", highlight=None),
        vb.labelled_bars(labels[1:], {"loss": r.losses}, title="loss", x_title="predicted", y_title="nats"),
    ]
    new = 24  # the page's default: greedy, 24 new tokens
    g = lm.generate(tm, tm.encode(text, lm.MAX_TOKENS).ids, new, greedy=True, temperature=0.8, top_k=None, seed=0)
    maps = g.maps[0].mean(axis=0)
    row = g.prompt_len - 1
    gen_toks = vb.safe_labels(g.tokens)
    ctx = [f"{i}: {t}" for i, t in enumerate(g.tokens[: row + 1])]
    figs += [
        vb.labelled_bars(ctx, {"weight": maps[row, : row + 1]}, x_title="context", y_title="weight", title="step"),
        heatmap(
            maps[g.prompt_len - 1 : -1],
            [f"→ {t}" for t in gen_toks[g.prompt_len :]],
            gen_toks,
            title="generated",
            x_title="context",
            y_title="generated",
        ),
    ]
    return Result(figs, f"{n} tokens + {new} generated")


def vision_transformer(m: Models) -> Result:
    from tx_explorer.analysis import vit_views
    from tx_explorer.data import images, shapes
    from tx_explorer.viz import vit as vitviz

    clf = m["vit-shapes"]
    cfg = clf.model.cfg
    g = cfg.grid
    sample = shapes.sample(7, size=cfg.image_size, label=0)
    picture = images.to_image(sample.image)
    pixels = images.to_array(images.center_square(picture, cfg.image_size))
    index = (g // 2) * g + g // 2
    lecture_grid = vit_views.LECTURE_SIZE // vit_views.LECTURE_PATCH
    lecture_index = (g // 2 * lecture_grid // g) * lecture_grid + g // 2 * lecture_grid // g
    big = images.to_array(images.center_square(picture, vit_views.LECTURE_SIZE))
    lecture = vit_views.patch_view(big, vit_views.lecture_embed(), lecture_index)
    own = vit_views.patch_view(pixels, clf.model.patch_embed, index, normalise=clf)
    figs = []
    for view, image, patch, pick in (
        (lecture, big, vit_views.LECTURE_PATCH, lecture_index),
        (own, pixels, cfg.patch_size, index),
    ):
        figs += [
            vitviz.image_with_grid(image, patch, highlight=pick, height=340),
            vitviz.patch_values(view.values, title="values"),
            vitviz.vector_bars(view.conv, title="projection"),
        ]
    result = clf.classify(pixels)
    prefix = clf.model.num_prefix
    query = 0 if prefix else "mean"
    maps = vit_views.query_maps(result.trace, query, num_prefix=prefix, grid=g)  # (L, H, g, g)
    shown = np.concatenate([maps[-1], maps[-1].mean(axis=0, keepdims=True)])
    heads = [f"head {h + 1}" for h in range(cfg.num_heads)]
    rolled = vit_views.rollout_map(result.trace, query, num_prefix=prefix, grid=g)
    pair = np.stack([maps[-1].mean(axis=0), rolled])
    figs += [
        vitviz.attention_overlays(pixels, shown, [*heads, "mean"], title="overlays", highlight=None),
        vitviz.layer_head_maps(maps, [f"layer {i + 1}" for i in range(cfg.num_layers)], heads, title="mosaic"),
        vitviz.prediction_bars(result.labels, result.probs, title="prediction"),
        vitviz.attention_overlays(pixels, pair, ["last layer", "rollout"], title="rollout", highlight=None),
    ]
    vit_views.object_shares(pair, sample.mask, cfg.patch_size)
    return Result(figs, f"{cfg.image_size}² px, {cfg.num_patches} patches")


SEQ2SEQ = {"fixed": "seq2seq-fixed", "attention": "seq2seq-attention", "transformer": "seq2seq-transformer"}


def seq2seq(m: Models) -> Result:
    from tx_explorer.analysis import seq2seq_eval as ev
    from tx_explorer.data import translation as tr
    from tx_explorer.viz import seq2seq as vs

    ts = {k: m[n] for k, n in SEQ2SEQ.items()}
    text = tr.LECTURE_EXAMPLE[0]
    check = ts["attention"].check(text)
    try:
        gold = tr.parse(check.tokens)
    except tr.ParseError:
        gold = None
    out = {k: t.translate(text, beam=1) for k, t in ts.items()}
    for t in ts.values():
        if gold is not None and t.has_alignment:
            ev.sentence_aer(t, gold)
    cross = out["transformer"].cross  # (L, H, T_out, T_in)
    axes = {"x_title": "source", "y_title": "output", "gold_label": "gold"}
    figs = []
    for key, weights in (
        ("attention", out["attention"].alignment),
        ("transformer", cross[ts["transformer"].align_layer or 0].mean(axis=0)),
    ):
        o = out[key]
        matches = gold is not None and o.tokens == gold.target
        figs.append(
            vs.alignment_figure(
                weights, o.source, o.tokens, gold=gold.alignment if matches else None, title=key, **axes
            )
        )
    figs.append(vs.cross_mosaic(cross, layer_name="layer", head_name="head", x_title="source", y_title="output"))
    o = out["attention"]
    if o.tokens:
        terms, context = ev.context_terms(o.alignment[0], o.annotations)
        figs.append(
            vs.context_figure(
                o.alignment[0],
                terms,
                context,
                o.source,
                title="step",
                weight_title="weight",
                dim_title="dim",
                source_title="source",
            )
        )
    return Result(figs, f"{len(check.tokens)} words, beam 1, 3 models")


def cost_of_attention(m: Models) -> Result:
    from tx_explorer.analysis import cost, flash_steps, memory
    from tx_explorer.viz import cost as vcost
    from tx_explorer.viz import style

    n, d, h = 2048, 512, 8
    flops_ns = [2**p for p in range(4, 17)]
    curve_ns = np.unique(np.geomspace(64, 131_072, 48).astype(int))
    cost.four_matmuls(n, d, h)  # the page's table
    flops = cost.flops_by_n(flops_ns, d, h)
    figs = [
        vcost.flops_bars(
            flops_ns,
            flops,
            cost.crossover_n(d),
            title="flops",
            crossover_label="crossover",
            x_title="N",
            y_title="share",
        )
    ]
    lines = cost.memory_lines(curve_ns, h, 64, block_size=128, itemsize=4)
    lecture = cost.memory_lines([cost.LECTURE_N], cost.LECTURE_H, 64, block_size=128, itemsize=4)
    lecture = {k: float(v[0]) for k, v in lecture.items()}
    total = memory.total_bytes("cpu")
    figs.append(
        vcost.memory_curves(
            {k: (curve_ns, v) for k, v in lines.items()},
            {},
            device_bytes=total,
            device_label="RAM",
            extrapolated={f"lecture {k}": (cost.LECTURE_N, lecture[k]) for k in ("naive", "flash")},
            title="memory",
            analytic_label="analytic",
            measured_label="measured",
            x_title="N",
            y_title="bytes",
        )
    )
    tr = flash_steps.trace_example(n=12, d=4, block_size=4, causal=True, seed=0)
    cols, rows = [f"after {j}" for j in range(tr.m.shape[1])], [f"row {i}" for i in range(tr.m.shape[0])]
    figs += [
        vcost.tile_grid(
            tr.status,
            ["skipped", "partial", "full"],
            block_q=tr.block_q,
            block_k=tr.block_k,
            title="tiles",
            x_title="key tile",
            y_title="query tile",
        ),
        vcost.running_stat_map(
            tr.m, rows, cols, title="m", colorscale=style.DIVERGING, zmid=0.0, x_title="steps", y_title="queries"
        ),
        vcost.running_stat_map(tr.l, rows, cols, title="l", x_title="steps", y_title="queries"),
    ]
    return Result(figs, f"N {n:,}, D {d}, H {h}")


def position_lab(m: Models) -> Result:
    from tx_explorer.views import position_lab as view

    demo = view.rotary_demo(16, 10000.0, 64, 4, 0, True)
    return Result([demo.rotation.figure, demo.scores.figure, demo.by_distance.figure], "D_h 16, 64 positions")


def kv_cache(m: Models) -> Result:
    from tx_explorer.views import kv_cache as view

    tm = m["tiny-gpt"]
    decoded = view.decode(tm, "The function returns a new list of the keys", 8)
    last = len(decoded.decoding.steps) - 1
    cv = view.cache_view(tm, decoded.decoding.ids, decoded.labels, last, 0)
    figs = [cv.keys.figure, cv.values.figure, cv.groups.figure, decoded.growth.figure, decoded.diff.figure]
    return Result(figs, f"{len(decoded.decoding.ids)} tokens, cached and uncached")


def head_science(m: Models) -> Result:
    from tx_explorer.views import head_science as view

    text = _en("head_science", "text_default")
    r = view.importance(m["tiny-gpt"], text)
    return Result([*(p.figure for p in r.panels), view.pattern(m["tiny-gpt"], text, 0, 0).figure], r.notes[0])


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
            "head_science",
            "type a text (tiny-gpt)",
            "every head zero-ablated (L·H + 1 forwards) + 2 maps + the chosen head's pattern",
            head_science,
            ("tiny-gpt",),
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
            ("variants:pre-ln", "variants:post-ln"),
        )
    ],
    "model_sizes": [
        Interaction("model_sizes", "change the layer count", "formula + meta-device count + stacked bars", model_sizes)
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
            "seq2seq",
            "type a sentence",
            "three translations, AER, alignments, mosaic, one step",
            seq2seq,
            tuple(SEQ2SEQ.values()),
        )
    ],
    "cost_of_attention": [
        Interaction(
            "cost_of_attention",
            "change N",
            "FLOP table, analytic memory curves, tile "
            "trace + 5 figures (the Measure button's timing run is a progress-bar job, "
            "not timed)",
            cost_of_attention,
        )
    ],
    "position_lab": [
        Interaction(
            "position_lab", "change the rotary positions", "rotation, 64 × 64 scores, check + 3 figures", position_lab
        )
    ],
    "kv_cache": [
        Interaction(
            "kv_cache",
            "type a prompt",
            "cached and uncached greedy decoding step by step + cache view + 5 figures",
            kv_cache,
            ("tiny-gpt",),
        )
    ],
}


def load(name: str) -> Any:
    """A registry model, or ``variants:<name>``: one trained variant of the norms page's bundle."""
    if name.startswith("variants:"):
        from tx_explorer.families import variants

        return variants.load_results().text_model(name.split(":", 1)[1])
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
    """Share of one profiled call spent in figure builders: ``tx_explorer.viz`` functions that ``run`` calls."""
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
        if caller_file == code.co_filename
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
        from tx_explorer.families import variants
        variants.load_results().text_model(name.split(":", 1)[1])
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
    p = argparse.ArgumentParser(prog="python -m benchmarks pages", description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="timed runs per interaction (after one warm-up)")
    p.add_argument("--load-repeats", type=int, default=3, help="fresh processes for the model load times")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's, as the app)")
    p.add_argument("--only", nargs="+", default=None, help="page names to run (default: every page of app.py)")
    p.add_argument("--no-write", action="store_true", help="print the section instead of writing BENCHMARKS.md")
    return p


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    header = machine(torch.device("cpu"))
    available = set(models.available_models()) | {"variants:pre-ln", "variants:post-ln"}
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

    command = "python -m benchmarks pages " + shlex.join(argv)
    lines = [
        "## Pages: compute + figures of each page's main interaction (function level)",
        "",
        f"Command: `{command.strip()}` (from the repository root; `make bench` runs every benchmark).",
        "",
        f"Machine: {header}.",
        "",
        f"Each row calls the `tx_explorer` analysis and figure functions that the page's section runs after the "
        f"input, with the page's default inputs, then serialises every figure as `st.plotly_chart` does "
        f"(`plotly.io.to_json`); time = median of {args.repeats} runs after one warm-up, models loaded before "
        "timing. Not included: Streamlit's own work (widgets, deltas, the websocket) and the page's other sections "
        "that rerun too; the browser section below measures input → chart rendered for the whole rerun. "
        f"Target (issue 11, bundled models, ≤ 64 tokens): ≤ {TARGET_MS:.0f} ms.",
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
