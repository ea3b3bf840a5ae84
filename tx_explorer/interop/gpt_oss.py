"""gpt-oss checkpoints (Hugging Face ``gpt_oss`` layout) in our :class:`CausalLM`.

gpt-oss (OpenAI 2025) is Llama's block with three changes, each a part of our modules picked by the config:
attention sinks, a learned logit per head that joins every softmax and is dropped, so a row of the attention map
sums to less than 1 (``attention_sinks``; the trace records the weights without the sink); a 128-token sliding
window on every other layer (``layer_types``, layers 0, 2, 4 … local); and routed experts in place of the MLP,
k of E clamped SwiGLU experts with biases (``mlp="experts"``,
:class:`~tx_explorer.modules.experts.ClampedSwiGLUExperts`). Its q/k/v/o projections carry biases and its heads are
``head_dim`` wide (64 on D = 2880).

The released models stretch rotary positions with YaRN (``rope_type="yarn"``: factor 32 over 4 096 trained
tokens), a part of our modules too (:class:`~tx_explorer.modules.positional.YaRNRotary`, ``yarn_factor``); a YaRN
with its own ``attention_factor`` or ``mscale`` is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop import gemma3, llama
from tx_explorer.interop.common import mlp_ratio
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("gpt_oss",)


def rotary(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Our rotary fields (θ, and YaRN's when the config stretches rotary with it); other scalings refused."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if params.get("rope_type", params.get("type")) != "yarn":
        return {"rope_theta": llama.rope_theta(cfg)}  # plain rotary, or another scaling refused there
    if params.get("attention_factor") is not None or params.get("mscale") or params.get("mscale_all_dim"):
        raise InputError("variant_yarn_scale")
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise InputError("variant_partial_rotary")
    return {
        "rope_theta": float(params["rope_theta"]),
        "yarn_factor": float(params["factor"]),
        "yarn_original_len": int(params["original_max_position_embeddings"]),
        "yarn_beta_fast": float(params.get("beta_fast") or 32.0),
        "yarn_beta_slow": float(params.get("beta_slow") or 1.0),
        "yarn_truncate": bool(params.get("truncate", True)),
    }


def config_from_gpt_oss(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a gpt-oss ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("model_type", "gpt_oss") not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=cfg.get("model_type"), supported=", ".join(MODEL_TYPES))
    positions = rotary(cfg)
    if cfg.get("hidden_act", "silu") != "silu":
        raise InputError("variant_activation", found=cfg["hidden_act"], supported="'silu' (SwiGLU)")
    layers = cfg["num_hidden_layers"]
    kinds = list(
        cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    )
    if set(kinds) - set(gemma3.LAYER_TYPES) or len(kinds) != layers:
        raise InputError("variant_layer_types", supported=", ".join(gemma3.LAYER_TYPES), found=kinds)
    dim, heads, hidden = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"]
    return TransformerConfig(
        vocab_size=cfg["vocab_size"],
        max_len=cfg["max_position_embeddings"],
        dim=dim,
        num_layers=layers,
        num_heads=heads,
        head_width=cfg.get("head_dim") or dim // heads,
        num_kv_heads=cfg.get("num_key_value_heads") or heads,
        mlp="experts",
        mlp_ratio=mlp_ratio(hidden, dim),
        num_experts=cfg["num_local_experts"],
        experts_per_token=cfg["num_experts_per_tok"],
        swiglu_limit=float(cfg.get("swiglu_limit", 7.0)),
        swiglu_alpha=float(cfg.get("swiglu_alpha", 1.702)),
        norm="rmsnorm",
        norm_eps=cfg["rms_norm_eps"],
        positions="rotary",
        **positions,
        sliding_window=cfg["sliding_window"] if "sliding_attention" in kinds else None,
        layer_types=tuple(gemma3.LAYER_TYPES[k] for k in kinds),
        attention_sinks=True,
        bias=bool(cfg.get("attention_bias", True)),  # q, k, v and o
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        dropout=0.0,
    )


def state_from_gpt_oss(sd: Mapping[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """Llama's renaming (embeddings, norms, attention), then the sinks, the router and the experts: transformers
    stores an expert's gate and up as the interleaved columns of one ``[E, D, 2I]`` matrix (x @ W), ours are rows
    of ``[E, I, D]`` each; ``down_proj [E, I, D]`` becomes ``w3 [E, D, I]``."""
    out = llama.state_from_llama(sd, cfg)
    sd = {k.removeprefix("model."): v for k, v in sd.items()}
    for i in range(cfg.num_layers):
        src, dst = f"layers.{i}.", f"blocks.{i}."
        gate_up, gate_up_bias = sd[src + "mlp.experts.gate_up_proj"], sd[src + "mlp.experts.gate_up_proj_bias"]
        out |= {
            dst + "attn.sinks.logits": sd[src + "self_attn.sinks"],
            dst + "mlp.router.weight": sd[src + "mlp.router.weight"],
            dst + "mlp.router.bias": sd[src + "mlp.router.bias"],
            dst + "mlp.w1": gate_up[..., ::2].transpose(1, 2),  # (E, I, D): the even columns are the gate
            dst + "mlp.b1": gate_up_bias[:, ::2],
            dst + "mlp.w2": gate_up[..., 1::2].transpose(1, 2),  # (E, I, D): the odd ones the up projection
            dst + "mlp.b2": gate_up_bias[:, 1::2],
            dst + "mlp.w3": sd[src + "mlp.experts.down_proj"].transpose(1, 2),  # (E, D, I)
            dst + "mlp.b3": sd[src + "mlp.experts.down_proj_bias"],
        }
    return out


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a gpt-oss config dict and state dict."""
    cfg = config_from_gpt_oss(config)
    return llama.build(cfg, state_from_gpt_oss(sd, cfg))
