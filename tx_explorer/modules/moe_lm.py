"""A causal language model whose blocks use Mixture-of-Experts MLPs, and its dense counterpart."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from tx_explorer.config import Serialisable, TransformerConfig
from tx_explorer.errors import InputError, positive_int
from tx_explorer.modules.block import TransformerBlock
from tx_explorer.modules.moe import MoE
from tx_explorer.modules.transformer import CausalLM, _init_weights
from tx_explorer.trace import Trace


@dataclass(frozen=True)
class MoEConfig(Serialisable):
    """The dense LM's settings plus the experts. Experts use ``transformer.mlp`` / ``activation`` / ``bias``."""

    transformer: TransformerConfig = field(default_factory=TransformerConfig)  # the dense LM around the experts
    num_experts: int = 8  # E expert MLPs per block
    top_k: int = 2  # k experts per token (Mixtral: 2 of 8)
    expert_ratio: float = 2.0  # expert hidden = ratio·D; the dense counterpart's MLP is k·ratio·D wide
    capacity_factor: float | None = 1.25  # training capacity (ST-MoE recommends 1.25); None = never drop
    eval_capacity_factor: float | None = None  # in eval mode; None = dropless inference
    balance_coef: float = 1e-2  # α of the Switch balancing loss (Fedus et al. 2022)
    z_coef: float = 1e-3  # coefficient of the router z-loss (ST-MoE)

    def __post_init__(self) -> None:
        positive_int("num_experts", self.num_experts)
        if not 1 <= self.top_k <= self.num_experts:
            raise InputError("top_k_experts", experts=self.num_experts, top_k=self.top_k)

    @property
    def expert_hidden(self) -> int:
        """Each expert's hidden width: the dense MLP's formula at ``expert_ratio``."""
        return self.transformer.replace(mlp_ratio=self.expert_ratio).mlp_hidden

    def dense_counterpart(self) -> TransformerConfig:
        """A dense LM with the same *active* parameters: one MLP as wide as the k chosen experts together."""
        return self.transformer.replace(mlp_ratio=self.top_k * self.expert_ratio)

    def make_moe(self) -> MoE:
        t = self.transformer
        return MoE(
            t.dim,
            self.expert_hidden,
            num_experts=self.num_experts,
            top_k=self.top_k,
            expert=t.mlp,
            activation=t.activation,
            bias=t.bias,
            dropout=t.dropout,
            capacity_factor=self.capacity_factor,
            eval_capacity_factor=self.eval_capacity_factor,
        )


class MoECausalLM(CausalLM):
    """:class:`CausalLM` with every block's MLP replaced by a :class:`MoE`; same forward and generate."""

    def __init__(self, cfg: MoEConfig) -> None:
        super().__init__(cfg.transformer)
        self.moe_cfg = cfg
        self.blocks = nn.ModuleList(
            TransformerBlock(cfg.transformer, mlp=cfg.make_moe()) for _ in range(cfg.transformer.num_layers)
        )
        self.blocks.apply(_init_weights)

    def forward_with_aux(self, idx: Tensor, trace: Trace | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """idx ``[B, N]`` → (logits ``[B, N, V]``, aux): balance and z losses averaged over layers (with
        gradients), dropped assignments and all assignments summed over layers. Reads them from the router
        records this call adds to ``trace`` (a private one when None)."""
        trace = Trace() if trace is None else trace
        start = len(trace)
        logits = self(idx, trace=trace)
        routers = [r for r in trace.records[start:] if r.kind == "router"]
        aux = {k: torch.stack([r.meta[k] for r in routers]).mean() for k in ("balance_loss", "z_loss")}
        aux.update({k: torch.stack([r.meta[k] for r in routers]).sum() for k in ("num_dropped", "num_assignments")})
        return logits, aux

    def training_loss(self, idx: Tensor, targets: Tensor) -> tuple[Tensor, dict[str, float]]:
        """Cross-entropy + α·balance + β·z; returns the total and its parts as floats for logging."""
        logits, aux = self.forward_with_aux(idx)
        ce = self.loss(logits, targets)
        total = ce + self.moe_cfg.balance_coef * aux["balance_loss"] + self.moe_cfg.z_coef * aux["z_loss"]
        parts = {"ce": ce.item(), "balance_loss": aux["balance_loss"].item(), "z_loss": aux["z_loss"].item()}
        parts["drop_rate"] = (aux["num_dropped"] / aux["num_assignments"]).item()
        return total, parts
