"""FlashAttention's IO argument on the cost page (lecture §4.4; Dao et al. 2022, Theorem 2): bytes moved between
slow and fast memory by naive and tiled attention, over N and the tile size, beside measured peak memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tx_explorer.analysis import cost, flash_io
from tx_explorer.analysis.memory import format_bytes
from tx_explorer.errors import InputError
from tx_explorer.views import Panel, texts
from tx_explorer.viz import cost as vcost
from tx_explorer.viz import positions as vp

PAGE = "flash_io"
NS = [2**p for p in range(7, 17)]  # 128 … 65 536
TILES = [16, 32, 64, 128, 256, 512]
MEASURE_NS = (128, 256, 512, 1024)  # live peaks: one head, small enough for every visit
LATEX = (
    r"\text{naive: } 4Nd + 4N^2 = \Theta(Nd + N^2)",
    r"\text{tiled: } 2Nd + \left\lceil N/B_c\right\rceil\,(3Nd + 4N) = \Theta\!\left(\tfrac{N^2 d^2}{M}\right),"
    r"\quad M = 4B_c d",
)


@dataclass(frozen=True)
class IO:
    by_n: Panel  # bytes moved against N: naive and one tile size per curve
    by_tile: Panel  # bytes moved against the tile size at one N
    rows: list[dict[str, str]]  # per N: moved (naive, tiled), measured peak (naive, tiled), time
    note: str


def io(d: int, tile: int, n: int, *, measure: Callable[..., cost.Measurement] | None = cost.measure, lang="en") -> IO:
    """The counted traffic (float32) for head size ``d``, beside live peaks and times of our two kernels
    (``measure=None``: counts only, in a tenth of a second; the page measures in a job, :func:`measured_rows`)."""
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
    rows = measured_rows(d, tile, measure=measure, lang=lang) if measure is not None else []
    ratio = flash_io.naive_io(n, d) / flash_io.tiled_io(n, d, tile)
    note = T("numbers", n=f"{n:,}", d=d, b=tile, m=f"{flash_io.sram_numbers(tile, d):,}", ratio=f"{ratio:.1f}")
    return IO(
        Panel("io_by_n", by_n, {k: v for k, v in curves.items()}),
        Panel("io_by_tile", by_tile, moved),
        rows,
        note,
    )


def measured_rows(
    d: int,
    tile: int,
    progress: Callable[[float, str], None] | None = None,
    *,
    measure: Callable[..., cost.Measurement] = cost.measure,
    lang: str = "en",
) -> list[dict[str, str]]:
    """Per N of :data:`MEASURE_NS`: bytes counted for both kernels beside their measured peaks and times (about
    10 s on one CPU core: the page runs it as a job, ``progress`` its report, after the counts are drawn)."""
    T = texts(PAGE, lang)
    rows = []
    for i, m in enumerate(MEASURE_NS):
        if progress is not None:
            progress(i / len(MEASURE_NS), T("measuring", n=f"{m:,}"))
        naive = measure("naive", m, heads=1, head_dim=d, repeats=3)
        tiled = measure("flash", m, heads=1, head_dim=d, repeats=3, block_size=tile)
        rows.append(
            {
                "N": f"{m:,}",
                T("col_moved_naive"): format_bytes(flash_io.naive_io(m, d) * 4),
                T("col_moved_tiled"): format_bytes(flash_io.tiled_io(m, d, tile) * 4),
                T("col_peak_naive"): format_bytes(naive.peak_bytes),
                T("col_peak_tiled"): format_bytes(tiled.peak_bytes),
                T("col_time"): f"{1000 * naive.seconds:.2f} / {1000 * tiled.seconds:.2f}",
            }
        )
    return rows
