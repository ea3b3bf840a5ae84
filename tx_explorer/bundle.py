"""Bundles: a folder of ``model.safetensors``, ``config.json``, extra files and a SHA-256 ``manifest.json``.

Only safetensors and JSON are ever read (never a pickle). :func:`read_bundle` verifies the manifest before it
reads anything, so a missing or tampered file is reported with the command that rebuilds the bundle. This
module imports nothing else from the project: every family loader and trainer can use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

WEIGHTS_DIR = Path(__file__).parent / "weights"  # the bundled models, one folder each
MANIFEST = "manifest.json"


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
    """Verify (the one checksum pass of a load), then read the state dict and config of a bundle folder."""
    verify(folder, retrain)
    return load_file(str(Path(folder) / "model.safetensors")), json.loads((Path(folder) / "config.json").read_text())
