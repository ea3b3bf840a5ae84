"""The attention operator (Vaswani et al. 2017, eq. 1): softmax(QKᵀ/√D)·V.

``scaled_dot_product_attention`` is the explicit reference path: it materialises the scores and the weights
so they can be shown, and every faster path in the project is tested against it.

Mask convention (a boolean ``attn_mask`` of PyTorch's SDPA; ``nn.MultiheadAttention`` reads True as hidden): a
boolean tensor broadcastable to ``[..., Nq, Nk]``, **True = may attend**.
An additive float ``bias`` broadcastable to ``[..., Nq, Nk]`` (ALiBi's −m·(i − j), T5's relative buckets) is
added to the scaled scores before the mask, as PyTorch's float ``attn_mask``; masking always wins over it.
A query whose row is fully masked sees nothing: its weights are all zero and its output is the zero vector
(softmax over an empty set is undefined; zero is the convention FlashAttention and PyTorch's math path
converge on, and it keeps the row free of NaN).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from tx_explorer.errors import InputError, positive_int


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to (NumPy's rule: aligned from the right, each size equal or 1), None if none.

    Plain Python, not ``torch.broadcast_shapes``: that one imports SymPy on first use (0.7 s), which every first
    attention call would otherwise pay, the app's first chart included."""
    out: list[int] = []
    for sizes in itertools.zip_longest(*(reversed(s) for s in shapes), fillvalue=1):
        wide = {n for n in sizes if n != 1}
        if len(wide) > 1:
            return None
        out.append(wide.pop() if wide else 1)
    return tuple(reversed(out))


def _check_qkv(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None = None) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError("q, k and v need at least two dimensions: [..., N, D]")
    if q.shape[-1] != k.shape[-1]:
        raise InputError("qk_width", q=q.shape[-1], k=k.shape[-1])
    if k.shape[-2] != v.shape[-2]:
        raise InputError("kv_rows", k=k.shape[-2], v=v.shape[-2])
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be boolean (True = may attend), got {mask.dtype}")
    if bias is not None and not bias.is_floating_point():
        raise TypeError(f"bias must be a float tensor added to the scores, got {bias.dtype}")
    scores = (*q.shape[:-1], k.shape[-2])  # [..., Nq, Nk]
    for name, t in (("mask", mask), ("bias", bias)):
        if t is None:
            continue
        if broadcast_shape(t.shape, scores) is None:
            raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to [..., Nq, Nk] = {scores}")


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of one attention call, for teaching.

    scores:  E = QKᵀ·scale (+ bias)   [..., Nq, Nk]
    masked:  E with −∞ where hidden   [..., Nq, Nk]
    weights: A = softmax(masked)      [..., Nq, Nk]  (fully masked rows are zero)
    out:     Y = A·V                  [..., Nq, Dv]
    """

    scores: Tensor
    masked: Tensor
    weights: Tensor
    out: Tensor


def attention_steps(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
    bias: Tensor | None = None,
) -> AttentionSteps:
    """Scaled dot-product attention, keeping every intermediate (see :class:`AttentionSteps`).

    Inputs in 16 bits (a bfloat16 model) are upcast first: scores, softmax and weights are float32, so every map
    a page shows has rows summing to 1 within float32's rounding; the output is cast back to ``v``'s dtype."""
    _check_qkv(q, k, v, mask, bias)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if q.dtype in (torch.bfloat16, torch.float16):
        steps = attention_steps(q.float(), k.float(), v.float(), mask, scale, None if bias is None else bias.float())
        return replace(steps, out=steps.out.to(v.dtype))
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Nq, Nk)
    if bias is not None:
        scores = scores + bias
    masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    if mask is not None:
        # Hidden entries are already exactly 0; this also turns fully masked rows (NaN) into 0.
        weights = weights.masked_fill(~mask, 0.0)
    out = weights @ v  # (..., Nq, Dv)
    return AttentionSteps(scores=scores, masked=masked, weights=weights, out=out)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(q·kᵀ·scale + bias, hidden where the mask is False)·v, returning the output and the weights.

    Args:
        q: queries ``[..., Nq, D]``.
        k: keys ``[..., Nk, D]``.
        v: values ``[..., Nk, Dv]``.
        mask: boolean, broadcastable to ``[..., Nq, Nk]``; True = may attend.
        scale: multiplies the scores; default ``1/sqrt(D)`` (the √D scaling of §2.3).
        bias: float, broadcastable to ``[..., Nq, Nk]``, added to the scaled scores (ALiBi, relative positions).

    Returns:
        ``(out [..., Nq, Dv], weights [..., Nq, Nk])``; rows of ``weights`` sum to 1, or to 0 when fully masked.
    """
    steps = attention_steps(q, k, v, mask=mask, scale=scale, bias=bias)
    return steps.out, steps.weights


# ----------------------------------------------------------------------------------------------------------
# Exact tiled attention (FlashAttention-2, Dao 2023, arXiv 2307.08691): the same result as above, computed
# block by block with an online softmax, never holding an Nq × Nk matrix.

TileObserver = Callable[[int, int, Tensor, Tensor], None]  # (query tile, key tile, running m, running ℓ)


def _tile_mask(
    mask: Tensor | None, causal: bool, i0: int, i1: int, j0: int, j1: int, device: torch.device
) -> Tensor | None:
    """The visible entries of one (query tile, key tile) block, ``[B or 1, i1 − i0, j1 − j0]``; None if all are."""
    visible = None
    if mask is not None:
        visible = mask[..., i0:i1, j0:j1].reshape(-1, i1 - i0, j1 - j0)  # (B or 1, bq, bk): copies one tile at most
    if causal and j1 - 1 > i0:  # the tile reaches above the diagonal (top-left aligned, like masks.causal)
        tri = torch.arange(j0, j1, device=device)[None, :] <= torch.arange(i0, i1, device=device)[:, None]  # (bq, bk)
        visible = tri if visible is None else visible & tri
    return visible


def _tile_bias(bias: Tensor | None, i0: int, i1: int, j0: int, j1: int) -> Tensor | int:
    """The additive bias of one block, ``[B or 1, i1 − i0, j1 − j0]``, or 0 without a bias."""
    return 0 if bias is None else bias[..., i0:i1, j0:j1].reshape(-1, i1 - i0, j1 - j0)  # (B or 1, bq, bk)


def _flash_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    causal: bool,
    block_q: int,
    block_k: int,
    scale: float,
    on_tile: TileObserver | None = None,
    bias: Tensor | None = None,
    score_mod: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """FA2 forward on flattened ``q [B, Nq, D]``, ``k [B, Nk, D]``, ``v [B, Nk, Dv]``; returns ``(out, lse)``.

    ``lse [B, Nq]`` is each row's log-sum-exp of its visible scores, +∞ for a fully masked row (so that the
    backward's ``exp(S − lse)`` is 0 there). ``on_tile`` sees ``m`` and ``ℓ`` after every computed tile;
    both are updated in place afterwards, so an observer that keeps them must copy.
    """
    batch, nq, _ = q.shape
    nk, dv = k.shape[1], v.shape[2]
    # A finite "no score yet": exp(−∞ − floor) = 0 and exp(floor − floor) = 1, so a row that has seen only
    # masked keys stays free of NaN without an extra where() per tile.
    floor = torch.finfo(q.dtype).min
    out = q.new_empty(batch, nq, dv)
    lse = q.new_empty(batch, nq)
    for i0 in range(0, nq, block_q):
        i1 = min(i0 + block_q, nq)
        qi = q[:, i0:i1] * scale  # (B, bq, D)
        m = q.new_full((batch, i1 - i0), floor)  # running row max
        l = q.new_zeros(batch, i1 - i0)  # running Σ exp(score − m)
        acc = q.new_zeros(batch, i1 - i0, dv)  # unnormalised output, rescaled whenever m grows
        for j0 in range(0, nk, block_k):
            if causal and j0 > i1 - 1:
                break  # this key tile and all later ones lie above the diagonal: skipped, never computed
            j1 = min(j0 + block_k, nk)
            s = torch.bmm(qi, k[:, j0:j1].transpose(1, 2))  # (B, bq, bk)
            if score_mod is not None:  # elementwise on the scaled scores, before the bias (a soft cap)
                s = score_mod(s)
            s.add_(_tile_bias(bias, i0, i1, j0, j1))
            visible = _tile_mask(mask, causal, i0, i1, j0, j1, q.device)
            if visible is not None:
                s.masked_fill_(~visible, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))
            p = s.sub_(m_new[..., None]).exp_()  # in place: the score tile becomes the probability tile
            alpha = (m - m_new).exp_()  # the old max overestimated by this factor: rescale what was summed
            l.mul_(alpha).add_(p.sum(dim=-1))
            acc.mul_(alpha[..., None]).baddbmm_(p, v[:, j0:j1])
            m = m_new
            if on_tile is not None:
                on_tile(i0 // block_q, j0 // block_k, m, l)
        seen = l > 0
        out[:, i0:i1] = acc / torch.where(seen, l, 1.0)[..., None]  # one normalisation at the end (FA2)
        lse[:, i0:i1] = torch.where(seen, m + l.log(), float("inf"))
    return out, lse


def _flash_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    dout: Tensor,
    mask: Tensor | None,
    causal: bool,
    block_q: int,
    block_k: int,
    scale: float,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """FA2 backward (Algorithm 2): each tile's probabilities are recomputed from ``lse``; O(N) extra memory.

    The bias is a constant (a position scheme's, not learned here): no gradient flows to it."""
    batch, nq, _ = q.shape
    nk = k.shape[1]
    delta = (dout * out).sum(dim=-1)  # (B, Nq): rowsum(dO ∘ O) = Σ_j P_ij·dP_ij
    dq = torch.zeros_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    for j0 in range(0, nk, block_k):  # FA2's backward walks key tiles outermost: dK_j, dV_j finish in one pass
        j1 = min(j0 + block_k, nk)
        kj, vj = k[:, j0:j1], v[:, j0:j1]
        dkj = k.new_zeros(batch, j1 - j0, k.shape[2])
        dvj = v.new_zeros(batch, j1 - j0, v.shape[2])
        first = (j0 // block_q) * block_q if causal else 0  # earlier query tiles cannot see these keys
        for i0 in range(first, nq, block_q):
            i1 = min(i0 + block_q, nq)
            qi, doi = q[:, i0:i1], dout[:, i0:i1]
            s = torch.bmm(qi, kj.transpose(1, 2)).mul_(scale).add_(_tile_bias(bias, i0, i1, j0, j1))  # (B, bq, bk)
            visible = _tile_mask(mask, causal, i0, i1, j0, j1, q.device)
            if visible is not None:
                s.masked_fill_(~visible, float("-inf"))
            p = s.sub_(lse[:, i0:i1, None]).exp_()  # the forward's probabilities, recomputed
            dvj.baddbmm_(p.transpose(1, 2), doi)
            ds = torch.bmm(doi, vj.transpose(1, 2)).sub_(delta[:, i0:i1, None]).mul_(p)  # P ∘ (dP − D)
            dq[:, i0:i1].baddbmm_(ds, kj, alpha=scale)
            dkj.baddbmm_(ds.transpose(1, 2), qi, alpha=scale)
        dk[:, j0:j1] = dkj
        dv[:, j0:j1] = dvj
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    """Saves q, k, v, the output and the row log-sum-exp; never the probabilities (O(N), not O(N²))."""

    @staticmethod
    def forward(ctx, q, k, v, mask, bias, causal, block_q, block_k, scale):
        out, lse = _flash_forward(q, k, v, mask, causal, block_q, block_k, scale, bias=bias)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.mask, ctx.bias, ctx.args = mask, bias, (causal, block_q, block_k, scale)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _flash_backward(q, k, v, out, lse, dout.contiguous(), ctx.mask, *ctx.args, bias=ctx.bias)
        return dq, dk, dv, None, None, None, None, None, None


def _fold_pairwise(t: Tensor | None, batch: tuple[int, ...], nq: int, nk: int, device: torch.device) -> Tensor | None:
    """A mask or bias as a broadcast view ``[B or 1, Nq, Nk]``, never a copy: tiles are cut from it."""
    if t is None:
        return None
    t = t.to(device)  # a tensor given on another device moves once, not tile by tile
    t = t.reshape((1,) * (2 - t.dim()) + t.shape) if t.dim() < 2 else t  # [..., ≥1, ≥1]
    if math.prod(t.shape[:-2]) == 1:
        return t.reshape(1, *t.shape[-2:]).expand(1, nq, nk)  # (1, Nq, Nk), shared by the batch
    return t.expand(*batch, nq, nk)  # (..., Nq, Nk)


def _fold_batch(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None = None
) -> tuple[tuple[int, ...], Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
    """Broadcast the leading dims and fold them into one; copies are O(N·D) at most, never O(Nq·Nk)."""
    nq, nk = q.shape[-2], k.shape[-2]
    leads = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    leads += [t.shape[:-2] for t in (mask, bias) if t is not None and t.dim() > 2]
    batch = broadcast_shape(*leads)
    if batch is None:  # what torch.broadcast_shapes raises, as the reference path's matmul does
        raise RuntimeError(f"shape mismatch: the leading dimensions {[tuple(s) for s in leads]} cannot be broadcast")
    q3 = q.expand(*batch, nq, q.shape[-1]).reshape(-1, nq, q.shape[-1])  # (B, Nq, D)
    k3 = k.expand(*batch, nk, k.shape[-1]).reshape(-1, nk, k.shape[-1])  # (B, Nk, D)
    v3 = v.expand(*batch, nk, v.shape[-1]).reshape(-1, nk, v.shape[-1])  # (B, Nk, Dv)
    return (
        batch,
        q3,
        k3,
        v3,
        _fold_pairwise(mask, batch, nq, nk, q.device),
        _fold_pairwise(bias, batch, nq, nk, q.device),
    )


def _block_sizes(block_size: int | tuple[int, int]) -> tuple[int, int]:
    sizes = tuple(block_size) if isinstance(block_size, (tuple, list)) else (block_size, block_size)
    if len(sizes) != 2:
        raise ValueError(f"block_size must be a positive integer or a pair of them, got {block_size!r}")
    return positive_int("block_size", sizes[0]), positive_int("block_size", sizes[1])


def _prepare(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    bias: Tensor | None,
    block_size: int | tuple[int, int],
    scale: float | None,
) -> tuple[tuple[int, ...], Tensor, Tensor, Tensor, Tensor | None, Tensor | None, int, int, float]:
    _check_qkv(q, k, v, mask, bias)
    block_q, block_k = _block_sizes(block_size)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return (*_fold_batch(q, k, v, mask, bias), block_q, block_k, scale)


def flash_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    block_size: int | tuple[int, int] = 64,
    scale: float | None = None,
    bias: Tensor | None = None,
) -> Tensor:
    """Exact attention computed tile by tile (FlashAttention-2 loop order): equal to
    :func:`scaled_dot_product_attention`, but nothing of size ``Nq × Nk`` is ever allocated.

    For each query tile the kernel walks the key/value tiles keeping, per row, the running max ``m``, the
    running sum ``ℓ = Σ exp(s − m)`` and an unnormalised output; when ``m`` grows, the sum and output so far
    are rescaled by ``exp(m_old − m_new)``, and the output is divided by ``ℓ`` once at the end. Under
    ``causal`` the tiles wholly above the diagonal are skipped. Differentiable: the backward recomputes tiles
    from the saved row log-sum-exp (FA2 Algorithm 2), so training memory is O(N) as well.

    Args:
        q: queries ``[..., Nq, D]``.
        k: keys ``[..., Nk, D]``.
        v: values ``[..., Nk, Dv]`` (leading dims of q, k, v and mask broadcast).
        mask: boolean, broadcastable to ``[..., Nq, Nk]``; True = may attend. Fully masked rows give zeros.
        causal: query i sees keys 0..i (top-left aligned, as ``masks.causal``); combined with ``mask`` by AND.
        block_size: tile side, or ``(block_q, block_k)``; any N works (the last tile is shorter).
        scale: multiplies the scores; default ``1/sqrt(D)``.
        bias: float, broadcastable to ``[..., Nq, Nk]``, added to the scaled scores tile by tile (a constant:
            it receives no gradient).

    Returns:
        ``out [..., Nq, Dv]``.
    """
    batch, q3, k3, v3, mask3, bias3, block_q, block_k, scale = _prepare(q, k, v, mask, bias, block_size, scale)
    out = _FlashAttention.apply(q3, k3, v3, mask3, bias3, bool(causal), block_q, block_k, scale)  # (B, Nq, Dv)
    return out.reshape(*batch, q.shape[-2], v.shape[-1])


@torch.no_grad()
def flash_attention_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    block_size: int | tuple[int, int] = 64,
    scale: float | None = None,
    on_tile: TileObserver | None = None,
    bias: Tensor | None = None,
    score_mod: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """The forward pass of :func:`flash_attention` alone (no autograd), for inspection.

    Args:
        score_mod: an elementwise function of each tile's scaled scores, applied before ``bias`` and the mask
            (Gemma 2's soft cap, as its layer applies it).
        on_tile: called as ``on_tile(i, j, m, l)`` after query tile ``i`` has consumed key tile ``j``, with the
            running max and sum ``[B, rows of tile i]`` (batch dims folded). Skipped tiles are never reported.
            ``m`` is ``finfo.min`` while a row has seen no visible key. The tensors change in place later: copy them.

    Returns:
        ``(out [..., Nq, Dv], lse [..., Nq])``; ``lse`` is each row's log-sum-exp of its visible scaled
        scores (+∞ for a fully masked row).
    """
    batch, q3, k3, v3, mask3, bias3, block_q, block_k, scale = _prepare(q, k, v, mask, bias, block_size, scale)
    out, lse = _flash_forward(
        q3, k3, v3, mask3, bool(causal), block_q, block_k, scale, on_tile, bias=bias3, score_mod=score_mod
    )
    return out.reshape(*batch, q.shape[-2], v.shape[-1]), lse.reshape(*batch, q.shape[-2])
