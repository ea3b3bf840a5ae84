"""FlashAttention's IO argument (Dao et al. 2022, §3.2 and Theorem 2; lecture §4.4): how many numbers move
between slow memory (HBM, or RAM) and fast memory (SRAM, or cache) for one head of attention.

Standard attention (their Algorithm 0) writes the N × N scores S and probabilities P out and reads them back:
Θ(Nd + N²) accesses. The tiled algorithm (their Algorithm 1) keeps key/value tiles of B_c rows in fast memory
of M numbers (B_c = ⌈M / 4d⌉) and streams the queries past each: Θ(N²d² / M) accesses, fewer whenever d² is
much smaller than M. Counts here are in numbers (multiply by bytes per number) and follow the algorithms
line by line, so the Θ bounds' constants are visible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tx_explorer.errors import InputError


def _check(n: int, d: int, tile: int = 1) -> None:
    for name, value in (("N", n), ("d", d), ("tile", tile)):
        if not isinstance(value, int) or value < 1:
            raise InputError("positive_integer", name=name, value=value)


def naive_io(n: int, d: int) -> int:
    """Algorithm 0: read Q, K (2Nd), write S (N²); read S, write P (2N²); read P and V (N² + Nd), write O (Nd)."""
    _check(n, d)
    return 4 * n * d + 4 * n * n


def tiled_io(n: int, d: int, tile: int) -> int:
    """Algorithm 1 with key/value tiles of ``tile`` rows: K and V are read once (2Nd); for each of the ⌈N / tile⌉
    key tiles every query row is read with its running output O and statistics ℓ, m, and O, ℓ, m are written
    back (3Nd + 4N)."""
    _check(n, d, tile)
    return 2 * n * d + math.ceil(n / tile) * (3 * n * d + 4 * n)


def sram_numbers(tile: int, d: int) -> int:
    """Fast memory the tiles need, M = 4·B_c·d (a block each of Q, K, V and O): B_c = M / 4d inverted."""
    _check(1, d, tile)
    return 4 * tile * d


def theorem_bound(n: int, d: int, tile: int) -> float:
    """The leading term N²d²/M of Theorem 2 with M = :func:`sram_numbers` (the constant 12 of Algorithm 1 aside)."""
    return n * n * d * d / sram_numbers(tile, d)


def io_by_n(ns: Sequence[int], d: int, tiles: Sequence[int], itemsize: int = 4) -> dict[str, np.ndarray]:
    """Bytes moved per head for every N: ``"naive"`` and one entry per tile size (keys ``"tile <B>"``)."""
    out = {"naive": np.array([naive_io(n, d) * itemsize for n in ns], dtype=np.float64)}
    for b in tiles:
        out[f"tile {b}"] = np.array([tiled_io(n, d, b) * itemsize for n in ns], dtype=np.float64)
    return out
