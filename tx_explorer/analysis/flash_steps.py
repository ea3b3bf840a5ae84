"""Tiled attention watched tile by tile: which tiles run, and each row's running max and sum as they do.

Built on :func:`tx_explorer.attention.flash_attention_forward`'s tile observer, so what is shown is what the
kernel computes, not a re-enactment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tx_explorer.analysis.seeding import generator
from tx_explorer.attention import flash_attention_forward, scaled_dot_product_attention
from tx_explorer.errors import InputError, positive_int

SKIPPED, PARTIAL, FULL = 0, 1, 2  # tile status codes: never computed / computed with hidden entries / all visible
MAX_TRACE_N = 64  # the view draws every row: beyond this it stops being readable


@dataclass(frozen=True)
class FlashTrace:
    """One tiled forward pass, recorded.

    status:  ``[Tr, Tc]`` SKIPPED / PARTIAL / FULL per (query tile, key tile).
    m:       ``[Nq, Tc]`` each row's running max after its tile consumed key tile j; −∞ while nothing is
             visible yet, NaN where the tile was skipped.
    l:       ``[Nq, Tc]`` the running sum ``Σ exp(s − m)`` at the same moments (relative to that m).
    out:     ``[Nq, Dv]`` the kernel's output; ``reference`` the naive path's; ``max_abs_diff`` between them.
    lse:     ``[Nq]`` final ``m + log ℓ`` per row.
    """

    block_q: int
    block_k: int
    status: np.ndarray
    m: np.ndarray
    l: np.ndarray
    out: np.ndarray
    reference: np.ndarray
    lse: np.ndarray
    max_abs_diff: float

    @property
    def computed_tiles(self) -> int:
        return int((self.status != SKIPPED).sum())


def visible_mask(nq: int, nk: int, mask: Tensor | None, causal: bool) -> Tensor:
    """The effective ``[Nq, Nk]`` mask (for small examples only: the kernel itself never builds it)."""
    visible = torch.ones(nq, nk, dtype=torch.bool) if mask is None else mask.expand(nq, nk).clone()
    if causal:
        visible &= torch.ones(nq, nk, dtype=torch.bool).tril()
    return visible


def trace_flash(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False, block_size: int = 4
) -> FlashTrace:
    """Run the tiled kernel on one head (``q [Nq, D]``, ``k [Nk, D]``, ``v [Nk, Dv]``) and record every tile."""
    if q.dim() != 2 or k.dim() != 2 or v.dim() != 2:
        raise ValueError("the tile view traces one head: q, k, v must be [N, D] matrices")
    nq, nk = q.shape[0], k.shape[0]
    if max(nq, nk) > MAX_TRACE_N:
        raise InputError("tile_view_size", limit=MAX_TRACE_N, count=max(nq, nk))
    b = positive_int("block_size", block_size)
    tr, tc = math.ceil(nq / b), math.ceil(nk / b)
    m_hist = np.full((nq, tc), np.nan)
    l_hist = np.full((nq, tc), np.nan)
    floor = torch.finfo(q.dtype).min

    def record(i: int, j: int, m: Tensor, l: Tensor) -> None:
        rows = slice(i * b, i * b + m.shape[-1])
        m_hist[rows, j] = torch.where(m[0] == floor, float("-inf"), m[0]).double().numpy()
        l_hist[rows, j] = l[0].double().numpy()

    out, lse = flash_attention_forward(q, k, v, mask=mask, causal=causal, block_size=b, on_tile=record)
    visible = visible_mask(nq, nk, mask, causal)
    status = np.full((tr, tc), SKIPPED)
    for i in range(tr):
        for j in range(tc):
            if not np.isnan(m_hist[i * b, j]):
                tile = visible[i * b : (i + 1) * b, j * b : (j + 1) * b]
                status[i, j] = FULL if bool(tile.all()) else PARTIAL
    reference, _ = scaled_dot_product_attention(q, k, v, mask=visible)
    return FlashTrace(
        block_q=b,
        block_k=b,
        status=status,
        m=m_hist,
        l=l_hist,
        out=out.numpy(),
        reference=reference.numpy(),
        lse=lse.numpy(),
        max_abs_diff=float((out - reference).abs().max()),
    )


def trace_example(n: int = 12, d: int = 4, block_size: int = 4, causal: bool = True, seed: int = 0) -> FlashTrace:
    """:func:`trace_flash` on standard normal ``Q, K, V [n, d]`` drawn from ``seed``."""
    for name, value in (("N", n), ("D", d)):
        positive_int(name, value)
    g = generator(seed)
    q, k, v = (torch.randn(int(n), int(d), generator=g) for _ in range(3))
    return trace_flash(q, k, v, causal=causal, block_size=block_size)
