"""One read-only copy of each registered model per process, shared by every session and thread.

The app's pages ask for models through :func:`shared_model` (``ui.cached_model``), and ``serve.py`` fills the
cache in the background at server start (:func:`preload`), so no visitor waits for a bundled model to load.
Two threads asking for the same name at once get one load: the second waits on that name's lock, not on the
others'. Every session shares the object, so it is made read-only: each module in eval mode, no gradients.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tx_explorer import models


def read_only(loaded: Any) -> Any:
    """``loaded`` with every torch module in it in eval mode and without gradients (returned for chaining)."""
    for module in _modules(loaded):
        module.eval().requires_grad_(False)
    return loaded


def _modules(obj: Any, depth: int = 2) -> Iterator[torch.nn.Module]:
    """The torch modules in a loaded model: the object itself, or its attributes (e.g. ``bundle.text.model``)."""
    if isinstance(obj, torch.nn.Module):
        yield obj
    elif depth and hasattr(obj, "__dict__"):
        for value in vars(obj).values():
            yield from _modules(value, depth - 1)


class ModelCache:
    """``load(name)`` once per name, made read-only; thread-safe, failures not cached (the next call retries)."""

    def __init__(self, load: Callable[[str], Any] = models.load_model) -> None:
        self._load = load  # the registry's loader; tests pass a counting fake
        self._models: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()  # guards _locks only: loads of different names run side by side

    def get(self, name: str) -> Any:
        if name in self._models:  # a dict read is atomic: no lock on the common path
            return self._models[name]
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._models:  # another thread may have loaded it while this one waited
                self._models[name] = read_only(self._load(name))
        return self._models[name]

    def loaded(self) -> list[str]:
        """Names loaded so far, in load order."""
        return list(self._models)


SHARED = ModelCache()


def shared_model(name: str) -> Any:
    """A registered model by name (``models.load_model``), loaded once per process and shared read-only."""
    return SHARED.get(name)


def preload() -> list[str]:
    """Load every bundled model that is present (``serve.py`` calls this in a background thread); the names loaded.

    Models that are not bundled (e.g. MiniLM from a pip package, GPT-2 from the Hugging Face cache) load when a
    page first asks for them, except those marked ``preload`` (SmolLM2, the text pages' default). A model that
    fails to load is skipped here: its page says why when visited.
    """
    for name in models.shipped():
        try:
            shared_model(name)
        except (models.BundleError, ValueError):  # ValueError: InputError, e.g. a damaged packaged file
            continue
    return SHARED.loaded()
