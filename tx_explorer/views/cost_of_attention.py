"""Cost of attention page (lecture §4.3–4.5, §9.6): the FLOP table, memory and time curves, the guard, tiles."""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tx_explorer.analysis import cost, flash_steps, memory, params
from tx_explorer.config import TransformerConfig
from tx_explorer.views import Panel, axes, listed, rounding, sentences, texts
from tx_explorer.views.inputs import Number, Section, Switch
from tx_explorer.viz import cost as vcost
from tx_explorer.viz import style

PAGE = "cost_of_attention"
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
TILE_LATEX = (  # the online softmax of one query tile (FlashAttention-2)
    r"\begin{aligned} m' &= \max\big(m,\ \mathrm{rowmax}(S_{ij})\big), \qquad S_{ij} = Q_i K_j^\top / \sqrt{D_H} \\ "
    r"\ell' &= e^{m - m'}\,\ell + \mathrm{rowsum}\big(e^{S_{ij} - m'}\big) \\ "
    r"\tilde O' &= e^{m - m'}\,\tilde O + e^{S_{ij} - m'}\,V_j \\ "
    r"O_i &= \tilde O / \ell, \qquad L_i = m + \log \ell \end{aligned}"
)
FLOPS_NS = [2**p for p in range(4, 17)]  # 16 … 65 536 tokens for the stacked bar
CURVE_NS = np.unique(np.geomspace(64, 131_072, 48).astype(int))  # analytic lines reach past the lecture's N


@dataclass(frozen=True)
class Matmuls:
    rows: dict[str, list[str]]  # the table, by translated column
    summary: str
    flops: Panel
    sharing: dict[str, list[str]]  # K/V weights, FLOPs and cache bytes: this shape, multi-head, multi-query
    sharing_note: str  # under a heading: what sharing key/value heads (and a head width other than D/H) changed


OWN = "own"  # the shape source "numbers of your own" (the others: registered causal text models)
KV_ITEMSIZE = 2  # a KV cache's numbers in 16 bits, as models are served
SHAPE_READ = "cost_shape_read"  # session state: the model whose numbers the boxes were last filled with


def shape_sources() -> list[str]:
    """What the FLOP table's shape can be read from: numbers of your own, or a registered causal text model."""
    from tx_explorer import models  # the registry: imported when the page asks

    return [OWN, *models.available_models("text", kind="causal")]


def shape_label(lang: str = "en") -> Callable[[str], str]:
    """How the shape choice names its options: a model by its registered name."""
    return lambda source: texts(PAGE, lang)("shape_own") if source == OWN else source


def read_shape(
    source: str, state: MutableMapping[str, Any], config_of: Callable[[str], TransformerConfig]
) -> TransformerConfig | None:
    """The chosen model's config (``config_of``: the loaded model's), None for numbers of your own. A new choice
    writes the model's numbers into ``state`` (the widgets' values, before they are drawn) once: the visitor may
    then change them."""
    cfg = None if source == OWN else config_of(source)
    if cfg and state.get(SHAPE_READ) != source:
        state.update(shape_values(cfg))
    state[SHAPE_READ] = source
    return cfg


def _read(cfg: TransformerConfig) -> dict[str, int]:
    return {"d": cfg.dim, "h": cfg.num_heads, "kv": cfg.kv_heads, "dh": cfg.head_dim}  # by the inputs' names


def shape_values(cfg: TransformerConfig) -> dict[str, int]:
    """A model's attention shape as the FLOP table's widget values, by widget key: D, H, H_kv and D_H."""
    return {MATMULS.key(inp): v for inp in MATMULS.inputs if (v := _read(cfg).get(inp.name)) is not None}


def shape_note(name: str, cfg: TransformerConfig, shown: TransformerConfig, *, lang: str = "en") -> str:
    """The numbers read from model ``name``'s config, and which of them the boxes' shape (``shown``) no longer
    holds (H_kv = 0 holds H, D_H = 0 holds D/H)."""
    T = texts(PAGE, lang)
    words = [T("shape_read", model=name, d=cfg.dim, h=cfg.num_heads, kv=cfg.kv_heads, dh=cfg.head_dim)]
    if changed := [T(f"shape_{k}") for k, v in _read(cfg).items() if _read(shown)[k] != v]:
        words.append(T("shape_changed", names=listed(changed, lang, last="and")))
    return sentences(words, lang)


def matmuls(
    n: int,
    d: int,
    h: int,
    kv: int = 0,
    dh: int = 0,
    *,
    model: tuple[str, TransformerConfig] | None = None,
    lang: str = "en",
) -> Matmuls:
    """The four products for N tokens, width D, H query heads sharing H_kv key/value heads of width D_H (0: H and
    D/H): table, summary, FLOPs-by-N bars, and what sharing the key/value heads changed. ``model``: (name, config)
    of the model the numbers were read from, said first in the summary."""
    T = texts(PAGE, lang)
    kv_, dh_ = kv or None, dh or None  # the widgets' 0: as many as H, and D / H
    products = cost.four_matmuls(n, d, h, kv_, dh_)
    total = sum(mm.flops for mm in products)
    rows = {
        T("col_step"): [T(f"mm_{mm.key}") for mm in products],
        T("col_product"): [f"{list(mm.left)} · {list(mm.right)} → {list(mm.out)}" for mm in products],
        T("col_flops"): [f"{mm.flops:,}" for mm in products],
        T("col_share"): [_percent(mm.flops, total, T, decimals=1) for mm in products],
    }
    shape = (d, h, kv_, dh_)
    cfg = cost.attention_shape(*shape)
    share, relation = _n2_against_projections(n, shape, T)
    words = [shape_note(*model, cfg, lang=lang)] if model else []
    words.append(T("flops_summary", n=f"{n:,}", total=_count(total), share=share, relation=relation))
    cross = cost.crossover_n(*shape)
    standard = cfg.kv_heads == h and cfg.head_dim * h == d  # the lecture's shape: the crossover is N = 2D
    keys = ("flops_at_2d", "flops_at_4d") if standard else ("flops_at_cross", "flops_at_twice")
    # the crossover and twice it, for comparison: not the N asked about, whose sentence is already said
    for key, m in zip(keys, (round(cross), 2 * round(cross)), strict=True):
        if m != n:
            share_m, relation_m = _n2_against_projections(m, shape, T)
            weights = f"{params.attention_weights(cfg):,}"
            words.append(T(key, n=f"{m:,}", share=share_m, relation=relation_m, weights=weights, cross=_about(cross)))
    summary = sentences(words, lang)
    flops = cost.flops_by_n(FLOPS_NS, *shape)
    fig = vcost.flops_bars(
        FLOPS_NS,
        {T(f"mm_{k}"): v for k, v in flops.items()},
        cross,
        title=T("flops_title"),
        crossover_label=T("crossover_label") if standard else T("crossover_at", n=_about(cross)),
        x_title=T("axis_n"),
        y_title=T("axis_share"),
    )
    table, note = _sharing(n, cfg, T, lang)
    panel = Panel("cost_flops", fig, np.column_stack([FLOPS_NS, *flops.values()]))
    return Matmuls(rows, summary, panel, table, note)


def _about(x: float) -> str:
    """A crossover N: "768", or "≈ 768.5" between two whole numbers."""
    return f"= {x:,.0f}" if float(x).is_integer() else f"≈ {x:,.1f}"


def _sharing(n: int, cfg: TransformerConfig, T, lang: str) -> tuple[dict[str, list[str]], str]:
    """This shape beside multi-head (H_kv = H) and multi-query (H_kv = 1) attention of the same D, H and D_H: the
    K/V weights, all four matrices' weights, the K/V projection's FLOPs at N tokens and one layer's KV cache per
    token; and the sentence saying what changed."""
    h, kv, dh = cfg.num_heads, cfg.kv_heads, cfg.head_dim
    shapes = (cfg, cfg.replace(num_kv_heads=None), cfg.replace(num_kv_heads=1))

    def numbers(c: TransformerConfig) -> tuple[int, int, int, int]:  # per token: 2 FLOPs a weight
        kv_w = params.kv_weights(c)
        return kv_w, params.attention_weights(c), 2 * n * kv_w, memory.kv_cache_bytes(c, 1, KV_ITEMSIZE)

    mine, mha, mqa = (numbers(c) for c in shapes)
    table = {
        T("col_quantity"): [T("row_kv_weights"), T("row_weights"), T("row_kv_flops", n=f"{n:,}"), T("row_cache")],
        **{
            T(col, h=h, kv=kv): [f"{v:,}" for v in vals[:3]] + [memory.format_bytes(vals[3])]
            for col, vals in (("col_this", mine), ("col_mha", mha), ("col_mqa", mqa))
        },
    }
    kind = "mha" if kv == h else "mqa" if kv == 1 else "gqa"
    words = [T(f"share_{kind}", h=h, kv=kv, group=h // kv)]
    if kv != h:
        words.append(
            T(
                "share_saves",
                kv_w=f"{mine[0]:,}",
                kv_w_mha=f"{mha[0]:,}",
                times=f"{h // kv}",
                flops=_count(mine[2]),
                flops_mha=_count(mha[2]),
                cache=memory.format_bytes(mine[3]),
                cache_mha=memory.format_bytes(mha[3]),
                bits=8 * KV_ITEMSIZE,
            )
        )
    if dh * h != cfg.dim:
        four = 4 * cfg.dim**2
        words.append(
            T(
                "share_width",
                dh=dh,
                d_over_h=f"{cfg.dim / h:g}",
                d=cfg.dim,
                q=f"{h * dh:,}",
                weights=f"{mine[1]:,}",
                ratio=f"{mine[1] / four:.3f}",
            )
        )
    words.append(T("share_same_n2"))
    return table, f"#### {T('sharing_header')}\n\n{sentences(words, lang)}"


def _n2_against_projections(n: int, shape: tuple, T) -> tuple[str, str]:
    """(the N² products' share of the FLOPs, and whether they take fewer, as many or more than the projections)
    at N tokens, read from the same four products as the table (``shape``: D, H, H_kv, D_H)."""
    products = cost.four_matmuls(n, *shape)
    quad = sum(mm.flops for mm in products if mm.quadratic)
    proj = sum(mm.flops for mm in products if not mm.quadratic)
    relation = "rel_less" if quad < proj else "rel_equal" if quad == proj else "rel_more"
    return _percent(quad, quad + proj, T), T(relation)


def _percent(part: int, whole: int, T, *, decimals: int = 0) -> str:
    """``part`` as a share of ``whole`` to ``decimals`` places, never rounded to 0% or 100% when it is neither:
    "under 1%" (2,048 of 2,099,200 FLOPs is 0.098%), "over 99%"."""
    share, step = 100 * part / whole, 10.0**-decimals
    if 0 < share < step:
        return T("share_under", share=f"{step:.{decimals}f}%")
    if 100 - step < share < 100:
        return T("share_over", share=f"{100 - step:.{decimals}f}%")
    return f"{share:.{decimals}f}%"


SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _count(value: int) -> str:
    """A FLOP count as students read it: with separators up to a million, then "2.66 × 10¹⁹" (no "26.6 E")."""
    if value < 1_000_000:
        return f"{value:,}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


@dataclass(frozen=True)
class Measured:
    """What one press of "measure" found: the runs, and why some were not run."""

    runs: list[cost.Measurement]
    refused: memory.MemoryBudgetError | None = None  # the memory guard's refusal at the first N naive could not hold
    over_budget: int | None = None  # the first N skipped because it would end after the time budget


def measure_all(
    methods: Sequence[str],
    ns: Sequence[int],
    *,
    heads: int,
    head_dim: int,
    repeats: int,
    block: int,
    dtype: str,
    device: torch.device,
    measure: Callable[..., cost.Measurement] = cost.measure,
    progress: Callable[[int, int, str, int], None] = lambda i, total, method, n: None,
) -> Measured:
    """Every (method, N): naive stops at the first N the memory guard refuses, and no run starts that is
    predicted to end after the time budget (the server is shared). ``measure`` may be a cached ``cost.measure``."""
    runs, refused, over_budget = [], None, None
    deadline = time.monotonic() + cost.MEASURE_BUDGET_S
    last: dict[str, cost.Measurement] = {}
    jobs = [(m, n) for n in ns for m in methods]
    for i, (method, n) in enumerate(jobs):
        progress(i, len(jobs), method, n)
        if method == "naive":
            if refused:
                continue
            try:
                memory.check_naive_fits(n, heads, head_dim, itemsize=ITEMSIZE[dtype], device=device)
            except memory.MemoryBudgetError as exc:
                refused = exc
                continue
        if time.monotonic() + cost.predicted_seconds(last.get(method), n) > deadline:
            over_budget = min(n, over_budget or n)
            continue
        last[method] = measure(
            method,
            n,
            heads=heads,
            head_dim=head_dim,
            repeats=repeats,
            block_size=block,
            device=str(device),
            dtype=dtype,
        )
        runs.append(last[method])
    return Measured(runs, refused, over_budget)


def sweep(
    report: Callable[[float, str], None], *, methods: Sequence[str], max_n: int, lang: str = "en", **kwargs
) -> Measured:
    """The page's button as one job for the pool: :func:`measure_all` at N = 128 … ``max_n`` (powers of two),
    each run reported in words (``report(fraction, text)``, in ``lang``: the result itself is numbers, worded by
    :func:`curves` and :func:`found_notes` in the language shown); ``kwargs`` go to :func:`measure_all`."""
    T = texts(PAGE, lang)
    ns = [2**p for p in range(7, int(np.log2(max_n)) + 1)]

    def say(i: int, total: int, method: str, n: int) -> None:
        report(i / total, T("progress", method=method, n=f"{n:,}", i=i + 1, total=total))

    return measure_all(methods, ns, progress=say, **kwargs)


def backends(device: torch.device, dtype: str, *, lang: str = "en") -> tuple[list[str], dict[str, list]]:
    """The methods to measure (on CUDA each usable SDPA backend too) and the backends' table."""
    T = texts(PAGE, lang)
    usable = cost.sdpa_backends(device, dtype)
    extra = [f"sdpa:{b}" for b, ok in usable.items() if ok] if device.type == "cuda" else []
    return [*cost.METHODS, *extra], {
        T("col_backend"): list(usable),
        T("col_usable", dtype=dtype): list(usable.values()),
    }


def found_notes(found: Measured | None, *, lang: str = "en") -> list[str]:
    """Why some runs of a press were not made: the memory guard's refusal, the time budget."""
    T, notes = texts(PAGE, lang), []
    if found and found.refused:
        notes.append(T("refused", message=found.refused.message(lang)))
    if found and found.over_budget:
        notes.append(T("over_budget", n=f"{found.over_budget:,}", seconds=cost.MEASURE_BUDGET_S))
    return notes


@dataclass(frozen=True)
class Curves:
    memory: Panel
    lecture_note: str
    time: Panel | None  # only once something was measured
    ratio_note: str | None  # naive vs flash memory and flash vs sdpa time at the largest naive N
    results: dict[str, list] | None  # the measured runs as a table, by translated column


def curves(
    heads: int,
    head_dim: int,
    block: int,
    dtype: str,
    device: torch.device,
    runs: Sequence[cost.Measurement] = (),
    *,
    lang: str = "en",
) -> Curves:
    """Analytic peak memory against N (with the lecture's point and what was measured), and measured time."""
    T = texts(PAGE, lang)
    itemsize = ITEMSIZE[dtype]
    methods = list(dict.fromkeys(r.method for r in runs))
    by_method = {m: [r for r in runs if r.method == m] for m in methods}
    lines = cost.memory_lines(CURVE_NS, heads, head_dim, block_size=block, itemsize=itemsize)
    lecture = cost.memory_lines([cost.LECTURE_N], cost.LECTURE_H, head_dim, block_size=block, itemsize=itemsize)
    lecture = {m: float(v[0]) for m, v in lecture.items()}
    total_mem = memory.total_bytes(device)
    fig = vcost.memory_curves(
        {m: (CURVE_NS, v) for m, v in lines.items()},
        {m: (np.array([r.n for r in rs]), np.array([r.peak_bytes for r in rs])) for m, rs in by_method.items()},
        device_bytes=total_mem,
        device_label=T("device_gpu" if device.type == "cuda" else "device_ram", size=memory.format_bytes(total_mem)),
        extrapolated={
            T("lecture_point", method=m, size=memory.format_bytes(lecture[m])): (cost.LECTURE_N, lecture[m])
            for m in ("naive", "flash")
        },
        title=T("memory_title"),
        analytic_label=T("analytic"),
        measured_label=T("measured"),
        x_title=T("axis_n"),
        y_title=T("axis_bytes"),
    )
    mem = Panel("cost_memory", fig, np.column_stack([CURVE_NS, *lines.values()]))  # N, naive, flash, sdpa
    note = T(
        "lecture_note",
        head_dim=head_dim,
        naive=memory.format_bytes(lecture["naive"]),
        flash=memory.format_bytes(lecture["flash"]),
    )
    if not runs:
        return Curves(mem, note, None, None, None)
    series = {m: (np.array([r.n for r in rs]), np.array([r.seconds for r in rs])) for m, rs in by_method.items()}
    fig = vcost.time_curves(series, title=T("time_title"), x_title=T("axis_n"), y_title=T("axis_seconds"))
    top = max((r.n for r in by_method.get("naive", [])), default=None)
    mem_x = cost.ratio(runs, top, "naive", "flash", "peak_bytes") if top else None
    time_x = cost.ratio(runs, top, "flash", "sdpa") if top else None
    ratio = T("ratio_note", n=f"{top:,}", mem=f"{mem_x:.1f}", time=f"{time_x:.1f}") if mem_x and time_x else None
    results = {
        T("col_n"): [r.n for r in runs],
        T("col_method"): [r.method for r in runs],
        T("col_ms"): [round(1000 * r.seconds, 2) for r in runs],
        T("col_peak"): [memory.format_bytes(r.peak_bytes) for r in runs],
    }
    return Curves(mem, note, Panel("cost_time", fig, cost.results_matrix(runs, methods)), ratio, results)


def guard(n: int, h: int, head_dim: int, dtype: str, device: torch.device, *, lang: str = "en") -> tuple[bool, str]:
    """(fits, the verdict in words) of the memory guard for naive attention at N tokens and H heads."""
    T = texts(PAGE, lang)
    try:
        need = memory.check_naive_fits(n, h, head_dim, itemsize=ITEMSIZE[dtype], device=device)
    except memory.MemoryBudgetError as exc:  # a question, not a run: its own verdict, not the run's refusal
        p = exc.params
        words = dict(need=p["need"], free=p["free"], fraction=f"{p['fraction']:.0%}", limit=p["limit"])
        return False, T("guard_no", n=f"{n:,}", h=h, **words)
    free = memory.format_bytes(memory.available_bytes(device))
    return True, T("guard_ok", n=f"{n:,}", h=h, need=memory.format_bytes(need), free=free)


@dataclass(frozen=True)
class Tiles:
    grid: Panel  # which tiles were computed, skipped, partly masked
    running_max: Panel
    running_sum: Panel
    max_diff: float  # tiled output against the materialised softmax
    note: str  # that difference in words: "1.8e−07" with a true minus, an exact 0 as "0"


def tiles(n: int, b: int, *, causal: bool = True, seed: int = 0, lang: str = "en") -> Tiles:
    """The tiled kernel opened tile by tile (N tokens, tiles of ``b``): the tile grid and each row's running max m
    and sum ℓ."""
    T = texts(PAGE, lang)
    tr = flash_steps.trace_example(n=n, d=4, block_size=b, causal=causal, seed=seed)
    fig = vcost.tile_grid(
        tr.status,
        [T("status_skipped"), T("status_partial"), T("status_full")],
        block_q=tr.block_q,
        block_k=tr.block_k,
        title=T("grid_title", computed=f"{tr.computed_tiles:,}", total=f"{tr.status.size:,}"),
        x_title=T("axis_key_tile"),
        y_title=T("axis_query_tile"),
    )
    cols = [T("after_tile", j=j) for j in range(tr.m.shape[1])]
    rows = [T("row", i=i) for i in range(tr.m.shape[0])]
    ax = {"x_title": T("axis_steps"), "y_title": axes(lang)["y_title"]}
    m = vcost.running_stat_map(tr.m, rows, cols, title=T("m_title"), colorscale=style.DIVERGING, zmid=0.0, **ax)
    l_fig = vcost.running_stat_map(tr.l, rows, cols, title=T("l_title"), **ax)
    return Tiles(
        Panel("cost_tiles", fig, tr.status),
        Panel("cost_running_max", m, tr.m),
        Panel("cost_running_sum", l_fig, tr.l),
        tr.max_abs_diff,
        T("max_diff", diff=rounding(tr.max_abs_diff)),
    )


# The sections with a fixed set of inputs (widget keys <prefix>_<name>): the four matmuls' FLOPs, the tiled kernel.
MATMULS = Section(
    PAGE,
    "cost",
    (
        Number("n", 1, 10_000_000, 1024),
        Number("d", 1, 65_536, 512),
        Number("h", 1, 1024, 8),
        Number("kv", 0, 1024, 0, help="kv_help"),  # 0: as many as H (multi-head)
        Number("dh", 0, 65_536, 0, help="dh_help"),  # 0: D / H
    ),
    compute=matmuls,
)
TILES = Section(
    PAGE,
    "cost_tile",
    (
        Number("n", 1, flash_steps.MAX_TRACE_N, 12, label="tile_n"),
        Number("b", 1, flash_steps.MAX_TRACE_N, 4, label="tile_block"),
        Switch("causal", True, label="tile_causal", widget="checkbox"),
        Number("seed", 0, 10_000, 0, label="tile_seed"),
    ),
    compute=tiles,
)
