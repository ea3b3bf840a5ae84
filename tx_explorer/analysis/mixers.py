"""RNN, convolution and self-attention side by side (lecture §4.5), and where a Transformer block's time goes (§4.3).

Three token mixers at the same width D, all causal so that each output sees only the past:

* a GRU layer: N sequential steps, O(N·D²) work, O(N·D) memory;
* a stack of width-3 causal convolutions: every position at once, but the receptive field grows by 2 per layer,
  so the last token reaches the first only after ⌈(N−1)/2⌉ layers;
* one self-attention layer (the standard, materialised form): one parallel step, every token reaches every
  earlier one in one layer, O(N²) weights.

"Reaches" is checked, not assumed: the gradient of the last output with respect to the first input is non-zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.profiler import ProfilerActivity, profile

from tx_explorer import masks
from tx_explorer.analysis import spread
from tx_explorer.analysis.cost import FusedTiming, extrapolated_seconds, seconds_and_peak
from tx_explorer.analysis.seeding import generator, seeded_init
from tx_explorer.attention import scaled_dot_product_attention
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import positive_int
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.block import TransformerBlock
from tx_explorer.trace import Trace

KINDS = ("rnn", "conv", "attention")
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::dot"})


class CausalConvStack(nn.Module):
    """``layers`` width-3 convolutions, each padded on the left only (output t sees inputs t−2…t), GELU between."""

    def __init__(self, dim: int, layers: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(dim, dim, kernel_size=3) for _ in range(layers))

    def forward(self, x: Tensor, *, every: bool = False) -> Tensor | list[Tensor]:
        """x ``[B, N, D]`` → ``[B, N, D]`` (or each layer's output when ``every``)."""
        h, outs = x.transpose(1, 2), []  # (B, D, N): Conv1d wants channels first
        for i, conv in enumerate(self.convs):
            h = conv(F.pad(h, (2, 0)))  # (B, D, N): two zeros on the left keep it causal and N long
            if i < len(self.convs) - 1:
                h = F.gelu(h)
            outs.append(h.transpose(1, 2))
        return outs if every else outs[-1]


class GRULayer(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.rnn = nn.GRU(dim, dim, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.rnn(x)[0]  # (B, N, D): the hidden state after every step


class AttentionLayer(nn.Module):
    """One causal self-attention layer in its standard form: the ``[B, H, N, N]`` weights are materialised."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.mha = MultiHeadAttention(dim, heads)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.mha.project_qkv(x, None, None)  # (B, H, N, Dh) each
        mask = masks.causal(x.shape[1]).to(x.device)
        y, _ = scaled_dot_product_attention(q, k, v, mask=mask)  # (B, H, N, Dh)
        return self.mha.proj(y.transpose(1, 2).reshape(x.shape))  # (B, N, D)


def conv_layers_to_reach(n: int) -> int:
    """Causal width-3 convolutions needed before output N−1 depends on input 0: the field grows by 2 a layer."""
    positive_int("N", n)
    return math.ceil((n - 1) / 2)


def sequential_steps(kind: str, n: int, *, conv_layers: int) -> int:
    """Steps that must run one after another for N tokens: the GRU's N, the stack's depth, attention's 1."""
    return {"rnn": n, "conv": conv_layers, "attention": 1}[_kind(kind)]


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown token mixer {kind!r}; use one of {KINDS}")
    return kind


def build(kind: str, dim: int, *, heads: int = 4, conv_layers: int = 4, seed: int = 0) -> nn.Module:
    """The mixer ``kind`` at width ``dim``, with weights drawn from ``seed`` (eval mode)."""
    positive_int("D", dim)
    model = {
        "rnn": lambda: GRULayer(dim),
        "conv": lambda: CausalConvStack(dim, conv_layers),
        "attention": lambda: AttentionLayer(dim, heads),
    }[_kind(kind)]()
    return seeded_init(model, seed).eval()  # a private generator: the server never seeds the global RNG


def reaches_first(kind: str, n: int, layers: int, *, dim: int = 8, seed: int = 0) -> bool:
    """Whether, after ``layers`` layers of ``kind``, output N−1 depends on input 0: ∂y_{N−1}/∂x_0 ≠ 0."""
    positive_int("layers", layers)
    x = torch.randn(1, n, dim, generator=generator(seed), dtype=torch.float64, requires_grad=True)
    model = build(kind, dim, conv_layers=layers, seed=seed).double()
    if kind == "conv":
        y = model(x)
    else:
        y = x
        for _ in range(layers):  # a stack of identical layers: one is already enough for these two
            y = model(y)
    (grad,) = torch.autograd.grad(y[0, -1].sum(), x)
    return bool(grad[0, 0].abs().max() > 0)


def layers_to_reach(kind: str, n: int, *, dim: int = 8, seed: int = 0) -> int:
    """The fewest layers after which the last token's output depends on the first token (by gradients)."""
    positive_int("N", n)
    limit = n  # a width-3 causal stack needs ⌈(N−1)/2⌉ < N; the others 1
    for layers in range(1, limit + 1):
        if reaches_first(kind, n, layers, dim=dim, seed=seed):
            return layers
    raise RuntimeError(f"{kind} did not reach the first token in {limit} layers")  # never for these mixers


@dataclass(frozen=True)
class MixerRun:
    kind: str
    n: int
    seconds: float  # median forward time
    peak_bytes: int  # peak bytes of tensors allocated during one forward pass
    runs: int


def measure(
    kind: str,
    n: int,
    *,
    dim: int = 64,
    heads: int = 4,
    conv_layers: int = 4,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> MixerRun:
    """Median forward time (after a warm-up that also measures peak memory) of ``kind`` on ``[1, n, dim]``."""
    for name, value in (("N", n), ("repeats", repeats)):
        positive_int(name, value)
    device = torch.device(device)
    model = build(kind, dim, heads=heads, conv_layers=conv_layers, seed=seed).to(device)
    x = torch.randn(1, n, dim, generator=generator(seed)).to(device)
    with torch.no_grad():
        seconds, peak = seconds_and_peak(lambda: model(x), repeats, device)
    return MixerRun(kind, n, seconds, peak, repeats)


def predicted_seconds(previous: MixerRun | None, n: int) -> float:
    """Wall time of :func:`measure` at ``n`` from the same mixer at a smaller N: attention grows as N², the
    others as N; 0 when there is no earlier run."""
    if previous is None:
        return 0.0
    power = 2 if previous.kind == "attention" else 1
    return extrapolated_seconds(previous.seconds, previous.runs, previous.n, n, power)


@dataclass(frozen=True)
class MatmulShare:
    matmul_us: float  # self time of the matrix-multiplication kernels, microseconds
    other_us: float  # everything else: softmax, norms, GELU, adds, copies, masking
    top: list[tuple[str, float]]  # the largest operators by self time (name, microseconds)

    @property
    def share(self) -> float:
        return self.matmul_us / (self.matmul_us + self.other_us)


def matmul_share(n: int, *, dim: int = 128, heads: int = 4, repeats: int = 3, seed: int = 0) -> MatmulShare:
    """Profile one Pre-Norm Transformer block (standard attention, GELU MLP D→4D→D) on ``[1, n, dim]`` on the
    CPU: the share of operator self time spent in matrix multiplications."""
    for name, value in (("N", n), ("repeats", repeats)):
        positive_int(name, value)
    cfg = TransformerConfig(vocab_size=2, dim=dim, num_heads=heads, num_layers=1, max_len=n, dropout=0.0)
    block = seeded_init(TransformerBlock(cfg), seed).eval()
    x = torch.randn(1, n, dim, generator=generator(seed))
    mask = masks.causal(n)
    with torch.no_grad():
        block(x, mask, trace=Trace())  # warm-up; the trace asks for the materialised weights
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(repeats):
                block(x, mask, trace=Trace())
    events = [(e.key, e.self_cpu_time_total) for e in prof.key_averages()]
    matmul = sum(t for k, t in events if k in MATMUL_OPS)
    total = sum(t for _, t in events)
    top = sorted(events, key=lambda e: -e[1])[:8]
    return MatmulShare(matmul / repeats, (total - matmul) / repeats, [(k, t / repeats) for k, t in top])


def fused_verdicts(timing: FusedTiming) -> list[list[spread.Comparison]]:
    """§3.1 "one fused product beats three", size by size ``[len(ds)][len(ns)]``: fused's calls against three's,
    holding (fused faster), not holding (fused slower) or within noise when the gap of the median times does not
    exceed the sum of their half interquartile ranges over the calls (:func:`tx_explorer.analysis.spread.faster`).
    A timing kept without its calls has one number a side, so no spread: within noise everywhere."""
    fused = timing.fused[..., None] if timing.fused_calls is None else timing.fused_calls
    three = timing.separate[..., None] if timing.separate_calls is None else timing.separate_calls
    return [
        [spread.faster(list(f), list(t)) for f, t in zip(fr, tr, strict=True)]
        for fr, tr in zip(fused, three, strict=True)
    ]


def fused_ratio_band(timing: FusedTiming) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three's time over one's, size by size ``[len(ds), len(ns)]``, as :func:`fused_verdicts` reads it: the ratio
    of the median times m and the band the calls' spread r (half their interquartile range) allows, from
    (m₃ − r₃) ÷ (m₁ + r₁) to (m₃ + r₃) ÷ (m₁ − r₁) (∞ when r₁ ≥ m₁). The band lies wholly above 1 exactly when the
    size holds (gap > spread ⇔ m₃ − r₃ > m₁ + r₁), wholly below 1 when it does not hold, and holds 1 when within
    noise; NaN where the calls give no spread (one a side)."""
    cells = [c for row in fused_verdicts(timing) for c in row]
    m1, r1 = np.array([(c.left.median, c.left.half_iqr) for c in cells]).T  # the fused product
    m3, r3 = np.array([(c.right.median, c.right.half_iqr) for c in cells]).T  # three products
    low = (m3 - r3) / (m1 + r1)
    high = np.divide(m3 + r3, m1 - r1, out=np.full_like(m1, np.inf), where=m1 > r1)
    high[np.isnan(low)] = np.nan
    shape = timing.fused.shape
    return (m3 / m1).reshape(shape), low.reshape(shape), high.reshape(shape)
