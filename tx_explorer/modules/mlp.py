"""Position-wise feed-forward networks (§5.3, §8.3)."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer.modules.linear import Linear
from tx_explorer.trace import Trace

ACTIVATIONS = {
    "gelu": nn.GELU,  # exact erf GELU (BERT, ViT)
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": nn.ReLU,  # the original Transformer
}


class MLP(nn.Module):
    """FFN(x) = W₂·act(W₁x + b₁) + b₂ with hidden width ``hidden`` (4D in the classic Transformer)."""

    def __init__(
        self, dim: int, hidden: int, *, activation: str = "gelu", bias: bool = True, dropout: float = 0.0
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}")
        self.fc1 = Linear(dim, hidden, bias=bias)
        self.act = ACTIVATIONS[activation]()
        self.fc2 = Linear(hidden, dim, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, trace: Trace | None = None) -> Tensor:
        return self.drop(self.fc2(self.act(self.fc1(x))))


class SwiGLU(nn.Module):
    """Shazeer 2020: FFN(x) = W₃·(SiLU(W₁x) ⊙ W₂x). Three matrices, so hidden = 8D/3 matches the MLP's 8D²."""

    def __init__(self, dim: int, hidden: int, *, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1 = Linear(dim, hidden, bias=bias)  # gate
        self.w2 = Linear(dim, hidden, bias=bias)  # value
        self.w3 = Linear(hidden, dim, bias=bias)  # output
        self.drop = nn.Dropout(dropout)

    @staticmethod
    def gate(h: Tensor) -> Tensor:
        """The non-linearity on W₁x."""
        return F.silu(h)

    def forward(self, x: Tensor, trace: Trace | None = None) -> Tensor:
        return self.drop(self.w3(self.gate(self.w1(x)) * self.w2(x)))


class GeGLU(SwiGLU):
    """Shazeer 2020's GELU-gated variant, as Gemma runs it: FFN(x) = W₃·(GELU_tanh(W₁x) ⊙ W₂x)."""

    @staticmethod
    def gate(h: Tensor) -> Tensor:
        return F.gelu(h, approximate="tanh")
