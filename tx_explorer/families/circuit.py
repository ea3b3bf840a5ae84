"""The induction circuit's bundle (``python -m tx_explorer.train induction``): a two-layer attention-only LM,
its training record and checkpoints spanning the phase change.

:func:`load` verifies the checksums and returns a :class:`CircuitBundle`: the final model as a
:class:`~tx_explorer.families.text.TextModel` (``.text``, so the head tools of :mod:`tx_explorer.analysis.
head_science` take the bundle as they take tiny-moe's), the record and each checkpoint on demand; what is measured on
them (the phase change, the held-out sequences, the K-composition test) is :mod:`tx_explorer.analysis.induction`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from safetensors.torch import load_file
from torch import Tensor

from tx_explorer.bundle import WEIGHTS_DIR, read_bundle
from tx_explorer.config import TransformerConfig
from tx_explorer.families.text import TextModel, bundled_causal
from tx_explorer.modules.transformer import AttentionOnlyLM

BUNDLE = WEIGHTS_DIR / "induction-2l"
RETRAIN = "python -m tx_explorer.train induction"
TOKENIZER = WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"
# Two attention-only blocks on tiny-gpt's vocabulary; tied embeddings (the copying circuit reads the same matrix
# it writes with, Elhage et al. 2021). ALiBi positions: its steepest head starts looking at the last few tokens, so
# layer 0 need not learn where "previous" is. With learned positions (on 64-token windows) the phase change came at
# step 3 050 and the circuit was split over several heads (best induction score 0.47, −30 % with one layer-0 head
# ablated); with ALiBi on the same windows the induction score was 0.70 at step 2 000 and −96 % with its steepest
# layer-0 head ablated. ALiBi has no table: max_len only bounds the held-out sequences (49 tokens), longer than the
# training windows.
CONFIG = TransformerConfig(vocab_size=2048, max_len=64, dim=64, num_layers=2, num_heads=4, positions="alibi")


@dataclass
class CircuitBundle:
    """The shipped run as the page reads it."""

    text: TextModel  # the final model
    training: dict  # training.json: settings, record, checkpoint steps, phase change, times
    folder: Path
    _checkpoints: dict[int, TextModel] = field(default_factory=dict, repr=False)

    @property
    def record(self) -> dict[str, list]:
        """The training record by column: ``step``, ``loss_first``, ``loss_second``, ``induction``, ``previous``…"""
        rows = self.training["record"]
        return {k: [r[k] for r in rows] for k in rows[0]}

    @property
    def steps(self) -> list[int]:
        """The steps of the shipped checkpoints."""
        return list(self.training["checkpoints"])

    def checkpoint(self, step: int) -> TextModel:
        """The model at a shipped checkpoint (float16 weights run in float32), loaded once."""
        if step not in self.steps:
            raise KeyError(f"no checkpoint at step {step}; the bundle has {self.steps}")
        if step not in self._checkpoints:
            prefix = f"step{step}."
            state = {
                k[len(prefix) :]: v.float()
                for k, v in load_file(str(self.folder / "checkpoints.safetensors")).items()
                if k.startswith(prefix)
            }
            model = AttentionOnlyLM(self.text.config)
            self._checkpoints[step] = bundled_causal(self.folder, model, state, f"{self.text.name}@{step}")
        return self._checkpoints[step]

    def tokens(self) -> Tensor:
        """The shipped slice of the training stream (the live run's data), int64."""
        return load_file(str(self.folder / "tokens.safetensors"))["train"].long()


def load(folder: Path = BUNDLE) -> CircuitBundle:
    """Registry loader for ``induction-2l``: verified weights, config, record and tokenizer."""
    folder = Path(folder)
    state, config = read_bundle(folder, RETRAIN)
    training = json.loads((folder / "training.json").read_text())
    text = bundled_causal(folder, AttentionOnlyLM(TransformerConfig.from_dict(config)), state, folder.name, training)
    return CircuitBundle(text=text, training=training, folder=folder)
