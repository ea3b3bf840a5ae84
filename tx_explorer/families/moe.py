"""The bundled ``tiny-moe``: the MoE language model, its tokenizer, training curves and held-out windows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tx_explorer.bundle import read_bundle
from tx_explorer.families.text import TextModel, bundled_causal
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig

RETRAIN = "python -m tx_explorer.train moe"


@dataclass(frozen=True)
class MoEBundle:
    """What the MoE page needs: the model behind a :class:`TextModel` (tokenise, run with a trace), its
    config, both models' training curves and the held-out token windows."""

    text: TextModel
    config: MoEConfig
    curves: dict[
        str, dict[str, list[float]]
    ]  # "moe" / "dense" → step, tokens, flops, seconds, train_loss, val_step, val_loss …
    heldout: Tensor  # [S, T] validation token windows
    group_size: int  # tokens routed together during training (one batch): the capacity is per group
    summary: dict[str, Any]


def load_tiny_moe(folder: Path) -> MoEBundle:
    """Registry loader for ``tiny-moe`` (checksums verified first)."""
    folder = Path(folder)
    state, config = read_bundle(folder, RETRAIN)
    cfg = MoEConfig.from_dict({k: v for k, v in config.items() if k != "architecture"})
    read = lambda name: json.loads((folder / name).read_text())  # noqa: E731
    heldout = read("heldout.json")
    text = bundled_causal(
        folder, MoECausalLM(cfg), state, folder.name, read("training.json"), max_len=cfg.transformer.max_len
    )
    return MoEBundle(
        text=text,
        config=cfg,
        curves=read("curves.json"),
        heldout=torch.tensor(heldout["windows"], dtype=torch.long),
        group_size=heldout["group_size"],
        summary=text.info,
    )
