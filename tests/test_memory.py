"""Measured memory (the dispatch-mode tracker), the naive-attention guard, and the cost model of the four matmuls."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from tx_explorer.analysis import cost, memory
from tx_explorer.analysis.memory import MemoryBudgetError, StorageTracker, check_naive_fits, peak_memory
from tx_explorer.attention import flash_attention, scaled_dot_product_attention

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.mark.parametrize(
    "numel, dtype", [(2_500_000, torch.float32), (3_000_000, torch.float64), (7_000_001, torch.uint8)]
)
def test_a_known_allocation_is_measured_within_5_percent(numel, dtype):
    expected = numel * torch.empty(0, dtype=dtype).element_size()
    result, peak = peak_memory(lambda: torch.ones(numel, dtype=dtype))
    assert result.numel() == numel
    assert abs(peak - expected) <= 0.05 * expected, (peak, expected)


def test_peak_is_the_high_water_mark_not_the_sum():
    def fn() -> None:
        a = torch.empty(2_000_000)  # 8 MB
        del a
        gc.collect()
        b = torch.empty(1_000_000)  # 4 MB, after a is gone
        c = b.view(1000, 1000)[::2]  # a view: no new storage
        return c

    _, peak = peak_memory(fn)
    assert abs(peak - 8_000_000) <= 0.05 * 8_000_000


def test_frees_are_subtracted_and_preexisting_tensors_are_not_counted():
    x = torch.zeros(1_000_000)
    with StorageTracker() as tracker:
        x.add_(1.0)  # in place on a tensor that existed before
        y = x * 2  # 4 MB new
        assert tracker.current == 4_000_000
        del y
        gc.collect()
        assert tracker.current == 0
    assert tracker.peak == 4_000_000


def test_naive_attention_is_measured_as_the_analytic_count():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 256, 16, generator=g) for _ in range(3))
    _, peak = peak_memory(lambda: scaled_dot_product_attention(q, k, v)[0])
    assert peak == pytest.approx(memory.naive_bytes(256, 2, 16), rel=0.01)


@pytest.mark.parametrize("n, block", [(300, 64), (1024, 128), (50, 64)])
def test_flash_attention_peak_matches_its_analytic_count_and_grows_linearly(n, block):
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(1, 2, n, 16, generator=g) for _ in range(3))
    with torch.no_grad():
        _, peak = peak_memory(lambda: flash_attention(q, k, v, block_size=block))
    assert peak == pytest.approx(cost.flash_bytes(n, 2, 16, block_size=block), rel=0.05)
    assert cost.flash_bytes(8 * n, 2, 16, block_size=block) < 9 * cost.flash_bytes(n, 2, 16, block_size=block)


def test_guard_refuses_with_the_numbers():
    with pytest.raises(MemoryBudgetError) as info:
        check_naive_fits(65536, 8, 64, free=20 * 10**9)
    message = str(info.value)
    assert "naive attention at N=65,536, H=8 needs 275 GB" in message
    assert "this machine has 20 GB free" in message
    assert isinstance(info.value, ValueError)  # the page's friendly_errors shows it as a message


def test_guard_lets_small_attention_run_and_returns_the_estimate():
    assert check_naive_fits(512, 8, 64, free=10**10) == memory.naive_bytes(512, 8, 64)
    assert check_naive_fits(512, 8, 64) > 0  # against the memory free right now


def test_free_memory_is_positive_and_below_the_total():
    assert 0 < memory.available_bytes() <= memory.total_bytes()


def test_format_bytes():
    assert memory.format_bytes(137.4e9) == "137 GB"
    assert memory.format_bytes(5.12e12) == "5.12 TB"
    assert memory.format_bytes(999) == "999 B"


def test_lecture_example_needs_terabytes_naively():
    assert memory.naive_bytes(cost.LECTURE_N, cost.LECTURE_H, 64) > 5e12  # two 64 × 10⁵ × 10⁵ float32 arrays
    assert cost.flash_bytes(cost.LECTURE_N, cost.LECTURE_H, 64) < 2e9


@pytest.mark.parametrize("n, d, h", [(7, 12, 3), (64, 32, 4), (33, 64, 8)])
def test_four_matmul_flops_match_pytorchs_flop_counter(n, d, h):
    """Independent count: PyTorch's FlopCounterMode on nn.MultiheadAttention's explicit (weights-returning) path."""
    mha = nn.MultiheadAttention(d, h, batch_first=True)
    x = torch.randn(1, n, d, generator=torch.Generator().manual_seed(n))
    with FlopCounterMode(display=False) as counter:
        mha(x, x, x, need_weights=True, average_attn_weights=False)
    products = cost.four_matmuls(n, d, h)
    assert counter.get_total_flops() == sum(mm.flops for mm in products)
    assert [mm.out for mm in products] == [(n, 3 * d), (h, n, n), (h, n, d // h), (n, d)]


def test_quadratic_products_overtake_the_projections_at_2d():
    d, h = 256, 8
    for n, overtaken in [(int(cost.crossover_n(d)) - 1, False), (int(cost.crossover_n(d)) + 1, True)]:
        mm = cost.four_matmuls(n, d, h)
        quad = sum(m.flops for m in mm if m.quadratic)
        assert (quad > sum(m.flops for m in mm) - quad) is overtaken


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="divide"):
        cost.four_matmuls(10, 10, 3)
    with pytest.raises(ValueError, match="positive"):
        cost.four_matmuls(0, 8, 2)


def test_measure_reports_time_and_peak():
    r = cost.measure("flash", 96, heads=2, head_dim=8, repeats=2, block_size=32)
    assert r.seconds > 0 and r.runs == 2
    assert r.peak_bytes == cost.flash_bytes(96, 2, 8, block_size=32)
    assert cost.ratio([r], 96, "flash", "flash") == 1.0
    with pytest.raises(ValueError, match="unknown"):
        cost.attention_fn("magic")


def test_probing_sdpa_backends_never_switches_this_processs_backends(monkeypatch):
    """``sdpa_kernel`` is process-wide: a probe in the server made other sessions' attention fail meanwhile. The
    probe runs in a child process, once per device and dtype."""
    import torch.nn.attention as attention

    cost._probed.cache_clear()
    for module in (attention, cost):  # the library's own name for it too
        monkeypatch.setattr(module, "sdpa_kernel", lambda *a, **k: pytest.fail("switched backends in the server"))
    usable = cost.sdpa_backends("cpu", "float32")
    assert usable["math"] is True
    assert set(usable) == {"flash_attention", "efficient_attention", "cudnn_attention", "math"}
    assert cost.sdpa_backends("cpu", torch.float32) is not usable and cost._probed.cache_info().hits == 1
