"""Is a GPT-2 checkpoint already in the local Hugging Face cache? Read-only, never a network call.

Kept free of model imports so that :mod:`tx_explorer.models` can ask at import time, to register GPT-2
only where it can be loaded.
"""

from __future__ import annotations

from pathlib import Path

from tx_explorer.interop.hf_cache import cached_snapshot, download_command

REPO_IDS = ("openai-community/gpt2", "gpt2")  # the Hub's current name and its older alias
FILES = ("config.json", "model.safetensors", "tokenizer.json")
DOWNLOAD = download_command(REPO_IDS[0], FILES)


def cached_checkpoint(cache_dir: str | Path | None = None) -> Path | None:
    """The snapshot folder holding every file in :data:`FILES`, or None. Only reads the cache folder."""
    return cached_snapshot(REPO_IDS, FILES, cache_dir)


def gpt2_status() -> str:
    """One sentence for the app: where the GPT-2 checkpoint was found, or how to get it."""
    folder = cached_checkpoint()
    if folder is not None:
        return f"GPT-2 (124M) found in the local Hugging Face cache: {folder}"
    return (
        "GPT-2 is not in the local Hugging Face cache, so it is not offered (the app never downloads). "
        f"To add it, run once on a machine with network access, then restart the app: {DOWNLOAD}"
    )
