"""BERT-family checkpoints (Hugging Face ``BertModel`` layout) in our :class:`Encoder`.

BERT (Devlin et al. 2019) is a Post-Norm encoder: ``LN(x + Attn(x))`` then ``LN(x + FFN(x))``, exact (erf)
GELU, learned positions, segment ("token type") embeddings and a LayerNorm straight after the embeddings.
Our fused attention projection is ``[W_Q W_K W_V]``, so the three separate ``query/key/value`` matrices are
stacked along the output dimension. The pooler is not part of the encoder and is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import load_state
from tx_explorer.interop.common import mlp_ratio
from tx_explorer.modules.transformer import Encoder


def config_from_bert(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a BERT ``config.json`` (or ``hf_model.config.to_dict()``)."""
    if cfg.get("hidden_act", "gelu") != "gelu":
        raise InputError("variant_activation", found=cfg["hidden_act"], supported="'gelu' (GELU)")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise InputError("variant_positions", found=cfg["position_embedding_type"])
    return TransformerConfig(
        vocab_size=cfg["vocab_size"],
        max_len=cfg["max_position_embeddings"],
        dim=cfg["hidden_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=cfg["num_attention_heads"],
        mlp_ratio=mlp_ratio(cfg["intermediate_size"], cfg["hidden_size"]),
        activation="gelu",
        norm_position="post",
        norm_eps=cfg["layer_norm_eps"],
        type_vocab_size=cfg["type_vocab_size"],
        embed_norm=True,
        final_norm=False,
        tie_embeddings=False,
        dropout=0.0,
    )


def state_from_bert(sd: Mapping[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """Rename a ``BertModel`` state dict to our :class:`Encoder`'s (a ``bert.`` prefix is dropped)."""
    sd = {k.removeprefix("bert."): v for k, v in sd.items()}
    out = {
        "embed.tok_embed.weight": sd["embeddings.word_embeddings.weight"],
        "embed.pos_embed.weight": sd["embeddings.position_embeddings.weight"],
        "embed.type_embed.weight": sd["embeddings.token_type_embeddings.weight"],
        "embed.norm.weight": sd["embeddings.LayerNorm.weight"],
        "embed.norm.bias": sd["embeddings.LayerNorm.bias"],
    }
    for i in range(num_layers):
        src, dst = f"encoder.layer.{i}.", f"blocks.{i}."
        for p in ("weight", "bias"):
            out[f"{dst}attn.qkv.{p}"] = torch.cat(
                [sd[f"{src}attention.self.{n}.{p}"] for n in ("query", "key", "value")]
            )
            out[f"{dst}attn.proj.{p}"] = sd[f"{src}attention.output.dense.{p}"]
            out[f"{dst}norm1.{p}"] = sd[f"{src}attention.output.LayerNorm.{p}"]
            out[f"{dst}mlp.fc1.{p}"] = sd[f"{src}intermediate.dense.{p}"]
            out[f"{dst}mlp.fc2.{p}"] = sd[f"{src}output.dense.{p}"]
            out[f"{dst}norm2.{p}"] = sd[f"{src}output.LayerNorm.{p}"]
    return out


def encoder_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> Encoder:
    """Build our :class:`Encoder` (eval mode) from a BERT config dict and state dict."""
    cfg = config_from_bert(config)
    model = Encoder(cfg)
    load_state(model, state_from_bert(sd, cfg.num_layers))
    return model.eval()


def encoder_from_bert(hf_model: nn.Module) -> Encoder:
    """Copy a ``transformers`` BERT-family model (``BertModel`` or a task model around one) into our Encoder.

    ``Encoder(idx [B, N], attention_mask [B, N], token_type_ids [B, N], trace)`` then returns the same
    ``last_hidden_state [B, N, D]`` and, through the trace, the same per-layer attention ``[B, H, N, N]``.
    """
    base = getattr(hf_model, "base_model", hf_model)
    return encoder_from_state(base.config.to_dict(), base.state_dict())  # load_state_dict copies
