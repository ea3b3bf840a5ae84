"""Statistics of Mixture-of-Experts routing tables, and the parameter/FLOP cost of a MoE model.

Every statistic is a pure function of one layer's routing table: router probabilities ``probs [N, E]`` for
N tokens (rows sum to 1) and/or the chosen experts ``chosen [N, k]`` (column 0 = first choice), as recorded
by :class:`tx_explorer.modules.moe.MoE` in a trace. Entropies are in nats (uniform over E experts = ln E).

The capacity-dependent numbers (drop rate) are recomputed from the stored probabilities with the module's
own :func:`~tx_explorer.modules.moe.route`, so any capacity factor can be tried after the fact. For layers
after the first this holds the layer's inputs fixed (in the network, drops upstream would change them a
little).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from tx_explorer.analysis import params, spread
from tx_explorer.analysis.information import entropy
from tx_explorer.modules.mlp import MLP
from tx_explorer.modules.moe import MoE, balance_loss, expert_capacity, route
from tx_explorer.modules.moe_lm import MoEConfig
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace


@dataclass(frozen=True)
class RoutingTable:
    """One layer's routing of S sequences × T tokens, as its MoE recorded it."""

    probs: Tensor  # [S, T, E] router probabilities
    chosen: Tensor  # [S, T, k] expert indices, first choice first
    gates: Tensor  # [S, T, k] renormalised gates
    dropped: Tensor  # [S, T, k] bool: over capacity

    @property
    def num_experts(self) -> int:
        return self.probs.shape[-1]

    @property
    def top_k(self) -> int:
        return self.chosen.shape[-1]

    def flat(self) -> tuple[Tensor, Tensor]:
        """``(probs [N, E], chosen [N, k])`` with N = S·T in sequence order."""
        return self.probs.reshape(-1, self.num_experts), self.chosen.reshape(-1, self.top_k)

    def gate_matrix(self) -> Tensor:
        """``[S, T, E]``: each token's gate for every expert, 0 where not chosen (or dropped)."""
        kept = self.gates * ~self.dropped
        return torch.zeros_like(self.probs).scatter(-1, self.chosen, kept)


def routing_tables(trace: Trace) -> list[RoutingTable]:
    """The router records of a trace (one per MoE layer, in layer order) as :class:`RoutingTable` s."""
    records = sorted(trace.select("router"), key=lambda r: r.layer)
    if not records:
        raise LookupError("the trace holds no router records: the model has no Mixture-of-Experts layers")
    return [RoutingTable(r.weights[:, 0], r.meta["chosen"], r.meta["gates"], r.meta["dropped"]) for r in records]


@torch.no_grad()
def collect_routing(model: CausalLM, idx: Tensor, batch_size: int = 16) -> list[RoutingTable]:
    """Run ``idx [S, T]`` through ``model`` (eval mode, in batches) and return each layer's routing table."""
    was_training = model.training
    model.eval()
    per_batch = []
    for start in range(0, idx.shape[0], batch_size):
        trace = Trace()
        model(idx[start : start + batch_size], trace=trace)
        per_batch.append(routing_tables(trace))
    model.train(was_training)
    return [
        RoutingTable(
            *(torch.cat([getattr(b[layer], f) for b in per_batch]) for f in ("probs", "chosen", "gates", "dropped"))
        )
        for layer in range(len(per_batch[0]))
    ]


def expert_counts(chosen: Tensor, num_experts: int, kept: Tensor | None = None) -> Tensor:
    """Assignments per expert ``[E]`` from ``chosen [N, k]`` (only the ``kept`` ones when given)."""
    flat = chosen.reshape(-1) if kept is None else chosen[kept]
    return torch.bincount(flat, minlength=num_experts)


def load_imbalance(counts: Tensor) -> tuple[float, float]:
    """(coefficient of variation std/mean, max/mean) of per-expert loads; (0, 1) when perfectly balanced.

    max/mean is also the capacity factor needed for this batch to drop nothing.
    """
    c = counts.double()
    mean = c.mean()
    if mean == 0:
        raise ValueError("no assignments to measure")
    return (c.std(unbiased=False) / mean).item(), (c.max() / mean).item()


def drop_rate(probs: Tensor, top_k: int, capacity_factor: float | None, group_size: int | None = None) -> float:
    """Share of assignments dropped for capacity when ``probs [N, E]`` is routed in groups of ``group_size``
    tokens (one forward call each; default: all N at once)."""
    n = probs.shape[0]
    size = n if group_size is None else group_size
    dropped = 0
    for start in range(0, n, size):
        group = probs[start : start + size]
        cap = expert_capacity(group.shape[0], probs.shape[1], top_k, capacity_factor)
        dropped += int((~route(group, top_k, cap).kept).sum())
    return dropped / (n * top_k)


def drop_curve(probs: Tensor, top_k: int, factors: Sequence[float], group_size: int | None = None) -> list[float]:
    """:func:`drop_rate` for each capacity factor."""
    return [drop_rate(probs, top_k, f, group_size) for f in factors]


def token_entropy(probs: Tensor) -> Tensor:
    """Each token's router entropy ``[N]``: 0 = certain of one expert, ln E = undecided."""
    return entropy(probs)


def marginal_entropy(probs: Tensor) -> float:
    """Entropy of the marginal expert distribution (mean router probability) against ln E for uniform use.

    The gap ``marginal_entropy − mean token_entropy`` is the mutual information between token and expert
    (≥ 0): high when tokens are routed decisively *and* to different experts.
    """
    return entropy(probs.double().mean(dim=0)).item()


def balance_relative(probs: Tensor, chosen: Tensor) -> float:
    """The Switch balancing loss ``E · Σ f_i P_i``, which is 1 under uniform routing (so this is "× uniform")."""
    return balance_loss(probs.double(), chosen).item()


def cooccurrence(chosen: Tensor, num_experts: int) -> Tensor:
    """``[E, E]`` counts of (first choice, second choice) pairs; needs k ≥ 2."""
    if chosen.shape[-1] < 2:
        raise ValueError("co-occurrence needs top_k ≥ 2 (a first and a second choice)")
    pairs = chosen[..., 0].reshape(-1) * num_experts + chosen[..., 1].reshape(-1)
    return torch.bincount(pairs, minlength=num_experts**2).reshape(num_experts, num_experts)


def repetition(chosen: Tensor) -> tuple[float, float]:
    """Consecutive-token routing repetition from ``chosen [S, T, k]`` (S sequences of T tokens), as in
    Mixtral §5: (share of neighbours with the same first choice, share whose k-sets overlap)."""
    if chosen.dim() != 3 or chosen.shape[1] < 2:
        raise ValueError("repetition needs chosen experts [sequences, tokens ≥ 2, k]")
    prev, nxt = chosen[:, :-1], chosen[:, 1:]
    same_first = (prev[..., 0] == nxt[..., 0]).double().mean().item()
    overlap = (prev.unsqueeze(-1) == nxt.unsqueeze(-2)).any(dim=-1).any(dim=-1).double().mean().item()
    return same_first, overlap


def repetition_baseline(num_experts: int, top_k: int) -> tuple[float, float]:
    """The same two shares under random routing: 1/E, and 1 − C(E−k, k)/C(E, k) (Mixtral: 46% for 2 of 8)."""
    return 1 / num_experts, 1 - math.comb(num_experts - top_k, top_k) / math.comb(num_experts, top_k)


SPEC_MIN = 5  # a token seen fewer times says nothing about what an expert prefers (1 of 1 is a share of 100 %)


def specialisation(
    first: Tensor, token_ids: Tensor, num_experts: int, *, top: int = 8, min_count: int = SPEC_MIN
) -> list[list[tuple[int, int, float]]]:
    """For each expert, the tokens it prefers: ``[(token_id, count, share), …]`` sorted by share, where
    share = P(expert | token) over the token's occurrences (ties broken by count). ``first [N]`` is the
    first-choice expert of each position and ``token_ids [N]`` its token; tokens seen fewer than
    ``min_count`` times are skipped (a share of 1/1 says nothing)."""
    vocab = int(token_ids.max()) + 1 if token_ids.numel() else 1
    joint = torch.zeros(num_experts, vocab, dtype=torch.long)
    joint.index_put_(
        (first.reshape(-1), token_ids.reshape(-1)), torch.ones(first.numel(), dtype=torch.long), accumulate=True
    )
    totals = joint.sum(dim=0)  # (V,) occurrences of each token
    share = joint.double() / totals.clamp_min(1)
    table = []
    for e in range(num_experts):
        ok = (totals >= min_count) & (joint[e] > 0)
        ids = ok.nonzero().flatten().tolist()
        ids.sort(key=lambda t: (-share[e, t].item(), -joint[e, t].item()))
        table.append([(t, int(joint[e, t]), share[e, t].item()) for t in ids[:top]])
    return table


def moe_params(cfg: MoEConfig) -> dict[str, int]:
    """Exact parameter counts (equal to ``sum(p.numel())`` of the model): total, and active per token.

    Built from the dense model's per-part formulas (:mod:`tx_explorer.analysis.params`): a MoE block is a
    dense block whose MLP became E experts plus a router.
    """
    t = cfg.transformer
    e, k, layers = cfg.num_experts, cfg.top_k, cfg.transformer.num_layers
    dense = params.count_params(t)
    expert = params.mlp_params(t, cfg.expert_hidden)
    router = t.dim * e
    embedding = dense["embeddings"] + dense["head"]
    shared = embedding + dense["attention"] + dense["norms"] + layers * router
    return {
        "total": shared + layers * e * expert,
        "active": shared + layers * k * expert,
        "experts_total": layers * e * expert,
        "experts_active": layers * k * expert,
        "router": layers * router,
        "embedding": embedding,
    }


def moe_flops_per_token(cfg: MoEConfig, context: int | None = None) -> dict[str, int]:
    """:func:`tx_explorer.analysis.params.flops_per_token` of the MoE: the token's k experts and the router
    take the MLP's place."""
    t = cfg.transformer
    return params.flops_per_token(
        t, context, mlp=cfg.top_k * params.mlp_weights(t, cfg.expert_hidden), router=t.dim * cfg.num_experts
    )


def layer_statistics(
    table: RoutingTable, capacity_factor: float | None, group_size: int | None = None
) -> dict[str, float]:
    """Every scalar statistic of one layer's routing (see the functions above), drop rate at ``capacity_factor``
    (left out for None: routing without a capacity, as gpt-oss's, has no drops to count)."""
    probs, chosen = table.flat()
    e, k = table.num_experts, table.top_k
    cv, peak = load_imbalance(expert_counts(chosen, e))
    stats = {"cv": cv, "max_over_mean": peak}
    if capacity_factor is not None:
        stats["drop_rate"] = drop_rate(probs, k, capacity_factor, group_size)
    stats |= {
        "token_entropy": token_entropy(probs.double()).mean().item(),
        "marginal_entropy": marginal_entropy(probs),
        "ln_e": math.log(e),
        "balance": balance_relative(probs, chosen),
    }
    if table.chosen.shape[1] >= 2:
        stats["repeat_first"], stats["repeat_any"] = repetition(table.chosen)
    return stats


def per_layer(tables: Sequence[RoutingTable], sequence: int = 0) -> dict[str, Tensor]:
    """One sequence's routing in every layer: ``gates`` and ``probs`` ``[L, T, E]``, ``first`` choice ``[L, T]``."""
    return {
        "gates": torch.stack([t.gate_matrix()[sequence] for t in tables]),
        "probs": torch.stack([t.probs[sequence] for t in tables]),
        "first": torch.stack([t.chosen[sequence, :, 0] for t in tables]),
    }


def load_matrix(tables: Sequence[RoutingTable]) -> Tensor:
    """Assignments per expert in every layer ``[L, E]`` (divide by the row mean for "× balanced")."""
    return torch.stack([expert_counts(t.chosen, t.num_experts) for t in tables])


def cost_sweep(cfg: MoEConfig, experts: Sequence[int]) -> dict[str, list[int]]:
    """Total and active parameters and forward FLOPs per token of ``cfg`` with each number of experts (same k)."""
    rows = [(moe_params(c), moe_flops_per_token(c)["total"]) for c in (cfg.replace(num_experts=e) for e in experts)]
    return {
        "total": [p["total"] for p, _ in rows],
        "active": [p["active"] for p, _ in rows],
        "flops": [f for _, f in rows],
    }


@dataclass(frozen=True)
class LossGap:
    """MoE's final loss against its dense twin's over the seeds trained (:func:`tx_explorer.analysis.spread.less`:
    the gap of the means against the sum of the two standard deviations), and the same gap read against the seed
    spread measured on similar runs trained at several seeds (the block variants): with one seed the comparison
    has no spread of its own and is within noise by rule, and the borrowed spread is all there is to read."""

    comparison: spread.Comparison  # MoE < dense at the seeds trained
    reference: spread.Stat | None  # the seed standard deviations of the reference runs, one per run (None: none)
    borrowed: float  # what a gap between two models would have to exceed: twice the largest reference deviation

    @property
    def beyond_borrowed(self) -> bool:
        return abs(self.comparison.gap) > self.borrowed

    @property
    def per_seed(self) -> list[float]:
        """Dense's loss minus MoE's seed by seed (the two models of one seed share its initialisation seed and
        batches): shown beside the verdict, which reads the means against the spread as every page does."""
        return [d - m for m, d in zip(self.comparison.left.values, self.comparison.right.values, strict=True)]


def loss_gap(moe: Sequence[float], dense: Sequence[float], reference: Sequence[float] = ()) -> LossGap:
    """``moe`` and ``dense``: final losses, one per seed; ``reference``: seed standard deviations of other runs
    (none: no borrowed spread, NaN, and no gap is beyond it).

    The borrowed spread takes the largest deviation, not a typical one: the reference runs are other models, and
    a gap called established on a borrowed spread should survive the noisiest of them."""
    ref = spread.stat(reference) if len(reference) else None
    return LossGap(spread.less(moe, dense), ref, 2 * max(ref.values) if ref else math.nan)


@dataclass(frozen=True)
class StackedExperts:
    """One MoE layer's expert MLPs as the lecture writes them: W₁ ``[E, D, H]`` and W₂ ``[E, H, D]``, and a check
    that the stacked tensors compute what each expert module computes."""

    w1: tuple[int, ...]  # [E, D, H]
    w2: tuple[int, ...]  # [E, H, D]
    weights: int  # elements of W₁ and W₂: 2·E·D·H
    biases: int  # elements of b₁ [E, H] and b₂ [E, D] (0 without biases)
    max_diff: float  # largest |act(x·W₁[e] + b₁[e])·W₂[e] + b₂[e] − expert e(x)| over experts, tokens, features


@torch.no_grad()
def stacked_experts(layer: MoE, x: Tensor) -> StackedExperts:
    """Stack ``layer``'s expert MLPs (``fc1``, ``fc2``) into W₁, W₂ and run ``x [N, D]`` through every expert both
    ways: one batched product per matrix for all E experts, and each expert module on its own."""
    experts = list(layer.experts)
    if not all(isinstance(e, MLP) for e in experts):
        raise ValueError("only MLP experts stack into W₁ [E, D, H] and W₂ [E, H, D]")
    w1 = torch.stack([e.fc1.weight.T for e in experts])  # (E, D, H): nn.Linear stores [H, D]
    w2 = torch.stack([e.fc2.weight.T for e in experts])  # (E, H, D)
    zeros = torch.zeros((), dtype=w1.dtype)
    b1 = torch.stack([e.fc1.bias if e.fc1.bias is not None else zeros.expand(w1.shape[2]) for e in experts])
    b2 = torch.stack([e.fc2.bias if e.fc2.bias is not None else zeros.expand(w1.shape[1]) for e in experts])
    h = experts[0].act(torch.einsum("nd,edh->enh", x, w1) + b1[:, None])  # (E, N, H): every expert at once
    y = torch.einsum("enh,ehd->end", h, w2) + b2[:, None]  # (E, N, D)
    each = torch.stack([e(x) for e in experts])  # (E, N, D)
    has_bias = experts[0].fc1.bias is not None
    return StackedExperts(
        tuple(w1.shape),
        tuple(w2.shape),
        w1.numel() + w2.numel(),
        b1.numel() + b2.numel() if has_bias else 0,
        float((y - each).abs().max()),
    )
