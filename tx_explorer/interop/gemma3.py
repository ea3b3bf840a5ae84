"""Gemma 3 text checkpoints (Hugging Face ``gemma3_text`` layout) in our :class:`CausalLM`.

Gemma 3 (Gemma Team 2025) is Llama's recipe with seven changes, each a part of our modules picked by the config:
heads of width ``head_dim`` ≠ D/H (``head_width``), RMSNorm on each head's q and k before rotary (``qk_norm``),
a norm after each sub-layer as well as before it (``norm_position="sandwich"``), a GeGLU MLP with tanh GELU
(``mlp="geglu"``), embeddings × √D (``embed_scale``), scores × ``query_pre_attn_scalar``^(−1/2)
(``attn_scale``), and two kinds of layers (``layer_types``): local ones that see a sliding window of keys with
rotary base θ = 10 000, and every sixth a global one that sees every earlier key with θ = 1 000 000.

Gemma's RMSNorm multiplies by 1 + w and stores w; ours multiplies by its weight, so a checkpoint's norms are
loaded as 1 + w (``norm_offset``). llama.cpp's converter has already added the 1 in GGUF files
(:mod:`tx_explorer.interop.gguf` passes 0). Variants our modules do not implement (soft-capping, scaled rotary,
bidirectional attention, biases) are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop import llama
from tx_explorer.interop.common import mlp_ratio
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("gemma3_text",)
LAYER_TYPES = {"sliding_attention": "sliding", "full_attention": "full"}  # transformers' names → ours


def _thetas(cfg: Mapping[str, Any]) -> tuple[float, float]:
    """(global θ, local θ) from ``rope_parameters`` per layer type (transformers ≥ 5) or the older
    ``rope_theta`` / ``rope_local_base_freq``; scaled rotary (Gemma 3 4B and larger) is refused."""
    params = cfg.get("rope_parameters") or {}
    if "full_attention" not in params:
        params = {
            "full_attention": {"rope_theta": cfg.get("rope_theta", 1e6), **(cfg.get("rope_scaling") or {})},
            "sliding_attention": {"rope_theta": cfg.get("rope_local_base_freq", 1e4)},
        }
    thetas = []
    for kind in ("full_attention", "sliding_attention"):
        p = params.get(kind) or {}
        if p.get("rope_type", p.get("type", "default")) != "default":
            raise InputError("variant_rope_scaling", kind=p.get("rope_type", p.get("type")))
        thetas.append(float(p.get("rope_theta", 1e4)))
    return thetas[0], thetas[1]


def config_from_gemma3(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a Gemma 3 text ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("model_type", "gemma3_text") not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=cfg.get("model_type"), supported=", ".join(MODEL_TYPES))
    act = cfg.get("hidden_activation") or cfg.get("hidden_act") or "gelu_pytorch_tanh"
    if act != "gelu_pytorch_tanh":
        raise InputError("variant_activation", found=act, supported="'gelu_pytorch_tanh' (GeGLU)")
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if cfg.get(key) is not None:
            raise InputError("variant_not_implemented", field=key)
    if cfg.get("use_bidirectional_attention", False):  # an embedding model
        raise InputError("variant_not_implemented", field="use_bidirectional_attention")
    if cfg.get("attention_bias", False):
        raise InputError("variant_not_implemented", field="attention_bias")
    kinds = list(cfg.get("layer_types") or [])
    unknown = sorted(set(kinds) - set(LAYER_TYPES))
    if unknown or len(kinds) != cfg["num_hidden_layers"]:
        raise InputError("variant_layer_types", supported=", ".join(LAYER_TYPES), found=kinds)
    theta, local_theta = _thetas(cfg)
    dim, hidden = cfg["hidden_size"], cfg["intermediate_size"]
    ours = TransformerConfig(
        vocab_size=cfg["vocab_size"],
        max_len=cfg["max_position_embeddings"],
        dim=dim,
        num_layers=cfg["num_hidden_layers"],
        num_heads=cfg["num_attention_heads"],
        head_width=cfg["head_dim"],
        num_kv_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
        mlp="geglu",
        mlp_ratio=mlp_ratio(hidden, dim),
        norm="rmsnorm",
        norm_eps=cfg["rms_norm_eps"],
        norm_position="sandwich",
        positions="rotary",
        rope_theta=theta,
        rope_local_theta=local_theta,
        sliding_window=cfg["sliding_window"] if "sliding_attention" in kinds else None,
        layer_types=tuple(LAYER_TYPES[k] for k in kinds),
        qk_norm=True,
        attn_scale=float(cfg["query_pre_attn_scalar"]) ** -0.5,
        embed_scale=True,
        bias=False,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        dropout=0.0,
    )
    if ours.mlp_hidden != hidden:
        raise InputError("variant_mlp_width", hidden=hidden, dim=dim)
    return ours


_BLOCK_KEYS = {  # Gemma 3's names → ours; the norms (ending in "norm.weight") take Gemma's 1 + w
    "input_layernorm.weight": "norm1.weight",
    "post_attention_layernorm.weight": "post_attn_norm.weight",
    "pre_feedforward_layernorm.weight": "norm2.weight",
    "post_feedforward_layernorm.weight": "post_mlp_norm.weight",
    "self_attn.q_norm.weight": "attn.qk_norm.q.weight",
    "self_attn.k_norm.weight": "attn.qk_norm.k.weight",
    "self_attn.o_proj.weight": "attn.proj.weight",
    "mlp.gate_proj.weight": "mlp.w1.weight",
    "mlp.up_proj.weight": "mlp.w2.weight",
    "mlp.down_proj.weight": "mlp.w3.weight",
}


def state_from_gemma3(sd: Mapping[str, Tensor], cfg: TransformerConfig, *, norm_offset: float) -> dict[str, Tensor]:
    """Rename a ``Gemma3ForCausalLM`` state dict (``model.`` prefix optional) to our :class:`CausalLM`'s; every
    norm weight w becomes ``w + norm_offset`` (1 for Gemma's own checkpoints, 0 where the 1 is already added)."""
    return llama.state_from_llama(sd, cfg, block_keys=_BLOCK_KEYS, norm_offset=norm_offset)


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor], *, norm_offset: float = 1.0) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a Gemma 3 text config dict and state dict."""
    cfg = config_from_gemma3(config)
    return llama.build(cfg, state_from_gemma3(sd, cfg, norm_offset=norm_offset))
