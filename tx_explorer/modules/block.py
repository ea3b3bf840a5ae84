"""The Transformer block (§5.1, §8.1): attention and MLP, each wrapped in a residual connection and a norm."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from tx_explorer.config import TransformerConfig
from tx_explorer.edit import Edit
from tx_explorer.modules.attention import make_attention
from tx_explorer.modules.cache import LayerCache
from tx_explorer.modules.experts import ClampedSwiGLUExperts
from tx_explorer.modules.mlp import MLP, GeGLU, SwiGLU
from tx_explorer.modules.norms import LayerNorm, RMSNorm
from tx_explorer.trace import Kind, Trace, scoped


def make_norm(cfg: TransformerConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.dim, eps=cfg.norm_eps)
    return LayerNorm(cfg.dim, eps=cfg.norm_eps, bias=cfg.bias)


def make_mlp(cfg: TransformerConfig) -> nn.Module:
    if cfg.mlp == "experts":
        return ClampedSwiGLUExperts(
            cfg.dim,
            cfg.mlp_hidden,
            cfg.num_experts,
            cfg.experts_per_token,
            limit=cfg.swiglu_limit,
            alpha=cfg.swiglu_alpha,
        )
    if cfg.mlp in ("swiglu", "geglu"):
        gated = SwiGLU if cfg.mlp == "swiglu" else GeGLU
        return gated(cfg.dim, cfg.mlp_hidden, bias=False, dropout=cfg.dropout)
    return MLP(cfg.dim, cfg.mlp_hidden, activation=cfg.activation, bias=cfg.bias, dropout=cfg.dropout)


class TransformerBlock(nn.Module):
    """Pre-Norm: x + f(norm(x)) — the residual path is the identity (Xiong et al. 2020).
    Post-Norm: norm(x + f(x)) — the original Transformer and BERT.
    Sandwich: x + norm_out(f(norm(x))) — Pre-Norm with a second norm on each sub-layer's output (Gemma 2/3).
    After: x + norm_out(f(x)) — the sub-layer reads the raw stream, only its output is normalised (OLMo 2).

    With ``cross=True`` a cross-attention sub-layer (queries from x, keys/values from ``context``) sits
    between self-attention and the MLP, as in the original decoder (§2.5).

    Attention and MLP are parts: pass your own (``attention=``, ``mlp=``) or let the config's factories build
    them (:func:`~tx_explorer.modules.attention.make_attention` for the block's ``layer``, :func:`make_mlp`).
    """

    def __init__(
        self,
        cfg: TransformerConfig,
        *,
        layer: int = 0,
        cross: bool = False,
        attention: nn.Module | None = None,
        mlp: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.norm_position = cfg.norm_position
        before = cfg.norm_position != "after"  # OLMo 2 has no norm in front of its sub-layers
        self.norm1 = make_norm(cfg) if before else nn.Identity()
        self.attn = attention if attention is not None else make_attention(cfg, layer=layer)
        self.cross_attn = make_attention(cfg, cross=True) if cross else None
        self.norm_cross = make_norm(cfg) if cross else None
        self.norm2 = make_norm(cfg) if before else nn.Identity()
        self.mlp = mlp if mlp is not None else make_mlp(cfg)
        out_norms = cfg.norm_position in ("sandwich", "after")
        self.post_attn_norm = make_norm(cfg) if out_norms else None  # on the attention's output
        self.post_mlp_norm = make_norm(cfg) if out_norms else None  # on the MLP's output
        self.drop = nn.Dropout(cfg.dropout)

    def attention_input(self, x: Tensor) -> Tensor:
        """What the self-attention reads from the residual stream ``x``: ``norm1(x)`` in pre-norm and sandwich
        blocks, ``x`` itself in a post-norm block (its norm comes after the sum) and after OLMo 2's (norm1 is the
        identity there)."""
        return x if self.norm_position == "post" else self.norm1(x)

    def residual(
        self, x: Tensor, f: Callable[[Tensor], Tensor], norm: nn.Module, after: nn.Module | None = None
    ) -> Tensor:
        """One sub-layer ``f`` and its residual connection; ``after``: the sandwich's norm on ``f``'s output."""
        if self.norm_position == "post":
            return norm(x + self.drop(f(x)))
        y = f(norm(x))
        return x + self.drop(y if after is None else after(y))

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        context: Tensor | None = None,
        context_mask: Tensor | None = None,
        trace: Trace | None = None,
        kind: Kind = "self",
        pos: Tensor | None = None,
        k_pos: Tensor | None = None,
        cache: LayerCache | None = None,
        edit: Edit | None = None,
    ) -> Tensor:
        """x ``[B, N, D]`` → ``[B, N, D]``; masks broadcast to ``[B, H, N, N]`` / ``[B, H, N, Nctx]``.

        ``pos``/``k_pos``/``cache``: the positions of queries and keys and this layer's KV cache (see
        :class:`~tx_explorer.modules.attention.MultiHeadAttention`). ``edit`` (scoped to this layer) may change
        the residual stream at the block's input ("pre"), after attention ("mid") and at its output ("post")."""
        site = (lambda name, t: edit.apply(name, t)) if edit is not None else (lambda name, t: t)
        x = site("pre", x)
        x = self.residual(
            x,
            lambda h: self.attn(h, mask=mask, trace=trace, kind=kind, pos=pos, k_pos=k_pos, cache=cache, edit=edit),
            self.norm1,
            self.post_attn_norm,
        )
        if self.cross_attn is not None:
            if context is None:
                raise ValueError("this block has cross-attention and needs a context")
            cross_trace = scoped(trace, "cross")
            x = self.residual(
                x, lambda h: self.cross_attn(h, context=context, mask=context_mask, trace=cross_trace), self.norm_cross
            )
        x = site("mid", x)
        return site("post", self.feed_forward(x, trace))

    def feed_forward(self, x: Tensor, trace: Trace | None) -> Tensor:
        """The MLP sub-layer with its norm and residual connection."""
        return self.residual(x, lambda h: self.mlp(h, trace=trace), self.norm2, self.post_mlp_norm)


class AttentionOnlyBlock(TransformerBlock):
    """A block with attention and no MLP: x + attn(norm(x)) (Elhage et al. 2021). Every path from a token to the
    logits then runs through heads, which is what makes a two-layer stack's circuits (a previous-token head feeding
    an induction head) readable. The residual sites "pre", "mid" and "post" stay, "mid" = "post"."""

    def __init__(self, cfg: TransformerConfig, *, layer: int = 0) -> None:
        super().__init__(cfg, layer=layer, mlp=nn.Identity())
        self.norm2 = self.mlp = None  # no parameters and nothing in the state dict

    def feed_forward(self, x: Tensor, trace: Trace | None) -> Tensor:
        return x
