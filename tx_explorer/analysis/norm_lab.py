"""Diagnostics for norm placement and block variants (§5.2–5.3, §8.1–8.3).

Everything is measured by running the model's own blocks explicitly (no hooks): the residual stream's RMS
after every block, gradient norms per block, the zero-branch identity argument, LayerNorm and RMSNorm step by
step, and MLP vs SwiGLU parameter counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from tx_explorer import masks
from tx_explorer.analysis import params
from tx_explorer.analysis.operator_lab import MAX_ABS, list_items, read_number
from tx_explorer.analysis.seeding import randn, seeded_init
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.block import TransformerBlock, make_mlp
from tx_explorer.modules.init import skip_init
from tx_explorer.modules.transformer import CausalLM


def forward_with_stats(model: CausalLM, idx: Tensor) -> tuple[Tensor, Tensor]:
    """``CausalLM.forward`` written out block by block, also measuring the residual stream.

    Args:
        idx: token ids ``[B, N]``.

    Returns:
        logits ``[B, N, V]`` (identical to ``model(idx)``) and the residual-stream RMS ``[L + 1]``:
        entry 0 after the embeddings, entry ``l`` after block ``l`` (before the final norm), detached.
    """
    mask = masks.causal(idx.shape[1]).to(idx.device)
    x = model.embed(idx)  # (B, N, D)
    rms = [x.detach().pow(2).mean().sqrt()]
    for block in model.blocks:
        x = block(x, mask, kind=model.kind)
        rms.append(x.detach().pow(2).mean().sqrt())
    return model.logits(model.norm(x)), torch.stack(rms)


def grad_norms(model: CausalLM) -> tuple[float, list[float]]:
    """Global L2 norm of all gradients and the norm of each block's gradients (call after ``backward``)."""

    def norm(params) -> Tensor:
        sq = [p.grad.detach().pow(2).sum() for p in params if p.grad is not None]
        return torch.stack(sq).sum().sqrt() if sq else torch.zeros(())

    per_layer = [float(norm(block.parameters())) for block in model.blocks]
    return float(norm(model.parameters())), per_layer


def depth_profile(model: CausalLM, idx: Tensor, targets: Tensor) -> dict[str, list[float]]:
    """One forward/backward on ``idx``/``targets [B, N]`` without updating: per-block grad norms and residual RMS.

    Gradients already on the model are restored afterwards, so it is safe mid-training.
    """
    saved = {p: p.grad for p in model.parameters()}
    model.zero_grad(set_to_none=True)
    logits, rms = forward_with_stats(model, idx)
    model.loss(logits, targets).backward()
    total, per_layer = grad_norms(model)
    for p, g in saved.items():
        p.grad = g
    return {"grad_norm": per_layer, "global_grad_norm": [total], "residual_rms": rms.tolist()}


@dataclass(frozen=True)
class IdentityDemo:
    """The §8.1 argument on one block whose branches output exactly zero."""

    x: Tensor  # input [N, D]
    pre: Tensor  # Pre-Norm block output: x + 0 = x
    post: Tensor  # Post-Norm block output: norm(norm(x + 0) + 0)
    norm_x: Tensor  # the norm applied to x (twice for the two sub-layers)

    @property
    def pre_error(self) -> float:
        """max |Pre-Norm(x) − x|: exactly 0."""
        return float((self.pre - self.x).abs().max())

    @property
    def post_change(self) -> float:
        """max |Post-Norm(x) − x|: how far Post-Norm moves x although both branches are zero."""
        return float((self.post - self.x).abs().max())

    @property
    def post_vs_norm(self) -> float:
        """max |Post-Norm(x) − norm(x)|: 0 — what comes out is norm(x)."""
        return float((self.post - self.norm_x).abs().max())


def sample_residual(n: int, dim: int, *, scale: float = 1.0, offset: float = 0.0, seed: int = 0) -> Tensor:
    """A residual stream ``[n, dim]`` = offset + scale·N(0, 1), seeded: something for the norms to change."""
    if n < 1 or dim < 2:
        raise InputError("residual_size", n=n, dim=dim)
    g = torch.Generator().manual_seed(seed)
    return offset + scale * torch.randn(n, dim, generator=g)


def zero_branch_block(cfg: TransformerConfig, position: str, *, seed: int = 0) -> TransformerBlock:
    """A block at ``position`` ("pre"/"post") whose attention and MLP output projections are zero,
    so each residual branch contributes exactly 0 (as a freshly zero-initialised branch does)."""
    block = seeded_init(TransformerBlock(cfg.replace(norm_position=position, dropout=0.0)), seed)
    out_layers = [block.attn.proj, block.mlp.fc2 if hasattr(block.mlp, "fc2") else block.mlp.w3]
    with torch.no_grad():
        for layer in out_layers:
            layer.weight.zero_()
            if layer.bias is not None:
                layer.bias.zero_()
    return block.eval()


def identity_demo(cfg: TransformerConfig, x: Tensor, *, seed: int = 0) -> IdentityDemo:
    """Run ``x [N, D]`` through a Pre-Norm and a Post-Norm block with zeroed branches (causal mask).

    Pre-Norm returns ``x`` bit for bit; Post-Norm returns ``norm(norm(x))`` — the identity is lost.
    """
    if x.dim() != 2 or x.shape[1] != cfg.dim:
        raise ValueError(f"x must be [N, {cfg.dim}], got shape {tuple(x.shape)}")
    mask = masks.causal(x.shape[0])
    with torch.no_grad():
        pre = zero_branch_block(cfg, "pre", seed=seed)(x[None], mask)[0]
        post_block = zero_branch_block(cfg, "post", seed=seed)
        post = post_block(x[None], mask)[0]
        norm_x = post_block.norm2(post_block.norm1(x))
    return IdentityDemo(x=x, pre=pre, post=post, norm_x=norm_x)


@dataclass(frozen=True)
class NormSteps:
    """LayerNorm and RMSNorm of one vector, every intermediate kept (float64)."""

    x: Tensor  # [D]
    mean: float  # μ (LayerNorm only)
    centred: Tensor  # x − μ
    std: float  # √(σ² + ε) of the centred vector
    ln_hat: Tensor  # (x − μ) / √(σ² + ε)
    ln_out: Tensor  # γ ⊙ ln_hat + β
    rms: float  # √(mean(x²) + ε) — of x itself, not centred
    rms_hat: Tensor  # x / RMS(x)
    rms_out: Tensor  # γ ⊙ rms_hat (RMSNorm has no β)


def parse_vector(text: str, name: str = "x", max_len: int = 64) -> Tensor:
    """Numbers separated by spaces, commas or semicolons (ASCII or full-width, one line or several) → ``[D]``.

    Raises:
        InputError: naming the vector and the number at fault (empty, not a number, not finite, too large, too
            many numbers).
    """
    items = list_items(text)
    if not items:
        raise InputError("vector_empty", name=name)
    if len(items) > max_len:
        raise InputError("vector_long", name=name, count=len(items), limit=max_len)
    return torch.tensor([_entry(item, name, i) for i, item in enumerate(items, start=1)], dtype=torch.float64)


def _entry(item: str, name: str, index: int) -> float:
    try:
        value = read_number(item)
    except ValueError:
        raise InputError("vector_not_a_number", name=name, index=index, cell=item[:20]) from None
    if not math.isfinite(value):
        raise InputError("vector_entry_not_finite", name=name, index=index)
    if abs(value) > MAX_ABS:  # the operator's bound on a typed number: the box kept it when it read matrix rows
        raise InputError("vector_too_large", name=name, index=index, limit=MAX_ABS, value=value)
    return value


def norm_steps(
    x: Sequence[float] | Tensor,
    gamma: Sequence[float] | Tensor | None = None,
    beta: Sequence[float] | Tensor | None = None,
    eps: float = 1e-5,
) -> NormSteps:
    """LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) of ``x [D]`` step by step.

    ``gamma`` and ``beta`` default to ones and zeros (a freshly initialised layer).
    """
    x = torch.as_tensor(x, dtype=torch.float64).reshape(-1)
    d = x.numel()
    if d < 2:
        raise InputError("norm_one_value", count=d)
    if not torch.isfinite(x).all():
        raise InputError("vector_not_finite")
    if eps < 0:
        raise InputError("eps_negative", eps=eps)
    g = torch.ones(d, dtype=torch.float64) if gamma is None else torch.as_tensor(gamma, dtype=torch.float64).reshape(-1)
    b = torch.zeros(d, dtype=torch.float64) if beta is None else torch.as_tensor(beta, dtype=torch.float64).reshape(-1)
    if g.numel() != d or b.numel() != d:
        raise InputError("gamma_beta_size", d=d, gamma=g.numel(), beta=b.numel())
    mean = x.mean()
    centred = x - mean
    std = (centred.pow(2).mean() + eps).sqrt()
    rms = (x.pow(2).mean() + eps).sqrt()
    if std == 0 or rms == 0:
        raise InputError("constant_vector")
    ln_hat, rms_hat = centred / std, x / rms
    return NormSteps(
        x=x,
        mean=float(mean),
        centred=centred,
        std=float(std),
        ln_hat=ln_hat,
        ln_out=g * ln_hat + b,
        rms=float(rms),
        rms_hat=rms_hat,
        rms_out=g * rms_hat,
    )


KINDS = ("mlp", "swiglu")


def mlp_param_counts(dim: int, mlp_ratio: float = 4.0, *, bias: bool = True) -> dict[str, int]:
    """Parameters of the classic MLP (D → rD → D) and of SwiGLU (hidden ⌊2rD/3⌉, no biases) at width ``dim``.

    Returns the closed-form counts and the modules' own ``sum(p.numel())`` (they must agree):
    MLP ``2·D·h + (h + D)·bias``, SwiGLU ``3·D·h'``.
    """
    if dim < 1 or mlp_ratio <= 0:
        raise InputError("mlp_width", dim=dim, ratio=mlp_ratio)
    cfgs = {kind: TransformerConfig(dim=dim, num_heads=1, mlp=kind, mlp_ratio=mlp_ratio, bias=bias) for kind in KINDS}
    if cfgs["mlp"].mlp_hidden < 1:
        raise InputError("mlp_no_hidden", dim=dim, ratio=mlp_ratio)
    with params.shapes_only():  # count without allocating
        counted = {kind: sum(p.numel() for p in make_mlp(cfg).parameters()) for kind, cfg in cfgs.items()}
    return {
        "mlp_hidden": cfgs["mlp"].mlp_hidden,
        "swiglu_hidden": cfgs["swiglu"].mlp_hidden,
        "mlp_formula": params.mlp_params(cfgs["mlp"]),
        "swiglu_formula": params.mlp_params(cfgs["swiglu"]),
        "mlp_counted": counted["mlp"],
        "swiglu_counted": counted["swiglu"],
    }


SWIGLU_CHECK_MAX_DIM = 256  # the live SwiGLU check runs at min(D, this): any D is counted, a small one is run
SWIGLU_CHECK_TOKENS = 8


@dataclass(frozen=True)
class SwiGLUCheck:
    dim: int  # the width the check ran at
    hidden: int
    max_diff: float  # max |module(x) − (SiLU(x W₁) ⊙ x W₂) W₃ by hand in float64|
    scale: float  # the largest |output|


@torch.no_grad()
def swiglu_by_hand(dim: int, mlp_ratio: float = 4.0, *, seed: int = 0) -> SwiGLUCheck:
    """§8.3's SwiGLU(x) = (SiLU(x W₁) ⊙ x W₂) W₃ written out in float64 from the module's three weight matrices, with
    SiLU(z) = z / (1 + e^(−z)), against the module itself on random tokens (width at most
    :data:`SWIGLU_CHECK_MAX_DIM`)."""
    d = min(int(dim), SWIGLU_CHECK_MAX_DIM)
    cfg = TransformerConfig(dim=d, num_heads=1, mlp="swiglu", mlp_ratio=mlp_ratio, bias=False)
    with skip_init():  # seeded_init draws every weight below: the global RNG stays untouched
        module = make_mlp(cfg)
    seeded_init(module, seed, std=d**-0.5)
    x = randn(SWIGLU_CHECK_TOKENS, d, seed=seed + 1)  # (T, D)
    w1, w2, w3 = (m.weight.double().T for m in (module.w1, module.w2, module.w3))  # (D, H), (D, H), (H, D)
    gate = x.double() @ w1
    by_hand = (gate / (1 + torch.exp(-gate)) * (x.double() @ w2)) @ w3  # (T, D)
    return SwiGLUCheck(d, cfg.mlp_hidden, float((module(x).double() - by_hand).abs().max()), float(by_hand.abs().max()))


def ema(values: Sequence[float | None], smoothing: float) -> list[float]:
    """Exponential moving average (TensorBoard-style, debiased) with weight ``smoothing`` ∈ [0, 1) on the past.

    Missing values (None, a diverged step) stay missing and do not enter the average.
    """
    if not 0 <= smoothing < 1:
        raise InputError("smoothing_range", smoothing=smoothing)
    out, avg, weight = [], 0.0, 0.0
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(float("nan"))
            continue
        avg = smoothing * avg + (1 - smoothing) * v
        weight = smoothing * weight + (1 - smoothing)
        out.append(avg / weight)
    return out


def pad_rows(rows: Sequence[Sequence[float | None]]) -> np.ndarray:
    """Rows of different lengths as one ``[R, max length]`` float array, NaN-padded (None → NaN): for downloads."""
    out = np.full((len(rows), max((len(r) for r in rows), default=0)), np.nan)
    for i, r in enumerate(rows):
        out[i, : len(r)] = np.asarray(r, dtype=np.float64)
    return out


@dataclass(frozen=True)
class AttentionPair:
    """One head of one layer in two models on the same tokens, and their difference."""

    tokens: list[str]
    a: Tensor  # [N, N]
    b: Tensor  # [N, N]
    diff: Tensor  # a − b
    truncated: bool  # the text was cut to the context


def attention_pair(model_a: TextModel, model_b: TextModel, text: str, *, layer: int, head: int) -> AttentionPair:
    """The same sentence through two models that share a tokenizer: head ``head`` of block ``layer`` in each."""
    enc = model_a.encode(text)
    maps = []
    for tm in (model_a, model_b):
        cfg = tm.config
        if not 0 <= layer < cfg.num_layers or not 0 <= head < cfg.num_heads:
            raise ValueError(
                f"{tm.name} has {cfg.num_layers} blocks × {cfg.num_heads} heads; "
                f"layer {layer}, head {head} does not exist"
            )
        maps.append(tm.maps(enc.ids, enc.tokens).stack()[layer, 0, head])  # (N, N)
    return AttentionPair(tokens=enc.tokens, a=maps[0], b=maps[1], diff=maps[0] - maps[1], truncated=enc.truncated)


def count_parameters(model: nn.Module, *, non_embedding: bool = False) -> int:
    """``sum(p.numel())`` over unique parameters; ``non_embedding`` leaves out token and position tables."""
    params = {id(p): p for p in model.parameters()}
    if non_embedding and isinstance(model, CausalLM):
        for p in model.embed.parameters():
            params.pop(id(p), None)
    return sum(p.numel() for p in params.values())
