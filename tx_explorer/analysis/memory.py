"""Peak memory of tensors, measured, and a guard that refuses work the machine cannot hold.

``peak_memory(fn)`` runs ``fn`` and reports the largest number of bytes held at any one moment by tensors
allocated during the call (tensors that existed before do not count):

* CUDA: the caching allocator's own high-water mark (``torch.cuda.reset_peak_memory_stats`` /
  ``max_memory_allocated``), which sees every allocation, kernel scratch space included.
* CPU: :class:`StorageTracker`, a ``TorchDispatchMode`` that sees every tensor an operator returns, counts its
  storage's bytes when the storage is new and subtracts them when the storage is freed (a weak reference
  callback). Views and in-place results share a storage and are counted once. It does **not** see scratch
  buffers a fused kernel allocates internally and frees before returning (PyTorch's CPU flash kernel keeps
  a few tiles per thread that way), and it is not the process's RSS, which also holds the allocator's
  caches, the interpreter and the libraries.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError

T = TypeVar("T")
DEFAULT_FRACTION = 0.5  # naive attention may use at most this share of the memory that is free right now


class StorageTracker(TorchDispatchMode):
    """Live bytes of tensor storages created while the mode is active, on one device type.

    ``current`` and ``peak`` are in bytes; ``peak`` is the maximum of ``current`` over the operators run;
    ``largest`` is the size of the largest single storage created.
    """

    def __init__(self, device_type: str = "cpu") -> None:
        super().__init__()
        self.device_type = device_type
        self.current = 0
        self.peak = 0
        self.largest = 0
        self._known: dict[int, tuple[weakref.ref, int]] = {}  # id(storage) -> (weak ref, bytes counted)

    def _storages(self, tree: object) -> list[torch.UntypedStorage]:
        return [
            t.untyped_storage()
            for t in tree_leaves(tree)
            if isinstance(t, torch.Tensor) and t.device.type == self.device_type and not t.is_meta
        ]

    def _forget(self, key: int) -> Callable[[weakref.ref], None]:
        def release(_: weakref.ref) -> None:
            entry = self._known.pop(key, None)
            if entry is not None:
                self.current -= entry[1]

        return release

    def _see(self, storage: torch.UntypedStorage, count: bool) -> None:
        key = id(storage)
        entry = self._known.get(key)
        if entry is not None and entry[0]() is storage:
            if entry[1] and storage.nbytes() != entry[1]:  # resized in place (e.g. an out= argument)
                self.current += storage.nbytes() - entry[1]
                self._known[key] = (entry[0], storage.nbytes())
            return
        nbytes = storage.nbytes() if count else 0  # storages that existed before are remembered, not counted
        self._known[key] = (weakref.ref(storage, self._forget(key)), nbytes)
        self.current += nbytes
        self.largest = max(self.largest, nbytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for st in self._storages((args, kwargs)):
            self._see(st, count=False)
        result = func(*args, **kwargs)
        for st in self._storages(result):
            self._see(st, count=True)
        self.peak = max(self.peak, self.current)
        return result

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._known.clear()  # drops the weak references and their callbacks: nothing outlives the measurement


def peak_memory(fn: Callable[[], T], device: torch.device | str = "cpu") -> tuple[T, int]:
    """Run ``fn()`` and return ``(its result, peak bytes of tensors allocated during the call)``.

    The result itself counts while it is alive, so a function returning a 4 MB tensor peaks at ≥ 4 MB.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        return result, torch.cuda.max_memory_allocated(device) - base
    with StorageTracker(device.type) as tracker:
        result = fn()
    return result, tracker.peak


def _meminfo(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # the file reports kB
    except OSError:
        return None
    return None


def _device_bytes(device: torch.device | str, *, free: bool) -> int:
    """The device's free (``free=True``) or whole memory: CUDA's ``mem_get_info``, Linux's /proc/meminfo, or
    elsewhere the physical page counts."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0 if free else 1]  # (free, total)
    found = _meminfo("MemAvailable" if free else "MemTotal")
    if found is None:  # not Linux
        found = os.sysconf("SC_AVPHYS_PAGES" if free else "SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return found


def available_bytes(device: torch.device | str = "cpu") -> int:
    """Memory free for new tensors right now: CUDA's ``mem_get_info``, or Linux's MemAvailable."""
    return _device_bytes(device, free=True)


def total_bytes(device: torch.device | str = "cpu") -> int:
    """The device's whole memory: the GPU's, or the machine's RAM."""
    return _device_bytes(device, free=False)


def format_si(value: float, unit: str = "") -> str:
    """Three significant digits with a decimal prefix: ``format_si(137.4e9, "B") == '137 GB'``."""
    exp = 0
    while abs(value) >= 999.5 * 1000**exp and exp < 6:  # 999.7 → "1.00 k", not "1e+03"
        exp += 1
    scaled = value / 1000**exp
    text = f"{scaled:.3g}" if abs(scaled) < 99.95 else f"{scaled:.0f}"
    return f"{text} {' kMGTPE'[exp].strip()}{unit}".rstrip()


def format_bytes(n: float) -> str:
    """Decimal units, three significant digits: ``format_bytes(137.4e9) == '137 GB'``."""
    return format_si(n, "B")


def naive_bytes(n: int, heads: int, head_dim: int, *, batch: int = 1, itemsize: int = 4) -> int:
    """Peak bytes allocated by materialising attention: scores and weights ``[B, H, N, N]`` alive together
    (softmax reads one while writing the other) plus the output ``[B, H, N, D_H]``."""
    return itemsize * batch * heads * (2 * n * n + n * head_dim)


class MemoryBudgetError(InputError):
    """Raised instead of running something that would not fit; the message carries the numbers."""


def check_naive_fits(
    n: int,
    heads: int,
    head_dim: int,
    *,
    batch: int = 1,
    itemsize: int = 4,
    device: torch.device | str = "cpu",
    fraction: float = DEFAULT_FRACTION,
    free: int | None = None,
) -> int:
    """Estimate the bytes naive attention needs at length ``n``; refuse if above ``fraction`` of free memory.

    Args:
        free: bytes free on the device (default: measured now with :func:`available_bytes`).

    Returns:
        The estimate in bytes, when it fits.

    Raises:
        MemoryBudgetError: "naive attention at N=65,536, H=8 needs 275 GB; this machine has 20 GB free …".
    """
    need = naive_bytes(n, heads, head_dim, batch=batch, itemsize=itemsize)
    free = available_bytes(device) if free is None else free
    if need > fraction * free:
        raise MemoryBudgetError(
            "naive_too_big_gpu" if torch.device(device).type == "cuda" else "naive_too_big",
            n=n,
            heads=heads,
            need=format_bytes(need),
            free=format_bytes(free),
            fraction=fraction,
            limit=format_bytes(fraction * free),
        )
    return need


def kv_cache_bytes(cfg: TransformerConfig, tokens: int, bytes_per_element: int = 4, batch: int = 1) -> int:
    """Bytes of a KV cache after ``tokens`` tokens: Σ over layers of 2 (K and V) · kv_heads · head_dim · bytes ·
    rows · B.

    A layer's rows are the tokens seen, or its sliding window once it is full (it then stops growing): every
    layer's (Mistral) or the local layers' only (Gemma 3: five of every six)."""
    if tokens < 0:
        raise ValueError(f"tokens must be non-negative, got {tokens}")
    windows = [cfg.layer_window(layer) or cfg.uniform_window for layer in range(cfg.num_layers)]
    rows = sum(tokens if w is None else min(tokens, w) for w in windows)
    return 2 * cfg.kv_heads * cfg.head_dim * bytes_per_element * rows * batch
