"""OLMo 2 checkpoints (Hugging Face ``olmo2`` layout) in our :class:`CausalLM`.

OLMo 2 (Team OLMo 2024) is Llama's recipe with its norms moved, each a part of our modules picked by the config:
no norm in front of a sub-layer, one on its output before the residual sum, x + norm(f(x))
(``norm_position="after"``; its ``post_attention_layernorm`` is therefore *after* attention, not before the MLP
as in Llama), and QK-norm over the full projected width: one RMSNorm over all H·D_H query values of a token and
one over its H_kv·D_H key values, before the heads are split and turned (``qk_norm_width="full"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.interop import llama
from tx_explorer.modules.transformer import CausalLM

MODEL_TYPES = ("olmo2",)


def config_from_olmo2(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for an OLMo 2 ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("model_type", "olmo2") not in MODEL_TYPES:
        raise InputError("checkpoint_architecture", found=cfg.get("model_type"), supported=", ".join(MODEL_TYPES))
    ours = llama.config_from_llama(dict(cfg) | {"model_type": "llama"})
    return ours.replace(norm_position="after", qk_norm=True, qk_norm_width="full")


def state_from_olmo2(sd: Mapping[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """Llama's renaming, then the two norms put where OLMo 2 has them: on the attention's and the MLP's output."""
    out = llama.state_from_llama(sd, cfg)
    sd = {k.removeprefix("model."): v for k, v in sd.items()}
    for i in range(cfg.num_layers):
        out[f"blocks.{i}.post_attn_norm.weight"] = out.pop(f"blocks.{i}.norm2.weight")  # post_attention_layernorm
        out[f"blocks.{i}.post_mlp_norm.weight"] = sd[f"layers.{i}.post_feedforward_layernorm.weight"]
    return out


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from an OLMo 2 config dict and state dict."""
    cfg = config_from_olmo2(config)
    return llama.build(cfg, state_from_olmo2(sd, cfg))
