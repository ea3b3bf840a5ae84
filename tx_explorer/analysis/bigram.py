"""The bigram baseline: p(x_t | x_{t-1}) from counts, the bar a language model must clear (§6.2).

A bigram model sees exactly one token of context. A Transformer that does not beat it on held-out text
has learned nothing beyond pair statistics.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def bigram_counts(ids: Tensor, vocab_size: int) -> Tensor:
    """``[V, V]`` counts of consecutive pairs (row = previous token, column = next token) in ``ids [N]``."""
    ids = ids.long().reshape(-1)
    flat = ids[:-1] * vocab_size + ids[1:]
    return torch.bincount(flat, minlength=vocab_size * vocab_size).reshape(vocab_size, vocab_size).double()


def pair_nll(counts: Tensor, prev: Tensor, nxt: Tensor, k: float) -> Tensor:
    """−log p(next | previous) in nats of every pair ``(prev, nxt)`` (any equal shapes), add-``k`` smoothed
    (Lidstone)."""
    if k <= 0:
        raise ValueError(f"the smoothing constant k must be positive, got {k}")
    prev, nxt = prev.long(), nxt.long()
    p = (counts[prev, nxt] + k) / (counts.sum(dim=1)[prev] + k * counts.shape[0])
    return -p.log()


def bigram_nll(counts: Tensor, ids: Tensor, k: float) -> float:
    """Mean −log p(next | previous) in nats over the consecutive pairs of ``ids``."""
    ids = ids.reshape(-1)
    return float(pair_nll(counts, ids[:-1], ids[1:], k).mean())


def bigram_baseline(
    train: Tensor, val: Tensor, vocab_size: int, ks: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
) -> dict[str, float]:
    """Validation loss of the best add-k bigram model.

    ``k`` is chosen on the last 10 % of ``train`` (counts from the first 90 %), never on ``val``; the final
    counts then use all of ``train``.

    Returns:
        ``{"val_loss": nats, "val_ppl": e^loss, "k": chosen k}``.
    """
    cut = int(0.9 * len(train))
    fit = bigram_counts(train[:cut], vocab_size)
    k = min(ks, key=lambda k: bigram_nll(fit, train[cut:], k))
    loss = bigram_nll(bigram_counts(train, vocab_size), val, k)
    return {"val_loss": loss, "val_ppl": math.exp(loss), "k": k}
