"""Attention masks as boolean tensors, True = the query may attend to the key (the convention of a boolean
``attn_mask`` in PyTorch's ``scaled_dot_product_attention``; ``nn.MultiheadAttention`` reads True as hidden).

Rows are queries, columns are keys. Square masks are ``[N, N]``; ``padding`` is ``[B, 1, N]`` so that it
broadcasts over queries; add a head axis with ``mask[:, None]`` for ``[B, H, Nq, Nk]`` scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from tx_explorer.errors import InputError, positive_int


def full(n: int) -> Tensor:
    """``[n, n]`` all True: unmasked self-attention (encoders, ViT)."""
    n = positive_int("n", n)
    return torch.ones(n, n, dtype=torch.bool)


def causal(n: int) -> Tensor:
    """``[n, n]`` lower-triangular: query i sees keys 0..i (autoregressive decoding, §3.4)."""
    n = positive_int("n", n)
    return torch.ones(n, n, dtype=torch.bool).tril()


def padding(lengths: Sequence[int] | Tensor, n: int) -> Tensor:
    """``[B, 1, n]``: key j of sequence b is visible iff ``j < lengths[b]`` (pad tokens are hidden)."""
    n = positive_int("n", n)
    lengths = torch.as_tensor(lengths, dtype=torch.long).reshape(-1)
    if lengths.numel() == 0:
        raise ValueError("padding needs at least one sequence length")
    if (lengths < 0).any() or (lengths > n).any():
        raise InputError("lengths_range", n=n, lengths=lengths.tolist())
    keys = torch.arange(n)
    return (keys[None, :] < lengths[:, None])[:, None, :]  # (B, 1, n)


def sliding_window(n: int, window: int) -> Tensor:
    """``[n, n]`` causal band: query i sees itself and the ``window - 1`` keys before it (Mistral's window;
    Longformer's is two-sided)."""
    n, window = positive_int("n", n), positive_int("window", window)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    return (j <= i) & (i - j < window)


def causal_between(q_pos: Tensor, k_pos: Tensor, window: int | None = None) -> Tensor:
    """``[Nq, Nk]`` for queries and keys at absolute positions: key j is visible iff it is not in the future and,
    with a ``window``, lies less than ``window`` positions back. Equals :func:`causal` / :func:`sliding_window`
    when both are 0…N−1; with a KV cache the keys run further back than the queries."""
    back = q_pos[:, None] - k_pos[None, :]  # (Nq, Nk): how far back each key lies
    visible = back >= 0
    return visible if window is None else visible & (back < positive_int("window", window))


def prefix_lm(n: int, prefix: int) -> Tensor:
    """``[n, n]``: full attention inside the first ``prefix`` tokens, causal after (T5's prefix LM)."""
    n = positive_int("n", n)
    if int(prefix) != prefix or not 0 <= prefix <= n:
        raise InputError("prefix_range", n=n, prefix=prefix)
    return causal(n) | (torch.arange(n)[None, :] < prefix)  # every query sees the whole prefix


def block_diagonal(sizes: Sequence[int]) -> Tensor:
    """``[sum(sizes), sum(sizes)]``: documents packed in one sequence only see themselves.

    Combine with :func:`causal` for packed causal language modelling.
    """
    if len(sizes) == 0:
        raise ValueError("block_diagonal needs at least one block size")
    sizes = [positive_int("every block size", s) for s in sizes]
    doc = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    return doc[:, None] == doc[None, :]


def combine(*masks: Tensor) -> Tensor:
    """Logical AND of masks (a key is visible only if every mask allows it), with broadcasting."""
    if not masks:
        raise ValueError("combine needs at least one mask")
    out = masks[0]
    for m in masks[1:]:
        out = out & m
    return out
