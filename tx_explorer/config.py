"""Frozen dataclass configs and named presets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal, Self, get_type_hints

from tx_explorer.errors import InputError, positive_int


class Serialisable:
    """``to_dict``, ``from_dict`` and ``replace`` for the frozen dataclass configs (``config.json`` of a bundle).

    ``from_dict`` ignores keys it does not know (a bundle's extra fields, or ones a later version added) and
    rebuilds nested configs from their dicts.
    """

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        types = get_type_hints(cls)
        kwargs = {}
        for f in fields(cls):
            if f.name in d:
                value, kind = d[f.name], types[f.name]
                nested = isinstance(kind, type) and issubclass(kind, Serialisable) and isinstance(value, Mapping)
                kwargs[f.name] = kind.from_dict(value) if nested else value
        return cls(**kwargs)

    def replace(self, **changes: Any) -> Self:
        return replace(self, **changes)


@dataclass(frozen=True)
class TransformerConfig(Serialisable):
    vocab_size: int = 2048  # tokens the embedding knows (byte-level BPE trained on our corpus)
    max_len: int = 128  # longest context in tokens (learned positions need a row each)
    dim: int = 128  # model width D
    num_layers: int = 4  # stacked blocks L
    num_heads: int = 4  # query heads H; D_H = D / H unless head_width says otherwise
    head_width: int | None = None  # D_H when it is not D / H (Gemma 3: 4 heads × 256 on D 640); W_O maps H·D_H → D
    num_kv_heads: int | None = None  # key/value heads: None = H (multi-head), 1 = multi-query, else grouped (§8.4)
    # classic MLP, SwiGLU (§8.3), GeGLU (tanh GELU gate: Gemma) or gpt-oss's routed experts (clamped SwiGLU, k of E)
    mlp: Literal["mlp", "swiglu", "geglu", "experts"] = "mlp"
    mlp_ratio: float = 4.0  # MLP hidden = ratio·D; SwiGLU uses 2/3 of it so parameters match; GeGLU all of it
    activation: Literal["gelu", "gelu_tanh", "relu"] = "gelu"  # MLP non-linearity
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"  # §5.2 / §8.2
    # x + f(norm(x)), norm(x + f(x)) (§8.1), Gemma 2/3's sandwich x + norm_out(f(norm(x))): a norm on both sides,
    # or OLMo 2's x + norm_out(f(x)): a norm on the sub-layer's output only
    norm_position: Literal["pre", "post", "sandwich", "after"] = "pre"
    norm_eps: float = 1e-5  # ε inside the square root (BERT 1e-12, ViT 1e-6)
    positions: Literal["learned", "sinusoidal", "rotary", "alibi", "none"] = "learned"  # §3.3, §9.3; none: equivariant
    sinusoidal_scale: float = 1.0  # multiplies the sinusoidal table (entries up to 1) before it is added
    rope_theta: float = 10000.0  # rotary base θ: pair i turns by position·θ^(−2i/D_H) (Llama 3 uses 500 000)
    sliding_window: int | None = None  # a query sees itself and the window − 1 keys before it (Mistral); None = all
    # Per layer, "sliding" (the window above) or "full" (every earlier key): Gemma 3 makes every 6th layer full.
    # None: every layer alike, windowed when sliding_window is set.
    layer_types: tuple[Literal["sliding", "full"], ...] | None = None
    # YaRN (gpt-oss): rotary stretched yarn_factor times past the yarn_original_len tokens it was trained at, the
    # pairs turning between yarn_beta_slow and yarn_beta_fast times in it ramped (truncate: at whole pairs)
    yarn_factor: float | None = None  # None: plain rotary
    yarn_original_len: int = 4096
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    yarn_truncate: bool = True
    rope_local_theta: float | None = None  # θ of the "sliding" layers when it differs from rope_theta (Gemma 3: 10⁴)
    qk_norm: bool = False  # RMSNorm over each head's q and k before rotary positions (Gemma 3, Qwen3, OLMo2)
    qk_norm_width: Literal["head", "full"] = "head"  # QK-norm per head (Gemma 3, Qwen3) or over all H·D_H (OLMo 2)
    attn_softcap: float | None = None  # scores become c·tanh(scores / c) before the mask (Gemma 2: c = 50)
    final_softcap: float | None = None  # the logits become c·tanh(logits / c) (Gemma 2: c = 30)
    attention_sinks: bool = False  # a learned logit per head joins each softmax and is dropped (gpt-oss)
    num_experts: int = 8  # E routed experts of mlp="experts" (gpt-oss 20B: 32)
    experts_per_token: int = 2  # k of them per token (gpt-oss: 4)
    swiglu_limit: float = 7.0  # the experts' clamp: gate ≤ L, |up| ≤ L (gpt-oss)
    swiglu_alpha: float = 1.702  # the experts' gate·σ(α·gate) (gpt-oss)
    attn_scale: float | None = None  # multiplies QKᵀ; None = 1/√D_H (Gemma: query_pre_attn_scalar^(−1/2))
    embed_scale: bool = False  # token vectors × √D before the first block (Vaswani et al. §3.4; Gemma)
    bias: bool = True  # biases in linear layers and LayerNorm
    qkv_bias: bool | None = None  # biases on the Q/K/V projections alone; None = follow ``bias`` (Qwen2: True)
    dropout: float = 0.0  # on attention weights, MLP output and embeddings; 0 for small-data runs
    tie_embeddings: bool = True  # LM head shares the token embedding matrix (GPT-2)
    type_vocab_size: int = 0  # BERT segment embeddings; 0 = none
    embed_norm: bool = False  # LayerNorm straight after the embeddings (BERT)
    final_norm: bool = True  # norm before the head; pre-norm stacks need it, BERT has none

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_len", "dim", "num_layers", "num_heads"):
            positive_int(name, getattr(self, name))
        if self.head_width is None and self.dim % self.num_heads:
            raise InputError("heads_divide", heads=self.num_heads, dim=self.dim)
        if self.head_width is not None:
            positive_int("head_width", self.head_width)
        if self.positions == "sinusoidal" and self.dim % 2:
            raise InputError("sinusoidal_even")
        if self.layer_types is not None:
            object.__setattr__(self, "layer_types", tuple(self.layer_types))  # a list from config.json
            if len(self.layer_types) != self.num_layers or set(self.layer_types) - {"sliding", "full"}:
                raise InputError("layer_types", types=", ".join(map(str, self.layer_types)), layers=self.num_layers)
            if "sliding" in self.layer_types and self.sliding_window is None:
                raise InputError("layer_types_window")
        if self.num_kv_heads is not None and self.num_heads % positive_int("num_kv_heads", self.num_kv_heads):
            raise InputError("kv_heads_divide", kv_heads=self.num_kv_heads, heads=self.num_heads)
        if self.positions == "rotary" and self.head_dim % 2:
            raise InputError("rotary_even")
        if self.sliding_window is not None:
            positive_int("sliding_window", self.sliding_window)
        if self.mlp == "experts":
            positive_int("num_experts", self.num_experts)
            if not 1 <= positive_int("experts_per_token", self.experts_per_token) <= self.num_experts:
                raise InputError("experts_per_token", k=self.experts_per_token, experts=self.num_experts)
        for name in ("attn_softcap", "final_softcap"):
            cap = getattr(self, name)
            if cap is not None and not cap > 0:
                raise InputError("softcap_positive", name=name, value=cap)

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads if self.head_width is None else self.head_width

    @property
    def uniform_window(self) -> int | None:
        """The window every layer shares (the stack's own mask and the KV cache apply it); None when the layers
        differ (each sliding layer's attention then applies its own, :func:`layer_window`) or none has one."""
        return self.sliding_window if self.layer_types is None else None

    def layer_window(self, layer: int) -> int | None:
        """The window of layer ``layer`` alone, beyond the stack's mask: set only for a "sliding" layer among
        others of another type."""
        return None if self.layer_types is None or self.layer_types[layer] == "full" else self.sliding_window

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Per layer, how many keys back it sees: every layer's window (Mistral), its own (Gemma 3's local layers,
        512) or None (all)."""
        return tuple(
            self.uniform_window if self.layer_types is None else self.layer_window(i) for i in range(self.num_layers)
        )

    @property
    def global_layers(self) -> tuple[int, ...]:
        """The layers that see every earlier token among windowed ones (Gemma 3's 5, 11, 17); none where every
        layer is alike."""
        return () if self.layer_types is None else tuple(i for i, kind in enumerate(self.layer_types) if kind == "full")

    def layer_theta(self, layer: int) -> float:
        """The rotary base θ of layer ``layer``."""
        local = self.layer_types is not None and self.layer_types[layer] == "sliding"
        return self.rope_local_theta if local and self.rope_local_theta is not None else self.rope_theta

    @property
    def kv_heads(self) -> int:
        """Key/value heads actually built: H for multi-head attention, fewer for GQA/MQA."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def attention_bias(self) -> tuple[bool, bool]:
        """(Q/K/V projections, output projection) biases."""
        return (self.bias if self.qkv_bias is None else self.qkv_bias), self.bias

    @property
    def mlp_hidden(self) -> int:
        """The MLP's hidden width: ratio·D, or for SwiGLU ⌊2/3 of it⌉ (three matrices: 3·D·h ≈ 2·D·ratio·D)."""
        if self.mlp == "swiglu":
            return max(1, round(2 * self.mlp_ratio * self.dim / 3))
        return int(self.mlp_ratio * self.dim)


@dataclass(frozen=True)
class ViTConfig(Serialisable):
    """A Vision Transformer (Dosovitskiy et al. 2020, lecture §7): image → patch tokens → encoder → class."""

    image_size: int = 64  # square input side in pixels; must be a multiple of patch_size
    patch_size: int = 8  # P: each token is one P×P×C patch (ViT-B/16 uses 16 at 224 px → 196 tokens)
    in_chans: int = 3  # RGB
    num_classes: int = 6  # classifier outputs C
    dim: int = 128  # model width D
    num_layers: int = 6  # stacked pre-norm blocks L
    num_heads: int = 4  # heads H; D_H = D / H
    mlp_ratio: float = 4.0  # MLP hidden = ratio·D
    class_token: bool = True  # prepend a learned [CLS] token (BERT/ViT); False = patches only
    pool: Literal["token", "avg"] = "token"  # classify from [CLS], or from the mean of the patch outputs (§7.3)
    positions: Literal["learned", "sincos2d", "none"] = "learned"  # learned 1-D table or fixed 2-D sin-cos (MAE)
    norm_eps: float = 1e-6  # timm's LayerNorm ε, so copied timm weights give the same logits
    dropout: float = 0.0  # on attention weights and MLP output; 0 for small-data runs
    qkv_bias: bool = True  # biases on the Q/K/V projection (timm's qkv_bias; the output projection keeps its own)

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "in_chans", "num_classes", "dim", "num_layers", "num_heads"):
            positive_int(name, getattr(self, name))
        if self.image_size % self.patch_size:
            raise InputError("patch_divides", patch=self.patch_size, size=self.image_size)
        if self.dim % self.num_heads:
            raise InputError("heads_divide", heads=self.num_heads, dim=self.dim)
        if self.pool == "token" and not self.class_token:
            raise ValueError("pool='token' needs class_token=True; use pool='avg' without a class token")
        if self.positions == "sincos2d" and self.dim % 4:
            raise ValueError("2-D sin-cos positions need dim divisible by 4 (sin and cos for rows and columns)")

    @property
    def grid(self) -> int:
        """Patches per side."""
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid**2

    @property
    def num_tokens(self) -> int:
        """Sequence length seen by the blocks: patches (+1 for [CLS])."""
        return self.num_patches + int(self.class_token)

    def blocks(self) -> TransformerConfig:
        """The shared block settings: pre-norm LayerNorm, exact GELU, biases (as in timm's ViT)."""
        return TransformerConfig(
            max_len=self.num_tokens,
            dim=self.dim,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            mlp_ratio=self.mlp_ratio,
            norm_eps=self.norm_eps,
            dropout=self.dropout,
            qkv_bias=self.qkv_bias,
            positions="none",
            tie_embeddings=False,
        )


PRESETS: dict[str, TransformerConfig] = {
    # Trained and bundled by `python -m tx_explorer.train lm --preset tiny`.
    "tiny": TransformerConfig(),
    # Bundled too (`--preset tiny-llama`): today's recipe at tiny-gpt's size. Rotary positions, 4 query heads
    # sharing 2 key/value heads, RMSNorm, SwiGLU (hidden 384 = 3D, so 12·D² per block like tiny-gpt), no biases.
    "tiny-llama": TransformerConfig(
        positions="rotary",
        num_kv_heads=2,
        norm="rmsnorm",
        mlp="swiglu",
        mlp_ratio=4.5,
        bias=False,
    ),
    # Published architectures, for parameter counting on the meta device (§5.4).
    "gpt2-small": TransformerConfig(
        vocab_size=50257, max_len=1024, dim=768, num_layers=12, num_heads=12, activation="gelu_tanh"
    ),
    "gpt2-xl": TransformerConfig(
        vocab_size=50257, max_len=1024, dim=1600, num_layers=48, num_heads=25, activation="gelu_tanh"
    ),
    "gpt3": TransformerConfig(
        vocab_size=50257, max_len=2048, dim=12288, num_layers=96, num_heads=96, activation="gelu_tanh"
    ),
    "bert-base": TransformerConfig(
        vocab_size=30522,
        max_len=512,
        dim=768,
        num_layers=12,
        num_heads=12,
        norm_position="post",
        norm_eps=1e-12,
        type_vocab_size=2,
        embed_norm=True,
        final_norm=False,
        tie_embeddings=False,
    ),
}
