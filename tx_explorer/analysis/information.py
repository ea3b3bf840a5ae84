"""Shannon entropy, the one formula behind every "how spread out is this distribution" number in the app:
attention rows (head metrics, the softmax saturation curves), router probabilities (MoE) and the
Jensen–Shannon distance between heads."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def entropy(p: Tensor, *, bits: bool = False) -> Tensor:
    """−Σ p·log p along the last axis, in nats (``bits=True``: log base 2), with 0·log 0 = 0.

    0 for a one-hot distribution, log n for the uniform one over n outcomes.
    """
    h = -torch.special.xlogy(p, p).sum(dim=-1)
    return h / math.log(2) if bits else h
