"""Who mixes tokens inside a block (lecture §5.1, §5.3, §9.5), and why LayerNorm needs no batch (§5.2).

* :func:`token_probe`: change one token's input to a block and measure how far every token's output moves after
  the norm, after attention, after the MLP and after the whole block. Only attention moves other tokens (and,
  under the causal mask, only later ones); the norm and the MLP move exactly one row, the others by exactly 0.
* :func:`batch_dependence`: one sequence in a batch, normalised by LayerNorm and by BatchNorm (training mode);
  another sequence is changed, or padding is added, and the first sequence's output is compared bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from tx_explorer import masks
from tx_explorer.analysis.seeding import generator
from tx_explorer.errors import InputError, positive_int
from tx_explorer.modules.norms import LayerNorm
from tx_explorer.modules.transformer import CausalLM

STAGES = ("norm", "attention", "mlp", "block")


@dataclass(frozen=True)
class Probe:
    token: int  # the token whose input was changed
    delta: dict[str, np.ndarray]  # stage -> ‖Δh_i‖ of every token i, [N]
    exact: dict[str, bool]  # stage -> every other token bit-identical (torch.equal)

    def others(self, stage: str, *, before: bool) -> float:
        """Largest ‖Δh_i‖ over the tokens before (``before``) or after the changed one."""
        d = self.delta[stage]
        part = d[: self.token] if before else d[self.token + 1 :]
        return float(part.max(initial=0.0))


@torch.no_grad()
def token_probe(
    model: CausalLM, ids: list[int], *, token: int, layer: int = 0, size: float = 0.5, seed: int = 0
) -> Probe:
    """Add a random vector of norm ``size · ‖x_token‖`` to token ``token`` of the input of block ``layer`` and
    feed each sub-layer its own input with only that token changed: ``norm1``; attention (after ``norm1`` in a
    Pre-Norm block); the MLP (after ``norm2``); and the whole block."""
    n = len(ids)
    if not 0 <= token < n:
        raise InputError("probe_token", index=token, n=n, last=n - 1)
    if not 0 <= layer < len(model.blocks):
        raise InputError("probe_layer", layer=layer, last=len(model.blocks) - 1)
    idx = torch.tensor([ids], device=next(model.parameters()).device)
    pos = torch.arange(n, device=idx.device)
    mask = masks.causal_between(pos, pos, model.cfg.sliding_window)  # (N, N)
    x = model.embed(idx)  # (1, N, D)
    for block in model.blocks[:layer]:  # the residual stream entering block ``layer``
        x = block(x, mask, pos=pos, k_pos=pos)
    block = model.blocks[layer]
    r = torch.randn(x.shape[-1], generator=generator(seed)).to(x)
    moved = x.clone()
    moved[0, token] += size * x[0, token].norm() * r / r.norm()
    before = block.norm_position != "post"  # pre-norm and sandwich blocks normalise a sub-layer's input
    stages = {
        "norm": lambda h: block.norm1(h),
        "attention": lambda h: block.attn(block.attention_input(h), mask=mask, pos=pos, k_pos=pos),
        "mlp": lambda h: block.mlp(block.norm2(h) if before else h),
        "block": lambda h: block(h, mask, pos=pos, k_pos=pos),
    }
    delta, exact = {}, {}
    for name, f in stages.items():
        a, b = f(x)[0], f(moved)[0]  # (N, D)
        delta[name] = (b - a).double().norm(dim=-1).cpu().numpy()
        rest = torch.ones(n, dtype=torch.bool)
        rest[token] = False
        exact[name] = torch.equal(a[rest], b[rest])
    return Probe(token, delta, exact)


@dataclass(frozen=True)
class BatchDependence:
    change: str  # "other_sequence" or "padding"
    layernorm: float  # max |Δ| of the first sequence's output
    batchnorm: float
    layernorm_identical: bool  # torch.equal
    batchnorm_identical: bool


CHANGES = ("other_sequence", "padding")


@torch.no_grad()
def batch_dependence(
    *, batch: int = 4, n: int = 6, dim: int = 8, pad: int = 3, scale: float = 5.0, seed: int = 0
) -> list[BatchDependence]:
    """A batch ``[B, N, D]`` normalised by LayerNorm over D and by BatchNorm (training mode: mean and variance
    over the batch and positions of each feature). Then (a) sequence 1 is replaced by ``scale``-times larger
    values, (b) every sequence gets ``pad`` zero padding tokens; how far does sequence 0's output move?"""
    for name, value in (("N", n), ("D", dim), ("padding", pad)):
        positive_int(name, value)
    if batch < 2:
        raise ValueError(f"the batch needs a second sequence to change, got B = {batch}")
    g = generator(seed)
    x = torch.randn(batch, n, dim, generator=g)
    other = x.clone()
    other[1] = scale * torch.randn(n, dim, generator=g) + scale
    padded = torch.cat([x, torch.zeros(batch, pad, dim)], dim=1)  # (B, N + pad, D)
    ln, bn = LayerNorm(dim), nn.BatchNorm1d(dim).train()

    def run(norm: nn.Module, t: Tensor) -> Tensor:
        if isinstance(norm, nn.BatchNorm1d):
            return norm(t.transpose(1, 2)).transpose(1, 2)[0, :n]  # BatchNorm1d wants (B, D, N)
        return norm(t)[0, :n]  # (N, D): sequence 0, its real tokens

    out = []
    for change, y in zip(CHANGES, (other, padded)):
        a_ln, b_ln, a_bn, b_bn = run(ln, x), run(ln, y), run(bn, x), run(bn, y)
        out.append(
            BatchDependence(
                change,
                float((b_ln - a_ln).abs().max()),
                float((b_bn - a_bn).abs().max()),
                torch.equal(a_ln, b_ln),
                torch.equal(a_bn, b_bn),
            )
        )
    return out
