"""The position lab's bundle (``python -m tx_explorer.train positions``): results, verdicts and weights.

:func:`load_results` verifies the checksums and reads ``summary.json``; each scheme's weights load on demand.
The trainer (:mod:`tx_explorer.train.positions`) writes the bundle with :func:`write_bundle`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor

from tx_explorer.bundle import WEIGHTS_DIR, write_manifest
from tx_explorer.config import TransformerConfig
from tx_explorer.families.text import SideBySide, write_runs
from tx_explorer.modules.transformer import CausalLM

BUNDLE = WEIGHTS_DIR / "positions"
RETRAIN = "python -m tx_explorer.train positions"
TOKENIZER = WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"
BASE = TransformerConfig(vocab_size=2048, max_len=64, dim=64, num_layers=2, num_heads=4)  # 2 blocks × D 64


def write_bundle(
    out: Path, summary: dict, weights: dict[str, Tensor], replay: dict[str, Tensor], tokenizer: Path | Tokenizer
) -> None:
    """Write the bundle files and the manifest; ``tokenizer`` is copied (a path) or saved."""
    out.mkdir(parents=True, exist_ok=True)
    write_runs(out, summary, summary["schemes"], weights)
    save_file({k: v.contiguous() for k, v in replay.items()}, str(out / "replay.safetensors"))
    if isinstance(tokenizer, Path):
        shutil.copyfile(tokenizer, out / "tokenizer.json")
    else:
        tokenizer.save(str(out / "tokenizer.json"))
    write_manifest(out)


class Results(SideBySide):
    """The shipped position-lab bundle as the page reads it."""

    runs = "schemes"

    @property
    def schemes(self) -> list[str]:
        return self.names

    @property
    def context(self) -> int:
        return self.summary["settings"]["seq_len"]

    def model(self, scheme: str) -> CausalLM:
        return self.run(scheme).eval().requires_grad_(False)  # shared by every session of the page: read-only

    def replay(self) -> dict[str, Tensor]:
        return load_file(str(self.folder / "replay.safetensors"))


def load_results(folder: Path = BUNDLE) -> Results:
    """Verify the bundle's checksums, then read its summary (weights load per scheme)."""
    return Results.read(folder, RETRAIN)
