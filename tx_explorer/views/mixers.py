"""RNN, convolution and self-attention measured side by side on the cost page (lecture §4.5), and the share of a
Transformer block's time spent in matrix multiplications (§4.3)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from tx_explorer.analysis import cost, memory, mixers, spread
from tx_explorer.views import Panel, listed, rounding, sentences, signed, texts
from tx_explorer.viz import cost as vcost

PAGE = "mixers"
NS = [2**p for p in range(7, 14)]  # 128 … 8192 tokens
DIMS = (32, 64, 128)
HEADS = 4
CONV_LAYERS = 4  # the measured stack's depth (its time and memory); the reach panel counts what N needs
CHECK_NS = tuple(range(2, 18))  # lengths at which the gradient check finds the layers needed
PROFILE_N, PROFILE_DIMS = 256, (64, 256)  # the profiled block, at two widths: how the matmul share moves with D
COLORS = {"rnn": "#9467bd", "conv": "#ff7f0e", "attention": "#1f77b4"}
# The GRU and self-attention both reach the first token in 1 layer: attention, drawn last, is dashed with open
# markers so that the GRU's line and points show through it (one solid line hid the other).
DASHES = {"rnn": "solid", "conv": "dot", "attention": "dash"}
SYMBOLS = {"rnn": "circle", "conv": "square", "attention": "diamond-open"}


@dataclass(frozen=True)
class Found:
    """What one press of "measure" found."""

    max_n: int
    dim: int
    runs: list[mixers.MixerRun]
    shares: list[mixers.MatmulShare]  # the block profiled at each of PROFILE_DIMS
    device: str  # where the runs were timed
    threads: int  # PyTorch's CPU threads there: the times depend on them
    over_budget: int | None = None  # the first N skipped: it would end after the time budget
    refused: int | None = None  # the first N where attention's N × N weights would not fit in memory


def measure_all(
    max_n: int,
    *,
    dim: int = 64,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    measure: Callable[..., mixers.MixerRun] = mixers.measure,
    progress: Callable[[float], None] = lambda done: None,
) -> Found:
    """Every mixer at N = 128 … ``max_n`` within the page's time budget, then the block profile."""
    if max_n not in NS or dim not in DIMS:
        raise ValueError(f"N must be one of {NS} and D one of {DIMS}, got {max_n} and {dim}")
    ns = [n for n in NS if n <= max_n]
    deadline = time.monotonic() + cost.MEASURE_BUDGET_S
    runs, last, over, refused = [], {}, None, None
    for i, n in enumerate(ns):
        for kind in mixers.KINDS:
            if kind == "attention":
                try:
                    memory.check_naive_fits(n, HEADS, dim // HEADS, device=device)
                except memory.MemoryBudgetError:
                    refused = min(n, refused or n)
                    continue
            if time.monotonic() + mixers.predicted_seconds(last.get(kind), n) > deadline:
                over = min(n, over or n)
                continue
            last[kind] = measure(kind, n, dim=dim, heads=HEADS, conv_layers=CONV_LAYERS, repeats=repeats, device=device)
            runs.append(last[kind])
        progress((i + 1) / (len(ns) + 1))
    shares = [mixers.matmul_share(PROFILE_N, dim=d, heads=HEADS) for d in PROFILE_DIMS]
    return Found(max_n, dim, runs, shares, str(torch.device(device)), torch.get_num_threads(), over, refused)


def measure_job(report: Callable[[float, str], None], *, max_n: int, lang: str = "en", **kwargs) -> Found:
    """:func:`measure_all` as a job for the pool: ``report(fraction, text)`` gets its progress in words."""
    text = texts(PAGE, lang)("progress")
    return measure_all(max_n, progress=lambda done: report(done, text), **kwargs)


@functools.cache
def reach_check(ns: tuple[int, ...] = CHECK_NS) -> dict[str, list[int]]:
    """Layers each mixer needs before the last token depends on the first, found by gradients at each N."""
    return {kind: [mixers.layers_to_reach(kind, n) for n in ns] for kind in mixers.KINDS}


@dataclass(frozen=True)
class Comparison:
    grid: Panel  # time, peak memory, sequential steps, layers to reach the first token, against N
    table: list[dict[str, str]]  # the lecture's table with the numbers at the largest N measured beside it
    check: str  # the gradient check of the layers formula
    note: str  # the largest N's ratios and the profile once measured; before, that time and memory await Measure


def compare(found: Found | None, *, max_n: int, dim: int, lang: str = "en") -> Comparison:
    """The four curves (steps and layers analytic and gradient-checked; time and memory once measured for
    ``max_n`` and ``dim``: ``found`` for other settings is not shown)."""
    T = texts(PAGE, lang)
    found = found if found is not None and (found.max_n, found.dim) == (max_n, dim) else None
    checked = reach_check()
    runs = found.runs if found else []
    ns = np.array(NS)
    name = {k: T(f"kind_{k}") for k in mixers.KINDS}
    reach = {k: [1 if k != "conv" else mixers.conv_layers_to_reach(n) for n in NS] for k in mixers.KINDS}
    by_kind = {k: [r for r in runs if r.kind == k] for k in mixers.KINDS}
    steps_of = [[mixers.sequential_steps(k, n, conv_layers=CONV_LAYERS) for n in NS] for k in mixers.KINDS]
    panels = {
        T("panel_time"): {name[k]: ([r.n for r in rs], [r.seconds for r in rs]) for k, rs in by_kind.items()},
        T("panel_memory"): {name[k]: ([r.n for r in rs], [r.peak_bytes for r in rs]) for k, rs in by_kind.items()},
        T("panel_steps", layers=CONV_LAYERS): {name[k]: (ns, v) for k, v in zip(mixers.KINDS, steps_of)},
        T("panel_reach"): {name[k]: (ns, v) for k, v in reach.items()},
    }
    colors, dashes, symbols = ({name[k]: v for k, v in m.items()} for m in (COLORS, DASHES, SYMBOLS))
    units = {T("panel_time"): "s", T("panel_memory"): "B"}
    fig = vcost.mixer_grid(
        panels, colors=colors, units=units, title=T("grid_title"), x_title=T("axis_n"), dashes=dashes, symbols=symbols
    )
    data = {"analytic": np.column_stack([ns, *steps_of, *reach.values()])}  # N, steps ×3, layers ×3
    if runs:  # one row a run: mixer (index into KINDS), N, seconds, peak bytes
        data["measured"] = np.array([[mixers.KINDS.index(r.kind), r.n, r.seconds, r.peak_bytes] for r in runs])
    top = {k: rs[-1] for k, rs in by_kind.items() if rs}
    table = [
        {
            T("col_kind"): name[k],
            T("col_input"): T(f"input_{k}"),
            T("col_pro"): T(f"pro_{k}"),
            T("col_con"): T(f"con_{k}"),
            T("col_steps", n=f"{max(NS):,}"): f"{mixers.sequential_steps(k, max(NS), conv_layers=CONV_LAYERS):,}",
            T("col_reach", n=f"{max(NS):,}"): f"{reach[k][-1]:,}",
            T("col_measured"): T(
                "measured_at",
                n=f"{top[k].n:,}",
                ms=f"{1000 * top[k].seconds:.3g}",
                peak=memory.format_bytes(top[k].peak_bytes),
            )
            if k in top
            else "—",
        }
        for k in mixers.KINDS
    ]
    expect = [mixers.conv_layers_to_reach(n) for n in CHECK_NS]
    agree = checked["conv"] == expect and set(checked["rnn"]) == set(checked["attention"]) == {1}
    check = T(
        "check_ok" if agree else "check_bad",
        lo=CHECK_NS[0],
        hi=CHECK_NS[-1],
        n=CHECK_NS[-1],
        layers=checked["conv"][-1],
    )
    return Comparison(
        Panel("cost_mixers", fig, data), table, check, _note(found, top, lang) if found else T("measure_first")
    )


def _note(found: Found, top: dict[str, mixers.MixerRun], lang: str) -> str:
    T = texts(PAGE, lang)
    lines = [T("measured_where", device=found.device, threads=found.threads)]
    if "attention" in top and "rnn" in top and top["attention"].n == top["rnn"].n:
        a, r = top["attention"], top["rnn"]
        ms = {"rnn": f"{1000 * r.seconds:.3g}", "attention": f"{1000 * a.seconds:.3g}"}
        lines.append(T("ratio_note", n=f"{a.n:,}", **ms, mem=f"{a.peak_bytes / max(r.peak_bytes, 1):.3g}"))
    if found.over_budget:
        lines.append(T("over_budget", n=f"{found.over_budget:,}", seconds=cost.MEASURE_BUDGET_S))
    if found.refused:
        lines.append(T("refused", n=f"{found.refused:,}"))
    small, s = found.shares[0], found.shares[-1]
    ops = listed((f"{k.removeprefix('aten::')} {t / 1000:.2g} ms" for k, t in s.top[:5]), lang)
    profile = T("profile_note", n=PROFILE_N, dim=PROFILE_DIMS[-1], share=f"{100 * s.share:.0f}", ops=ops)
    # "matmuls take a larger share as D grows", read from the two profiles rather than asserted
    trend = T(
        "profile_grew" if s.share > small.share else "profile_not_grew",
        small=PROFILE_DIMS[0],
        large=PROFILE_DIMS[-1],
        lo=f"{100 * small.share:.0f}",
        hi=f"{100 * s.share:.0f}",
    )
    lines.append(sentences([profile, trend], lang))
    return "\n\n".join(lines)


@dataclass(frozen=True)
class Fused:
    chart: Panel  # time of three Linear(D, D) over one Linear(D, 3D), against N, one line per D
    note: str


def fused(timing: cost.FusedTiming, *, lang: str = "en") -> Fused:
    """§3.1 "the fused [Q K V] projection uses the hardware better", as measured: the ratio and where it peaks."""
    T = texts(PAGE, lang)
    ratio, low, high = mixers.fused_ratio_band(timing)  # (D, N): the numbers the verdict below is read from
    fig = vcost.ratio_bands(
        timing.ns,
        {T("fused_series", d=d): (ratio[i], low[i], high[i]) for i, d in enumerate(timing.ds)},
        title=T("fused_title"),
        x_title=T("fused_axis_n"),
        y_title=T("fused_axis_ratio"),
        same_label=T("fused_same"),
        cut_label=T("fused_cut_hover"),
    )
    words = [T("fused_same_numbers", diff=rounding(timing.max_diff)), _fused_range(timing, ratio, T)]
    slow_d, slow_n = np.unravel_index(timing.fused.argmax(), timing.fused.shape)
    words.append(T("fused_note", ms=f"{timing.fused.max() * 1e3:.2f}", n=timing.ns[slow_n], d=timing.ds[slow_d]))
    if cut := _fused_cut(timing, ratio, low, high, T):
        words.append(cut)
    note = sentences(words, lang)
    return Fused(
        Panel(
            "cost_fused_qkv",
            fig,
            {"fused_s": timing.fused, "separate_s": timing.separate, "ratio": ratio, "low": low, "high": high},
        ),
        note + "\n\n" + fused_verdict(timing, lang=lang),
    )


def _fused_cut(timing: cost.FusedTiming, ratio: np.ndarray, low: np.ndarray, high: np.ndarray, T) -> str:
    """The bars the chart cuts at its edge (:func:`vcost.ratio_span`), with their true ends and both sides' spread
    over their calls there: calls spread as widely as their median (half the interquartile range r ≥ the median m)
    make the band's upper end (m₃ + r₃) ÷ (m₁ − r₁) unbounded, or its lower end (m₃ − r₃) ÷ (m₁ + r₁) negative."""
    lo, hi = vcost.ratio_span(list(ratio))
    cells = mixers.fused_verdicts(timing)
    where = [
        T(
            "fused_cut_at",
            n=timing.ns[j],
            d=timing.ds[i],
            low=f"{low[i, j]:.3g}" if low[i, j] > 0 else signed(f"{low[i, j]:.3g}"),
            high=f"{high[i, j]:.3g}" if np.isfinite(high[i, j]) else "∞",
            **{
                f"{k}{side}": f"{getattr(getattr(cells[i][j], part), field) * 1e3:.3f}"
                for k, field in (("m", "median"), ("r", "half_iqr"))
                for side, part in (("1", "left"), ("3", "right"))
            },
        )
        for i, j in zip(*np.nonzero((high > hi) | (low < lo)), strict=True)  # NaN: no bar, never cut
    ]
    return T("fused_cut", where=T("fused_sep").join(where)) if where else ""


def _fused_range(timing: cost.FusedTiming, ratio: np.ndarray, T) -> str:
    """How much slower three products are than one, read only at the sizes outside the noise band: a point whose
    bar crosses 1 is not told apart from equal time, so it does not make an end of the range."""
    clear = np.array([[c.state != "noise" for c in row] for row in mixers.fused_verdicts(timing)])
    if not clear.any():
        return T("fused_range_none", lo=f"{ratio.min():.2f}", hi=f"{ratio.max():.2f}", same=T("fused_same"))
    (hi_d, hi_n), (lo_d, lo_n) = (
        np.unravel_index(np.where(clear, ratio, -np.inf).argmax(), ratio.shape),
        np.unravel_index(np.where(clear, ratio, np.inf).argmin(), ratio.shape),
    )
    if clear.sum() == 1:
        return T(
            "fused_range_one", total=ratio.size, ratio=f"{ratio[hi_d, hi_n]:.2f}", n=timing.ns[hi_n], d=timing.ds[hi_d]
        )
    return T(
        "fused_range",
        clear=int(clear.sum()),
        total=ratio.size,
        hi=f"{ratio[hi_d, hi_n]:.2f}",
        lo=f"{ratio[lo_d, lo_n]:.2f}",
        n_hi=timing.ns[hi_n],
        d_hi=timing.ds[hi_d],
        n_lo=timing.ns[lo_n],
        d_lo=timing.ds[lo_d],
    )


def fused_verdict(timing: cost.FusedTiming, *, lang: str = "en") -> str:
    """The lecture's "fused is faster" size by size, from every timed call: how many sizes it holds at, where fused
    was slower beyond the calls' spread, and how many are within noise."""
    T = texts(PAGE, lang)
    cells = [
        (d, n, c)
        for d, row in zip(timing.ds, mixers.fused_verdicts(timing), strict=True)
        for n, c in zip(timing.ns, row, strict=True)
    ]
    count = {state: sum(c.state == state for _, _, c in cells) for state in spread.STATES}
    calls = 1 if timing.fused_calls is None else timing.fused_calls.shape[-1]
    words = [
        T(
            "fused_verdict",
            total=len(cells),
            calls=calls,
            faster=count["holds"],
            slower=count["not_holds"],
            noise=count["noise"],
            same=T("fused_same"),
        )
    ]
    slower = [
        T("fused_where", n=n, d=d, gap=f"{-c.gap * 1e3:.3f}", spread=f"{c.spread * 1e3:.3f}")
        for d, n, c in cells
        if c.state == "not_holds"
    ]
    if slower:
        words.append(T("fused_slower", where=T("fused_sep").join(slower)))
    return sentences(words, lang)
