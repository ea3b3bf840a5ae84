"""Which checkpoint folders the app may open: the local Hugging Face cache and the roots its operator allows.

A visitor of the app can type a folder path. The server opens it only when, with ``~``, ``..`` and every
symbolic link resolved, it lies inside an allowed root:

- the Hugging Face hub cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``);
- each folder in the environment variable ``TX_EXPLORER_MODEL_ROOTS`` (separated by ``:``, ``;`` on Windows);
- each folder in ``model_roots`` of the ``[tx_explorer]`` table of ``tx_explorer.toml`` at the project root
  (or of the file the environment variable ``TX_EXPLORER_CONFIG`` names).

Anything else is refused with one message that names no path, so a visitor learns nothing about which
folders exist on the server. Nothing here downloads.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tx_explorer.errors import InputError

if TYPE_CHECKING:
    from tx_explorer.families.text import TextModel

log = logging.getLogger(__name__)
ENV_ROOTS = "TX_EXPLORER_MODEL_ROOTS"
ENV_CONFIG = "TX_EXPLORER_CONFIG"
CONFIG = Path(__file__).resolve().parents[1] / "tx_explorer.toml"
# model_type → kind, for the checkpoints tx_explorer.interop.checkpoint loads (kept in step by a test).
SUPPORTED = {
    "bert": "encoder",
    "gpt2": "causal",
    "llama": "causal",
    "qwen2": "causal",
    "mistral": "causal",
    "gemma3_text": "causal",
    "qwen3": "causal",
    "gemma2": "causal",
    "phi3": "causal",
    "olmo2": "causal",
    "gpt_oss": "causal",
}


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache folder, from the environment as ``huggingface_hub`` reads it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _configured_roots() -> list[str]:
    path = Path(os.environ.get(ENV_CONFIG) or CONFIG)
    if not path.is_file():
        return []
    try:
        roots = tomllib.loads(path.read_text(encoding="utf-8")).get("tx_explorer", {}).get("model_roots", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        log.warning("ignoring %s: %s", path, e)
        return []
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
        log.warning("ignoring %s: [tx_explorer] model_roots must be a list of folder paths", path)
        return []
    return roots


def model_roots() -> list[Path]:
    """Every allowed root, resolved (symlinks and ``..``), read afresh on each call (the operator may edit them)."""
    named = [str(hf_hub_cache()), *os.environ.get(ENV_ROOTS, "").split(os.pathsep), *_configured_roots()]
    roots: list[Path] = []
    for r in named:
        if r.strip():
            root = Path(os.path.realpath(os.path.expanduser(r.strip())))
            if root not in roots:
                roots.append(root)
    return roots


def allowed_folder(text: str) -> Path:
    """The real path of ``text`` when it lies inside an allowed root.

    Raises:
        InputError: ``folder_not_allowed`` for anything else, with the same message whether or not the path exists.
    """
    try:
        path = Path(os.path.realpath(os.path.expanduser(text.strip())))
    except (ValueError, OSError):  # a NUL byte, a name too long for the system
        raise InputError("folder_not_allowed", variable=ENV_ROOTS) from None
    if not text.strip() or not any(path.is_relative_to(root) for root in model_roots()):
        raise InputError("folder_not_allowed", variable=ENV_ROOTS)
    return path


@dataclass(frozen=True)
class Cached:
    """A checkpoint found on this machine: a snapshot folder in the Hugging Face cache, or a GGUF file."""

    repo: str  # "Qwen/Qwen2-0.5B", or "Qwen/Qwen2-0.5B-GGUF/qwen2-0_5b-q4_0.gguf" for one file of a repository
    path: Path  # the snapshot folder (config.json, *.safetensors, tokenizer.json) or the .gguf file
    kind: str  # "causal" or "encoder"
    where: str  # "hf_cache" (the Hugging Face cache) or "root" (a folder the operator allows)


@functools.lru_cache(maxsize=1024)
def _damaged_gguf(path: Path, size: int, mtime_ns: int) -> bool:
    """Whether the GGUF file at ``path`` fails the loader's header check as corrupt or truncated (its magic, version,
    every length and every tensor's extent against the file's size; no tensor is read). Gemma 3's header, with its
    262 144-token vocabulary, takes 0.25 s: each file is read once per ``size`` and ``mtime_ns``, so a file replaced
    or still being copied is read again."""
    from tx_explorer.interop.gguf import read_header  # imported only once a GGUF file is found

    try:
        read_header(path)
    except InputError as e:
        if e.key != "checkpoint_corrupt":  # an unsupported quantisation: listed, and refused with its reason
            return False
        log.warning("not listing %s: %s", path, e)
        return True
    return False


def _intact_ggufs(files: list[Path]) -> list[Path]:
    """The files of ``files`` that are GGUF files whose header reads whole (:func:`_damaged_gguf`)."""
    intact = []
    for f in files:
        try:
            info = f.stat()
            if f.is_file() and not _damaged_gguf(f, info.st_size, info.st_mtime_ns):
                intact.append(f)
        except OSError:  # unreadable, or a dangling link (a blob of the hub cache removed)
            continue
    return intact


def _snapshots(repo_dir: Path) -> list[Path]:
    """The snapshot ``refs/main`` names, else the newest one."""
    snapshots, ref = repo_dir / "snapshots", repo_dir / "refs" / "main"
    main = snapshots / ref.read_text(encoding="utf-8").strip() if ref.is_file() else None
    return [main] if main and main.is_dir() else sorted(snapshots.iterdir(), key=os.path.getmtime)[-1:]


def cached_checkpoints(cache: Path | None = None) -> list[Cached]:
    """Checkpoints on this machine: snapshots in the hub cache that hold a supported ``config.json``, safetensors
    weights and ``tokenizer.json``, and GGUF files (decoders) in the hub cache's snapshots and directly in, or one
    folder below, the operator's allowed roots, each marked with where it was found.

    One snapshot per repository (the revision ``refs/main`` names, else the newest), sorted by name. Reads only
    small files, names and GGUF headers; a folder that cannot be read is skipped, and so is a GGUF file whose
    header shows it corrupt or truncated (the server's log names it), which would only fail once picked.
    """
    cache = hf_hub_cache() if cache is None else cache
    found = []
    for repo_dir in sorted(cache.glob("models--*")):
        repo = repo_dir.name.removeprefix("models--").replace("--", "/")
        try:
            for folder in _snapshots(repo_dir):
                ggufs = _intact_ggufs(sorted(folder.glob("*.gguf")))
                found += [Cached(f"{repo}/{f.name}", f, "causal", "hf_cache") for f in ggufs]
                model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
                has_weights = any(folder.glob("*.safetensors"))
                if model_type in SUPPORTED and has_weights and (folder / "tokenizer.json").is_file():
                    found.append(Cached(repo, folder, SUPPORTED[model_type], "hf_cache"))
        except (OSError, ValueError, AttributeError):  # unreadable, not JSON, not a JSON object
            continue
    for root in model_roots()[1:]:  # the operator's roots (the first is the hub cache, scanned above)
        try:
            files = sorted({*root.glob("*.gguf"), *root.glob("*/*.gguf")})
        except OSError:
            continue
        found += [Cached(str(f.relative_to(root)), f, "causal", "root") for f in _intact_ggufs(files)]
    return found


def open_checkpoint(text: str) -> TextModel:
    """Load the checkpoint folder or GGUF file ``text`` names, once it is checked to lie inside an allowed root.

    The loader is imported on first use: pages import this module at start, and most never open a folder."""
    from tx_explorer.models import load_checkpoint

    return load_checkpoint(allowed_folder(text))
