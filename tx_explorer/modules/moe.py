"""Mixture of Experts (§8.4): E expert MLPs per block, each token routed to k of them.

A router ``Linear(D, E)`` scores every token against every expert (in float32 at least: Fedus et al. 2022 found a
bfloat16 router diverges); softmax gives probabilities p; the top k are kept and renormalised to gates that
sum to 1 (Mixtral); the layer's output for a token is Σ gate · expert(x) over its chosen experts.

Capacity (Switch Transformer / GShard): every expert processes at most
``capacity = ceil(k · tokens / E × capacity_factor)`` token slots per forward call — ``k · tokens`` counts
token-expert *assignments*, so factor 1.0 means exactly enough room for perfectly balanced routing, for any
k. Slots are filled first-choice-first, in token order; an assignment that finds its expert full is
*dropped*: that expert contributes 0 and the token keeps only the residual path (and its other experts).
``capacity_factor=None`` never drops (dropless inference, as Mixtral).

Auxiliary losses (how they reach the training loop without state on the module): :meth:`MoE.forward_with_aux`
returns ``(y, aux)``; :meth:`MoE.forward` (the plain ``forward(x, trace=None) -> Tensor`` of every MLP, so a
MoE plugs into ``TransformerBlock(cfg, mlp=MoE(...))``) puts ``aux`` into the trace's router record — the
losses as live 0-d tensors, so they keep their gradient — and the language model collects them from there.

- balance loss (Switch): ``E · Σ_i f_i · P_i`` with f_i the fraction of assignments routed to expert i (before
  capacity) and P_i its mean router probability; exactly 1 under uniform routing (P_i = 1/E or f_i = 1/E),
  larger when load concentrates. (HF's Mixtral version sums over the k ranks and gives k at uniform.)
- router z-loss (ST-MoE, Zoph et al. 2022): ``mean((logsumexp logits)²)``, keeps router logits small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer.errors import InputError
from tx_explorer.modules.mlp import MLP, SwiGLU
from tx_explorer.trace import Trace


def expert_capacity(num_tokens: int, num_experts: int, top_k: int, factor: float | None) -> int | None:
    """Slots per expert: ``ceil(k · tokens / E × factor)``; None (no limit) when ``factor`` is None."""
    if factor is None:
        return None
    if factor <= 0:
        raise InputError("capacity_positive", value=factor)
    # The 1e-9 keeps float noise (3.0000000000000004) from adding a slot; at least one slot per expert.
    return max(1, math.ceil(top_k * num_tokens / num_experts * factor - 1e-9))


@dataclass(frozen=True)
class Routing:
    """Routing of N tokens to k of E experts (all ``[N, k]``, column 0 = first choice)."""

    chosen: Tensor  # long: expert index per slot
    gates: Tensor  # float: renormalised probabilities, each row sums to 1
    kept: Tensor  # bool: False = dropped for capacity (the expert contributes 0)


def route(probs: Tensor, top_k: int, capacity: int | None = None) -> Routing:
    """Top-k routing with renormalised gates and first-choice-first capacity over the rows of ``probs [N, E]``.

    Slot priority is rank-major then token order (GShard): every token's first choice is served before any
    second choice, so raising k never drops a first choice that k = 1 kept.
    """
    n, e = probs.shape
    if not 1 <= top_k <= e:
        raise ValueError(f"top_k must be between 1 and the number of experts ({e}), got {top_k}")
    top_p, chosen = probs.topk(top_k, dim=-1)  # (N, k)
    gates = top_p / top_p.sum(dim=-1, keepdim=True)
    if capacity is None:
        return Routing(chosen, gates, torch.ones_like(chosen, dtype=torch.bool))
    onehot = F.one_hot(chosen.t().reshape(-1), e)  # (k·N, E): rank-major order = fill priority
    position = (onehot.cumsum(dim=0) - 1).mul(onehot).sum(dim=-1)  # 0-based arrival index at the chosen expert
    kept = (position < capacity).reshape(top_k, n).t()  # (N, k)
    return Routing(chosen, gates, kept)


def balance_loss(probs: Tensor, chosen: Tensor) -> Tensor:
    """Switch load-balancing loss ``E · Σ_i f_i · P_i`` (= 1 when uniform).

    ``probs [N, E]`` are the router's probabilities, ``chosen [N, k]`` the experts each token went to.
    """
    e = probs.shape[-1]
    f = torch.bincount(chosen.reshape(-1), minlength=e).to(probs.dtype) / chosen.numel()  # not differentiable
    return e * (f * probs.mean(dim=0)).sum()


def z_loss(logits: Tensor) -> Tensor:
    """Router z-loss ``mean_n (log Σ_e exp logits[n, e])²`` (ST-MoE) from ``logits [N, E]``."""
    return torch.logsumexp(logits, dim=-1).square().mean()


class MoE(nn.Module):
    """A sparse MLP: router + ``num_experts`` MLPs (or SwiGLUs); ``[B, T, D] → [B, T, D]``."""

    def __init__(
        self,
        dim: int,
        hidden: int,
        *,
        num_experts: int = 8,
        top_k: int = 2,
        expert: str = "mlp",
        activation: str = "gelu",
        bias: bool = True,
        dropout: float = 0.0,
        capacity_factor: float | None = 1.25,
        eval_capacity_factor: float | None = None,
    ) -> None:
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise InputError("top_k_experts", experts=num_experts, top_k=top_k)
        if expert not in ("mlp", "swiglu"):
            raise ValueError(f"expert must be 'mlp' or 'swiglu', got {expert!r}")
        self.num_experts, self.top_k = num_experts, top_k
        self.capacity_factor, self.eval_capacity_factor = capacity_factor, eval_capacity_factor
        self.router = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(
            MLP(dim, hidden, activation=activation, bias=bias, dropout=dropout)
            if expert == "mlp"
            else SwiGLU(dim, hidden, bias=False, dropout=dropout)
            for _ in range(num_experts)
        )

    def forward(self, x: Tensor, trace: Trace | None = None) -> Tensor:
        """x ``[B, T, D]`` → ``[B, T, D]``; with a trace, records the routing (and the aux losses) as kind "router"."""
        return self.forward_with_aux(x, trace)[0]

    def forward_with_aux(self, x: Tensor, trace: Trace | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """x ``[B, T, D]`` → (y ``[B, T, D]``, aux): the balance and z losses (live 0-d tensors) and the
        ``num_dropped`` / ``num_assignments`` counts of this call."""
        b, t, d = x.shape
        flat = x.reshape(b * t, d)  # (N, D)
        # at least float32 (a bfloat16 model's router in float32); a float64 model's in float64, or its float64
        # reference runs would carry float32's rounding, which differs with the tokens in the call
        wide = torch.promote_types(x.dtype, torch.float32)
        logits = F.linear(flat.to(wide), self.router.weight.to(wide))  # (N, E)
        probs = logits.softmax(dim=-1)
        factor = self.capacity_factor if self.training else self.eval_capacity_factor
        capacity = expert_capacity(b * t, self.num_experts, self.top_k, factor)
        r = route(probs, self.top_k, capacity)
        y = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = torch.nonzero((r.chosen == e) & r.kept, as_tuple=True)  # assignments this expert serves
            if token.numel():
                gate = r.gates[token, slot].to(x.dtype).unsqueeze(-1)  # (n_e, 1)
                y.index_add_(0, token, gate * expert(flat[token]))
        aux = {
            "balance_loss": balance_loss(probs, r.chosen),
            "z_loss": z_loss(logits),
            "num_dropped": (~r.kept).sum(),
            "num_assignments": torch.tensor(r.kept.numel(), device=x.device),
        }
        if trace is not None:
            trace.add(
                "router",
                probs.view(b, 1, t, self.num_experts),  # (B, 1, T, E): "queries" = tokens, "keys" = experts
                name="router",
                chosen=r.chosen.view(b, t, self.top_k).detach().cpu(),
                gates=r.gates.view(b, t, self.top_k).detach().cpu(),
                dropped=(~r.kept).view(b, t, self.top_k).cpu(),
                capacity=capacity,
                **aux,
            )
        return y.view(b, t, d), aux
