"""Qwen3 checkpoints (Hugging Face ``qwen3`` layout, or a ``qwen3`` GGUF file) in our :class:`CausalLM`.

Qwen3 (Qwen Team 2025) is Llama's recipe with two changes, each a part of our modules picked by the config: an
RMSNorm over each head's q and k before rotary positions (``qk_norm``, the part Gemma 3 brought), and heads of a
width of their own (``head_dim``, 128 in every size, ``head_width``). Unlike Qwen2 its q/k/v projections carry no
bias unless ``attention_bias`` says so (then ``o_proj`` too, as Llama's switch). Windows on some layers
(``use_sliding_window``) are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop import llama
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("qwen3",)


def config_from_qwen3(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a Qwen3 ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("model_type", "qwen3") not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=cfg.get("model_type"), supported=", ".join(MODEL_TYPES))
    if cfg.get("use_sliding_window", False):
        raise InputError("variant_not_implemented", field="use_sliding_window")
    heads = cfg["num_attention_heads"]
    even = cfg["hidden_size"] // heads
    # Llama's reading with heads of width D/H, then the two parts Qwen3 adds
    ours = llama.config_from_llama(dict(cfg) | {"model_type": "llama", "head_dim": even})
    return ours.replace(head_width=cfg.get("head_dim") or even, qk_norm=True)


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a Qwen3 config dict and state dict (Llama's names, plus
    ``self_attn.q_norm`` / ``k_norm``)."""
    cfg = config_from_qwen3(config)
    return llama.build(cfg, llama.state_from_llama(sd, cfg))
