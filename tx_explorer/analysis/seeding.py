"""Reproducible random tensors and layers that never touch the global RNG.

The app serves several sessions from one process; ``torch.manual_seed`` there would let one user's rerun
change another's numbers. Everything here draws from a private ``torch.Generator`` instead.
"""

from __future__ import annotations

import math
from typing import TypeVar

import torch
from torch import Tensor, nn

from tx_explorer.errors import InputError
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.init import skip_init

M = TypeVar("M", bound=nn.Module)


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` (any integer ≥ 0)."""
    if int(seed) != seed or seed < 0:
        raise InputError("seed_range", seed=seed)
    return torch.Generator().manual_seed(int(seed))


def randn(*shape: int, seed: int) -> Tensor:
    """Standard normal ``[*shape]`` from ``seed``."""
    return torch.randn(*shape, generator=generator(seed))


@torch.no_grad()
def seeded_mha(dim: int, num_heads: int, seed: int) -> MultiHeadAttention:
    """A randomly initialised :class:`MultiHeadAttention` in eval mode, the same for the same arguments.

    Weights are N(0, 1/fan_in) (Xavier-like): with unit-variance inputs the queries and keys have unit
    variance too, so the softmax is neither flat nor saturated and the maps have visible structure.
    Biases are zero, so nothing but the inputs distinguishes one token from another.
    """
    with skip_init():
        mha = MultiHeadAttention(dim, num_heads)  # raises ValueError when num_heads does not divide dim
    g = generator(seed)
    for layer in (mha.qkv, mha.proj):
        layer.weight.normal_(0.0, 1.0 / math.sqrt(layer.in_features), generator=g)
        nn.init.zeros_(layer.bias)
    return mha.eval().requires_grad_(False)


@torch.no_grad()
def seeded_init(module: M, seed: int, *, std: float = 0.02) -> M:
    """Re-draw every parameter of ``module`` from a private generator: GPT-2's initialisation, reproducible
    from ``seed`` alone, whatever the global RNG holds.

    Every parameter of two or more dimensions (linear maps, embeddings, position tables) gets N(0, std²), biases
    0 and norm gains 1 — what :class:`~tx_explorer.modules.transformer.CausalLM` draws by default. Whatever the
    module's constructor drew is overwritten, so nothing of the global RNG's state reaches the result.
    """
    g = generator(seed)
    for name, p in module.named_parameters():
        if p.dim() >= 2:
            p.normal_(0.0, std, generator=g)
        elif name.rsplit(".", 1)[-1].startswith("bias"):  # "bias", and a GRU's "bias_ih_l0"
            p.zero_()
        else:  # a norm's gain γ
            p.fill_(1.0)
    return module
