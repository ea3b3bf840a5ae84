"""Attention rollout (Abnar & Zuidema 2020, §3): how much each input token feeds each output, through all layers.

One layer mixes tokens by its head-averaged weights W̄ₗ, and the residual connection passes each token on
unchanged, so the layer's effective mixing is Aₗ = r·I + (1 − r)·W̄ₗ (r = 0.5 in the paper), re-normalised
so rows sum to 1. Rolling out multiplies the layers: Ã = A_L · … · A_2 · A_1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def rollout(weights: Tensor | Sequence[Tensor], residual: float = 0.5) -> Tensor:
    """Roll attention out through the layers.

    Args:
        weights: ``[L, B, H, N, N]`` (e.g. ``Trace.stack()``) or a list of L ``[B, H, N, N]`` maps, first layer first.
        residual: the identity's share r in Aₗ = r·I + (1 − r)·mean_h Wₗ.

    Returns:
        ``[B, N, N]``: row i says how much of output token i traces back to each input token (rows sum to 1).
    """
    stacked = torch.stack(list(weights)) if not isinstance(weights, Tensor) else weights
    if stacked.dim() != 5 or stacked.shape[-1] != stacked.shape[-2]:
        raise ValueError(f"rollout needs square maps [L, B, H, N, N], got shape {tuple(stacked.shape)}")
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual must be in [0, 1], got {residual}")
    n = stacked.shape[-1]
    eye = torch.eye(n, dtype=stacked.dtype, device=stacked.device)
    result = eye.expand(stacked.shape[1], n, n)
    for layer in stacked:  # (B, H, N, N), first layer first
        a = residual * eye + (1 - residual) * layer.mean(dim=1)
        a = a / a.sum(dim=-1, keepdim=True)
        result = a @ result  # later layers multiply on the left
    return result
