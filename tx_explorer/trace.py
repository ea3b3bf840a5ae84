"""The Trace contract: how every model reports what it attended to, without hooks.

A model's ``forward(..., trace=None)`` keeps its normal return type. When a :class:`Trace` is passed, each
attention-like module appends an :class:`AttnRecord` holding its post-softmax, pre-dropout weights
``[B, H, Nq, Nk]`` (Seq2Seq alignments ``[B, 1, T_out, T_in]``, MoE router probabilities ``[B, 1, T, E]``),
detached and on the CPU. Containers hand their children a *scoped* view (``trace.scope("blocks.3", layer=3)``)
that shares the same record list, so names and layer indices come out right without modules storing state.
Labels (tokens, patches) are known only to whoever tokenised the input; they attach them afterwards with
:meth:`Trace.label`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar

import torch
from torch import Tensor

Kind = Literal["self", "causal", "cross", "additive", "router"]
KINDS: tuple[str, ...] = ("self", "causal", "cross", "additive", "router")


@dataclass(frozen=True)
class AttnRecord:
    """One attention map: ``weights`` is ``[B, H, Nq, Nk]`` (rows = queries, columns = keys)."""

    name: str
    kind: Kind
    layer: int
    weights: Tensor
    row_labels: tuple[str, ...] | None = None
    col_labels: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_heads(self) -> int:
        return self.weights.shape[1]


_View = TypeVar("_View", covariant=True)


class Scopes(Protocol[_View]):
    """A per-run argument a container narrows for each child: :class:`Trace`, ``Edit``, ``KVCache``."""

    def scope(self, *args: Any, **kwargs: Any) -> _View: ...


def scoped(arg: Scopes[_View] | None, *args: Any, **kwargs: Any) -> _View | None:
    """``arg.scope(*args, **kwargs)``, the view a child receives (``scoped(trace, "blocks.3", layer=3)``,
    ``scoped(edit, 3)``, ``scoped(cache, 3)``), or None when the run passed none: the one way every container
    hands on the run's trace, edit and KV cache."""
    return None if arg is None else arg.scope(*args, **kwargs)


class Trace:
    """Collects :class:`AttnRecord` s during one forward pass."""

    def __init__(self, *, _records: list[AttnRecord] | None = None, _prefix: str = "", _layer: int = 0) -> None:
        self.records: list[AttnRecord] = [] if _records is None else _records
        self._prefix = _prefix
        self._layer = _layer

    def scope(self, name: str, layer: int | None = None) -> Trace:
        """A view that prefixes names with ``name`` and stamps ``layer``; it shares this trace's records."""
        prefix = f"{self._prefix}.{name}" if self._prefix else name
        return Trace(_records=self.records, _prefix=prefix, _layer=self._layer if layer is None else layer)

    def add(self, kind: Kind, weights: Tensor, name: str = "", **meta: Any) -> None:
        """Record ``weights`` (``[B, H, Nq, Nk]``), detached and copied to the CPU."""
        if kind not in KINDS:
            raise ValueError(f"unknown record kind {kind!r}; expected one of {KINDS}")
        if weights.dim() != 4:
            raise ValueError(f"attention weights must be [B, H, Nq, Nk], got shape {tuple(weights.shape)}")
        full = ".".join(p for p in (self._prefix, name) if p)
        self.records.append(
            AttnRecord(name=full, kind=kind, layer=self._layer, weights=weights.detach().float().cpu(), meta=meta)
        )

    def label(self, rows: Sequence[str], cols: Sequence[str] | None = None, *, kind: Kind | None = None) -> None:
        """Attach row (query) and column (key) labels to every record, or to those of one ``kind``."""
        cols = rows if cols is None else cols
        self.records[:] = [
            replace(r, row_labels=tuple(rows), col_labels=tuple(cols)) if kind is None or r.kind == kind else r
            for r in self.records
        ]

    def select(self, kind: Kind | None = None, name_contains: str = "") -> list[AttnRecord]:
        return [r for r in self.records if (kind is None or r.kind == kind) and name_contains in r.name]

    def stack(self, kind: Kind | None = None, name_contains: str = "") -> Tensor:
        """The selected records' weights stacked by layer: ``[L, B, H, Nq, Nk]``. With no ``kind``, every attention
        map: a mixture of experts' router probabilities (``[B, 1, T, E]``, kind "router") are not maps."""
        chosen = [r for r in self.select(kind, name_contains) if kind is not None or r.kind != "router"]
        if not chosen:
            raise LookupError(f"no attention records of kind {kind!r} containing {name_contains!r}")
        return torch.stack([r.weights for r in chosen])

    def __iter__(self) -> Iterator[AttnRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)
