"""``nn.Linear`` with a fast path for a few rows of float32 on the CPU.

A reader of a 135M-parameter model on a CPU feeds it a few tokens at a time: a decoding step is one row, a typed
sentence a handful. Then a layer is a matrix-vector product, bound by reading the weights, and MKL's float32 path
behind ``F.linear`` reads them at a third of the memory's speed for one to eight rows, where ``W · xᵀ`` (the rows
as a narrow right-hand matrix, one row doubled) runs near it: a SmolLM2 pass over one token takes 32 ms instead of
62 (``benchmarks/linear.py`` measures both). Larger batches, 16-bit weights (whose kernels are
fast already), gradients and GPUs take ``F.linear`` itself. tests/test_linear.py holds the fast path to it."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

# Rows up to which W · xᵀ beats F.linear here with the server's one torch thread per job (from 9 rows on F.linear
# wins there; with 2 threads W · xᵀ still wins up to 64 rows, so sweeps must use the server's thread count).
FEW_ROWS = 8


def fast_path(x: Tensor, weight: Tensor) -> bool:
    """Whether :func:`linear` takes ``W · xᵀ`` for ``x``: few rows of float32 on the CPU, no gradient to record."""
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.numel() <= FEW_ROWS * x.shape[-1]
        and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
    )


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``: ``x [..., in]`` → ``[..., out]``, equal up to float32 rounding."""
    if not fast_path(x, weight) or x.numel() == 0:
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])  # (M, in)
    rows = flat.shape[0]
    if rows == 1:
        flat = torch.cat([flat, flat])  # (2, in): one row would take the matrix-vector kernel, the slow one here
    y = (weight @ flat.T).T[:rows]  # (M, out)
    if bias is not None:
        y = y + bias
    return y.contiguous().view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) computed by :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
