"""Multi-head attention (Vaswani et al. 2017, §3.2.2): heads in parallel, one fused QKV projection."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer.attention import scaled_dot_product_attention
from tx_explorer.trace import Kind, Trace


class MultiHeadAttention(nn.Module):
    """MultiHead(X) = Concat(head₁…head_H)·W_O, head_h = softmax(Q_h K_hᵀ/√D_H)·V_h.

    Self-attention takes Q, K and V from one fused ``Linear(dim, 3·dim)`` — the lecture's
    ``[Q K V] = X[W_Q W_K W_V]`` — so the hardware sees one large matrix multiplication. With ``context``
    (cross-attention) queries come from ``x`` and keys/values from ``context``, through the same weights.
    """

    def __init__(self, dim: int, num_heads: int, *, bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        if dim <= 0 or num_heads <= 0:
            raise ValueError(f"dim and num_heads must be positive, got dim={dim}, num_heads={num_heads}")
        if dim % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide dim={dim}: each head needs D/H dimensions")
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)  # [W_Q W_K W_V]
        self.proj = nn.Linear(dim, dim, bias=bias)  # W_O
        self.attn_drop = nn.Dropout(dropout)

    def _heads(self, t: Tensor) -> Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, N, Dh)

    def project_qkv(self, x: Tensor, context: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Q from ``x``; K, V from ``context`` (or ``x``); each ``(B, H, N, Dh)``."""
        if context is None:
            q, k, v = self.qkv(x).split(self.dim, dim=-1)  # 3 × (B, N, D)
        else:
            w_q, w_kv = self.qkv.weight.split([self.dim, 2 * self.dim])
            b_q, b_kv = self.qkv.bias.split([self.dim, 2 * self.dim]) if self.qkv.bias is not None else (None, None)
            q = nn.functional.linear(x, w_q, b_q)
            k, v = nn.functional.linear(context, w_kv, b_kv).split(self.dim, dim=-1)
        return self._heads(q), self._heads(k), self._heads(v)

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        trace: Trace | None = None,
        kind: Kind | None = None,
    ) -> Tensor:
        """x ``[B, Nq, D]``, context ``[B, Nk, D]`` or None, mask broadcastable to ``[B, H, Nq, Nk]`` → ``[B, Nq, D]``."""
        q, k, v = self.project_qkv(x, context)
        fusable = mask is None or (mask.dtype == torch.bool and bool(mask.any(dim=-1).all()))
        if trace is None and fusable:
            # Nobody looks at the weights: PyTorch's fused kernel (flash-style on CPU) computes the same
            # output without materialising them. Fully masked rows (NaN there, zero in ours) keep our path.
            drop = self.attn_drop.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)  # (B, H, Nq, Dh)
        else:
            _, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # (B, H, Nq, Nk)
            if trace is not None:
                trace.add(kind or ("cross" if context is not None else "self"), weights, name="attn")
            y = self.attn_drop(weights) @ v  # (B, H, Nq, Dh)
        y = y.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.dim)  # (B, Nq, H·Dh)
        return self.proj(y)
