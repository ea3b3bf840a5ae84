"""Who mixes tokens inside a block (lecture §5.1, §5.3, §9.5), and why LayerNorm needs no batch (§5.2).

* :func:`token_probe`: change one token's input to a block and measure how far every token moves after each of the
  block's stages, in its own order (its norms, attention, the MLP, the residual sums). Only attention moves other
  tokens (and, under the causal mask, only later ones); fed alone, a norm or the MLP moves exactly one row.
* :func:`batch_dependence`: one sequence in a batch, normalised by LayerNorm and by BatchNorm (training mode);
  another sequence is changed, or padding is added, and the first sequence's output is compared bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from tx_explorer.analysis.seeding import generator
from tx_explorer.errors import InputError, positive_int
from tx_explorer.modules.block import TransformerBlock
from tx_explorer.modules.norms import LayerNorm
from tx_explorer.modules.transformer import CausalLM

# Each stage of a block -> the part of the lecture's §9.5 table it belongs to.
PART = {
    "norm": "norm",  # in front of attention
    "attention": "attention",
    "attention_out_norm": "norm",  # on attention's output (sandwich, OLMo 2)
    "sum1": "residual",
    "sum1_norm": "norm",  # Post-Norm: after the first sum
    "norm2": "norm",  # in front of the MLP
    "mlp": "mlp",
    "mlp_out_norm": "norm",
    "sum2": "residual",
    "sum2_norm": "norm",
}

# (stage, what it applies to the previous stage's output or None for a residual sum, whether its output becomes
# the residual stream that the next sum adds to)
Step = tuple[str, Callable[[Tensor], Tensor] | None, bool]


def steps(block: TransformerBlock, mask: Tensor, pos: Tensor) -> list[Step]:
    """``block``'s stages in the order its forward runs them, every norm a stage of its own:

    * "pre": norm, attention, sum1, norm2, mlp, sum2
    * "sandwich" (Gemma 2/3): norm, attention, attention_out_norm, sum1, norm2, mlp, mlp_out_norm, sum2
    * "after" (OLMo 2, no norm in front): attention, attention_out_norm, sum1, mlp, mlp_out_norm, sum2
    * "post": attention, sum1, sum1_norm, mlp, sum2, sum2_norm

    An attention-only block (no MLP) ends at sum1."""

    def attention(h: Tensor) -> Tensor:
        return block.attn(h, mask=mask, pos=pos, k_pos=pos)

    if block.norm_position == "post":
        plan = [("attention", attention, False), ("sum1", None, True), ("sum1_norm", block.norm1, True)]
        plan += [("mlp", block.mlp, False), ("sum2", None, True), ("sum2_norm", block.norm2, True)]
        return plan if block.mlp is not None else plan[:3]
    plan = []
    subs = (("attention", attention, "norm", block.norm1, block.post_attn_norm, "sum1"),)
    if block.mlp is not None:
        subs += (("mlp", block.mlp, "norm2", block.norm2, block.post_mlp_norm, "sum2"),)
    for name, f, norm_name, norm, out_norm, total in subs:
        if block.norm_position != "after":  # OLMo 2's sub-layers read the stream as it is
            plan.append((norm_name, norm, False))
        plan.append((name, f, False))
        if out_norm is not None:
            plan.append((f"{name}_out_norm", out_norm, False))
        plan.append((total, None, True))
    return plan


def run(block: TransformerBlock, x: Tensor, mask: Tensor, pos: Tensor) -> dict[str, Tensor]:
    """The output of each of ``block``'s stages (:func:`steps`) on its input ``x``; the last one is ``block(x)``."""
    out, stream, h = {}, x, x
    for name, f, to_stream in steps(block, mask, pos):
        h = stream + block.drop(h) if f is None else f(h)  # a sum adds the sub-layer's output to the stream
        if to_stream:
            stream = h
        out[name] = h
    return out


@dataclass(frozen=True)
class Probe:
    token: int  # the token whose input was changed
    stages: tuple[str, ...]  # the block's stages in its order (:func:`steps`); the last one's output is the block's
    delta: dict[str, np.ndarray]  # stage -> ‖Δh_i‖ of every token after it, the block run on both inputs, [N]
    # Each norm, attention and the MLP fed alone its own input with only the token's row changed (after attention
    # the block carries the moved later tokens into every stage, which says nothing of whether that stage mixes):
    alone: dict[str, np.ndarray]  # stage -> ‖Δh_i‖, [N]
    exact: dict[str, bool]  # stage -> every other token bit-identical (torch.equal)

    def others(self, stage: str, *, before: bool, alone: bool = False) -> float:
        """Largest ‖Δh_i‖ over the tokens before (``before``) or after the changed one, in the block or alone."""
        d = (self.alone if alone else self.delta)[stage]
        part = d[: self.token] if before else d[self.token + 1 :]
        return float(part.max(initial=0.0))

    def part(self, name: str) -> list[str]:
        """The stages of one part of the lecture's table ("norm", "attention", "mlp", "residual")."""
        return [s for s in self.stages if PART[s] == name]


@torch.no_grad()
def token_probe(
    model: CausalLM, ids: list[int], *, token: int, layer: int = 0, size: float = 0.5, seed: int = 0
) -> Probe:
    """Add a random vector of norm ``size · ‖x_token‖`` to token ``token`` of the input of block ``layer``, run
    the block's stages in its own order on both inputs, and feed each norm, attention and the MLP alone its own
    input (the unchanged run's) with only that token's row changed (to the changed run's)."""
    n = len(ids)
    if not 0 <= token < n:
        raise InputError("probe_token", index=token, n=n, last=n - 1)
    if not 0 <= layer < len(model.blocks):
        raise InputError("probe_layer", layer=layer, last=len(model.blocks) - 1)
    idx = torch.tensor([ids], device=next(model.parameters()).device)
    pos = torch.arange(n, device=idx.device)
    # the model's own mask: a window on some layers only (Gemma 2) is their attention's, not every layer's
    mask = model.mask_between(pos, pos)  # (N, N)
    x = model.embed(idx)  # (1, N, D)
    for block in model.blocks[:layer]:  # the residual stream entering block ``layer``
        x = block(x, mask, pos=pos, k_pos=pos)
    block = model.blocks[layer]
    r = torch.randn(x.shape[-1], generator=generator(seed)).to(x)
    moved = x.clone()
    moved[0, token] += size * x[0, token].norm() * r / r.norm()
    a, b = run(block, x, mask, pos), run(block, moved, mask, pos)
    rest = torch.ones(n, dtype=torch.bool)
    rest[token] = False
    delta, alone, exact = {}, {}, {}
    a_in, b_in = x, moved  # each stage's input: the previous stage's output
    for name, f, _ in steps(block, mask, pos):
        delta[name] = _moved(a[name], b[name])
        if f is not None:
            one = a_in.clone()
            one[0, token] = b_in[0, token]
            c = f(one)
            alone[name] = _moved(a[name], c)
            exact[name] = torch.equal(a[name][0, rest], c[0, rest])
        a_in, b_in = a[name], b[name]
    return Probe(token, tuple(delta), delta, alone, exact)


def _moved(a: Tensor, b: Tensor) -> np.ndarray:
    """‖b_i − a_i‖ of every token i of one sequence ``[1, N, D]`` → ``[N]``."""
    return (b[0] - a[0]).double().norm(dim=-1).cpu().numpy()


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
