"""The attention operator (Vaswani et al. 2017, eq. 1): softmax(QKᵀ/√D)·V.

``scaled_dot_product_attention`` is the explicit reference path: it materialises the scores and the weights
so they can be shown, and every faster path in the project is tested against it.

Mask convention (PyTorch's): a boolean tensor broadcastable to ``[..., Nq, Nk]``, **True = may attend**.
A query whose row is fully masked sees nothing: its weights are all zero and its output is the zero vector
(softmax over an empty set is undefined; zero is the convention FlashAttention and PyTorch's math path
converge on, and it keeps the row free of NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


def _check_qkv(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError("q, k and v need at least two dimensions: [..., N, D]")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share their last dimension D, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of rows Nk, got {k.shape[-2]} and {v.shape[-2]}")
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean (True = may attend), got {mask.dtype}")
        try:
            torch.broadcast_shapes(mask.shape, (*q.shape[:-1], k.shape[-2]))
        except RuntimeError:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to [..., Nq, Nk] = "
                f"{(*q.shape[:-1], k.shape[-2])}"
            ) from None


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of one attention call, for teaching.

    scores:  E = QKᵀ·scale            [..., Nq, Nk]
    masked:  E with −∞ where hidden   [..., Nq, Nk]
    weights: A = softmax(masked)      [..., Nq, Nk]  (fully masked rows are zero)
    out:     Y = A·V                  [..., Nq, Dv]
    """

    scores: Tensor
    masked: Tensor
    weights: Tensor
    out: Tensor


def attention_steps(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> AttentionSteps:
    """Scaled dot-product attention, keeping every intermediate (see :class:`AttentionSteps`)."""
    _check_qkv(q, k, v, mask)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Nq, Nk)
    masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    if mask is not None:
        # Hidden entries are already exactly 0; this also turns fully masked rows (NaN) into 0.
        weights = weights.masked_fill(~mask, 0.0)
    out = weights @ v  # (..., Nq, Dv)
    return AttentionSteps(scores=scores, masked=masked, weights=weights, out=out)


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(q·kᵀ·scale + mask)·v, returning the output and the post-softmax weights.

    Args:
        q: queries ``[..., Nq, D]``.
        k: keys ``[..., Nk, D]``.
        v: values ``[..., Nk, Dv]``.
        mask: boolean, broadcastable to ``[..., Nq, Nk]``; True = may attend.
        scale: multiplies the scores; default ``1/sqrt(D)`` (the √D scaling of §2.3).

    Returns:
        ``(out [..., Nq, Dv], weights [..., Nq, Nk])``; rows of ``weights`` sum to 1, or to 0 when fully masked.
    """
    steps = attention_steps(q, k, v, mask=mask, scale=scale)
    return steps.out, steps.weights
