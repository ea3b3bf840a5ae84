"""Copy weights from timm / transformers models into our modules (and prove the outputs match)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy: importing tx_explorer.interop stays cheap and cannot form an import cycle with tx_explorer.models.
    if name == "vit_from_timm":
        from tx_explorer.interop.timm_vit import vit_from_timm

        return vit_from_timm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
