"""Find checkpoints already in the local Hugging Face cache. Read-only: never a network call.

Kept free of project imports so that :mod:`tx_explorer.models` can ask at import time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def cached_snapshot(repo_ids: Sequence[str], files: Sequence[str], cache_dir: str | Path | None = None) -> Path | None:
    """The snapshot folder of the first repository whose ``files`` are all cached (in one snapshot), or None."""
    from huggingface_hub import try_to_load_from_cache  # lazily: most sessions never ask

    for repo in repo_ids:
        found = [try_to_load_from_cache(repo, name, cache_dir=cache_dir) for name in files]
        # None: never fetched; a non-str sentinel: fetched and known not to exist.
        if all(isinstance(p, str) for p in found) and len({Path(p).parent for p in found}) == 1:
            return Path(found[0]).parent
    return None


def download_command(repo_id: str, files: Sequence[str]) -> str:
    """The one-line command a user runs once, with network access, to put a checkpoint in the cache."""
    return (
        'python -c "from huggingface_hub import snapshot_download; '
        f"snapshot_download('{repo_id}', allow_patterns={list(files)!r})\""
    )


@dataclass(frozen=True)
class CachedCheckpoint:
    """A pretrained checkpoint the app offers only when its files are already in the local cache."""

    name: str  # how the app names it, e.g. "GPT-2 (124M)"
    repo_ids: tuple[str, ...]  # the first one whose files are all cached is used
    files: tuple[str, ...]

    @property
    def download(self) -> str:
        return download_command(self.repo_ids[0], self.files)

    def folder(self, cache_dir: str | Path | None = None) -> Path | None:
        """The snapshot folder holding every file, or None. Only reads the cache folder."""
        return cached_snapshot(self.repo_ids, self.files, cache_dir)

    def status(self, folder: Path | None) -> str:
        """One sentence for the app: where the checkpoint was found, or how to get it."""
        if folder is not None:
            return f"{self.name} found in the local Hugging Face cache: {folder}"
        return (
            f"{self.name} is not in the local Hugging Face cache, so it is not offered (the app never downloads). "
            f"To add it, run once on a machine with network access, then restart the app: {self.download}"
        )
