"""Tiled ("flash") attention: exact against the references, O(N) memory forward and backward, causal skipping."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tx_explorer.analysis.flash_steps import FULL, PARTIAL, SKIPPED, trace_example, trace_flash
from tx_explorer.analysis.memory import StorageTracker
from tx_explorer.attention import flash_attention, flash_attention_forward, scaled_dot_product_attention

SETTINGS = dict(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@st.composite
def problems(draw: st.DrawFn) -> dict:
    """Random leading dims, lengths, widths, mask (broadcast shapes, fully masked rows likely), causal, tiles."""
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    nq, nk = draw(st.integers(1, 33)), draw(st.integers(1, 33))
    d, dv = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    q = torch.randn(*lead, nq, d, generator=g)
    k_lead = lead[1:] if lead and draw(st.booleans()) else lead  # k, v shared across the first leading dim
    k = torch.randn(*k_lead, nk, d, generator=g)
    v = torch.randn(*k_lead, nk, dv, generator=g)
    mask = None
    kind = draw(st.sampled_from(["none", "full", "keys", "rows"]))
    if kind != "none":
        shape = {"full": (*lead, nq, nk), "keys": (*lead[:1], *(1,) * len(lead[1:]), 1, nk), "rows": (nq, nk)}[kind]
        mask = torch.rand(*shape, generator=g) < draw(st.floats(0.2, 1.0))
    block = draw(st.one_of(st.integers(1, 40), st.tuples(st.integers(1, 17), st.integers(1, 17))))
    return dict(q=q, k=k, v=v, mask=mask, causal=draw(st.booleans()), block=block)


def _effective_mask(p: dict) -> torch.Tensor | None:
    nq, nk = p["q"].shape[-2], p["k"].shape[-2]
    if not p["causal"]:
        return p["mask"]
    tri = torch.ones(nq, nk, dtype=torch.bool).tril()  # top-left aligned, like PyTorch's is_causal
    return tri if p["mask"] is None else p["mask"] & tri


@settings(**SETTINGS)
@given(problems())
def test_equals_the_reference(p):
    out = flash_attention(p["q"], p["k"], p["v"], mask=p["mask"], causal=p["causal"], block_size=p["block"])
    ref, _ = scaled_dot_product_attention(p["q"], p["k"], p["v"], mask=_effective_mask(p))
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)


@settings(**{**SETTINGS, "max_examples": 25})
@given(problems())
def test_gradients_equal_autograd_through_pytorch_math_attention(p):
    """Reference: PyTorch's materialising math backend in float64 (its safe softmax gives fully masked rows 0)."""
    q, k, v = (t.clone().requires_grad_() for t in (p["q"], p["k"], p["v"]))
    out = flash_attention(q, k, v, mask=p["mask"], causal=p["causal"], block_size=p["block"])
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), g)

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    mask = _effective_mask(p)
    lead = out.shape[:-2]  # PyTorch's math path wants equal leading dims: expand (autograd sums them back)
    qe, ke, ve = (t.expand(*lead, *t.shape[-2:]) for t in (q64, k64, v64))
    with sdpa_kernel([SDPBackend.MATH]):
        full = None if mask is None else mask.expand(*lead, *mask.shape[-2:])
        ref = F.scaled_dot_product_attention(qe, ke, ve, attn_mask=full)
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), g.double())
    torch.testing.assert_close(out.double(), ref.detach(), atol=1e-5, rtol=0)
    for ours, theirs in zip(grads, ref_grads):
        assert ours.shape == theirs.shape
        torch.testing.assert_close(ours.double(), theirs, atol=1e-4, rtol=1e-4)


def test_gradients_equal_autograd_through_the_project_reference():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 29, 8, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.rand(2, 1, 29, 29, generator=g) < 0.8
    mask[..., 0] = True  # no fully masked row: the reference's NaN-then-zero rows have NaN gradients
    out = flash_attention(q, k, v, mask=mask, causal=True, block_size=5)
    ref, _ = scaled_dot_product_attention(q, k, v, mask=mask & torch.ones(29, 29, dtype=torch.bool).tril())
    dout = torch.randn_like(out)
    for ours, theirs in zip(torch.autograd.grad(out, (q, k, v), dout), torch.autograd.grad(ref, (q, k, v), dout)):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_fully_masked_rows_are_zero_with_finite_gradients():
    q, k, v = (torch.randn(1, 2, 10, 4, requires_grad=True) for _ in range(3))
    mask = torch.ones(10, 10, dtype=torch.bool)
    mask[3] = False
    out = flash_attention(q, k, v, mask=mask, block_size=4)
    assert torch.equal(out[..., 3, :], torch.zeros_like(out[..., 3, :]))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert torch.equal(q.grad[..., 3, :], torch.zeros_like(q.grad[..., 3, :]))


@pytest.mark.parametrize("n, block, computed", [(64, 16, 10), (10, 4, 6), (12, 12, 1), (7, 1, 28)])
def test_causal_tiles_above_the_diagonal_are_skipped(n, block, computed):
    seen = []
    q = torch.randn(n, 4)
    flash_attention_forward(q, q, q, causal=True, block_size=block, on_tile=lambda i, j, m, l: seen.append((i, j)))
    assert len(seen) == computed
    assert all(j * block <= (i + 1) * block - 1 for i, j in seen)  # every computed tile touches the diagonal or below


def test_trace_shows_tiles_running_stats_and_the_same_output():
    tr = trace_example(n=12, d=4, block_size=4, causal=True, seed=3)
    assert tr.status.tolist() == [[PARTIAL, SKIPPED, SKIPPED], [FULL, PARTIAL, SKIPPED], [FULL, FULL, PARTIAL]]
    assert tr.max_abs_diff < 1e-5
    # the running max never decreases along a row; the final (m, ℓ) give the row's log-sum-exp
    for row_m, row_l, lse in zip(tr.m, tr.l, tr.lse):
        done = row_m[~np.isnan(row_m)]
        assert (np.diff(done) >= 0).all()
        assert np.isclose(done[-1] + np.log(row_l[~np.isnan(row_l)][-1]), lse, atol=1e-5)


def test_trace_on_fully_masked_row_reports_minus_infinity():
    q = torch.randn(6, 3)
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False
    tr = trace_flash(q, q, q, mask=mask, block_size=3)
    assert np.isneginf(tr.m[2]).all()
    assert (tr.l[2] == 0).all()


def test_never_allocates_an_nq_by_nk_tensor_forward_or_backward():
    nq, nk, d = 640, 512, 8  # one Nq×Nk matrix: 1.3 MB in float32, 328 kB even as booleans; a tile is 16 kB
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, nq, d, generator=g, requires_grad=True)
    k = torch.randn(2, nk, d, generator=g, requires_grad=True)
    v = torch.randn(2, nk, d, generator=g, requires_grad=True)
    mask = torch.rand(nq, nk, generator=g) < 0.9  # the caller's mask exists already; only tiles are cut from it
    with StorageTracker() as tracker:
        out = flash_attention(q, k, v, mask=mask, causal=True, block_size=64)
        out.square().sum().backward()
    assert tracker.largest < nq * nk, tracker.largest  # no tensor with Nq·Nk elements of any dtype
    assert tracker.peak < 2 * nq * nk * 4 / 8  # and the whole working set is far below the 2 batches' weights

    # The same tracker does see the materialised weights of the reference path: the test can fail.
    with StorageTracker() as tracker:
        scaled_dot_product_attention(q, k, v, mask=mask)
    assert tracker.largest >= 2 * nq * nk * 4


def test_a_score_mod_is_applied_to_the_scaled_scores_before_the_bias_and_the_mask():
    """The atlas's Gemma 2 path: the kernel with a soft cap equals softmax(c·tanh(QKᵀ·s / c) + bias), masked, in
    float64, with tiles smaller than the rows."""
    from tx_explorer.modules.attention import SoftCap

    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g, dtype=torch.float64) * 3 for n in (37, 41, 41))
    bias = torch.randn(3, 37, 41, generator=g, dtype=torch.float64)
    mask = torch.rand(37, 41, generator=g) > 0.3
    cap, scale = SoftCap(1.5), 0.4
    scores = cap((q @ k.transpose(-2, -1)) * scale) + bias
    want = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
    out, lse = flash_attention_forward(q, k, v, mask=mask, bias=bias, block_size=16, scale=scale, score_mod=cap)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(lse, torch.logsumexp(scores.masked_fill(~mask, float("-inf")), dim=-1))
    plain, _ = flash_attention_forward(q, k, v, mask=mask, bias=bias, block_size=16, scale=scale)
    assert (plain - want).abs().max() > 1e-2  # the cap matters at these scores


def test_leading_dims_broadcast_like_the_reference():
    q = torch.randn(2, 3, 5, 4)
    k, v = torch.randn(5, 4), torch.randn(1, 3, 5, 2)
    mask = torch.rand(2, 1, 1, 5) < 0.7
    ref, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(flash_attention(q, k, v, mask=mask, block_size=2), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("block", [0, -1, 2.5, True, (4,), (4, 0)])
def test_bad_block_size_is_refused(block):
    q = torch.randn(4, 2)
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(q, q, q, block_size=block)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    q, k, v = (torch.randn(2, 4, 300, 32) for _ in range(3))
    cpu = flash_attention(q, k, v, causal=True, block_size=64)
    gpu = flash_attention(q.cuda(), k.cuda(), v.cuda(), causal=True, block_size=64)
    torch.testing.assert_close(gpu.cpu(), cpu, atol=1e-5, rtol=1e-5)
