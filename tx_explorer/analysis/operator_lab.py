"""The attention operator taken apart (lecture §2, §9.1–9.2): inputs, the √D scaling, Q/K versus V.

Everything returns numbers a page can print or draw; nothing here knows about the UI.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from tx_explorer.analysis.information import entropy
from tx_explorer.analysis.seeding import generator, randn, seeded_mha
from tx_explorer.attention import AttentionSteps, attention_steps
from tx_explorer.errors import InputError, positive_int
from tx_explorer.trace import Trace

MAX_SIDE = 16  # editable matrices stay small enough to read every number
MAX_ABS = 1000.0  # keeps every product in QKᵀ far from float32 overflow (inf, then NaN weights)
MAX_SAMPLES = 1 << 23  # trials · n_keys · max(dims) numbers the saturation curve draws (64 MiB in float64)
# What separates the numbers of a typed list: commas, semicolons and whitespace (the full-width space included), and
# the full-width comma, semicolon and enumeration comma a Chinese keyboard types in their place.
LIST_SEPARATORS = re.compile(r"[,;，；、\s]+")
# Signs a typed number may carry that float() refuses: the minus sign the app's own axes print (U+2212), and the
# hyphen, figure dash and en dash a word processor turns "-" into; NFKC reads the full-width "－" and "＋" first.
MINUS_SIGNS = str.maketrans(dict.fromkeys("\u2212\u2010\u2011\u2012\u2013", "-"))

# A readable starting point for hand-edited inputs: three one-hot keys ("topics"), the first query asks for
# topic 1, the second for topics 2 and 3; each value row is what its key hands back.
EXAMPLE: dict[str, Tensor] = {
    "Q": torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 2.0]]),
    "K": torch.eye(3),
    "V": torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
}


def random_qkv(nq: int, nk: int, d: int, dv: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Standard normal ``Q [nq, d]``, ``K [nk, d]``, ``V [nk, dv]`` from one seed."""
    for name, value in (("N_Q", nq), ("N_K", nk), ("D", d), ("D_V", dv)):
        positive_int(name, value)
    g = generator(seed)
    return torch.randn(nq, d, generator=g), torch.randn(nk, d, generator=g), torch.randn(nk, dv, generator=g)


def list_items(text: str) -> list[str]:
    """The items of a typed list such as ``"1, 2; 3"`` or ``"1，2、3"`` (a matrix row, a vector, a list of lengths)."""
    return [c for c in LIST_SEPARATORS.split(str(text)) if c]


def parse_matrix(text: str, name: str = "matrix", max_side: int = MAX_SIDE) -> Tensor:
    """Parse one row per line, numbers separated by spaces, commas or semicolons (ASCII or full-width, as
    :func:`list_items` reads them), into ``[rows, cols]``.

    Raises:
        ValueError: with a message naming the matrix and the offending line, when the text is empty,
            rows differ in length, an entry is not a finite number, an entry exceeds ``MAX_ABS`` or the
            matrix exceeds ``max_side`` in either direction.
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        raise InputError("matrix_empty", name=name)
    if len(lines) > max_side:
        raise InputError("matrix_rows", name=name, count=len(lines), limit=max_side)
    rows: list[list[float]] = []
    for i, line in enumerate(lines, start=1):
        cells = list_items(line)
        if len(cells) > max_side:
            raise InputError("matrix_cols", name=name, row=i, count=len(cells), limit=max_side)
        values = [_number(c, name, i) for c in cells]
        if rows and len(values) != len(rows[0]):
            raise InputError("matrix_ragged", name=name, row=i, count=len(values), first=len(rows[0]))
        rows.append(values)
    return torch.tensor(rows, dtype=torch.float32)


def read_number(cell: str) -> float:
    """One typed number, as every typed list and matrix reads it: "−1" (U+2212) and "－１" are -1; raises
    ``ValueError`` as ``float`` does for what is not a number."""
    return float(unicodedata.normalize("NFKC", cell).translate(MINUS_SIGNS))


def _number(cell: str, name: str, row: int) -> float:
    try:
        value = read_number(cell)
    except ValueError:
        raise InputError("not_a_number", name=name, row=row, cell=cell[:20]) from None
    if not math.isfinite(value):
        raise InputError("not_finite", name=name, row=row)
    if abs(value) > MAX_ABS:
        raise InputError("too_large", name=name, row=row, limit=MAX_ABS, value=value)
    return value


def format_matrix(m: Tensor, decimals: int = 2) -> str:
    """The inverse of :func:`parse_matrix` (up to rounding): one row per line."""
    return "\n".join(" ".join(f"{v:.{decimals}f}" for v in row) for row in m.tolist())


def operator_steps(q: Tensor, k: Tensor, v: Tensor, scaled: bool = True) -> AttentionSteps:
    """E, A, Y for ``q [Nq, D]``, ``k [Nk, D]``, ``v [Nk, Dv]``; ``scaled=False`` drops the 1/√D."""
    return attention_steps(q, k, v, scale=None if scaled else 1.0)


@dataclass(frozen=True)
class StepSummary:
    """The numbers printed under the three steps."""

    scale: float  # factor applied to QKᵀ: 1/√D, or 1 without scaling
    score_std: float  # spread of E (0 for a single score)
    mean_peak: float  # mean over queries of the largest weight in the row (1 = one-hot)
    max_row_error: float  # max |Σ_j A_ij − 1|


def summarize(steps: AttentionSteps, d: int, scaled: bool) -> StepSummary:
    """Summarise one :func:`operator_steps` result (scores ``[Nq, Nk]``) for key width ``d``."""
    return StepSummary(
        scale=1.0 / math.sqrt(d) if scaled else 1.0,
        score_std=steps.scores.std().item() if steps.scores.numel() > 1 else 0.0,
        mean_peak=steps.weights.max(-1).values.mean().item(),
        max_row_error=(steps.weights.sum(-1) - 1).abs().max().item(),
    )


@dataclass(frozen=True)
class SaturationCurve:
    """Softmax statistics of q·k scores against the width D, averaged over random queries.

    Arrays are indexed like ``dims``. ``entropy`` is in nats (at most ``log(n_keys)``, a uniform softmax);
    ``max_weight`` is the largest weight of a row (1 = one-hot); ``grad_norm`` is the Frobenius norm of the
    softmax Jacobian diag(a) − aaᵀ, the factor every gradient to the scores passes through;
    ``logit_std`` is the standard deviation of the scores fed to the softmax.
    """

    dims: np.ndarray
    entropy: np.ndarray
    max_weight: np.ndarray
    grad_norm: np.ndarray
    logit_std: np.ndarray
    n_keys: int
    scaled: bool

    @property
    def uniform_entropy(self) -> float:
        """log N: the entropy of equal weights, the upper bound of ``entropy``."""
        return math.log(self.n_keys)

    @property
    def uniform_max_weight(self) -> float:
        """1/N: the largest weight of a uniform row, the lower bound of ``max_weight``."""
        return 1.0 / self.n_keys


def softmax_jacobian_norm(a: Tensor) -> Tensor:
    """‖diag(a) − aaᵀ‖_F for probability rows ``a [..., N]`` → ``[...]``: the Jacobian of the softmax."""
    jac = torch.diag_embed(a) - a[..., :, None] * a[..., None, :]  # (..., N, N)
    return torch.linalg.matrix_norm(jac)


@torch.no_grad()
def softmax_saturation(
    dims: Sequence[int], n_keys: int = 32, trials: int = 64, seed: int = 0, scaled: bool = True
) -> SaturationCurve:
    """Measure why attention divides by √D (§2.3).

    ``trials`` queries, each with its own ``n_keys`` keys, are drawn once with N(0, 1) entries at the
    largest width; the width-D scores use their first D dimensions, so q·k has variance D. With
    ``scaled=True`` the scores are q·k/√D (variance 1 at every D); without, the softmax input grows like
    √D and the distribution collapses onto one key, whose gradient vanishes.
    """
    if not dims or any(int(d) != d or d < 1 for d in dims):
        raise InputError("dims_positive", dims=list(dims))
    if n_keys < 2 or trials < 1:
        raise InputError("keys_and_trials", n_keys=n_keys, trials=trials)
    if trials * n_keys * max(dims) > MAX_SAMPLES:
        raise InputError("too_many_samples", count=trials * n_keys * max(dims), limit=MAX_SAMPLES)
    g = generator(seed)
    d_max = int(max(dims))
    q = torch.randn(trials, 1, d_max, generator=g, dtype=torch.float64)
    k = torch.randn(trials, n_keys, d_max, generator=g, dtype=torch.float64)
    partial = (q * k).cumsum(-1)  # (trials, n_keys, d_max): column D−1 holds q·k over the first D dimensions
    stats = {name: [] for name in ("entropy", "max_weight", "grad_norm", "logit_std")}
    for d in dims:
        e = partial[..., int(d) - 1] / (math.sqrt(d) if scaled else 1.0)  # (trials, n_keys)
        a = torch.softmax(e, dim=-1)
        stats["entropy"].append(entropy(a).mean().item())
        stats["max_weight"].append(a.max(-1).values.mean().item())
        stats["grad_norm"].append(softmax_jacobian_norm(a).mean().item())
        stats["logit_std"].append(e.std().item())
    return SaturationCurve(
        dims=np.asarray(dims, dtype=np.int64),
        **{name: np.asarray(values) for name, values in stats.items()},
        n_keys=n_keys,
        scaled=scaled,
    )


@dataclass(frozen=True)
class Replacement:
    """One input swapped for fresh random numbers, and what changed (§2.4, §9.2)."""

    replaced: Literal["K", "V"]
    before: AttentionSteps
    after: AttentionSteps
    weights_diff: float  # max |A_after − A_before|
    out_diff: float  # max |Y_after − Y_before|


def replace_input(
    q: Tensor, k: Tensor, v: Tensor, which: Literal["K", "V"], seed: int, scaled: bool = True
) -> Replacement:
    """Redraw ``K`` or ``V`` (same shape, seed ``seed``) and recompute.

    Replacing V leaves the weights A bit-for-bit unchanged — similarity comes from Q and K only — while
    the output Y, a mix of the values, changes. Replacing K changes A and therefore Y.
    """
    if which not in ("K", "V"):
        raise ValueError(f"which must be 'K' or 'V', got {which!r}")
    before = operator_steps(q, k, v, scaled)
    fresh = randn(*(k if which == "K" else v).shape, seed=seed)
    after = operator_steps(q, fresh, v, scaled) if which == "K" else operator_steps(q, k, fresh, scaled)
    return Replacement(
        replaced=which,
        before=before,
        after=after,
        weights_diff=(after.weights - before.weights).abs().max().item(),
        out_diff=(after.out - before.out).abs().max().item(),
    )


@dataclass(frozen=True)
class CrossAttention:
    """Cross-attention (§2.5): queries from one set, keys and values from another."""

    queries: Tensor  # [N_Q, D], e.g. decoder states
    context: Tensor  # [N_X, D], e.g. encoder states
    weights: Tensor  # [H, N_Q, N_X]
    out: Tensor  # [N_Q, D]: one output per query, whatever N_X is
    self_diff: float  # §3.1: max |cross(X, context = X) − self(X)| for the queries X (the layer's two paths)


@torch.no_grad()
def cross_attention(nq: int, nx: int, dim: int, num_heads: int, seed: int) -> CrossAttention:
    """A seeded multi-head cross-attention layer applied to random queries ``[nq, dim]`` and context ``[nx, dim]``.

    Raises:
        ValueError: when ``num_heads`` does not divide ``dim`` or a size is not positive.
    """
    for name, value in (("N_Q", nq), ("N_X", nx)):
        positive_int(name, value)
    mha = seeded_mha(dim, num_heads, seed)
    g = generator(seed + 1)
    x = torch.randn(1, nq, dim, generator=g)
    ctx = torch.randn(1, nx, dim, generator=g)
    trace = Trace()
    out = mha(x, context=ctx, trace=trace)  # (1, N_Q, D)
    # Self-attention is cross-attention with the context = the queries: the layer's self path (one fused [Q K V]
    # product) against its cross path (W_Q on x, [W_K W_V] on the context) on the same X
    self_diff = float((mha(x, context=x) - mha(x)).abs().max())
    return CrossAttention(
        queries=x[0], context=ctx[0], weights=trace.records[0].weights[0], out=out[0], self_diff=self_diff
    )
