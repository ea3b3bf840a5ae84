"""Llama, Qwen2 and Mistral checkpoints (Hugging Face layout) in our :class:`CausalLM`.

The three share one recipe (Touvron et al. 2023): Pre-Norm blocks with RMSNorm, rotary positions on q and k
(transformers' half-split pairs, as our :class:`~tx_explorer.modules.positional.Rotary`), grouped-query
attention, a SwiGLU MLP ``down(silu(gate(x)) · up(x))`` and an LM head that may or may not share the embedding.
They differ in two switches: Qwen2 puts a bias on the q/k/v projections (not on ``o_proj``) and Mistral limits
each query to a sliding window of keys. Our fused projection is ``[W_Q W_K W_V]``, so the three matrices are
stacked along the output dimension; ``gate_proj``/``up_proj``/``down_proj`` become SwiGLU's ``w1``/``w2``/``w3``.

Variants our model does not implement (scaled rotary, a head dimension other than D/H, MLP biases, windows on
some layers only) are refused with the reason, never approximated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import load_state
from tx_explorer.modules.init import skip_init
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("llama", "qwen2", "mistral")


def rope_theta(cfg: Mapping[str, Any]) -> float:
    """θ from ``rope_parameters`` (transformers ≥ 5) or the older ``rope_theta``; scaled variants are refused."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise InputError("variant_rope_scaling", kind=kind)
    if params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)) != 1.0:
        raise InputError("variant_partial_rotary")
    return float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def _window(cfg: Mapping[str, Any], model_type: str) -> int | None:
    """The sliding window, if every layer uses it; Qwen2's windows on some layers only are refused."""
    if model_type == "llama":
        return None
    if model_type == "qwen2" and not cfg.get("use_sliding_window", False):
        return None
    window = cfg.get("sliding_window")
    kinds = set(cfg.get("layer_types") or [])
    if window is not None and kinds - {"sliding_attention"}:
        raise InputError("variant_window_layers", kinds=", ".join(sorted(kinds)))
    return window


def config_from_llama(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a Llama / Qwen2 / Mistral ``config.json`` (or ``hf_model.config.to_dict()``)."""
    model_type = cfg.get("model_type", "llama")
    if model_type not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=model_type, supported=", ".join(MODEL_TYPES))
    dim, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    if cfg.get("hidden_act", "silu") != "silu":
        raise InputError("variant_activation", found=cfg["hidden_act"], supported="'silu' (SiLU, SwiGLU)")
    if dim % heads or (cfg.get("head_dim") or dim // heads) != dim // heads:
        raise InputError("variant_head_dim", head_dim=cfg.get("head_dim"), dim=dim, heads=heads)
    if cfg.get("mlp_bias", False):
        raise InputError("variant_not_implemented", field="mlp_bias=True")
    hidden = cfg["intermediate_size"]
    ratio = 1.5 * hidden / dim  # SwiGLU's width keeps 2/3 of ratio·D, rounded: exactly ``hidden`` again
    attention_bias = bool(cfg.get("attention_bias", False))  # Llama's switch: q, k, v and o all biased
    ours = TransformerConfig(
        vocab_size=cfg["vocab_size"],
        max_len=cfg["max_position_embeddings"],
        dim=dim,
        num_layers=cfg["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads") or heads,
        mlp="swiglu",
        mlp_ratio=ratio,
        norm="rmsnorm",
        norm_eps=cfg["rms_norm_eps"],
        positions="rotary",
        rope_theta=rope_theta(cfg),
        sliding_window=_window(cfg, model_type),
        bias=attention_bias,
        qkv_bias=True if model_type == "qwen2" else attention_bias,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        dropout=0.0,
    )
    if ours.mlp_hidden != hidden:
        raise InputError("variant_mlp_width", hidden=hidden, dim=dim)
    return ours


_BLOCK_KEYS = {
    "input_layernorm.weight": "norm1.weight",
    "post_attention_layernorm.weight": "norm2.weight",
    "self_attn.o_proj.weight": "attn.proj.weight",
    "self_attn.o_proj.bias": "attn.proj.bias",
    "mlp.gate_proj.weight": "mlp.w1.weight",
    "mlp.up_proj.weight": "mlp.w2.weight",
    "mlp.down_proj.weight": "mlp.w3.weight",
    "self_attn.q_norm.weight": "attn.qk_norm.q.weight",  # QK-norm (Qwen3, OLMo 2), where the checkpoint has it
    "self_attn.k_norm.weight": "attn.qk_norm.k.weight",
}


def state_from_llama(
    sd: Mapping[str, Tensor],
    cfg: TransformerConfig,
    *,
    block_keys: Mapping[str, str] = _BLOCK_KEYS,
    norm_offset: float = 0.0,
) -> dict[str, Tensor]:
    """Rename a ``LlamaForCausalLM``-style state dict (``model.`` prefix optional) to our :class:`CausalLM`'s.

    ``block_keys``: a family's own names for a block's tensors (Gemma's four norms); ``norm_offset`` is added to
    every norm weight (Gemma stores w and applies 1 + w). A tensor a checkpoint lacks is left out here, and the
    strict load names it."""
    head = sd.get("lm_head.weight")
    sd = {k.removeprefix("model."): v for k, v in sd.items()}
    shift = (lambda key, t: t + norm_offset if key.endswith("norm.weight") else t) if norm_offset else (lambda k, t: t)
    out = {"embed.tok_embed.weight": sd["embed_tokens.weight"], "norm.weight": shift("norm.weight", sd["norm.weight"])}
    if not cfg.tie_embeddings:
        if head is None:
            raise InputError("weights_no_head")
        out["head.weight"] = head
    for i in range(cfg.num_layers):
        src, dst = f"layers.{i}.", f"blocks.{i}."
        for key, ours in block_keys.items():
            if src + key in sd:
                out[dst + ours] = shift(key, sd[src + key])
        for p in ("weight", "bias"):
            parts = [sd.get(f"{src}self_attn.{n}_proj.{p}") for n in ("q", "k", "v")]
            if all(t is not None for t in parts):
                out[f"{dst}attn.qkv.{p}"] = torch.cat(parts)  # (D + 2·D_kv, …): [W_Q W_K W_V]
    return out


def build(cfg: TransformerConfig, state: Mapping[str, Tensor]) -> CausalLM:
    """Our :class:`CausalLM` of ``cfg`` (eval mode) holding ``state`` (our names), loaded strictly."""
    with skip_init():  # every weight is overwritten: drawing 135M random numbers first would take seconds
        model = CausalLM(cfg)
    load_state(model, dict(state))
    return model.eval()


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a Llama/Qwen2/Mistral config dict and state dict."""
    cfg = config_from_llama(config)
    return build(cfg, state_from_llama(sd, cfg))


def causal_lm_from_llama(hf_model: nn.Module) -> CausalLM:
    """Copy a ``transformers`` ``LlamaForCausalLM``, ``Qwen2ForCausalLM`` or ``MistralForCausalLM``.

    ``CausalLM(idx [B, N], trace)`` then returns the same logits ``[B, N, V]`` and, through the trace, the same
    attention ``[B, H, N, N]`` per layer (one map per query head; GQA groups in the records' metadata).
    """
    return causal_lm_from_state(hf_model.config.to_dict(), hf_model.state_dict())  # load_state_dict copies
