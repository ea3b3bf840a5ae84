"""The bundled block variants (``python -m tx_explorer.train variants``): curves, depth profiles, weights.

:func:`load_results` is the registry loader of ``variants``: it verifies the checksums and reads the JSON files;
each variant's weights load lazily as a :class:`~tx_explorer.families.text.TextModel` (the lecture's claims on its
numbers: :mod:`tx_explorer.analysis.variant_claims`). The trainer (:mod:`tx_explorer.train.variants`) writes the
bundle with :func:`write_bundle`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor

from tx_explorer import locales
from tx_explorer.bundle import WEIGHTS_DIR, write_manifest
from tx_explorer.data.tokenizer import EOT
from tx_explorer.families.text import SideBySide, TextModel, write_runs

BUNDLE = WEIGHTS_DIR / "variants"
RETRAIN = "python -m tx_explorer.train variants"
BUNDLE_FILES = (
    "history.json",
    "summary.json",
    "profiles.json",
    "model.safetensors",
    "tokens.safetensors",
    "config.json",
    "tokenizer.json",
    "manifest.json",
)


def write_bundle(
    out: Path,
    *,
    summary: dict,
    history: dict,
    profiles: dict,
    weights: dict[str, Tensor],
    tokenizer: Tokenizer,
    live_tokens: dict[str, Tensor],
) -> None:
    """Write the bundle files (replacing only our own) and the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_FILES:
        (out / name).unlink(missing_ok=True)
    (out / "history.json").write_text(json.dumps(history, separators=(",", ":")) + "\n")
    (out / "profiles.json").write_text(json.dumps(profiles, separators=(",", ":")) + "\n")
    write_runs(out, summary, summary["variants"], weights)
    save_file({k: v.to(torch.int16).contiguous() for k, v in live_tokens.items()}, str(out / "tokens.safetensors"))
    tokenizer.save(str(out / "tokenizer.json"))
    write_manifest(out)


@dataclass(frozen=True)
class Results(SideBySide):
    """The shipped variants bundle as the page reads it: also the loss curves and the depth profiles."""

    history: dict
    profiles: dict
    runs = "variants"

    def label(self, name: str, lang: str = "en") -> str:
        """The variant's name for a legend, in ``lang`` (``variant_<name>`` in locales/norms.json)."""
        key = f"variant_{name}"
        return (
            locales.text("norms", key, lang)
            if key in locales.table("norms")
            else self.summary["variants"][name]["label"]
        )

    def tokens(self, split: str = "train") -> Tensor:
        """The shipped slice of the token stream (for the live mini-run), as int64."""
        return load_file(str(self.folder / "tokens.safetensors"))[split].long()

    def text_model(self, name: str) -> TextModel:
        """A trained variant with the shared tokenizer, ready for :meth:`TextModel.attention`."""
        model = self.run(name)
        return TextModel(
            name=name,
            model=model,
            tokenizer=Tokenizer.from_file(str(self.folder / "tokenizer.json")),
            kind="causal",
            max_len=model.cfg.max_len,
            special_tokens=(EOT,),
            byte_level=True,
        )


def load_results(folder: Path = BUNDLE) -> Results:
    """Verify the bundle's checksums, then read its JSON files (weights load lazily per variant)."""
    return Results.read(folder, RETRAIN, history="history.json", profiles="profiles.json")
