"""The few-rows fast path of :mod:`tx_explorer.modules.linear` against ``F.linear``, the plain path it replaces."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from tx_explorer.config import PRESETS
from tx_explorer.modules import linear as lin
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.transformer import CausalLM

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("shape", [(1, 24), (2, 24), (3, 24), (1, 1, 24), (2, 4, 24), (8, 24), (9, 24), (0, 24)])
@pytest.mark.parametrize("bias", [False, True])
def test_few_rows_equal_f_linear(shape, bias):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(*shape, generator=g), torch.randn(40, 24, generator=g)
    b = torch.randn(40, generator=g) if bias else None
    with torch.no_grad():
        y = lin.linear(x, w, b)
    assert lin.fast_path(x, w) == (0 < x.numel() // 24 <= lin.FEW_ROWS) or x.numel() == 0
    assert y.shape == (*shape[:-1], 40) and y.is_contiguous()
    torch.testing.assert_close(y, F.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_the_fast_path_is_taken_and_only_where_it_pays():
    x, w = torch.randn(3, 24), torch.randn(40, 24)
    with torch.no_grad():
        assert lin.fast_path(x, w)
        assert not lin.fast_path(torch.randn(lin.FEW_ROWS + 1, 24), w)  # many rows: F.linear
        assert not lin.fast_path(x.bfloat16(), w.bfloat16())  # 16-bit kernels are fast already
        assert not lin.fast_path(x.double(), w.double())
    w.requires_grad_(True)
    assert not lin.fast_path(x, w)  # training records F.linear's graph
    with torch.no_grad():
        assert lin.fast_path(x, w)


def test_a_linear_keeps_nn_linears_parameters_and_gradients():
    torch.manual_seed(0)
    layer = lin.Linear(24, 40)
    plain = torch.nn.Linear(24, 40)
    plain.load_state_dict(layer.state_dict())  # same names and shapes
    x = torch.randn(2, 24)
    layer(x).sum().backward()
    plain(x).sum().backward()
    torch.testing.assert_close(layer.weight.grad, plain.weight.grad)


def test_a_model_on_the_fast_path_reads_as_on_the_plain_one(monkeypatch):
    """tiny-llama's forward and cached decoding, few rows (the fast path) against every product through F.linear."""
    torch.manual_seed(0)
    model = CausalLM(PRESETS["tiny-llama"].replace(vocab_size=64)).eval()
    ids = torch.tensor([[3, 1, 4, 1, 5]])

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        cache = KVCache()
        with torch.no_grad():
            full = model(ids)  # (1, 5, V): five rows
            steps = torch.cat([model(ids[:, t : t + 1], cache=cache) for t in range(ids.shape[1])], dim=1)
        return full, steps

    calls: list[int] = []
    monkeypatch.setattr(lin, "F", type("F", (), {"linear": lambda *a: calls.append(1) or F.linear(*a)}))
    fast = run()
    assert not calls  # five rows or one: every product on the fast path
    monkeypatch.setattr(lin, "FEW_ROWS", 0)  # every product through F.linear
    plain = run()
    assert calls
    for a, b in zip(fast, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
