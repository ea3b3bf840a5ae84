"""The position lab's bundle (``python -m tx_explorer.train positions``): results, verdicts and weights.

:func:`load_results` verifies the checksums and reads ``summary.json``; each scheme's weights load on demand.
The trainer (:mod:`tx_explorer.train.positions`) writes the bundle with :func:`write_bundle`.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor

from tx_explorer.bundle import WEIGHTS_DIR, write_manifest
from tx_explorer.config import TransformerConfig
from tx_explorer.families.text import SideBySide, load_run, write_runs
from tx_explorer.modules.transformer import CausalLM

BUNDLE = WEIGHTS_DIR / "positions"
RETRAIN = "python -m tx_explorer.train positions"
TOKENIZER = WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"
BASE = TransformerConfig(vocab_size=2048, max_len=64, dim=64, num_layers=2, num_heads=4)  # 2 blocks × D 64
# The sinusoidal table's entries have RMS 1/√2; token embeddings (and the learned table) start with std 0.02. Added
# unscaled, positions drowned out the tokens (in-context loss 5.60 nats against 4.48 without positions): the lab
# scales the table to the embeddings' size at initialisation instead.
SINUSOIDAL_SCALE = 0.02 * math.sqrt(2)


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

    @property
    def seeds(self) -> list[int]:
        """The seeds every scheme was trained at; the first one's models are the page's."""
        return self.summary["seeds"]

    def model(self, scheme: str, seed: int | None = None) -> CausalLM:
        """One scheme's trained model at ``seed`` (default: the first seed), read-only: shared by every session."""
        if seed is None or seed == self.seeds[0] or scheme not in self.schemes:  # (the last raises the KeyError)
            return self.run(scheme).eval().requires_grad_(False)
        if seed not in self.seeds:
            raise KeyError(f"seed {seed} is not in the bundle; it has {', '.join(map(str, self.seeds))}")
        key = f"{scheme}@{seed}"  # where the trainer stored the weights of the other seeds
        return load_run(self.folder, {key: self.summary["schemes"][scheme]}, key, "scheme").eval().requires_grad_(False)

    def seed_runs(self, scheme: str) -> list[dict]:
        """Every seed's results of one scheme (``seed``, losses, probes, attention by distance)."""
        return self.summary["schemes"][scheme]["seeds"]

    def replay(self) -> dict[str, Tensor]:
        return load_file(str(self.folder / "replay.safetensors"))


def load_results(folder: Path = BUNDLE) -> Results:
    """Verify the bundle's checksums, then read its summary (weights load per scheme)."""
    return Results.read(folder, RETRAIN)
