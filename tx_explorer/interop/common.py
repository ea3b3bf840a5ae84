"""Helpers shared by the checkpoint importers: widths, memory, precision."""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from torch import nn

# GGUF architectures we recognise and refuse from the header, naming the part our modules lack.
NOT_IMPLEMENTED = {
    "gpt-oss": "the GGUF layout of its experts (MXFP4 blocks) and YaRN-scaled rotary positions (gpt_oss folders "
    "with plain rotary positions are read)",
}


def mlp_ratio(hidden: int, dim: int) -> float:
    """The ``mlp_ratio`` whose ``int(ratio · dim)`` (as :func:`make_mlp` computes it) is exactly ``hidden``.

    ``hidden / dim · dim`` can land one ulp below ``hidden`` and truncate to ``hidden − 1``; stepping the ratio
    up by one ulp fixes that without changing any width that already comes out right.
    """
    ratio = hidden / dim
    if int(ratio * dim) != hidden:
        ratio = math.nextafter(ratio, math.inf)
    return ratio


def available_memory(device: torch.device) -> int:
    """Bytes free for new tensors: the GPU's free memory, or the system's ``MemAvailable``."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def cast(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """The parameters in ``dtype``; the buffers (rotary frequencies θ^(−2i/Dh)) stay float32, since rounded to
    16 bits they would turn every position by the wrong angle (``model.to(dtype)`` would round them too)."""
    for p in model.parameters():
        p.data = p.data.to(dtype)
    return model
