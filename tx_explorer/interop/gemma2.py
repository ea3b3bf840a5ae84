"""Gemma 2 checkpoints (Hugging Face ``gemma2`` layout) in our :class:`CausalLM`.

Gemma 2 (Gemma Team 2024) is where Gemma 3's layout began: sandwich norms stored as 1 + w, GeGLU, embeddings
× √D, scores × ``query_pre_attn_scalar``^(−1/2), local layers with a sliding window alternating with global ones
(layers 0, 2, 4 … local) — all read by :mod:`tx_explorer.interop.gemma3` — with one rotary base for every layer,
no QK-norm, and soft-capping, two parts of our modules picked by the config: each score becomes
c·tanh(score / c) before the mask (``attn_softcap``, c = 50) and each final logit likewise (``final_softcap``,
c = 30).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop import gemma3, llama
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("gemma2",)
CAPS = ("attn_logit_softcapping", "final_logit_softcapping")


def config_from_gemma2(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a Gemma 2 ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("model_type", "gemma2") not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=cfg.get("model_type"), supported=", ".join(MODEL_TYPES))
    rope = {"rope_type": "default", "rope_theta": llama.rope_theta(cfg)}  # one θ, scaled rotary refused
    layers = cfg["num_hidden_layers"]
    pattern = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]  # Gemma 2's own
    as_gemma3 = {k: v for k, v in cfg.items() if k not in CAPS} | {
        "model_type": "gemma3_text",
        "layer_types": cfg.get("layer_types") or pattern,
        "rope_parameters": {"full_attention": rope, "sliding_attention": rope},
    }
    ours = gemma3.config_from_gemma3(as_gemma3)
    attn_cap, final_cap = (None if cfg.get(k) is None else float(cfg[k]) for k in CAPS)
    return ours.replace(qk_norm=False, rope_local_theta=None, attn_softcap=attn_cap, final_softcap=final_cap)


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a Gemma 2 config dict and state dict (Gemma 3's names without
    the QK-norm; every norm weight w loaded as 1 + w)."""
    cfg = config_from_gemma2(config)
    return llama.build(cfg, gemma3.state_from_gemma3(sd, cfg, norm_offset=1.0))
