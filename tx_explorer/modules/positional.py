"""Positional encodings (§3.3): x̃_i = x_i + p_i, so identical tokens at different positions differ."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(n: int, dim: int, base: float = 10000.0) -> Tensor:
    """Vaswani et al. 2017 §3.5: P[pos, 2i] = sin(pos/base^{2i/D}), P[pos, 2i+1] = cos(…). Shape ``[n, dim]``."""
    if n < 1 or dim < 2 or dim % 2:
        raise ValueError(f"sinusoidal encodings need n ≥ 1 and an even dim ≥ 2, got n={n}, dim={dim}")
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(base) / dim))
    table = torch.zeros(n, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


class SinusoidalPositions(nn.Module):
    """Fixed encodings: no parameters, defined for any length up to ``max_len``."""

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_len, dim), persistent=False)

    def forward(self, n: int) -> Tensor:
        """The first ``n`` encodings, ``[n, dim]``."""
        return self.table[:n]


class LearnedPositions(nn.Module):
    """One trained vector per position (GPT-2, BERT, ViT)."""

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, dim) * 0.02)

    def forward(self, n: int) -> Tensor:
        return self.weight[:n]
