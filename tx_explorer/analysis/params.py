"""Parameter counts (§5.4): from the config by formula, and from a model built on the ``meta`` device.

Per block, attention holds 4D² (W_Q, W_K, W_V, W_O) and the MLP 2·D·4D = 8D², so a stack of L blocks
holds about 12·L·D² (Kaplan et al. 2020), plus V·D for the token embedding (shared with the LM head when
tied), T·D for learned positions, and small change for biases and norms. A decoder block of the original
encoder–decoder Transformer also has cross-attention: 16D².

The formula is checked against ``sum(p.numel())`` of the real modules instantiated on the ``meta`` device:
shapes without memory, so even GPT-3's 175B parameters count exactly in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.modules.block import TransformerBlock, make_norm
from tx_explorer.modules.mlp import swiglu_hidden
from tx_explorer.modules.transformer import CausalLM, Encoder

Kind = Literal["causal", "encoder", "encoder-decoder"]
PARTS = ("embeddings", "attention", "mlp", "norms", "head")


def _norm_size(cfg: TransformerConfig) -> int:
    return cfg.dim if cfg.norm == "rmsnorm" else (2 * cfg.dim if cfg.bias else cfg.dim)


def count_params(cfg: TransformerConfig, kind: Kind = "causal", decoder_layers: int | None = None) -> dict[str, int]:
    """Parameters by part — embeddings, attention, MLP, norms, (untied) LM head — from the formulas.

    Args:
        kind: "causal" (:class:`CausalLM`), "encoder" (:class:`Encoder`) or "encoder-decoder"
            (``num_layers`` encoder blocks, ``decoder_layers`` decoder blocks with cross-attention, one
            embedding shared by both sides and the output projection, as in Vaswani et al. 2017 §3.4).
    """
    d, v = cfg.dim, cfg.vocab_size
    embeddings = v * d + (cfg.max_len * d if cfg.positions == "learned" else 0) + cfg.type_vocab_size * d
    attn = 4 * d * d + (4 * d if cfg.bias else 0)
    if cfg.mlp == "swiglu":
        mlp = 3 * d * swiglu_hidden(d, cfg.mlp_ratio)  # SwiGLU is built without biases
    else:
        hidden = int(cfg.mlp_ratio * d)
        mlp = 2 * d * hidden + (hidden + d if cfg.bias else 0)
    norm = _norm_size(cfg)
    enc_layers = cfg.num_layers
    dec_layers = (cfg.num_layers if decoder_layers is None else decoder_layers) if kind == "encoder-decoder" else 0
    stacks = 2 if kind == "encoder-decoder" else 1
    return {
        "embeddings": embeddings,
        "attention": (enc_layers + 2 * dec_layers) * attn,
        "mlp": (enc_layers + dec_layers) * mlp,
        "norms": (2 * enc_layers + 3 * dec_layers) * norm
        + (stacks * norm if cfg.final_norm else 0)
        + (2 * d if cfg.embed_norm else 0),
        "head": v * d if kind == "causal" and not cfg.tie_embeddings else 0,
    }


class EncoderDecoder(nn.Module):
    """The original Transformer's parameter layout (for counting): shared embedding, encoder and decoder stacks."""

    def __init__(self, cfg: TransformerConfig, decoder_layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)  # shared by both sides and the output layer
        self.encoder = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.num_layers))
        self.decoder = nn.ModuleList(TransformerBlock(cfg, cross=True) for _ in range(decoder_layers))
        self.norms = nn.ModuleList(make_norm(cfg) for _ in range(2)) if cfg.final_norm else nn.ModuleList()


def build_on_meta(cfg: TransformerConfig, kind: Kind = "causal", decoder_layers: int | None = None) -> nn.Module:
    """The real module with every tensor on the ``meta`` device (shapes only, no memory)."""
    with torch.device("meta"):
        if kind == "causal":
            return CausalLM(cfg)
        if kind == "encoder":
            return Encoder(cfg)
        return EncoderDecoder(cfg, cfg.num_layers if decoder_layers is None else decoder_layers)


def _part(name: str) -> str:
    if "norm" in name:
        return "norms"
    if "attn" in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    if name.startswith("head."):
        return "head"
    return "embeddings"


def measure(model: nn.Module) -> dict[str, int]:
    """``sum(p.numel())`` by part, reading parameter names (tied weights counted once)."""
    out = dict.fromkeys(PARTS, 0)
    for name, p in model.named_parameters():  # named_parameters() yields a shared tensor once
        out[_part(name)] += p.numel()
    return out


@dataclass(frozen=True)
class Published:
    """A row of the lecture's table (§5.4) next to what the papers report."""

    model: str
    lecture_blocks: int
    lecture_dim: int
    lecture_heads: int
    lecture_context: int
    lecture_params: float
    published_params: float
    published_source: str
    config: TransformerConfig
    kind: Kind
    decoder_layers: int | None = None


# Vaswani et al. 2017 Table 3 ("big": 6+6 layers, d_model 1024, d_ff 4096, 16 heads, shared ~37k BPE vocabulary,
# sinusoidal positions, post-norm, ReLU); Radford et al. 2019 Table 2; Brown et al. 2020 Table 2.1.
TRANSFORMER_BIG = TransformerConfig(
    vocab_size=37000,
    max_len=512,
    dim=1024,
    num_layers=6,
    num_heads=16,
    activation="relu",
    norm_position="post",
    positions="sinusoidal",
    final_norm=False,
)
LECTURE_TABLE = (
    Published(
        "Original Transformer",
        12,
        1024,
        16,
        512,
        213e6,
        213e6,
        "Vaswani et al. 2017, Table 3 (big)",
        TRANSFORMER_BIG,
        "encoder-decoder",
        6,
    ),
    Published("GPT-2", 48, 1600, 25, 1024, 1.5e9, 1542e6, "Radford et al. 2019, Table 2", PRESETS["gpt2-xl"], "causal"),
    Published("GPT-3", 96, 12288, 96, 2048, 175e9, 175.0e9, "Brown et al. 2020, Table 2.1", PRESETS["gpt3"], "causal"),
)
