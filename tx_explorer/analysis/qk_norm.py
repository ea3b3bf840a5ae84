"""QK-norm measured on a real model (Gemma 3, Qwen3, OLMo 2): each layer's scores q·k with the model's own norm on
q and k, and with the same weights but the norm left out, on one text.

The norm divides each head's q and k by their root mean square and multiplies by learned weights, so the scores'
size is set by those weights rather than by how large the residual stream has grown. Left out, the scores take the
raw projections' size. Per layer: the scores' spread (standard deviation over the cells a query sees), their largest
magnitude, and the rows' mean entropy after the softmax, both ways. The model itself is never changed (it is
shared between sessions); the path without the norm is computed beside it from the same projection weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from tx_explorer import masks
from tx_explorer.analysis.mask_gallery import layer_window
from tx_explorer.families.text import TextModel
from tx_explorer.modules.attention import MultiHeadAttention

QK_TOKENS = 256  # the bundled text's first tokens: one layer's scores (H × N²) at a time


@dataclass(frozen=True)
class Side:
    """One layer's scores measured one way."""

    spread: float  # standard deviation of the scaled scores over the visible cells, all heads
    largest: float  # the largest |score| over the visible cells
    entropy: float  # the rows' mean entropy after the softmax (nats); log(i + 1) would be uniform


@dataclass(frozen=True)
class QKNormLayer:
    layer: int
    normed: Side  # with the model's QK-norm (what the model computes)
    raw: Side  # the same projections without it


def _side(q: Tensor, k: Tensor, attn: MultiHeadAttention, visible: Tensor) -> Side:
    """``q [1, H, N, Dh]``, ``k [1, H_kv, N, Dh]`` (already turned by rotary) → the layer's score statistics."""
    scale = attn.scale or q.shape[-1] ** -0.5  # the module's own factor (Gemma 3: 1/√256)
    scores = (q @ attn.expand_kv(k).transpose(-2, -1))[0].double() * scale  # (H, N, N)
    seen = scores[:, visible]  # (H, cells)
    weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (H, N)
    return Side(float(seen.std()), float(seen.abs().max()), float(entropy.mean()))


@torch.no_grad()
def qk_norm_effect(tm: TextModel, ids: Sequence[int]) -> list[QKNormLayer]:
    """For every layer of ``tm`` (a causal model with QK-norm): its scores on ``ids`` with and without the norm.

    The residual stream is the model's own (each block runs as it does); only the scores are measured two ways."""
    model, cfg = tm.model, tm.config
    if not cfg.qk_norm:
        raise ValueError(f"{tm.name} has no QK-norm")
    device = next(model.parameters()).device
    x = model.embed(torch.tensor([list(ids)], device=device))  # (1, N, D)
    n = x.shape[1]
    pos = torch.arange(n, device=device)
    mask = model.mask(n, device)  # (N, N)
    found = []
    for i, block in enumerate(model.blocks):
        attn = block.attn
        h = block.attention_input(x)  # what the attention reads
        q, k, _ = attn.project_qkv(h, pos=pos)  # with the norm, turned: the model's own
        q_raw, k_raw, _ = attn.qkv(h).split([attn.q_dim, attn.kv_dim, attn.kv_dim], dim=-1)
        q_raw = q_raw.view(1, n, attn.num_heads, attn.head_dim).transpose(1, 2)  # (1, H, N, Dh)
        k_raw = k_raw.view(1, n, attn.num_kv_heads, attn.head_dim).transpose(1, 2)  # (1, H_kv, N, Dh)
        if attn.position is not None:
            q_raw, k_raw = attn.position.rotate(q_raw, pos), attn.position.rotate(k_raw, pos)
        window = layer_window(cfg, i)
        visible = mask if window is None else mask & masks.causal_between(pos, pos, window)
        found.append(QKNormLayer(i, _side(q, k, attn, visible), _side(q_raw, k_raw, attn, visible)))
        x = block(x, mask, pos=pos)
    return found
