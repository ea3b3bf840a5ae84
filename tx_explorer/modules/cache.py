"""A key/value cache of our own for incremental decoding (§6.3 made fast).

Decoding one token at a time recomputes nothing if every layer keeps the keys and values it has already
made: a new token's query attends to the stored keys plus its own. ``model(ids, cache=cache)`` appends each
layer's new rows and returns logits for the new positions only; a sliding-window model keeps only its last
``window`` rows, so its cache stops growing; in a stack of local and global layers (Gemma 3) each local layer
keeps its own last ``window`` rows and the global ones keep all. Rotary keys are stored already turned (their
position is fixed).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from the start: what a cache (or any per-position result of a causal
    model) made for one serves the other."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


class KVCache:
    """Per layer, keys and values ``[B, H_kv, T, Dh]``; ``positions [T]`` are the absolute positions kept."""

    def __init__(self) -> None:
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []
        self.positions = torch.empty(0, dtype=torch.long)  # (T,), shared by every layer
        self.seen = 0  # tokens consumed so far: the next token's position
        self.window: int | None = None  # rows kept per layer (a sliding-window model's window)

    def begin(self, n: int, window: int | None, device: torch.device) -> tuple[Tensor, Tensor]:
        """Positions of ``n`` new queries ``[n]`` and of every key they see, kept ones first ``[T + n]``."""
        self.window = window
        self.positions = self.positions.to(device)
        q_pos = torch.arange(self.seen, self.seen + n, device=device)
        return q_pos, torch.cat([self.positions, q_pos])

    def update(self, layer: int, k: Tensor, v: Tensor, window: int | None = None) -> tuple[Tensor, Tensor]:
        """Append ``k, v [B, H_kv, n, Dh]`` to ``layer``; return all keys and values this step attends to.

        ``window``: this layer's own window (a local layer among global ones): it keeps only its last rows."""
        if layer > len(self.keys):
            raise IndexError(f"layer {layer} updated before layer {len(self.keys)}")
        window = window or self.window
        if layer < len(self.keys):
            k = torch.cat([self.keys[layer], k], dim=2)  # (B, H_kv, T + n, Dh)
            v = torch.cat([self.values[layer], v], dim=2)
            self.keys[layer], self.values[layer] = self._keep(k, window), self._keep(v, window)
        else:
            self.keys.append(self._keep(k, window))
            self.values.append(self._keep(v, window))
        return k, v

    def rows(self, layer: int) -> int:
        """Rows ``layer`` holds now (0 before its first update)."""
        return self.keys[layer].shape[2] if layer < len(self.keys) else 0

    def commit(self, q_pos: Tensor) -> None:
        """After every layer has been updated: remember the new positions."""
        positions = torch.cat([self.positions, q_pos])
        self.positions = positions if self.window is None else positions[-self.window :]
        self.seen += q_pos.numel()

    def complete(self) -> bool:
        """Whether every layer still holds every token seen (no window has dropped a row yet)."""
        return all(self.rows(layer) == self.seen for layer in range(len(self.keys)))

    def prefix(self, n: int) -> KVCache:
        """A new cache of this one's first ``n`` tokens: what feeding only them leaves, since a token's keys and
        values depend on it and the tokens before it alone (causal mask). Only while :meth:`complete`."""
        if not 0 <= n <= self.seen or not self.complete():
            raise ValueError(f"a prefix needs 0 ≤ n ≤ {self.seen} and every row kept, got n = {n}")
        out = KVCache()
        out.keys = [k[:, :, :n].clone() for k in self.keys]  # (B, H_kv, n, Dh): copies, this cache may go on
        out.values = [v[:, :, :n].clone() for v in self.values]
        out.positions, out.seen, out.window = self.positions[:n].clone(), n, self.window
        return out

    @staticmethod
    def _keep(t: Tensor, window: int | None) -> Tensor:
        return t if window is None or t.shape[2] <= window else t[:, :, -window:]

    def scope(self, index: int) -> LayerCache:
        """Layer ``index``'s view, as the stack hands it on (:func:`tx_explorer.trace.scoped`)."""
        return LayerCache(self, index)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached tensors: 2 · layers · H_kv · Dh · bytes per element · T (times B)."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def __len__(self) -> int:
        """Rows held per layer (tokens seen, or the window once it is full)."""
        return int(self.positions.numel())


class LayerCache:
    """One layer's view of a :class:`KVCache`, handed to that layer's attention (``window``: the layer's own)."""

    def __init__(self, cache: KVCache, index: int, window: int | None = None) -> None:
        self.cache, self.index, self.window = cache, index, window

    def windowed(self, window: int) -> LayerCache:
        """This view for a layer that sees only its last ``window`` keys and so keeps only as many rows."""
        return LayerCache(self.cache, self.index, window)

    @property
    def rows(self) -> int:
        """Rows the layer holds before this step's update."""
        return self.cache.rows(self.index)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        return self.cache.update(self.index, k, v, self.window)
