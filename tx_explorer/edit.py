"""The Edit contract: change what a model computes inside one forward pass, without hooks.

A model's ``forward(..., edit=None)`` takes an :class:`Edit` the way it takes a :class:`~tx_explorer.trace.Trace`:
containers hand each block a view scoped to its layer (``edit.scope(layer)``) that shares the same operations
and recordings, and the modules ask it to transform three kinds of tensor as they pass:

- ``"head"``: each head's output before the output projection W_O, ``[B, H, N, Dh]``;
- ``"weights"``: the attention weights ``[B, H, Nq, Nk]`` (asking for them makes the layer take the explicit path);
- the residual stream ``[B, N, D]`` at three sites of a block: ``"pre"`` (its input), ``"mid"`` (after
  attention) and ``"post"`` (its output);
- ``"tokens"``: the token vectors ``[B, N, D]`` before positions are added (the unscoped edit, ``layer`` None).

Operations chain: ``Edit().ablate(1, 2).ablate(3, 0, mode="mean", reference=means)``. ``Edit().record()``
captures every head output and residual (detached copies) into ``edit.captured``; a captured run is the source
of activation patching: ``Edit().patch_residual(2, 5, clean)`` writes the clean run's residual at layer 2,
position 5 into this run. An empty ``Edit()`` changes nothing, and patching a run with its own recording is
exact (the same numbers are written back). Zero-ablating head h equals zeroing columns h·Dh … (h+1)·Dh − 1 of
W_O (its input side).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

Site = Literal["tokens", "head", "pre", "mid", "post"]
SITES: tuple[str, ...] = ("tokens", "head", "pre", "mid", "post")
RESIDUAL_SITES: tuple[str, ...] = ("pre", "mid", "post")
Positions = int | Sequence[int] | None


@dataclass(frozen=True)
class HeadMeans:
    """Per-head mean outputs over a stated reference set: ``values [L, H, Dh]`` averaged over ``count`` tokens."""

    values: Tensor
    source: str  # what the mean was taken over, e.g. "tiny-gpt held-out windows (16 × 64 tokens)"
    count: int  # tokens averaged


class Capture(dict):
    """Recorded activations of one run, keyed ``(site, layer)``: heads ``[B, H, N, Dh]``, residuals and token
    vectors ``[B, N, D]`` (tokens under layer None)."""

    def get_site(self, site: Site, layer: int | None) -> Tensor:
        if (site, layer) not in self:
            raise LookupError(
                f"nothing recorded at site {site!r} of layer {layer}: run the source with Edit().record()"
            )
        return self[(site, layer)]


@dataclass
class _Op:
    site: str
    layer: int | None  # None: the model-level sites ("tokens")
    fn: Callable[[Tensor], Tensor]  # takes the tensor at this site, returns the edited one


def _positions(positions: Positions) -> slice | list[int]:
    if positions is None:
        return slice(None)
    return [positions] if isinstance(positions, int) else list(positions)


def _source(source: Edit | Capture | Tensor, site: Site, layer: int | None) -> Tensor:
    if isinstance(source, Edit):
        source = source.captured
    return source.get_site(site, layer) if isinstance(source, Capture) else source


@dataclass
class Edit:
    """Operations on heads, attention weights and the residual stream, applied during one forward pass."""

    ops: list[_Op] = field(default_factory=list)
    captured: Capture = field(default_factory=Capture)
    recording: bool = False
    layer: int | None = None  # set on the scoped views modules receive

    # --- building (each returns self, so calls chain) -------------------------------------------------------
    def ablate(
        self,
        layer: int,
        head: int,
        *,
        mode: Literal["zero", "mean"] = "zero",
        reference: HeadMeans | Tensor | None = None,
        positions: Positions = None,
    ) -> Edit:
        """Replace head ``head``'s output at ``layer`` by zero, or by its mean over ``reference``.

        ``reference`` is a :class:`HeadMeans` (``values [L, H, Dh]``) or a tensor ``[L, H, Dh]`` / ``[Dh]``.
        """
        if mode not in ("zero", "mean"):
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}")
        if mode == "mean" and reference is None:
            raise ValueError("mean ablation needs a reference: the per-head means over a stated set (HeadMeans)")
        rows = _positions(positions)
        mean = None
        if mode == "mean":
            mean = reference.values if isinstance(reference, HeadMeans) else reference
            mean = mean[layer, head] if mean.dim() == 3 else mean  # (Dh,)

        def fn(y: Tensor) -> Tensor:  # y (B, H, N, Dh)
            y = y.clone()
            y[:, head, rows] = 0.0 if mean is None else mean.to(y)
            return y

        self.ops.append(_Op("head", layer, fn))
        return self

    def patch_head(
        self, layer: int, head: int, source: Edit | Capture | Tensor, *, positions: Positions = None
    ) -> Edit:
        """Write ``source``'s output of (layer, head) (a recorded run, or ``[B, H, N, Dh]``) into this run."""
        values = _source(source, "head", layer)
        rows = _positions(positions)

        def fn(y: Tensor) -> Tensor:
            y = y.clone()
            y[:, head, rows] = values[:, head, rows].to(y)
            return y

        self.ops.append(_Op("head", layer, fn))
        return self

    def patch_residual(
        self,
        layer: int,
        position: Positions,
        source: Edit | Capture | Tensor,
        *,
        site: Literal["pre", "mid", "post"] = "pre",
    ) -> Edit:
        """Write ``source``'s residual stream at (layer, site, position) into this run (``[B, N, D]`` if a tensor)."""
        if site not in RESIDUAL_SITES:
            raise ValueError(f"residual site must be one of {RESIDUAL_SITES}, got {site!r}")
        values = _source(source, site, layer)
        rows = _positions(position)

        def fn(x: Tensor) -> Tensor:  # x (B, N, D)
            x = x.clone()
            x[:, rows] = values[:, rows].to(x)
            return x

        self.ops.append(_Op(site, layer, fn))
        return self

    def patch_tokens(self, source: Edit | Capture | Tensor, *, positions: Positions = None) -> Edit:
        """Replace the token vectors (before positions and the embedding norm) by ``source``'s (``[B, N, D]``)."""
        values = _source(source, "tokens", None)
        rows = _positions(positions)

        def fn(x: Tensor) -> Tensor:
            x = x.clone()
            x[:, rows] = values[:, rows].to(x)
            return x

        self.ops.append(_Op("tokens", None, fn))
        return self

    def drop_keys(self, layer: int, keys: Iterable[int], *, heads: Iterable[int] | None = None) -> Edit:
        """Remove attention to ``keys`` (e.g. ``[0]``, the first token) and renormalise each row over the rest.

        A row left with no visible key (the first query sees only itself) keeps its weights."""
        keys, heads = list(keys), None if heads is None else list(heads)

        def fn(w: Tensor) -> Tensor:  # w (B, H, Nq, Nk)
            kept = w.clone()
            kept[..., keys] = 0.0
            total = kept.sum(dim=-1, keepdim=True)  # (B, H, Nq, 1)
            out = torch.where(total > 0, kept / total.clamp_min(torch.finfo(w.dtype).tiny), w)
            if heads is None:
                return out
            picked = torch.zeros(w.shape[1], dtype=torch.bool, device=w.device)
            picked[heads] = True
            return torch.where(picked[None, :, None, None], out, w)

        self.ops.append(_Op("weights", layer, fn))
        return self

    def record(self) -> Edit:
        """Capture every head output and residual of the next run into ``self.captured``."""
        self.recording = True
        return self

    # --- used by the modules ------------------------------------------------------------------------------
    def scope(self, layer: int) -> Edit:
        """The view a block receives: same operations and capture, stamped with ``layer``."""
        return Edit(ops=self.ops, captured=self.captured, recording=self.recording, layer=layer)

    def wants_weights(self) -> bool:
        """Whether this layer edits attention weights (the layer must then materialise them)."""
        return any(op.site == "weights" and op.layer == self.layer for op in self.ops)

    def apply(self, site: str, t: Tensor) -> Tensor:
        """Apply this layer's operations at ``site`` in the order they were added, then record the result."""
        for op in self.ops:
            if op.site == site and op.layer == self.layer:
                t = op.fn(t)
        if self.recording and site in SITES:
            self.captured[(site, self.layer)] = t.detach().clone()
        return t


@torch.no_grad()
def head_means(
    run: Callable[[Tensor, Edit], object], windows: Tensor, *, source: str, batch_size: int = 8
) -> HeadMeans:
    """Each head's mean output over every token of ``windows [S, T]`` (a stated reference set).

    ``run(ids, edit)`` runs the model on ``ids [b, T]`` with ``edit`` (e.g. ``lambda ids, e: model(ids, edit=e)``).
    """
    if windows.dim() != 2 or windows.shape[0] == 0:
        raise ValueError(f"reference windows must be a non-empty [S, T] tensor, got shape {tuple(windows.shape)}")
    total, count = None, 0
    for i in range(0, windows.shape[0], batch_size):
        rec = Edit().record()
        run(windows[i : i + batch_size], rec)
        layers = sorted(layer for site, layer in rec.captured if site == "head")
        heads = torch.stack([rec.captured[("head", layer)].double().sum(dim=(0, 2)) for layer in layers])  # (L, H, Dh)
        total = heads if total is None else total + heads
        count += windows[i : i + batch_size].numel()
    return HeadMeans(values=(total / count).float(), source=source, count=count)
