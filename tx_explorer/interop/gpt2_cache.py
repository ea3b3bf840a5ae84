"""Is a GPT-2 checkpoint already in the local Hugging Face cache? Read-only, never a network call.

Kept free of model imports so that :mod:`tx_explorer.models` can ask at import time, to register GPT-2
only where it can be loaded.
"""

from __future__ import annotations

from pathlib import Path

from tx_explorer.interop.hf_cache import CachedCheckpoint

GPT2 = CachedCheckpoint(
    "GPT-2 (124M)",
    repo_ids=("openai-community/gpt2", "gpt2"),  # the Hub's current name and its older alias
    files=("config.json", "model.safetensors", "tokenizer.json"),
)
DOWNLOAD = GPT2.download


def cached_checkpoint(cache_dir: str | Path | None = None) -> Path | None:
    """The snapshot folder holding GPT-2's files, or None. Only reads the cache folder."""
    return GPT2.folder(cache_dir)


def gpt2_status() -> str:
    """One sentence for the app: where the GPT-2 checkpoint was found, or how to get it."""
    return GPT2.status(cached_checkpoint())
