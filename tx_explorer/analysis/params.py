"""Parameter and FLOP counts (§5.4), each formula written once, and the real model built on the ``meta`` device.

Per block, attention holds 4D² (W_Q, W_K, W_V, W_O) and the MLP 2·D·4D = 8D², so a stack of L blocks
holds about 12·L·D² (Kaplan et al. 2020), plus V·D for the token embedding (shared with the LM head when
tied), T·D for learned positions, and small change for biases and norms. A decoder block of the original
encoder–decoder Transformer also has cross-attention: 16D². Grouped-query attention shrinks W_K and W_V to
D × H_kv·D_H each, so attention holds D·(D + 2·H_kv·D_H) + D·D.

A token's forward pass costs 2 FLOPs per weight it meets (one multiply-add) plus the two N-dependent products
QKᵀ and AV, 2·2·N·H·D_H over N keys (2·2·N·D when D_H = D/H). The formulas are checked against
``sum(p.numel())`` of the real modules instantiated on the ``meta`` device: shapes without memory, so even GPT-3's
175B parameters count exactly in milliseconds.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.modules.block import TransformerBlock, make_norm
from tx_explorer.modules.init import skip_init
from tx_explorer.modules.transformer import CausalLM, Encoder

Kind = Literal["causal", "encoder", "encoder-decoder"]
PARTS = ("embeddings", "attention", "mlp", "norms", "head")


def attention_weights(cfg: TransformerConfig) -> int:
    """Matrix entries of one attention layer: W_Q is D × H·D_H and W_O H·D_H × D (D × D unless the heads are wider
    or narrower than D / H: Gemma 3's 4 × 256 on D = 640), W_K and W_V D × H_kv·D_H each."""
    q = cfg.num_heads * cfg.head_dim
    return cfg.dim * q + kv_weights(cfg) + q * cfg.dim


def kv_weights(cfg: TransformerConfig) -> int:
    """Matrix entries of W_K and W_V together: D × H_kv·D_H each, what sharing key/value heads shrinks."""
    return 2 * cfg.dim * cfg.kv_heads * cfg.head_dim


def attention_params(cfg: TransformerConfig) -> int:
    """One attention layer (self or cross): :func:`attention_weights` plus the Q/K/V and output biases and learned
    sinks' logits (one per head, gpt-oss)."""
    qkv_bias, out_bias = cfg.attention_bias
    q, kv = cfg.num_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    sinks = cfg.num_heads if cfg.attention_sinks else 0
    return attention_weights(cfg) + (q + 2 * kv) * qkv_bias + cfg.dim * out_bias + sinks


def mlp_weights(cfg: TransformerConfig, hidden: int | None = None) -> int:
    """Matrix entries of one MLP of width ``hidden`` (default ``cfg.mlp_hidden``): SwiGLU has three matrices."""
    h = cfg.mlp_hidden if hidden is None else hidden
    return (3 if cfg.mlp in ("swiglu", "geglu") else 2) * cfg.dim * h  # gated MLPs have a third matrix


def mlp_params(cfg: TransformerConfig, hidden: int | None = None) -> int:
    """One MLP (or one expert of that width): weights plus biases; SwiGLU is built without biases."""
    h = cfg.mlp_hidden if hidden is None else hidden
    return mlp_weights(cfg, h) + (h + cfg.dim if cfg.bias and cfg.mlp == "mlp" else 0)  # gated: built unbiased


def norm_params(cfg: TransformerConfig) -> int:
    """One norm: the gain, and LayerNorm's shift when the config has biases."""
    return cfg.dim if cfg.norm == "rmsnorm" else (2 * cfg.dim if cfg.bias else cfg.dim)


def qk_norm_params(cfg: TransformerConfig) -> int:
    """QK-norm's gains in one attention layer: on q and k, per head D_H each; over all heads (H + H_kv)·D_H."""
    if not cfg.qk_norm:
        return 0
    return 2 * cfg.head_dim if cfg.qk_norm_width == "head" else (cfg.num_heads + cfg.kv_heads) * cfg.head_dim


def block_norm_params(cfg: TransformerConfig) -> int:
    """The norms of one block without cross-attention: two, four for Gemma's sandwich (one more after each
    sub-layer), and its attention's QK-norm."""
    return (4 if cfg.norm_position == "sandwich" else 2) * norm_params(cfg) + qk_norm_params(cfg)


def embedding_params(cfg: TransformerConfig) -> int:
    """Token embedding, learned positions (other schemes have no parameters) and segment embeddings."""
    positions = cfg.max_len * cfg.dim if cfg.positions == "learned" else 0
    return cfg.vocab_size * cfg.dim + positions + cfg.type_vocab_size * cfg.dim


def rule_of_thumb(cfg: TransformerConfig) -> int:
    """12·L·D²: the blocks' weights when attention is 4D² and the MLP 8D² (Kaplan et al. 2020)."""
    return 12 * cfg.num_layers * cfg.dim**2


def count_params(cfg: TransformerConfig, kind: Kind = "causal", decoder_layers: int | None = None) -> dict[str, int]:
    """Parameters by part — embeddings, attention, MLP, norms, (untied) LM head — from the formulas.

    Args:
        kind: "causal" (:class:`CausalLM`), "encoder" (:class:`Encoder`) or "encoder-decoder"
            (``num_layers`` encoder blocks, ``decoder_layers`` decoder blocks with cross-attention, one
            embedding shared by both sides and the output projection, as in Vaswani et al. 2017 §3.4).
    """
    norm = norm_params(cfg)
    enc_layers = cfg.num_layers
    dec_layers = (cfg.num_layers if decoder_layers is None else decoder_layers) if kind == "encoder-decoder" else 0
    stacks = 2 if kind == "encoder-decoder" else 1
    return {
        "embeddings": embedding_params(cfg),
        "attention": (enc_layers + 2 * dec_layers) * attention_params(cfg),
        "mlp": (enc_layers + dec_layers) * mlp_params(cfg),
        "norms": (enc_layers + dec_layers) * block_norm_params(cfg)
        + dec_layers * (norm + qk_norm_params(cfg))  # the decoder's cross-attention: its norm and QK-norm
        + (stacks * norm if cfg.final_norm else 0)
        + (2 * cfg.dim if cfg.embed_norm else 0),  # BERT's embedding LayerNorm, always with a shift
        "head": cfg.vocab_size * cfg.dim if kind == "causal" and not cfg.tie_embeddings else 0,
    }


def flops_per_token(
    cfg: TransformerConfig, context: int | None = None, *, mlp: int | None = None, router: int = 0
) -> dict[str, int]:
    """Forward matmul FLOPs per token of a causal LM (2 per multiply-add), exact from the config.

    Counts the attention projections, QKᵀ and AV over ``context`` keys (default: the full context; a causal
    model's average is about half), the MLP and the LM head; norms, softmax and activations are left out
    (a few % at small sizes). ``mlp`` replaces one layer's MLP weight count (a MoE's k experts) and ``router``
    adds a router's. Training costs ≈ 3× (backward = 2× forward).
    """
    n = cfg.max_len if context is None else context
    mlp_flops = 2 * (mlp_weights(cfg) if mlp is None else mlp)
    # Q, K, V, O projections; QKᵀ and AV over n keys in each of the H heads of width D_H (H·D_H = D unless the heads
    # are wider or narrower: Gemma 3's 4 × 256 on D = 640)
    attention = 2 * attention_weights(cfg) + 2 * 2 * n * cfg.num_heads * cfg.head_dim
    head = 2 * cfg.dim * cfg.vocab_size
    return {
        "mlp": cfg.num_layers * mlp_flops,
        "attention": cfg.num_layers * attention,
        "router": cfg.num_layers * 2 * router,
        "head": head,
        "total": cfg.num_layers * (mlp_flops + attention + 2 * router) + head,
    }


class EncoderDecoder(nn.Module):
    """The original Transformer's parameter layout (for counting): shared embedding, encoder and decoder stacks."""

    def __init__(self, cfg: TransformerConfig, decoder_layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)  # shared by both sides and the output layer
        self.encoder = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.num_layers))
        self.decoder = nn.ModuleList(TransformerBlock(cfg, cross=True) for _ in range(decoder_layers))
        self.norms = nn.ModuleList(make_norm(cfg) for _ in range(2)) if cfg.final_norm else nn.ModuleList()


@contextlib.contextmanager
def shapes_only() -> Iterator[None]:
    """Modules built inside have every tensor on the ``meta`` device, uninitialised: shapes without memory."""
    with torch.device("meta"), skip_init():
        yield


def build_on_meta(cfg: TransformerConfig, kind: Kind = "causal", decoder_layers: int | None = None) -> nn.Module:
    """The real module with every tensor on the ``meta`` device (shapes only, no memory)."""
    with shapes_only():
        if kind == "causal":
            return CausalLM(cfg)
        if kind == "encoder":
            return Encoder(cfg)
        return EncoderDecoder(cfg, cfg.num_layers if decoder_layers is None else decoder_layers)


def _part(name: str) -> str:
    if "norm" in name:
        return "norms"
    if "attn" in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    if name.startswith("head."):
        return "head"
    return "embeddings"


def measure(model: nn.Module) -> dict[str, int]:
    """``sum(p.numel())`` by part, reading parameter names (tied weights counted once)."""
    out = dict.fromkeys(PARTS, 0)
    for name, p in model.named_parameters():  # named_parameters() yields a shared tensor once
        out[_part(name)] += p.numel()
    return out


@dataclass(frozen=True)
class Published:
    """A row of the lecture's table (§5.4) next to what the papers report."""

    model: str
    lecture_blocks: int
    lecture_dim: int
    lecture_heads: int
    lecture_context: int
    lecture_params: float
    published_params: float
    published_source: str
    config: TransformerConfig
    kind: Kind
    decoder_layers: int | None = None


# Vaswani et al. 2017 Table 3 ("big": 6+6 layers, d_model 1024, d_ff 4096, 16 heads, shared ~37k BPE vocabulary,
# sinusoidal positions, post-norm, ReLU); Radford et al. 2019 Table 2; Brown et al. 2020 Table 2.1.
TRANSFORMER_BIG = TransformerConfig(
    vocab_size=37000,
    max_len=512,
    dim=1024,
    num_layers=6,
    num_heads=16,
    activation="relu",
    norm_position="post",
    positions="sinusoidal",
    final_norm=False,
)
LECTURE_TABLE = (
    Published(
        "Original Transformer",
        12,
        1024,
        16,
        512,
        213e6,
        213e6,
        "Vaswani et al. 2017, Table 3 (big)",
        TRANSFORMER_BIG,
        "encoder-decoder",
        6,
    ),
    Published("GPT-2", 48, 1600, 25, 1024, 1.5e9, 1542e6, "Radford et al. 2019, Table 2", PRESETS["gpt2-xl"], "causal"),
    Published("GPT-3", 96, 12288, 96, 2048, 175e9, 175.0e9, "Brown et al. 2020, Table 2.1", PRESETS["gpt3"], "causal"),
)


# ---------------------------------------------------------------------------------------------------------------
# §5.4 "a stack of identical blocks", and how far today's block is from 2017's


@dataclass(frozen=True)
class BlockRow:
    """One block of a real model beside its first block."""

    index: int
    params: int  # sum(p.numel()) of the block
    same_shapes: bool  # every parameter's name and shape equal block 0's
    max_diff: float  # largest |w − block 0's w| over its parameters: identical in form, not in weights (0 for block 0)


@torch.no_grad()
def block_table(blocks: Sequence[nn.Module]) -> list[BlockRow]:
    """Every block of a stack (``model.blocks``) against the first: its size, its shapes and its weights."""
    first = dict(blocks[0].named_parameters())
    rows = []
    for i, block in enumerate(blocks):
        own = dict(block.named_parameters())
        same = {k: tuple(v.shape) for k, v in own.items()} == {k: tuple(v.shape) for k, v in first.items()}
        diff = max((float((v - first[k]).abs().max()) for k, v in own.items()), default=0.0) if same else math.nan
        rows.append(BlockRow(i, sum(p.numel() for p in own.values()), same, diff))
    return rows


@dataclass(frozen=True)
class BlockFit:
    """One block's weight matrices, counted on the meta device, against §5.4's 12·D² (4D² attention + 8D² MLP)."""

    attention: int  # W_Q, W_K, W_V, W_O (and a decoder's cross-attention)
    mlp: int  # W₁, W₂ (and SwiGLU's W₃)
    rule: int  # 12·D²

    @property
    def ratio(self) -> float:
        return (self.attention + self.mlp) / self.rule

    @property
    def attention_ratio(self) -> float:
        """The attention matrices against the rule's 4D² (a third of 12·D²)."""
        return 3 * self.attention / self.rule

    @property
    def mlp_ratio(self) -> float:
        """The MLP matrices against the rule's 8D² (two thirds of 12·D²)."""
        return 3 * self.mlp / (2 * self.rule)


def block_fit(cfg: TransformerConfig, *, cross: bool = False) -> BlockFit:
    """Count one block's matrices (``cross``: a decoder block with cross-attention) on the meta device."""
    with shapes_only():
        block = TransformerBlock(cfg, cross=cross)
    parts = {"attention": 0, "mlp": 0}
    for name, p in block.named_parameters():
        if p.dim() >= 2:  # matrices only: biases and norm gains are O(D), not the D² the rule counts
            parts["mlp" if name.startswith("mlp.") else "attention"] += p.numel()
    return BlockFit(parts["attention"], parts["mlp"], 12 * cfg.dim**2)


# what a block is; head_width: the query heads' total width H·D_H against D (1 when D_H = D/H)
ARCHITECTURE = ("norm_position", "norm", "positions", "mlp", "activation", "bias", "kv_heads", "head_width")


def architecture_changes(before: TransformerConfig, after: TransformerConfig) -> dict[str, tuple[object, object]]:
    """The fields of :data:`ARCHITECTURE` in which two configs differ: ``{field: (before, after)}`` (key/value
    heads as a share of the query heads and the heads' width as a share of D, so that sizes do not count as a
    change)."""

    def read(cfg: TransformerConfig, field: str) -> object:
        if field == "activation" and cfg.mlp == "swiglu":
            return "silu"  # SwiGLU's gate is SiLU whatever the config's activation field says
        if field == "head_width":
            return f"{cfg.num_heads * cfg.head_dim / cfg.dim:g}"  # Gemma 3: 4 × 256 on D = 640, 1.6
        return f"{cfg.kv_heads}/{cfg.num_heads}" if field == "kv_heads" else getattr(cfg, field)

    return {
        f: (read(before, f), read(after, f))
        for f in ARCHITECTURE
        if (before.kv_heads / before.num_heads if f == "kv_heads" else read(before, f))
        != (after.kv_heads / after.num_heads if f == "kv_heads" else read(after, f))
    }
