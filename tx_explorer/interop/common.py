"""Helpers shared by the checkpoint importers: refusals with their reasons, widths, memory, precision."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tx_explorer.errors import InputError


def corrupt(file: str, reason: InputError) -> InputError:
    """``checkpoint_corrupt``: ``file`` is corrupt or truncated, for ``reason`` (a key of ``errors.json`` and its
    fields)."""
    return InputError("checkpoint_corrupt", file=file, reason=reason)


def checked_config(family: str, check: Callable[[Mapping[str, Any]], Any], cfg: Mapping[str, Any], file: str) -> Any:
    """``check(cfg)``, a family's config reader (``llama.config_from_llama`` …). A variant it refuses becomes
    ``checkpoint_variant`` with its reason; a field the config lacks, or holds as something else than a number where
    one goes (text, null, zero heads), ``checkpoint_corrupt`` of ``file``."""
    try:
        return check(cfg)
    except InputError as e:
        raise InputError("checkpoint_variant", family=family, reason=e) from None
    except KeyError as e:
        raise corrupt(file, InputError("field_missing", field=e.args[0])) from None
    except (TypeError, ValueError, ZeroDivisionError):
        raise corrupt(file, InputError("corrupt_field_type")) from None


# GGUF architectures we recognise and refuse from the header, naming the part our modules lack.
# A block's tensors are named by its index: model.layers.3., transformer.h.3. (GPT-2), encoder.layer.3. (BERT),
# blk.3. (GGUF)
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|layer|h|blk)\.(\d+)\.")


def check_layers(layers: int, names: Iterable[str], source: str) -> None:
    """Refuse a configuration that asks for more blocks than the weights hold, before any is built: a config.json
    (or a GGUF header) of 1,000,000 layers over a two-layer file took 10 GB and minutes of the server building empty
    blocks. ``source`` names where the count was read (config.json, a GGUF header's key)."""
    stored = 1 + max((int(m.group(1)) for n in names if (m := LAYER_INDEX.search(n))), default=-1)
    if layers > stored:
        raise InputError(
            "checkpoint_weights", reason=InputError("weights_layers", source=source, layers=layers, stored=stored)
        )


NOT_IMPLEMENTED = {"gpt-oss": InputError("missing_gpt_oss_gguf")}


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
