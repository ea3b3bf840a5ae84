"""The bundled block variants (``python -m tx_explorer.train variants``): curves, depth profiles, weights.

:func:`load_results` is the registry loader of ``variants``: it verifies the checksums and reads the JSON files;
each variant's weights load lazily as a :class:`~tx_explorer.families.text.TextModel`. :func:`claims` checks the
lecture's claims on the shipped numbers. The trainer (:mod:`tx_explorer.train.variants`) writes the bundle with
:func:`write_bundle`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor

from tx_explorer import locales
from tx_explorer.analysis import spread
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


RMS_TOLERANCE = 0.02  # nats: "still works" = no worse than LayerNorm by more than this
PARAM_TOLERANCE = 0.01  # "the same parameters" = within 1 %


def losses(run: dict) -> list[float]:
    """A variant's final validation loss at every seed; a diverged run (None) counts as infinitely bad."""
    return [math.inf if r["final_val_loss"] is None else r["final_val_loss"] for r in run["seeds"]]


def _gap(runs: dict, pre: str, post: str) -> list[float]:
    """Post-Norm's loss minus Pre-Norm's, seed by seed (the runs of one seed share data and initialisation)."""
    return [b - a for a, b in zip(losses(runs[pre]), losses(runs[post]), strict=True)]


def _same_params(runs: dict) -> spread.Comparison:
    swiglu, mlp = (runs[n]["non_embedding_parameters"] for n in ("pre-rms-swiglu", "pre-rms"))
    return spread.less(abs(swiglu - mlp), PARAM_TOLERANCE * mlp)  # counts do not depend on the seed: no spread


# claim → (the variants it reads, the comparison ``left < right`` over seeds that decides it).
CLAIMS: dict[str, tuple[tuple[str, ...], Callable[[dict], spread.Comparison]]] = {
    "pre_beats_post": (("pre-ln", "post-ln"), lambda r: spread.less(losses(r["pre-ln"]), losses(r["post-ln"]))),
    "deep_pre_beats_post": (
        ("deep-pre-ln", "deep-post-ln"),
        lambda r: spread.less(losses(r["deep-pre-ln"]), losses(r["deep-post-ln"])),
    ),
    "gap_grows_with_depth": (
        ("pre-ln", "post-ln", "deep-pre-ln", "deep-post-ln"),
        lambda r: spread.less(_gap(r, "pre-ln", "post-ln"), _gap(r, "deep-pre-ln", "deep-post-ln")),
    ),
    "rms_matches_ln": (
        ("pre-rms", "pre-ln"),
        lambda r: spread.less(losses(r["pre-rms"]), [v + RMS_TOLERANCE for v in losses(r["pre-ln"])]),
    ),
    "swiglu_same_params": (("pre-rms-swiglu", "pre-rms"), _same_params),
    "swiglu_beats_mlp": (
        ("pre-rms-swiglu", "pre-rms"),
        lambda r: spread.less(losses(r["pre-rms-swiglu"]), losses(r["pre-rms"])),
    ),
}


def claims(summary: dict) -> list[dict[str, Any]]:
    """Check the lecture's claims on every seed's numbers: ``{key, state, holds, comparison, variants, losses,
    params}`` with ``state`` "holds", "not_holds" or "noise" (:mod:`tx_explorer.analysis.spread`) and ``losses``
    each variant's final validation loss over the seeds.

    Claims whose variants were not all trained are left out.
    """
    runs = summary["variants"]
    out = []
    for key, (names, compare) in CLAIMS.items():
        if not all(n in runs for n in names):
            continue
        c = compare(runs)
        out.append(
            {
                "key": key,
                "state": c.state,
                "holds": c.state == "holds",
                "comparison": c,
                "variants": list(names),
                "losses": {n: spread.stat(losses(runs[n])) for n in names},
                "params": {n: runs[n]["non_embedding_parameters"] for n in names},
            }
        )
    return out
