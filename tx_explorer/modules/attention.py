"""Multi-head attention (Vaswani et al. 2017, §3.2.2): heads in parallel, one fused QKV projection.

One class covers multi-head, grouped-query and multi-query attention (they differ only in how many key/value
heads there are), with the position scheme as an injected part (:mod:`tx_explorer.modules.positional`):
rotary turns q and k, ALiBi adds a bias to the scores; QK-norm is a part too (:class:`QKNorm` per head,
:class:`FullWidthQKNorm` over all heads at once), and so are soft-capped scores (:class:`SoftCap`, Gemma 2) and
attention sinks (:class:`AttentionSinks`, gpt-oss). A layer that sees only a window of keys among layers that see
all (Gemma 2/3's local layers) is a :class:`SlidingWindowAttention`.
:func:`make_attention` builds the one a config asks for, layer by layer.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer import masks
from tx_explorer.attention import scaled_dot_product_attention
from tx_explorer.config import TransformerConfig
from tx_explorer.edit import Edit
from tx_explorer.errors import InputError, positive_int
from tx_explorer.modules.cache import LayerCache
from tx_explorer.modules.linear import Linear, linear
from tx_explorer.modules.norms import RMSNorm
from tx_explorer.modules.positional import ALiBi, RelativePositions, Rotary, YaRNRotary
from tx_explorer.trace import Kind, Trace


class QKNorm(nn.Module):
    """RMSNorm over each head's query and each head's key vector, before rotary positions (Dehghani et al. 2023;
    Gemma 3, Qwen3, OLMo2): the scores' scale is then set by the two norms' weights, whatever the size of q and k."""

    def __init__(self, head_dim: int, *, eps: float = 1e-6) -> None:
        super().__init__()
        self.q = RMSNorm(head_dim, eps=eps)  # one weight per dimension, shared by every head
        self.k = RMSNorm(head_dim, eps=eps)

    def forward(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """``q [B, H, N, Dh]``, ``k [B, H_kv, N, Dh]`` → the same shapes, each vector of unit RMS times the weight."""
        return self.q(q), self.k(k)


class FullWidthQKNorm(QKNorm):
    """OLMo 2's QK-norm: one RMSNorm over all of a token's query heads together (width H·D_H), one over its key
    heads (H_kv·D_H), before rotary positions — the heads' sizes are normalised jointly, not each on its own."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, *, eps: float = 1e-6) -> None:
        nn.Module.__init__(self)
        self.q = RMSNorm(num_heads * head_dim, eps=eps)  # one weight per dimension of every head
        self.k = RMSNorm(num_kv_heads * head_dim, eps=eps)

    @staticmethod
    def _across_heads(norm: RMSNorm, t: Tensor) -> Tensor:
        b, h, n, dh = t.shape
        flat = t.transpose(1, 2).reshape(b, n, h * dh)  # (B, N, H·Dh): a token's heads side by side
        return norm(flat).view(b, n, h, dh).transpose(1, 2)  # (B, H, N, Dh)

    def forward(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """``q [B, H, N, Dh]``, ``k [B, H_kv, N, Dh]`` → the same shapes, each token's H·D_H values of unit RMS."""
        return self._across_heads(self.q, q), self._across_heads(self.k, k)


class SoftCap(nn.Module):
    """Soft-capping (Gemma 2): x ↦ c·tanh(x / c), close to x while |x| ≪ c and never beyond ±c — a smooth limit on
    attention scores (before the mask) or on the final logits."""

    def __init__(self, cap: float) -> None:
        super().__init__()
        self.cap = cap

    def forward(self, x: Tensor) -> Tensor:
        return self.cap * torch.tanh(x / self.cap)


class AttentionSinks(nn.Module):
    """Learned attention sinks (gpt-oss; Xiao et al. 2023's sink token as one parameter): each head h has a logit
    s_h that joins every row's softmax as an extra key with no value, then is dropped. A row's weights on the
    real keys are exp(e_j) / (exp(s_h) + Σ_k exp(e_k)), so they sum to less than 1: a head can attend "nowhere"."""

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(num_heads))  # s_h, one per query head

    def softmax(self, masked: Tensor) -> Tensor:
        """``masked [B, H, Nq, Nk]`` (−∞ where hidden) → weights ``[B, H, Nq, Nk]``, each row summing to < 1."""
        sink = self.logits.to(masked.dtype).view(1, -1, 1, 1).expand(*masked.shape[:-1], 1)  # (B, H, Nq, 1)
        return torch.softmax(torch.cat([masked, sink], dim=-1), dim=-1)[..., :-1]  # (B, H, Nq, Nk): sink dropped

    def log_normaliser(self, lse: Tensor) -> Tensor:
        """A row's log-sum-exp over its keys, ``lse [..., H, Nq]``, → over its keys and the sink: the log of the
        denominator above, for a kernel that sums the keys alone (weights = exp(e_j − this))."""
        return torch.logaddexp(lse, self.logits.to(lse.dtype)[:, None])  # (…, H, Nq)


class MultiHeadAttention(nn.Module):
    """MultiHead(X) = Concat(head₁…head_H)·W_O, head_h = softmax(Q_h K_{g(h)}ᵀ/√D_H + bias_h)·V_{g(h)}.

    Self-attention takes Q, K and V from one fused ``Linear(dim, (H + 2·H_kv)·D_H)`` — the lecture's
    ``[Q K V] = X[W_Q W_K W_V]`` — so the hardware sees one large matrix multiplication. With ``num_kv_heads``
    below ``num_heads`` (GQA; 1 = MQA) query head h reads key/value head g(h) = h // (H / H_kv), as
    transformers' ``repeat_kv`` does. With ``context`` (cross-attention) queries come from ``x`` and
    keys/values from ``context``, through the same weights. ``head_dim`` sets D_H where it is not D/H (Gemma 3:
    4 × 256 on D = 640; W_O then maps H·D_H back to D), ``scale`` the factor on QKᵀ (default 1/√D_H);
    ``softcap`` caps the scaled scores and ``sinks`` adds a sink logit per head to the softmax.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        num_kv_heads: int | None = None,
        bias: bool = True,
        qkv_bias: bool | None = None,
        dropout: float = 0.0,
        position: RelativePositions | None = None,
        head_dim: int | None = None,
        scale: float | None = None,
        qk_norm: QKNorm | None = None,
        softcap: SoftCap | None = None,
        sinks: AttentionSinks | None = None,
    ) -> None:
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        for name, value in (("dim", dim), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
            positive_int(name, value)
        if head_dim is None and dim % num_heads:
            raise InputError("heads_divide", heads=num_heads, dim=dim)
        if num_heads % num_kv_heads:
            raise InputError("kv_heads_divide", kv_heads=num_kv_heads, heads=num_heads)
        self.dim, self.num_heads = dim, num_heads
        self.head_dim = dim // num_heads if head_dim is None else positive_int("head_dim", head_dim)
        self.num_kv_heads = num_kv_heads
        self.q_dim = num_heads * self.head_dim  # H·D_H: D itself unless the heads are wider or narrower
        self.kv_dim = num_kv_heads * self.head_dim
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.qkv = Linear(dim, self.q_dim + 2 * self.kv_dim, bias=qkv_bias)  # [W_Q W_K W_V]
        self.proj = Linear(self.q_dim, dim, bias=bias)  # W_O
        self.attn_drop = nn.Dropout(dropout)
        self.position = position
        self.scale = scale
        self.qk_norm = qk_norm
        self.softcap = softcap
        self.sinks = sinks

    @property
    def groups(self) -> tuple[int, ...]:
        """The key/value head each query head reads."""
        per_group = self.num_heads // self.num_kv_heads
        return tuple(h // per_group for h in range(self.num_heads))

    def _heads(self, t: Tensor, heads: int) -> Tensor:
        b, n, _ = t.shape
        return t.view(b, n, heads, self.head_dim).transpose(1, 2)  # (B, heads, N, Dh)

    def project_qkv(
        self, x: Tensor, context: Tensor | None = None, pos: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q from ``x``; K, V from ``context`` (or ``x``): ``(B, H, N, Dh)``, ``(B, H_kv, N, Dh)`` twice.

        A QK-norm part normalises each head's q and k first; self-attention then turns them by a rotary position
        part at ``pos`` (default 0…N−1)."""
        sizes = [self.q_dim, self.kv_dim, self.kv_dim]
        if context is None:
            q, k, v = self.qkv(x).split(sizes, dim=-1)  # (B, N, H·Dh), (B, N, D_kv) × 2
        else:
            w_q, w_kv = self.qkv.weight.split([self.q_dim, 2 * self.kv_dim])
            b_q, b_kv = (
                self.qkv.bias.split([self.q_dim, 2 * self.kv_dim]) if self.qkv.bias is not None else (None, None)
            )
            q = linear(x, w_q, b_q)
            k, v = linear(context, w_kv, b_kv).split(self.kv_dim, dim=-1)
        q, k, v = self._heads(q, self.num_heads), self._heads(k, self.num_kv_heads), self._heads(v, self.num_kv_heads)
        if self.qk_norm is not None:
            q, k = self.qk_norm(q, k)  # (B, H, N, Dh), (B, H_kv, N, Dh)
        if self.position is not None and context is None:
            pos = torch.arange(x.shape[1], device=x.device) if pos is None else pos
            q, k = self.position.rotate_qk(q, k, pos)
        return q, k, v

    def project_values(self, x: Tensor) -> Tensor:
        """V alone from ``x [B, N, D]``: ``[B, H_kv, N, Dh]``, as :meth:`project_qkv` makes it (no norm or rotary
        acts on values), from W_V's rows of the fused weight alone (SmolLM2: 192 of its 960 rows)."""
        start = self.q_dim + self.kv_dim
        bias = None if self.qkv.bias is None else self.qkv.bias[start:]
        return self._heads(linear(x, self.qkv.weight[start:], bias), self.num_kv_heads)

    def expand_kv(self, t: Tensor) -> Tensor:
        """``[B, H_kv, N, Dh]`` → ``[B, H, N, Dh]``: each key/value head repeated for the queries of its group."""
        if self.num_kv_heads == self.num_heads:
            return t
        b, _, n, dh = t.shape
        rep = self.num_heads // self.num_kv_heads
        return t[:, :, None].expand(b, self.num_kv_heads, rep, n, dh).reshape(b, self.num_heads, n, dh)

    def masked_scores(self, q: Tensor, k: Tensor, mask: Tensor | None, bias: Tensor | None) -> Tensor:
        """The scores ``[..., Nq, Nk]`` each row's softmax takes: QKᵀ scaled (1/√D_h unless the layer has its own
        scale), capped (Gemma 2), the bias added, −∞ where the mask hides a key; 16-bit inputs upcast as the operator
        does, float64 kept."""
        scale = 1.0 / math.sqrt(q.shape[-1]) if self.scale is None else self.scale
        wide = torch.promote_types(q.dtype, torch.float32)
        scores = (q.to(wide) @ k.to(wide).transpose(-2, -1)) * scale
        if self.softcap is not None:
            scores = self.softcap(scores)
        if bias is not None:
            scores = scores + bias
        return scores if mask is None else scores.masked_fill(~mask, float("-inf"))

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """The explicit path: ``(y [B, H, Nq, Dh], weights [B, H, Nq, Nk])`` from ``q``, ``k``, ``v`` of H heads.

        Plain attention is the library's operator; with a soft cap the scaled scores are capped before the bias
        and the mask, and with sinks each row's softmax takes the head's sink logit too (rows then sum to < 1)."""
        if self.softcap is None and self.sinks is None:
            return scaled_dot_product_attention(q, k, v, mask=mask, scale=self.scale, bias=bias)
        masked = self.masked_scores(q, k, mask, bias)  # (B, H, Nq, Nk)
        if self.sinks is not None:
            weights = self.sinks.softmax(masked)  # a fully masked row holds only the sink: zero weights
        else:
            weights = torch.softmax(masked, dim=-1)
            weights = weights if mask is None else weights.masked_fill(~mask, 0.0)  # a fully masked row: zeros
        return (weights @ v.to(masked.dtype)).to(v.dtype), weights  # (B, H, Nq, Dh), (B, H, Nq, Nk)

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        trace: Trace | None = None,
        kind: Kind | None = None,
        *,
        pos: Tensor | None = None,
        k_pos: Tensor | None = None,
        cache: LayerCache | None = None,
        edit: Edit | None = None,
    ) -> Tensor:
        """x ``[B, Nq, D]``, context ``[B, Nk, D]`` or None, mask broadcastable to ``[B, H, Nq, Nk]`` → ``[B, Nq, D]``.

        ``pos [Nq]`` are the queries' absolute positions and ``k_pos [Nk]`` the keys' (both 0…N−1 by default);
        with ``cache`` the new keys and values are appended to it and the queries see every cached row.
        ``edit`` (scoped to this layer) may change the weights and each head's output before W_O.
        """
        q, k, v = self.project_qkv(x, context, pos)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, T + Nq, Dh)
        k, v = self.expand_kv(k), self.expand_kv(v)  # (B, H, Nk, Dh)
        bias = None
        if self.position is not None and context is None:
            q_pos = torch.arange(x.shape[1], device=x.device) if pos is None else pos
            bias = self.position.score_bias(q_pos, q_pos if k_pos is None else k_pos)  # (H, Nq, Nk) or None
        fusable = mask is None or (mask.dtype == torch.bool and bool(mask.any(dim=-1).all()))
        fusable = fusable and self.softcap is None and self.sinks is None  # PyTorch's kernel has neither
        if trace is None and fusable and not (edit is not None and edit.wants_weights()):
            # Nobody looks at the weights: PyTorch's fused kernel (flash-style on CPU) computes the same
            # output without materialising them. Fully masked rows (NaN there, zero in ours) keep our path.
            drop = self.attn_drop.p if self.training else 0.0
            attn_mask = mask
            if bias is not None:  # one float mask: the bias where visible, −∞ where hidden
                bias = bias.to(q.dtype)
                attn_mask = bias if mask is None else torch.where(mask, bias, float("-inf"))
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=drop, scale=self.scale
            )  # (B, H, Nq, Dh)
        else:
            # (B, H, Nq, Dh), (B, H, Nq, Nk)
            y, weights = self.attend(q, k, v, mask, bias)
            if edit is not None:
                weights = edit.apply("weights", weights)
            if trace is not None:
                trace.add(
                    kind or ("cross" if context is not None else "self"),
                    weights,
                    name="attn",
                    kv_heads=self.num_kv_heads,
                    groups=self.groups,
                )
            if (self.training and self.attn_drop.p > 0) or (edit is not None and edit.wants_weights()):
                # dropped or edited weights: the output is theirs, recomputed (weights float32, v maybe bfloat16)
                y = (self.attn_drop(weights) @ v.to(weights.dtype)).to(v.dtype)
        if edit is not None:
            y = edit.apply("head", y)
        y = y.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.q_dim)  # (B, Nq, H·Dh)
        return self.proj(y)


class SlidingWindowAttention(MultiHeadAttention):
    """Causal self-attention of one layer that sees only the last ``window`` keys (the query included), in a stack
    whose other layers may see them all (Gemma 3: five local layers of 512 keys, then a global one). The window
    joins whatever mask the stack hands in; the weights outside it are exactly 0."""

    def __init__(self, dim: int, num_heads: int, *, window: int, **kwargs: Any) -> None:
        super().__init__(dim, num_heads, **kwargs)
        self.window = positive_int("window", window)

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        trace: Trace | None = None,
        kind: Kind | None = None,
        *,
        pos: Tensor | None = None,
        k_pos: Tensor | None = None,
        cache: LayerCache | None = None,
        edit: Edit | None = None,
    ) -> Tensor:
        """As :meth:`MultiHeadAttention.forward`, keys more than ``window − 1`` positions back hidden too (with a
        cache the keys' positions ``k_pos`` include the cached ones). With a cache this layer keeps only its last
        ``window`` rows, so it attends to the last of the stack's key positions (and mask columns) only."""
        q_pos = torch.arange(x.shape[1], device=x.device) if pos is None else pos
        k_pos = q_pos if k_pos is None else k_pos
        if cache is not None:
            cache = cache.windowed(self.window)
            kept = cache.rows + x.shape[1]  # the rows this step attends to: those the layer kept, then the new
            k_pos, mask = k_pos[-kept:], None if mask is None else mask[..., -kept:]
        band = masks.causal_between(q_pos, k_pos, self.window)  # (Nq, Nk)
        mask = band if mask is None else mask & band
        return super().forward(x, context, mask, trace, kind, pos=pos, k_pos=k_pos, cache=cache, edit=edit)


def make_rotary(cfg: TransformerConfig, layer: int) -> Rotary:
    """Rotary positions with the layer's θ, stretched by YaRN when the config says so (``yarn_factor``)."""
    if cfg.yarn_factor is None:
        return Rotary(cfg.head_dim, theta=cfg.layer_theta(layer))
    return YaRNRotary(
        cfg.head_dim,
        cfg.layer_theta(layer),
        factor=cfg.yarn_factor,
        original_len=cfg.yarn_original_len,
        beta_fast=cfg.yarn_beta_fast,
        beta_slow=cfg.yarn_beta_slow,
        truncate=cfg.yarn_truncate,
    )


POSITION_PARTS = {  # position schemes that act inside attention (the others are added to the embeddings)
    "rotary": make_rotary,
    "alibi": lambda cfg, layer: ALiBi(cfg.num_heads),
}


QK_NORMS = {  # per head (Gemma 3, Qwen3) or across a token's heads (OLMo 2)
    "head": lambda cfg: QKNorm(cfg.head_dim, eps=cfg.norm_eps),
    "full": lambda cfg: FullWidthQKNorm(cfg.num_heads, cfg.kv_heads, cfg.head_dim, eps=cfg.norm_eps),
}


def make_attention(cfg: TransformerConfig, *, cross: bool = False, layer: int = 0) -> MultiHeadAttention:
    """The attention of layer ``layer`` as a config asks for it: MHA/GQA/MQA by ``num_kv_heads``, rotary (with
    the layer's θ) or ALiBi by ``positions``, QK-norm by ``qk_norm`` (per head or over the full width by
    ``qk_norm_width``), soft-capped scores by ``attn_softcap``, sinks by ``attention_sinks``, and a
    :class:`SlidingWindowAttention` for a "sliding" layer among others (``layer_types``).

    Cross-attention keeps plain positions and no window: its keys come from another sequence."""
    position = None if cross or cfg.positions not in POSITION_PARTS else POSITION_PARTS[cfg.positions](cfg, layer)
    qkv_bias, out_bias = cfg.attention_bias
    parts: dict[str, Any] = dict(
        num_kv_heads=cfg.num_kv_heads,
        bias=out_bias,
        qkv_bias=qkv_bias,
        dropout=cfg.dropout,
        position=position,
        head_dim=cfg.head_width,
        scale=cfg.attn_scale,
        qk_norm=QK_NORMS[cfg.qk_norm_width](cfg) if cfg.qk_norm else None,
        softcap=None if cfg.attn_softcap is None else SoftCap(cfg.attn_softcap),
        sinks=AttentionSinks(cfg.num_heads) if cfg.attention_sinks else None,
    )
    window = None if cross else cfg.layer_window(layer)
    if window is not None:
        return SlidingWindowAttention(cfg.dim, cfg.num_heads, window=window, **parts)
    return MultiHeadAttention(cfg.dim, cfg.num_heads, **parts)
