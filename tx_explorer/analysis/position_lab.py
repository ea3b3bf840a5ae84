"""The position lab (lecture §3.3, §9.3): what a position scheme lets a causal LM do, in and beyond its context.

Numbers only. Models that differ only in ``TransformerConfig.positions`` are measured by: loss at every
position of long held-out windows (a learned table stops at its length: ``NaN`` there), attention weight by
query–key distance, sensitivity to the order of the context (a shuffled-prefix probe), and how far the
first layer's scores on one repeated token depend on anything but i − j. :func:`verdicts` turns these into
the usual claims, each holding or not. The live rotary demonstration is :func:`rotation_path` and
:func:`rotary_relative_check`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from tx_explorer.analysis import spread
from tx_explorer.modules.positional import Rotary
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace

SCHEMES = ("none", "sinusoidal", "learned", "rotary", "alibi")
RELATIVE_TOLERANCE = 1e-4  # "depends only on i − j": spread along a diagonal ≤ this × the largest |score|


def reach(model: CausalLM, n: int) -> int:
    """Positions the model can be run on out of ``n``: a learned table has no row past its length."""
    return min(n, model.cfg.max_len) if model.cfg.positions == "learned" else n


@torch.no_grad()
def loss_by_position(model: CausalLM, windows: Tensor, *, batch: int = 32) -> Tensor:
    """Mean cross-entropy at each position of ``windows [W, N + 1]`` (inputs then next tokens) → ``[N]``.

    Positions a learned table cannot reach are ``NaN`` (the model is not run there rather than failing)."""
    n = windows.shape[1] - 1
    m = reach(model, n)
    total = torch.zeros(m, dtype=torch.float64)
    model.eval()
    for chunk in windows.split(batch):
        x, y = chunk[:, :m], chunk[:, 1 : m + 1]  # (B, m) each
        ce = F.cross_entropy(model(x).transpose(1, 2), y, reduction="none")  # (B, m)
        total += ce.double().sum(0)
    return torch.cat([(total / len(windows)).float(), torch.full((n - m,), math.nan)])


@torch.no_grad()
def attention_by_distance(model: CausalLM, x: Tensor) -> Tensor:
    """Mean attention weight a query at i puts on the key at i − d, per layer and head → ``[L, H, N]``.

    Averaged over the batch ``x [B, N]`` and over every query that has a key d back."""
    trace = Trace()
    model.eval()
    model(x, trace)
    w = trace.stack()  # (L, B, H, N, N)
    n = w.shape[-1]
    by_d = [torch.diagonal(w, offset=-d, dim1=-2, dim2=-1).mean(dim=(1, -1)) for d in range(n)]  # (L, H) each
    return torch.stack(by_d, dim=-1)  # (L, H, N)


@torch.no_grad()
def order_probe(model: CausalLM, windows: Tensor, *, seed: int = 0, batch: int = 64) -> tuple[float, float]:
    """Mean loss on the last position of ``windows [W, N + 1]`` with the context as written and with every
    context token but the last shuffled (one permutation per window): ``(original, shuffled)``.

    A model blind to order gives the same prediction either way."""
    gen = torch.Generator().manual_seed(seed)
    x, y = windows[:, :-1], windows[:, -1]  # (W, N), (W,)
    perms = torch.stack([torch.randperm(x.shape[1] - 1, generator=gen) for _ in range(len(x))])  # (W, N − 1)
    shuffled = torch.cat([torch.gather(x[:, :-1], 1, perms), x[:, -1:]], dim=1)  # last token kept in place
    model.eval()
    sums = [0.0, 0.0]
    for i in range(0, len(x), batch):
        for j, inp in enumerate((x, shuffled)):
            logits = model(inp[i : i + batch])[:, -1]  # (b, V)
            sums[j] += float(F.cross_entropy(logits, y[i : i + batch], reduction="sum"))
    return sums[0] / len(x), sums[1] / len(x)


@torch.no_grad()
def first_layer_scores(model: CausalLM, token: int, n: int) -> Tensor:
    """Pre-softmax scores of the first layer ``[H, n, n]`` (causal part; the rest 0) on ``token`` repeated n times.

    With the same content at every position, a scheme whose scores depend only on i − j gives constant
    diagonals; absolute positions (added to the embeddings) do not."""
    model.eval()
    block = model.blocks[0]
    x = model.embed(torch.full((1, n), token))  # (1, n, D)
    h = block.attention_input(x)
    attn = block.attn
    q, k, _ = attn.project_qkv(h)
    s = q @ attn.expand_kv(k).transpose(-2, -1) / math.sqrt(attn.head_dim)  # (1, H, n, n)
    if attn.position is not None:
        pos = torch.arange(n)
        bias = attn.position.score_bias(pos, pos)
        s = s if bias is None else s + bias
    return torch.tril(s[0])


def diagonal_spread(scores: Tensor) -> float:
    """Largest (max − min) along any causal diagonal m − n = d of ``scores [..., n, n]``."""
    n = scores.shape[-1]
    spread = [torch.diagonal(scores, offset=-d, dim1=-2, dim2=-1) for d in range(n - 1)]
    return max(float((t.amax(-1) - t.amin(-1)).max()) for t in spread)


def relative_spread(model: CausalLM, tokens: Sequence[int], n: int) -> dict[str, float]:
    """``{spread, scale}``: the worst diagonal spread of :func:`first_layer_scores` over ``tokens`` and the
    largest |score|, so the spread can be read relative to the scores' size."""
    scores = [first_layer_scores(model, t, n) for t in tokens]
    return {"spread": max(diagonal_spread(s) for s in scores), "scale": max(float(s.abs().max()) for s in scores)}


# ---------------------------------------------------------------------------------------------------------------
# Verdicts on the runs' numbers. ``runs`` maps a scheme to its entry of the trainer's summary.json: ``{"config",
# "seeds": [one results dict per seed]}``. Each claim is a comparison over seeds (:mod:`analysis.spread`).


def _mean(values: Sequence[float | None]) -> float:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else math.nan


def inside_beyond(loss: Sequence[float | None], context: int) -> tuple[float, float]:
    """Mean loss over positions inside the training context and beyond it (NaN where never run)."""
    return _mean(loss[:context]), _mean(loss[context:])


def seeds_of(runs: Mapping[str, Mapping]) -> list[int]:
    """The seeds every scheme was trained at (those of the first scheme)."""
    return [r["seed"] for r in next(iter(runs.values()))["seeds"]]


def per_seed(runs: Mapping[str, Mapping], quantity: Callable[[Mapping], float]) -> dict[str, list[float]]:
    """``quantity`` of every scheme's run at every seed: ``{scheme: [value per seed]}``."""
    return {s: [quantity(r) for r in run["seeds"]] for s, run in runs.items()}


def order_harm(r: Mapping) -> float:
    """How much shuffling the context raised the loss on the last token (nats)."""
    return r["order_probe"]["shuffled"] - r["order_probe"]["original"]


def rise(r: Mapping, context: int) -> float:
    """Mean loss beyond the context minus mean loss inside it (NaN where the scheme cannot run)."""
    inside, beyond = inside_beyond(r["loss_by_position"], context)
    return beyond - inside


def relative(r: Mapping) -> float:
    """The first layer's worst diagonal spread over its largest |score| (0: scores depend only on m − n)."""
    return r["relative"]["spread"] / r["relative"]["scale"]


def inside(r: Mapping, context: int) -> float:
    """Mean loss over the positions inside the training context."""
    return inside_beyond(r["loss_by_position"], context)[0]


@dataclass(frozen=True)
class Verdict:
    key: str
    state: spread.State  # holds, does not hold, or within noise: every comparison's gap against its spread
    numbers: dict[str, spread.Stat]  # the quantity the verdict reads, per scheme, over seeds
    comparisons: tuple[spread.Comparison, ...]  # what decided it, each ``left < right``
    scheme: str = ""  # the scheme a per-scheme claim is about ("" for a claim about the runs together)
    # What each comparison reads when one claim makes several of different quantities: (quantity, left scheme,
    # right scheme); empty when ``numbers`` says it
    tested: tuple[tuple[str, str, str], ...] = ()
    untestable: tuple[str, ...] = ()  # schemes the claim names that cannot run where it is tested: not scored

    @property
    def holds(self) -> bool:
        return self.state == "holds"


def verdicts(runs: Mapping[str, Mapping], context: int, bigram: Sequence[float] | None = None) -> list[Verdict]:
    """The usual claims about positions, each holding, not holding or within seed noise on these runs (claims
    missing a scheme are left out). ``bigram``: a bigram model's loss at every position of the same held-out
    windows, the bar the models are held to.

    Order and in-context loss are judged scheme by scheme against the model without positions: a mean over the
    schemes would let the two that learned order answer for the two that did not."""
    out = []
    if "none" in runs:
        harm, loss = per_seed(runs, order_harm), per_seed(runs, lambda r: inside(r, context))
        others = [s for s in runs if s != "none"]
        # "orders": shuffling the context hurts the scheme's model more than the model without positions
        out += [
            _verdict("orders", {"none": harm["none"], s: harm[s]}, spread.less(harm["none"], harm[s]), scheme=s)
            for s in others
        ]
        out += [
            _verdict("helps_inside", {"none": loss["none"], s: loss[s]}, spread.less(loss[s], loss["none"]), scheme=s)
            for s in others
        ]
    if bigram is not None:
        floor = _mean(bigram[:context])  # counted, not trained: the same at every seed (spread 0)
        loss = per_seed(runs, lambda r: inside(r, context))
        tested = tuple(("inside", s, "bigram") for s in loss)  # one comparison per scheme: each gap names its own
        tests = (spread.less(loss[s], floor) for _, s, _ in tested)
        out.append(_verdict("beats_bigram", {**loss, "bigram": floor}, *tests, tested=tested))
    if {"alibi", "learned", "sinusoidal"} <= set(runs):
        read = {
            "beyond": per_seed(runs, lambda r: inside_beyond(r["loss_by_position"], context)[1]),
            "rise": per_seed(runs, lambda r: rise(r, context)),
        }
        # Against each rival: lower loss past the context and a smaller rise over its own in-context loss (a scheme
        # that trained worse inside cannot win by that alone). A learned table has no rows past its length: against
        # it the claim cannot be tested here, which is said, not scored.
        rivals = [s for s in ("sinusoidal", "learned") if any(math.isfinite(v) for v in read["beyond"][s])]
        tested = tuple((q, "alibi", s) for s in rivals for q in ("beyond", "rise"))
        tests = (spread.less(read[q][a], read[q][b]) for q, a, b in tested)
        untestable = tuple(s for s in ("sinusoidal", "learned") if s not in rivals)
        out.append(_verdict("alibi_extrapolates", read["rise"], *tests, tested=tested, untestable=untestable))
    if "rotary" in runs:
        rel = per_seed(runs, relative)
        out.append(_verdict("rotary_relative", rel, spread.less(rel["rotary"], RELATIVE_TOLERANCE)))
    return out


def _verdict(
    key: str,
    numbers: Mapping[str, Sequence[float] | float],
    *tests: spread.Comparison,
    scheme: str = "",
    tested: tuple[tuple[str, str, str], ...] = (),
    untestable: tuple[str, ...] = (),
) -> Verdict:
    return Verdict(
        key,
        spread.overall([t.state for t in tests]),
        {s: spread.stat(v) for s, v in numbers.items()},
        tests,
        scheme,
        tested,
        untestable,
    )


# ---------------------------------------------------------------------------------------------------------------
# Rotary made visible


def rotation_path(q: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Where each 2-D pair (i, i + Dh/2) of one head vector ``q [Dh]`` lands at ``positions [P]`` → ``[Dh/2, P, 2]``.

    Pair i turns by m·θᵢ at position m, θᵢ = b^(−2i/Dh) with ``base`` b (the page's notation; Rotary calls b
    theta, as Llama's config does): the first pairs spin fast, the last barely move."""
    rot = Rotary(q.numel(), base).double()
    turned = rot.rotate(q.double().expand(len(positions), -1)[None, None], positions)[0, 0]  # (P, Dh)
    half = q.numel() // 2
    return torch.stack([turned[:, :half], turned[:, half:]], dim=-1).transpose(0, 1)  # (Dh/2, P, 2)


@dataclass(frozen=True)
class RelativeCheck:
    scores: Tensor  # [P, P]: ⟨R(m)q, R(n)k⟩ for m, n < P
    by_distance: Tensor  # [2P − 1]: the score at each m − n (from −(P − 1) to P − 1), read at n = 0 or m = 0
    max_deviation: float  # largest |score(m, n) − score at the same m − n|
    scale: float  # largest |score|


def rotary_relative_check(
    head_dim: int, positions: int, *, base: float = 10000.0, seed: int = 0, dtype: torch.dtype = torch.float64
) -> RelativeCheck:
    """Turn one random (q, k) pair to every position m, n < ``positions`` and check ⟨R(m)q, R(n)k⟩ = f(m − n)."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"rotary turns pairs of dimensions: the head dimension must be even, got {head_dim}")
    if positions < 2:
        raise ValueError(f"need at least 2 positions, got {positions}")
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, head_dim, generator=gen, dtype=torch.float64).to(dtype)
    rot = Rotary(head_dim, base).to(dtype)
    pos = torch.arange(positions)
    rq = rot.rotate(q.expand(positions, -1)[None, None], pos)[0, 0]  # (P, Dh)
    rk = rot.rotate(k.expand(positions, -1)[None, None], pos)[0, 0]
    scores = (rq @ rk.T).double()  # (P, P)
    ref = torch.cat([scores[0, 1:].flip(0), scores[:, 0]])  # m − n from −(P−1) … P−1
    offset = pos[:, None] - pos[None, :] + positions - 1  # index of m − n in ref
    return RelativeCheck(
        scores=scores,
        by_distance=ref,
        max_deviation=float((scores - ref[offset]).abs().max()),
        scale=float(scores.abs().max()),
    )
