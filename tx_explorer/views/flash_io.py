"""FlashAttention's IO argument on the cost page (lecture §4.4; Dao et al. 2022, Theorem 2): bytes moved between
slow and fast memory by naive and tiled attention, over N and the tile size, beside measured peak memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from tx_explorer.analysis import cost, flash_io
from tx_explorer.analysis.memory import format_bytes
from tx_explorer.errors import InputError
from tx_explorer.views import Panel, listed, sentences, texts
from tx_explorer.viz import cost as vcost
from tx_explorer.viz import positions as vp

PAGE = "flash_io"
NS = [2**p for p in range(7, 17)]  # 128 … 65 536
TILES = [16, 32, 64, 128, 256, 512]
MEASURE_NS = (128, 256, 512, 1024)  # live peaks: one head, small enough for every visit
LATEX = (  # the two counts; each is named in the page's language (latex)
    r"4Nd + 4N^2 = \Theta(Nd + N^2)",
    r"2Nd + \left\lceil N/B_c\right\rceil\,(3Nd + 4N) = \Theta\!\left(\tfrac{N^2 d^2}{M}\right),\quad M = 4B_c d",
)


def latex(lang: str = "en") -> tuple[str, str]:
    """:data:`LATEX`, each formula after its algorithm's name in ``lang``."""
    T = texts(PAGE, lang)
    return tuple(rf"\text{{{T(name)}}}\ " + f for name, f in zip(("formula_naive", "formula_tiled"), LATEX))


@dataclass(frozen=True)
class IO:
    by_n: Panel  # bytes moved against N: naive and one tile size per curve
    by_tile: Panel  # bytes moved against the tile size at one N
    rows: list[dict[str, str]]  # per N: moved (naive, tiled), measured peak (naive, tiled), time
    note: str


def io(d: int, tile: int, n: int, *, measure: Callable[..., cost.Measurement] | None = cost.measure, lang="en") -> IO:
    """The counted traffic (float32) for head size ``d``, beside live peaks and times of our two kernels
    (``measure=None``: counts only, in a tenth of a second; the page measures in a job, :func:`measure_peaks`)."""
    T = texts(PAGE, lang)
    if tile not in TILES:
        raise InputError("positive_integer", name="tile", value=tile)
    curves = flash_io.io_by_n(NS, d, TILES)
    by_n = vp.marked_lines(
        NS,
        {T("naive") if k == "naive" else T("tiled", b=k.split()[1]): v for k, v in curves.items()},
        title=T("by_n_title", d=d),
        x_title="N",
        y_title=T("axis_bytes"),
        log_x=True,
        log_y=True,
    )
    vcost.byte_ticks(by_n, list(curves.values()))
    vcost.n_ticks(by_n, NS, most=5)
    vcost.si_hover(by_n, "B", "N")
    moved = np.array([flash_io.tiled_io(n, d, b) * 4 for b in TILES], dtype=np.float64)
    naive = [flash_io.naive_io(n, d) * 4] * len(TILES)
    by_tile = vp.marked_lines(
        TILES,
        {T("tiled_at", n=f"{n:,}"): moved, T("naive"): naive},
        title=T("by_tile_title", n=f"{n:,}", d=d),
        x_title=T("axis_tile"),
        y_title=T("axis_bytes"),
        log_x=True,
        log_y=True,
    )
    vcost.byte_ticks(by_tile, [*moved, *naive])
    vcost.n_ticks(by_tile, TILES)
    vcost.si_hover(by_tile, "B", T("axis_tile"))
    rows = measured_rows(measure_peaks(d, tile, measure=measure), lang=lang) if measure is not None else []
    ratio = flash_io.naive_io(n, d) / flash_io.tiled_io(n, d, tile)
    note = T("numbers", n=f"{n:,}", d=d, b=tile, m=f"{flash_io.sram_numbers(tile, d):,}", ratio=f"{ratio:.1f}")
    return IO(
        Panel("io_by_n", by_n, {k: v for k, v in curves.items()}),
        Panel("io_by_tile", by_tile, moved),
        rows,
        note,
    )


@dataclass(frozen=True)
class Peaks:
    """What one press of "measure" found, in numbers only: the page words it in the language shown when drawn,
    so a switch of language relabels the table instead of losing it."""

    d: int
    tile: int
    naive: list[cost.Measurement]  # one per N of MEASURE_NS
    tiled: list[cost.Measurement]
    threads: int  # PyTorch's CPU threads where it was measured: the times depend on them


def measure_peaks(
    d: int,
    tile: int,
    progress: Callable[[float, str], None] | None = None,
    *,
    measure: Callable[..., cost.Measurement] = cost.measure,
    lang: str = "en",
) -> Peaks:
    """Both kernels' peaks and times at every N of :data:`MEASURE_NS`, on the CPU (about 10 s on one core: the page
    runs it as a job, ``progress`` its report in ``lang``, after the counts are drawn)."""
    T = texts(PAGE, lang)
    naive, tiled = [], []
    for i, m in enumerate(MEASURE_NS):
        if progress is not None:
            progress(i / len(MEASURE_NS), T("measuring", n=f"{m:,}"))
        naive.append(measure("naive", m, heads=1, head_dim=d, repeats=3))
        tiled.append(measure("flash", m, heads=1, head_dim=d, repeats=3, block_size=tile))
    return Peaks(d, tile, naive, tiled, torch.get_num_threads())


def measured_rows(peaks: Peaks, *, lang: str = "en") -> list[dict[str, str]]:
    """Per N: bytes counted for both kernels beside their measured peaks and times."""
    T = texts(PAGE, lang)
    return [
        {
            "N": f"{a.n:,}",
            T("col_moved_naive"): format_bytes(flash_io.naive_io(a.n, peaks.d) * 4),
            T("col_moved_tiled"): format_bytes(flash_io.tiled_io(a.n, peaks.d, peaks.tile) * 4),
            T("col_peak_naive"): format_bytes(a.peak_bytes),
            T("col_peak_tiled"): format_bytes(b.peak_bytes),
            T("col_time"): f"{1000 * a.seconds:.2f} / {1000 * b.seconds:.2f}",
        }
        for a, b in zip(peaks.naive, peaks.tiled, strict=True)
    ]


def measured_note(peaks: Peaks, *, lang: str = "en") -> str:
    """What the table shows, read from it: where it was measured, how each peak grew over the measured lengths
    beside N² and N, and at how many lengths the tiled kernel was the faster one."""
    T = texts(PAGE, lang)
    first, last = peaks.naive[0].n, peaks.naive[-1].n
    faster = [b.n for a, b in zip(peaks.naive, peaks.tiled, strict=True) if b.seconds < a.seconds]
    words = [
        T(
            "measured_growth",
            threads=peaks.threads,
            lo=f"{first:,}",
            hi=f"{last:,}",
            times=f"{last / first:g}",
            square=f"{(last / first) ** 2:g}",
            naive=f"{peaks.naive[-1].peak_bytes / peaks.naive[0].peak_bytes:.1f}",
            tiled=f"{peaks.tiled[-1].peak_bytes / peaks.tiled[0].peak_bytes:.1f}",
        ),
        T(
            "measured_faster_some" if faster else "measured_faster_none",
            k=len(faster),
            total=len(peaks.tiled),
            where=listed((f"N = {n:,}" for n in faster), lang),
        ),
    ]
    return sentences(words, lang)
