"""gpt-oss's routed experts (OpenAI 2025): a router picks k of E small gated MLPs per token, each clamped.

The router is a biased ``Linear(D, E)``; the k highest-scoring experts of a token are kept and their scores
renormalised into gates that sum to 1 (:func:`~tx_explorer.modules.moe.route`: a softmax over all E followed by
renormalising the top k equals gpt-oss's softmax over the top k logits, since p_i / Σ_top-k p_j = e^{s_i} / Σ_top-k
e^{s_j}). With a trace, the router's probabilities over all E experts are recorded as the MoE layer records them
(kind "router", see :class:`~tx_explorer.modules.moe.MoE`), so that gpt-oss's routing is read as tiny-moe's.

Each expert is a SwiGLU variant with biases and two clamps, which keep a single activation from growing without bound:

    gate = min(W₁x + b₁, L),  up = clamp(W₂x + b₂, −L, L),  expert(x) = W₃ · ((up + 1) ⊙ gate ⊙ σ(α·gate)) + b₃

with L = ``swiglu_limit`` (7) and α = ``swiglu_alpha`` (1.702: gate·σ(1.702·gate) is the sigmoid approximation of
GELU). A token's output is Σ gate_e · expert_e(x) over its k experts; every expert holds its own weights, stacked
along a first dimension of size E (rows as ``nn.Linear``'s: ``[E, out, in]``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tx_explorer.modules.linear import linear
from tx_explorer.modules.moe import route
from tx_explorer.trace import Trace


class ClampedSwiGLUExperts(nn.Module):
    """E experts of hidden width ``hidden``, k of them per token (see the module docstring)."""

    def __init__(
        self, dim: int, hidden: int, num_experts: int, top_k: int, *, limit: float = 7.0, alpha: float = 1.702
    ) -> None:
        super().__init__()
        self.top_k, self.limit, self.alpha = top_k, limit, alpha
        self.router = nn.Linear(dim, num_experts)  # scores of a token against each expert
        self.w1 = nn.Parameter(torch.randn(num_experts, hidden, dim) * 0.02)  # gate, per expert
        self.b1 = nn.Parameter(torch.zeros(num_experts, hidden))
        self.w2 = nn.Parameter(torch.randn(num_experts, hidden, dim) * 0.02)  # up (value)
        self.b2 = nn.Parameter(torch.zeros(num_experts, hidden))
        self.w3 = nn.Parameter(torch.randn(num_experts, dim, hidden) * 0.02)  # down (output)
        self.b3 = nn.Parameter(torch.zeros(num_experts, dim))

    def expert(self, e: int, x: Tensor) -> Tensor:
        """Expert ``e`` on tokens ``x [T, D]`` → ``[T, D]``."""
        gate = linear(x, self.w1[e], self.b1[e]).clamp(max=self.limit)  # (T, hidden)
        up = linear(x, self.w2[e], self.b2[e]).clamp(-self.limit, self.limit)
        return linear((up + 1) * gate * torch.sigmoid(self.alpha * gate), self.w3[e], self.b3[e])

    def forward(self, x: Tensor, trace: Trace | None = None) -> Tensor:
        """``x [B, N, D]`` → ``[B, N, D]``: each token the gated sum of its k experts' outputs."""
        b, n, d = x.shape
        flat = x.reshape(b * n, d)  # (T, D)
        probs = torch.softmax(self.router(flat), dim=-1)  # (T, E)
        routing = route(probs, self.top_k)  # chosen, gates: (T, k)
        if trace is not None:
            # probs: the softmax over all E scores, which gpt-oss never forms (it softmaxes only the k it keeps);
            # the gates are its softmax over the k chosen scores, the same numbers as route's renormalised top k.
            # No capacity: gpt-oss drops nothing. No auxiliary losses: they matter only to training.
            trace.add(
                "router",
                probs.view(b, 1, n, -1),  # (B, 1, N, E): "queries" = tokens, "keys" = experts
                name="router",
                chosen=routing.chosen.view(b, n, self.top_k).cpu(),
                gates=routing.gates.detach().view(b, n, self.top_k).float().cpu(),
                dropped=(~routing.kept).view(b, n, self.top_k).cpu(),
                capacity=None,
            )
        out = torch.zeros_like(flat)
        for e in routing.chosen.unique().tolist():  # only the experts some token chose run
            token, slot = torch.where(routing.chosen == e)
            out.index_add_(0, token, self.expert(e, flat[token]) * routing.gates[token, slot, None])
        return out.view(b, n, d)  # (B, N, D)
