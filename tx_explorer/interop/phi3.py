"""Phi-3 checkpoints (Hugging Face ``phi3`` layout) in our :class:`CausalLM`.

Phi-3 (Abdin et al. 2024) runs Llama's recipe; what differs is how it stores it: one fused ``qkv_proj`` of rows
[W_Q; W_K; W_V] and one fused ``gate_up_proj`` of rows [W_gate; W_up]. Both are split at load time into Llama's
matrices (our own attention fuses Q, K and V again, in the same order), so the model is Llama's (a window on every
layer when ``sliding_window`` is set, as Mistral). Its long-context variants (``longrope`` scaled rotary) and
partial rotary are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop import llama
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("phi3",)


def config_from_phi3(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a Phi-3 ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("model_type", "phi3") not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=cfg.get("model_type"), supported=", ".join(MODEL_TYPES))
    # Mistral's reading: a window on every layer if there is one; Phi-3 has no biases on its projections
    return llama.config_from_llama(dict(cfg) | {"model_type": "mistral", "attention_bias": False})


def unfuse(sd: Mapping[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """``qkv_proj`` → ``q_proj``, ``k_proj``, ``v_proj`` and ``gate_up_proj`` → ``gate_proj``, ``up_proj`` (the gate
    is the first half, as Phi-3's ``up_states.chunk(2)`` takes it); every other tensor as it is."""
    q_rows, kv_rows = cfg.num_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    out = {}
    for key, t in sd.items():
        stem, _, param = key.rpartition(".")
        if stem.endswith("self_attn.qkv_proj"):
            base = stem.removesuffix("qkv_proj")
            if t.shape[0] != q_rows + 2 * kv_rows:
                raise InputError("weights_fused_qkv", tensor=key, rows=t.shape[0], need=q_rows + 2 * kv_rows)
            q, k, v = t.split([q_rows, kv_rows, kv_rows])  # (H·Dh, D), (H_kv·Dh, D) × 2
            out |= {f"{base}q_proj.{param}": q, f"{base}k_proj.{param}": k, f"{base}v_proj.{param}": v}
        elif stem.endswith("mlp.gate_up_proj"):
            base = stem.removesuffix("gate_up_proj")
            if t.shape[0] % 2:
                raise InputError("weights_fused_odd", tensor=key, rows=t.shape[0])
            gate, up = t.chunk(2)  # (I, D) each
            out |= {f"{base}gate_proj.{param}": gate, f"{base}up_proj.{param}": up}
        else:
            out[key] = t
    return out


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a Phi-3 config dict and state dict."""
    cfg = config_from_phi3(config)
    return llama.build(cfg, llama.state_from_llama(unfuse(sd, cfg), cfg))
