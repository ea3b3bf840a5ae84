"""Cost of attention page (lecture §4.3–4.5, §9.6): the FLOP table, memory and time curves, the guard, tiles."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tx_explorer.analysis import cost, flash_steps, memory
from tx_explorer.views import Panel, axes, sentences, texts
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


def matmuls(n: int, d: int, h: int, *, lang: str = "en") -> Matmuls:
    """The four products for N tokens, width D, H heads: table, one-line summary and FLOPs-by-N bars."""
    T = texts(PAGE, lang)
    products = cost.four_matmuls(n, d, h)
    total = sum(mm.flops for mm in products)
    rows = {
        T("col_step"): [T(f"mm_{mm.key}") for mm in products],
        T("col_product"): [f"{list(mm.left)} · {list(mm.right)} → {list(mm.out)}" for mm in products],
        T("col_flops"): [f"{mm.flops:,}" for mm in products],
        T("col_share"): [_percent(mm.flops, total, T, decimals=1) for mm in products],
    }
    share, relation = _n2_against_projections(n, d, h, T)
    words = [T("flops_summary", n=f"{n:,}", total=_count(total), share=share, relation=relation)]
    cross = int(cost.crossover_n(d))
    # the crossover and twice it, for comparison: not the N asked about, whose sentence is already said
    for key, m in (("flops_at_2d", cross), ("flops_at_4d", 2 * cross)):
        if m != n:
            share_m, relation_m = _n2_against_projections(m, d, h, T)
            words.append(T(key, n=f"{m:,}", share=share_m, relation=relation_m))
    summary = sentences(words, lang)
    flops = cost.flops_by_n(FLOPS_NS, d, h)
    fig = vcost.flops_bars(
        FLOPS_NS,
        {T(f"mm_{k}"): v for k, v in flops.items()},
        cost.crossover_n(d),
        title=T("flops_title"),
        crossover_label=T("crossover_label"),
        x_title=T("axis_n"),
        y_title=T("axis_share"),
    )
    return Matmuls(rows, summary, Panel("cost_flops", fig, np.column_stack([FLOPS_NS, *flops.values()])))


def _n2_against_projections(n: int, d: int, h: int, T) -> tuple[str, str]:
    """(the N² products' share of the FLOPs, and whether they take fewer, as many or more than the projections)
    at N tokens, read from the same four products as the table."""
    products = cost.four_matmuls(n, d, h)
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
    )


# The sections with a fixed set of inputs (widget keys <prefix>_<name>): the four matmuls' FLOPs, the tiled kernel.
MATMULS = Section(
    PAGE,
    "cost",
    (Number("n", 1, 10_000_000, 1024), Number("d", 1, 65_536, 512), Number("h", 1, 1024, 8)),
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
