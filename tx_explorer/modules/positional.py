"""Positional encodings (§3.3): x̃_i = x_i + p_i, so identical tokens at different positions differ."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from tx_explorer.errors import InputError, positive_int


def sinusoidal_table(n: int, dim: int, base: float = 10000.0) -> Tensor:
    """Vaswani et al. 2017 §3.5: P[pos, 2i] = sin(pos/base^{2i/D}), P[pos, 2i+1] = cos(…). Shape ``[n, dim]``."""
    if n < 1 or dim < 2 or dim % 2:
        raise InputError("sinusoidal_size", n=n, dim=dim)
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(base) / dim))
    table = torch.zeros(n, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


class SinusoidalPositions(nn.Module):
    """Fixed encodings: no parameters, defined for any length up to ``max_len``.

    ``scale`` multiplies the table: its entries reach 1 (RMS 1/√2), while token embeddings initialised with
    std 0.02 start 35× smaller; Vaswani et al. multiply the embeddings by √D instead (§3.4)."""

    def __init__(self, max_len: int, dim: int, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale
        self.register_buffer("table", scale * sinusoidal_table(max_len, dim), persistent=False)

    def forward(self, n: int) -> Tensor:
        """The first ``n`` encodings, ``[n, dim]``; past ``max_len`` the formula is simply evaluated further."""
        if n > self.table.shape[0]:
            return self.scale * sinusoidal_table(n, self.table.shape[1]).to(self.table)
        return self.table[:n]


class LearnedPositions(nn.Module):
    """One trained vector per position (GPT-2, BERT, ViT)."""

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_len, dim))
        # An initialiser, not torch.randn (same numbers): counting on the meta device skips initialisers.
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, n: int) -> Tensor:
        return self.weight[:n]


# ----------------------------------------------------------------------------------------------------------
# Relative schemes act inside attention, not on the embeddings: rotary turns q and k, ALiBi biases the scores.
# Attention takes one of these as a part (``MultiHeadAttention(..., position=Rotary(...))``).


class RelativePositions(nn.Module):
    """The hooks an attention module calls: ``rotate`` on q and k, ``score_bias`` on the scores; here both are
    the identity, and a scheme overrides the one it needs."""

    def rotate(self, x: Tensor, pos: Tensor) -> Tensor:
        """``x [B, H, N, Dh]`` at absolute positions ``pos [N]`` → the same shape."""
        return x

    def rotate_qk(self, q: Tensor, k: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`rotate` of a layer's queries and keys at the same positions (a scheme may share work)."""
        return self.rotate(q, pos), self.rotate(k, pos)

    def score_bias(self, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """An additive bias ``[H, Nq, Nk]`` for queries at ``q_pos`` and keys at ``k_pos``, or None."""
        return None


class Rotary(RelativePositions):
    """RoFormer (Su et al. 2021), as Llama/Qwen2/Mistral write it: dimension i is paired with i + Dh/2 and the
    pair is turned by the angle pos·θ^(−2i/Dh). Then ⟨R(m)q, R(n)k⟩ depends on m − n only. Beyond the lecture,
    whose §3.3 adds p_i to the token (``x̃_i = x_i + p_i``): rotary touches only q and k, never the token."""

    def __init__(self, head_dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions: head_dim must be even, got {head_dim}")
        self.theta = theta
        self.head_dim = head_dim

    def inv_freq(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """θ^(−2i/Dh) for i < Dh/2, ``[Dh/2]``."""
        return (self.theta ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)).to(dtype)

    def angles(self, pos: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """``[N, Dh/2]``: the angle of every pair at every position. Never in half precision: bf16 holds every
        integer only up to 256, so the positions themselves would round."""
        dtype = torch.promote_types(dtype, torch.float32)
        return pos.to(dtype)[:, None] * self.inv_freq(dtype).to(pos.device)[None, :]

    def cos_sin(self, pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos and sin of every pair's angle at ``pos``, ``[N, Dh]`` each (the same for i and i + Dh/2)."""
        angle = self.angles(pos, dtype).repeat(1, 2)  # (N, Dh)
        return angle.cos().to(dtype), angle.sin().to(dtype)

    @staticmethod
    def turn(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x1, x2 = x.chunk(2, dim=-1)  # (B, H, N, Dh/2) each
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin  # (x1, x2) → (x1·cos − x2·sin, x2·cos + x1·sin)

    def rotate(self, x: Tensor, pos: Tensor) -> Tensor:
        return self.turn(x, *self.cos_sin(pos, x.dtype))

    def rotate_qk(self, q: Tensor, k: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
        cos, sin = self.cos_sin(pos, q.dtype)  # once for both: a decoding step would make them 2 × layers times
        return self.turn(q, cos, sin), self.turn(k, cos.to(k.dtype), sin.to(k.dtype))


class YaRNRotary(Rotary):
    """YaRN (Peng et al. 2023; gpt-oss, long-context Qwen and Llama): rotary positions stretched to a context
    ``factor`` times the one they were trained at (``original_len``). Each pair's frequency is a blend of its own
    θ^(−2i/Dh) (kept for the fast pairs, which turn many times within the original context) and that frequency ÷
    ``factor`` (for the slow pairs, which would otherwise see angles never seen in training); the pairs between
    turning ``beta_fast`` and ``beta_slow`` times in the original context are ramped linearly from one to the other.
    cos and sin are scaled by 0.1·ln(factor) + 1, so every score grows by that factor squared."""

    def __init__(
        self,
        head_dim: int,
        theta: float,
        *,
        factor: float,
        original_len: int,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        truncate: bool = True,
    ) -> None:
        super().__init__(head_dim, theta)
        self.factor, self.original_len, self.truncate = factor, original_len, truncate
        self.beta_fast, self.beta_slow = beta_fast, beta_slow
        self.magnitude = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0  # on cos and sin

    def _pair_turning(self, turns: float) -> float:
        """The (fractional) pair index i whose frequency turns ``turns`` times within the original context."""
        return self.head_dim * math.log(self.original_len / (turns * 2 * math.pi)) / (2 * math.log(self.theta))

    def inv_freq(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """The blended frequencies ``[Dh/2]`` (see the class docstring)."""
        low, high = self._pair_turning(self.beta_fast), self._pair_turning(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, self.head_dim - 1)
        own = super().inv_freq(torch.float64)  # (Dh/2,)
        i = torch.arange(self.head_dim // 2, dtype=torch.float64)
        stretched = ((i - low) / max(high - low, 1e-3)).clamp(0, 1)  # 0: keep the pair's own, 1: ÷ factor
        return (own / self.factor * stretched + own * (1 - stretched)).to(dtype)

    def cos_sin(self, pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        cos, sin = super().cos_sin(pos, dtype)
        return cos * self.magnitude, sin * self.magnitude  # every score then grows by the magnitude squared


def alibi_slopes(num_heads: int) -> Tensor:
    """Press et al. 2022: m_h = 2^(−8h/H), h = 1…H, for H a power of two; otherwise the first power of two's
    slopes followed by every other slope of the next one (the paper's reference code)."""
    positive_int("num_heads", num_heads)
    n = 2 ** math.floor(math.log2(num_heads))
    slopes = [2 ** (-8 * h / n) for h in range(1, n + 1)]
    if n < num_heads:
        slopes += [2 ** (-8 * h / (2 * n)) for h in range(1, 2 * n + 1, 2)][: num_heads - n]
    return torch.tensor(slopes)


class ALiBi(RelativePositions):
    """Attention with linear biases: score(i, j) − m_h·|i − j| per head h; no position embeddings at all."""

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def score_bias(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        distance = (q_pos[:, None] - k_pos[None, :]).abs().to(self.slopes)  # (Nq, Nk)
        return -self.slopes[:, None, None] * distance  # (H, Nq, Nk)
