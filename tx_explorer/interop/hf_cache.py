"""Find checkpoints already in the local Hugging Face cache. Read-only: never a network call.

Kept free of project imports so that :mod:`tx_explorer.models` can ask at import time.
"""

from __future__ import annotations

from collections.abc import Sequence
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
