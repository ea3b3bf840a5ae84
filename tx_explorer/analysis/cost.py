"""What attention costs (lecture §4.3–4.5, §9.6): FLOPs and shapes of its four matmuls, analytic memory,
and measured time and peak memory of three implementations on this device.

FLOPs count a multiply-add as 2 (an ``[m, k]·[k, n]`` product costs ``2·m·k·n``), as the FlashAttention papers do.
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from tx_explorer.analysis.memory import naive_bytes, peak_memory
from tx_explorer.analysis.params import attention_weights
from tx_explorer.analysis.seeding import generator
from tx_explorer.attention import flash_attention, scaled_dot_product_attention
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import positive_int

LECTURE_N, LECTURE_H = 100_000, 64  # the lecture's example (§4.4): terabytes for the weights alone
MEASURE_BUDGET_S = 60.0  # one press of the page's button starts no run predicted to end later (shared server)


@dataclass(frozen=True)
class Matmul:
    """One of the four matrix multiplications of multi-head self-attention."""

    key: str  # short id: "qkv", "qk", "av", "out"
    name: str
    left: tuple[int, ...]
    right: tuple[int, ...]
    out: tuple[int, ...]
    flops: int
    quadratic: bool  # grows with N² (the token-mixing products) rather than N


def attention_shape(d: int, h: int, kv: int | None = None, dh: int | None = None) -> TransformerConfig:
    """One attention layer's shape as a config: width ``d``, ``h`` query heads, ``kv`` key/value heads (None: ``h``,
    multi-head) of width ``dh`` (None: ``d / h``), checked as a model's config is (H_kv must divide H, D/H whole)."""
    return TransformerConfig(dim=d, num_heads=h, num_kv_heads=kv, head_width=dh, num_layers=1, vocab_size=1)


def four_matmuls(n: int, d: int, h: int, kv: int | None = None, dh: int | None = None) -> list[Matmul]:
    """Shapes and FLOPs of the four products for ``n`` tokens, model width ``d``, ``h`` query heads sharing ``kv``
    key/value heads (None: ``h``), each ``dh`` wide (None: D_H = d / h); :func:`attention_shape` checks them.

    QKV projection ``[N, D]·[D, (H + 2·H_kv)·D_H]``, similarity ``[H, N, D_H]·[H, D_H, N]`` (each query head
    scores its group's keys), V-weighting ``[H, N, N]·[H, N, D_H]`` and output projection ``[N, H·D_H]·[H·D_H, D]``.
    """
    positive_int("N", n)
    for name, value in (("D", d), ("H", h)):
        positive_int(name, value)
    cfg = attention_shape(d, h, kv, dh)
    dh, q = cfg.head_dim, h * cfg.head_dim
    qkv = q + 2 * cfg.kv_heads * dh  # the columns of [W_Q W_K W_V]
    return [
        Matmul("qkv", "QKV projection", (n, d), (d, qkv), (n, qkv), 2 * n * d * qkv, False),
        Matmul("qk", "QK similarity", (h, n, dh), (h, dh, n), (h, n, n), 2 * h * n * dh * n, True),
        Matmul("av", "V-weighting", (h, n, n), (h, n, dh), (h, n, dh), 2 * h * n * n * dh, True),
        Matmul("out", "output projection", (n, q), (q, d), (n, d), 2 * n * q * d, False),
    ]


def crossover_n(d: int, h: int = 1, kv: int | None = None, dh: int | None = None) -> float:
    """The N where the two N² products (4·N²·H·D_H FLOPs) equal the two projections (2·N FLOPs per weight of
    :func:`~tx_explorer.analysis.params.attention_weights`): N = weights / (2·H·D_H), which is 2·D when
    D_H = D/H and H_kv = H (4D² weights)."""
    positive_int("D", d)
    cfg = attention_shape(d, h, kv, dh)
    return attention_weights(cfg) / (2 * h * cfg.head_dim)


def flash_bytes(n: int, heads: int, head_dim: int, *, block_size: int = 64, batch: int = 1, itemsize: int = 4) -> int:
    """Peak bytes allocated by our tiled kernel (forward, no autograd), linear in N: the output and row log-sum-exp
    (``N·D_H + N``) plus one query tile's working set of ``b = min(block, N)`` rows — the larger of two
    moments: while a key tile is scored (the previous ``b × b`` tile is freed only once the next exists, next
    to the scaled queries and the accumulator) and while the tile's output is normalised."""
    b = min(block_size, n)
    scoring = 2 * b * b + 2 * b * head_dim + 6 * b if n > b else 0
    normalising = b * b + 3 * b * head_dim + 4 * b
    per_head = itemsize * (n * head_dim + n + max(scoring, normalising)) + b  # + b: a boolean flag per row
    return batch * heads * per_head


def sdpa_bytes(n: int, heads: int, head_dim: int, *, batch: int = 1, itemsize: int = 4) -> int:
    """Bytes PyTorch's fused kernel returns (output and log-sum-exp); its per-thread scratch is not included."""
    return itemsize * batch * heads * (n * head_dim + n)


def flops_by_n(
    ns: Sequence[int], d: int, h: int, kv: int | None = None, dh: int | None = None
) -> dict[str, np.ndarray]:
    """FLOPs of each of the four products (by key) for every N in ``ns`` (for a stacked bar)."""
    rows = [four_matmuls(n, d, h, kv, dh) for n in ns]
    return {mm.key: np.array([r[i].flops for r in rows], dtype=np.float64) for i, mm in enumerate(rows[0])}


def memory_lines(
    ns: Sequence[int] | np.ndarray,
    heads: int,
    head_dim: int,
    *,
    block_size: int = 64,
    batch: int = 1,
    itemsize: int = 4,
) -> dict[str, np.ndarray]:
    """Analytic peak bytes of "naive", "flash" and "sdpa" for every N in ``ns``."""
    kw = dict(batch=batch, itemsize=itemsize)
    return {
        "naive": np.array([naive_bytes(int(n), heads, head_dim, **kw) for n in ns], dtype=np.float64),
        "flash": np.array(
            [flash_bytes(int(n), heads, head_dim, block_size=block_size, **kw) for n in ns], dtype=np.float64
        ),
        "sdpa": np.array([sdpa_bytes(int(n), heads, head_dim, **kw) for n in ns], dtype=np.float64),
    }


# ---- measurement ------------------------------------------------------------------------------------------

METHODS = ("naive", "flash", "sdpa")


def _dtype(dtype: torch.dtype | str) -> torch.dtype:
    dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"not a floating-point dtype: {dtype!r}")
    return dtype


# Run in a child process: ``sdpa_kernel`` switches the other backends off for the whole process, so a probe in the
# server made every other session's attention fail meanwhile ("No viable backend", seen under a class's load).
_PROBE = """
import json, sys, warnings
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
q = torch.zeros(1, 2, 16, 64, device=sys.argv[1], dtype=getattr(torch, sys.argv[2]))
usable = {}
for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                SDPBackend.MATH):
    try:
        with sdpa_kernel([backend]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch explains each refusal in a warning; the table says it
            F.scaled_dot_product_attention(q, q, q)
        usable[backend.name.lower()] = True
    except RuntimeError:  # "No available kernel": this backend does not run here
        usable[backend.name.lower()] = False
print(json.dumps(usable))
"""


def sdpa_backends(device: torch.device | str, dtype: torch.dtype | str = torch.float32) -> dict[str, bool]:
    """Which of PyTorch's SDPA backends accept ``dtype`` inputs on ``device`` (probed on a tiny input, once per
    process, in a child process: see :data:`_PROBE`)."""
    device, dtype = torch.device(device), _dtype(dtype)
    return dict(_probed(str(device), str(dtype).removeprefix("torch.")))


@functools.cache
def _probed(device: str, dtype: str) -> tuple[tuple[str, bool], ...]:
    run = subprocess.run([sys.executable, "-c", _PROBE, device, dtype], capture_output=True, text=True, check=True)
    return tuple(json.loads(run.stdout.strip().splitlines()[-1]).items())


def attention_fn(method: str, *, block_size: int = 128) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """``method(q, k, v) -> out``: "naive" (materialised weights), "flash" (ours), "sdpa" (PyTorch's default
    dispatch) or "sdpa:<backend>" (one backend forced, e.g. "sdpa:flash_attention")."""
    if method == "naive":
        return lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]
    if method == "flash":
        return lambda q, k, v: flash_attention(q, k, v, block_size=block_size)
    if method == "sdpa":
        return F.scaled_dot_product_attention
    if method.startswith("sdpa:"):
        backend = getattr(SDPBackend, method[5:].upper(), None)
        if backend is None:
            raise ValueError(f"unknown SDPA backend {method[5:]!r}")

        def forced(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v)

        return forced
    raise ValueError(f"unknown attention method {method!r}; use one of {METHODS} or 'sdpa:<backend>'")


@dataclass(frozen=True)
class Measurement:
    """One implementation at one length, as :func:`measure` found it."""

    method: str
    n: int
    seconds: float  # median wall-clock time of one forward pass
    peak_bytes: int  # peak bytes of tensors allocated during one forward pass
    runs: int


def _seconds(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of one call; on CUDA the queued kernels are waited for before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def _call_seconds(fn: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` on the CPU, after one untimed call (first-call allocations,
    kernel selection)."""
    fn()
    return [_seconds(fn, torch.device("cpu")) for _ in range(repeats)]


def seconds_and_peak(fn: Callable[[], object], repeats: int, device: torch.device | str) -> tuple[float, int]:
    """Median seconds of ``repeats`` calls of ``fn`` and the peak bytes of one more call, made first: the warm-up."""
    device = torch.device(device)
    _, peak = peak_memory(fn, device)
    return statistics.median(_seconds(fn, device) for _ in range(repeats)), peak


def extrapolated_seconds(seconds: float, runs: int, n_from: int, n: int, power: int) -> float:
    """Wall time of a warm-up plus ``runs`` timed calls at length ``n``, from ``seconds`` per call at ``n_from``,
    for work growing as N^``power``."""
    return seconds * (runs + 1) * (n / n_from) ** power


def measure(
    method: str,
    n: int,
    *,
    heads: int = 8,
    head_dim: int = 64,
    batch: int = 1,
    repeats: int = 3,
    block_size: int = 128,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    seed: int = 0,
) -> Measurement:
    """Time (median of ``repeats`` runs after one warm-up) and peak memory of one self-attention forward pass
    on random ``[batch, heads, n, head_dim]`` inputs, without autograd. Check :func:`memory.check_naive_fits`
    before measuring "naive" at large ``n``."""

    for name, value in (("N", n), ("heads", heads), ("head_dim", head_dim), ("batch", batch), ("repeats", repeats)):
        positive_int(name, value)
    device = torch.device(device)
    dtype = _dtype(dtype)
    fn = attention_fn(method, block_size=block_size)
    g = generator(seed)
    q, k, v = (torch.randn(batch, heads, n, head_dim, generator=g).to(device, dtype) for _ in range(3))
    with torch.no_grad():
        seconds, peak = seconds_and_peak(lambda: fn(q, k, v), repeats, device)
    return Measurement(method=method, n=n, seconds=seconds, peak_bytes=peak, runs=repeats)


def predicted_seconds(previous: Measurement | None, n: int) -> float:
    """Wall time of :func:`measure` at ``n`` (a warm-up plus ``previous.runs`` passes), extrapolated as N² from
    the same method's ``previous`` measurement at a smaller N; 0 when there is none yet."""
    if previous is None:
        return 0.0
    return extrapolated_seconds(previous.seconds, previous.runs, previous.n, n, power=2)


def ratio(results: Sequence[Measurement], n: int, num: str, den: str, field: str = "seconds") -> float | None:
    """``field`` of method ``num`` over that of ``den`` at length ``n`` (None when either was not measured)."""
    values = {r.method: getattr(r, field) for r in results if r.n == n}
    return values[num] / values[den] if values.get(num) and values.get(den) else None


def results_matrix(results: Sequence[Measurement], methods: Sequence[str]) -> np.ndarray:
    """One row per N: ``[N, seconds of each method…, peak bytes of each method…]``, NaN where not measured."""
    ns = sorted({r.n for r in results})
    out = np.full((len(ns), 1 + 2 * len(methods)), np.nan)
    out[:, 0] = ns
    for r in results:
        if r.method in methods:
            i, j = ns.index(r.n), list(methods).index(r.method)
            out[i, 1 + j], out[i, 1 + len(methods) + j] = r.seconds, r.peak_bytes
    return out


FUSED_NS, FUSED_DS = (16, 128, 1024), (64, 256, 512)  # tokens and widths of the fused-projection sweep (§3.1)


@dataclass(frozen=True)
class FusedTiming:
    """One ``Linear(D, 3D)`` (the lecture's [Q K V] = X[W_Q W_K W_V]) against three ``Linear(D, D)`` holding the
    same weights, timed on ``[N, D]`` inputs: seconds ``[len(ds), len(ns)]``, medians of ``repeats`` calls."""

    ns: tuple[int, ...]
    ds: tuple[int, ...]
    fused: np.ndarray
    separate: np.ndarray
    max_diff: float  # largest |[Q K V] − (Q, K, V)| over the grid: both compute the same numbers
    # Every timed call, [len(ds), len(ns), repeats]: how far the calls spread (None: only the medians were kept)
    fused_calls: np.ndarray | None = None
    separate_calls: np.ndarray | None = None


def _three(x: Tensor, parts: Sequence[tuple[Tensor, Tensor]]) -> list[Tensor]:
    return [F.linear(x, w, b) for w, b in parts]  # Q, K, V one after the other


@torch.no_grad()
def fused_qkv_sweep(
    ns: Sequence[int] = FUSED_NS, ds: Sequence[int] = FUSED_DS, *, repeats: int = 5, seed: int = 0
) -> FusedTiming:
    """Time the fused projection against three separate ones at every (N, D) (CPU, float32, no autograd)."""
    positive_int("repeats", repeats)
    g = generator(seed)
    fused, separate, diff = np.zeros((len(ds), len(ns), repeats)), np.zeros((len(ds), len(ns), repeats)), 0.0
    for i, d in enumerate(ds):
        w, b = torch.randn(3 * d, d, generator=g) / d**0.5, torch.randn(3 * d, generator=g)  # (3D, D), (3D,)
        parts = list(zip(w.split(d), b.split(d), strict=True))  # W_Q, W_K, W_V: rows d·k … d·(k+1) − 1
        for j, n in enumerate(ns):
            x = torch.randn(n, d, generator=g)
            one, three = functools.partial(F.linear, x, w, b), functools.partial(_three, x, parts)
            diff = max(diff, float((one() - torch.cat(three(), dim=-1)).abs().max()))
            fused[i, j] = _call_seconds(one, repeats)  # one (N, D)·(D, 3D)
            separate[i, j] = _call_seconds(three, repeats)  # three (N, D)·(D, D)
    medians = np.median(fused, axis=-1), np.median(separate, axis=-1)
    return FusedTiming(tuple(ns), tuple(ds), *medians, diff, fused, separate)
