"""GPT-2 checkpoints (Hugging Face layout) in our :class:`CausalLM`, and finding one in the local cache.

GPT-2 (Radford et al. 2019) is a Pre-Norm decoder with learned positions, tanh-approximated GELU
("gelu_new"), a final LayerNorm and an LM head tied to the token embedding. Its linear layers are
``Conv1D`` modules storing weights as ``[in, out]``, so the four matrices per block are transposed for
``nn.Linear`` (``[out, in]``); ``c_attn`` is already the fused ``[W_Q W_K W_V]`` our attention uses.
The causal-mask buffers ``attn.bias`` / ``attn.masked_bias`` of old checkpoints are not weights and are skipped.

Nothing here downloads: a checkpoint is only read from the local cache (see :mod:`gpt2_cache`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import Tensor, nn

from tx_explorer.bundle import BundleError, sha256
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel, load_state
from tx_explorer.interop import gpt2_cache
from tx_explorer.interop.common import mlp_ratio
from tx_explorer.interop.gpt2_cache import DOWNLOAD, cached_checkpoint, gpt2_status
from tx_explorer.modules.transformer import CausalLM

__all__ = ["DOWNLOAD", "cached_checkpoint", "causal_lm_from_gpt2", "gpt2_status", "load", "locate"]
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
_BLOCK_KEYS = {
    "ln_1": "norm1",
    "attn.c_attn": "attn.qkv",
    "attn.c_proj": "attn.proj",
    "ln_2": "norm2",
    "mlp.c_fc": "mlp.fc1",
    "mlp.c_proj": "mlp.fc2",
}


def config_from_gpt2(cfg: Mapping[str, Any]) -> TransformerConfig:
    """Our config for a GPT-2 ``config.json`` (or ``hf_model.config.to_dict()``)."""
    act = cfg.get("activation_function", "gelu_new")
    if act not in ACTIVATIONS:
        raise InputError("variant_activation", found=act, supported=", ".join(map(repr, sorted(ACTIVATIONS))))
    if not cfg.get("scale_attn_weights", True) or cfg.get("scale_attn_by_inverse_layer_idx", False):
        raise InputError("variant_attn_scale")
    dim = cfg["n_embd"]
    return TransformerConfig(
        vocab_size=cfg["vocab_size"],
        max_len=cfg["n_positions"],
        dim=dim,
        num_layers=cfg["n_layer"],
        num_heads=cfg["n_head"],
        mlp_ratio=mlp_ratio(cfg.get("n_inner") or 4 * dim, dim),
        activation=ACTIVATIONS[act],
        norm_eps=cfg["layer_norm_epsilon"],
        tie_embeddings=cfg.get("tie_word_embeddings", True),
        dropout=0.0,
    )


def state_from_gpt2(sd: Mapping[str, Tensor], num_layers: int, *, tied: bool = True) -> dict[str, Tensor]:
    """Rename (and transpose) a GPT-2 state dict — with or without the ``transformer.`` prefix — to ours."""
    head = sd.get("lm_head.weight")
    sd = {k.removeprefix("transformer."): v for k, v in sd.items()}
    out = {
        "embed.tok_embed.weight": sd["wte.weight"],
        "embed.pos_embed.weight": sd["wpe.weight"],
        "norm.weight": sd["ln_f.weight"],
        "norm.bias": sd["ln_f.bias"],
        "head.weight": sd["wte.weight"] if tied or head is None else head,
    }
    for i in range(num_layers):
        for src, dst in _BLOCK_KEYS.items():
            w = sd[f"h.{i}.{src}.weight"]
            out[f"blocks.{i}.{dst}.weight"] = w.t() if src in _CONV1D else w  # Conv1D [in, out] → Linear [out, in]
            out[f"blocks.{i}.{dst}.bias"] = sd[f"h.{i}.{src}.bias"]
    return out


def causal_lm_from_state(config: Mapping[str, Any], sd: Mapping[str, Tensor]) -> CausalLM:
    """Build our :class:`CausalLM` (eval mode) from a GPT-2 config dict and state dict."""
    cfg = config_from_gpt2(config)
    model = CausalLM(cfg)
    load_state(model, state_from_gpt2(sd, cfg.num_layers, tied=cfg.tie_embeddings))
    return model.eval()


def causal_lm_from_gpt2(hf_model: nn.Module) -> CausalLM:
    """Copy a ``transformers`` ``GPT2LMHeadModel`` (or ``GPT2Model``, whose head is then the tied embedding).

    ``CausalLM(idx [B, N], trace)`` then returns the same logits ``[B, N, V]`` and, through the trace, the
    same per-layer causal attention ``[B, H, N, N]``.
    """
    return causal_lm_from_state(hf_model.config.to_dict(), hf_model.state_dict())  # load_state_dict copies


def locate() -> Path:
    """The cached snapshot folder (registry ``locate``); :class:`BundleError` saying how to get it if absent."""
    folder = gpt2_cache.cached_checkpoint()
    if folder is None:
        raise BundleError(gpt2_cache.gpt2_status())
    return folder


def _check_blob(path: Path) -> None:
    """The cache stores large files as blobs named by their SHA-256: recompute it to catch a corrupt download."""
    blob = path.resolve()
    if re.fullmatch(r"[0-9a-f]{64}", blob.name) and sha256(blob) != blob.name:
        raise BundleError(f"gpt2: {path.name} in the Hugging Face cache is corrupt. Fetch it again with: {DOWNLOAD}")


def load(folder: Path) -> TextModel:
    """Load a cached GPT-2 snapshot (config, safetensors, tokenizer) as a causal :class:`TextModel`."""
    folder = Path(folder)
    _check_blob(folder / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    model = causal_lm_from_state(config, load_file(str(folder / "model.safetensors")))
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()  # TextModel.encode truncates to the context and reports it
    return TextModel(
        name="gpt2",
        model=model,
        tokenizer=tok,
        kind="causal",
        max_len=model.cfg.max_len,
        special_tokens=("<|endoftext|>",),
        byte_level=True,
    )
