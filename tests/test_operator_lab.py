"""The operator page's analysis: inputs, the √D measurement, Q/K versus V, cross-attention, seeding."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tx_explorer.analysis import operator_lab as op
from tx_explorer.analysis.seeding import generator, seeded_mha

DIMS = [2**i for i in range(11)]


# Inputs --------------------------------------------------------------------------------------------------------


def test_random_qkv_shapes_and_seeding():
    q, k, v = op.random_qkv(3, 5, 8, 2, seed=7)
    assert (q.shape, k.shape, v.shape) == ((3, 8), (5, 8), (5, 2))
    again = op.random_qkv(3, 5, 8, 2, seed=7)
    other = op.random_qkv(3, 5, 8, 2, seed=8)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), again))
    assert not torch.equal(q, other[0])


@pytest.mark.parametrize("sizes", [(0, 2, 2, 2), (2, 2, -1, 2), (2, 2, 2, 1.5)])
def test_random_qkv_rejects_bad_sizes(sizes):
    with pytest.raises(ValueError, match="positive integer"):
        op.random_qkv(*sizes, seed=0)


def test_random_qkv_rejects_negative_seed():
    with pytest.raises(ValueError, match="seed"):
        op.random_qkv(2, 2, 2, 2, seed=-1)


def test_parse_matrix_reads_rows_with_any_separator():
    m = op.parse_matrix(" 1 2,3\n\n4;5  6 \n")
    assert torch.equal(m, torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))


def test_parse_matrix_reads_a_chinese_keyboards_separators():
    m = op.parse_matrix("1，2、3\n4；5\u30006")  # full-width comma, enumeration comma, semicolon and space
    assert torch.equal(m, torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))


@given(st.lists(st.lists(st.floats(-999, 999), min_size=3, max_size=3), min_size=1, max_size=16))
@settings(max_examples=40, deadline=None)
def test_parse_matrix_inverts_format_matrix(rows):
    m = torch.tensor(rows, dtype=torch.float32)
    assert torch.allclose(op.parse_matrix(op.format_matrix(m, decimals=6)), m, atol=1e-4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Q is empty"),
        ("   \n \n", "Q is empty"),
        ("1 2\n3", "row 2 holds 1, row 1 holds 2"),
        ("1 two", "row 1: 'two' is not a number"),
        ("1 nan", "finite"),
        ("1 inf", "finite"),
        ("1 1e9", "within"),
        ("\n".join(["1"] * 17), "17 rows"),
        (" ".join(["1"] * 17), "17 entries"),
        ("<script>alert(1)</script>", "is not a number"),
    ],
)
def test_parse_matrix_explains_bad_text(text, message):
    with pytest.raises(ValueError, match=message):
        op.parse_matrix(text, "Q")


def test_example_matrices_fit_together():
    steps = op.operator_steps(op.EXAMPLE["Q"], op.EXAMPLE["K"], op.EXAMPLE["V"])
    assert steps.out.shape == (2, 2)
    # The first query asks for topic 1, so key 1 gets the largest weight.
    assert steps.weights[0].argmax().item() == 0


# The three steps -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scaled", [True, False])
def test_operator_steps_match_torch_math_backend(scaled):
    q, k, v = op.random_qkv(4, 6, 8, 3, seed=1)
    steps = op.operator_steps(q, k, v, scaled)
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q[None], k[None], v[None], scale=None if scaled else 1.0)[0]
    assert torch.allclose(steps.out, ref, atol=1e-5)
    expected = torch.softmax(q.double() @ k.double().T / (math.sqrt(8) if scaled else 1.0), -1)
    assert torch.allclose(steps.weights.double(), expected, atol=1e-6)


def test_summarize_reports_scale_spread_and_row_sums():
    q, k, v = op.random_qkv(5, 7, 16, 2, seed=2)
    for scaled, scale in ((True, 0.25), (False, 1.0)):
        steps = op.operator_steps(q, k, v, scaled)
        s = op.summarize(steps, 16, scaled)
        assert s.scale == pytest.approx(scale)
        assert s.score_std == pytest.approx(steps.scores.std().item())
        assert 1 / 7 <= s.mean_peak <= 1
        assert s.max_row_error < 1e-6


def test_summarize_of_a_single_score():
    steps = op.operator_steps(torch.ones(1, 2), torch.ones(1, 2), torch.ones(1, 1))
    s = op.summarize(steps, 2, True)
    assert s.score_std == 0.0 and s.mean_peak == 1.0


# Why √D --------------------------------------------------------------------------------------------------------


@given(st.integers(2, 12), st.integers(0, 1000), st.floats(0.1, 30))
@settings(max_examples=30, deadline=None)
def test_softmax_jacobian_norm_matches_autograd(n, seed, spread):
    logits = torch.randn(n, generator=generator(seed), dtype=torch.float64) * spread
    a = torch.softmax(logits, -1)
    jac = torch.autograd.functional.jacobian(lambda e: torch.softmax(e, -1), logits)
    assert op.softmax_jacobian_norm(a).item() == pytest.approx(torch.linalg.matrix_norm(jac).item(), abs=1e-9)


def test_unscaled_softmax_saturates_while_scaled_stays_flat():
    scaled = op.softmax_saturation(DIMS, n_keys=32, trials=64, seed=0, scaled=True)
    unscaled = op.softmax_saturation(DIMS, n_keys=32, trials=64, seed=0, scaled=False)
    log_n = math.log(32)
    assert scaled.uniform_entropy == pytest.approx(log_n)
    # Scaled: the same softmax at every width.
    assert np.ptp(scaled.entropy) < 0.1 * log_n
    assert np.ptp(scaled.max_weight) < 0.1
    assert np.allclose(scaled.logit_std, 1.0, atol=0.15)
    # Unscaled: scores grow like √D, the entropy collapses, one key takes nearly everything.
    assert np.allclose(unscaled.logit_std / np.sqrt(DIMS), 1.0, atol=0.15)
    assert unscaled.entropy[-1] < 0.1 * log_n < scaled.entropy[-1]
    assert np.all(np.diff(unscaled.entropy) < 0.05)  # falls (up to sampling noise) at every doubling
    assert unscaled.max_weight[-1] > 0.9 > 0.2 > scaled.max_weight[-1]
    assert unscaled.grad_norm[-1] < 0.5 * scaled.grad_norm[-1]
    # Both start from the same scores at D = 1, where √D = 1.
    assert unscaled.entropy[0] == pytest.approx(scaled.entropy[0])


def test_saturation_prefix_trick_matches_a_direct_computation():
    """The curve reuses the first D dimensions of one draw; recompute D = 8 directly from the same numbers."""
    curve = op.softmax_saturation([8, 16], n_keys=5, trials=3, seed=4, scaled=True)
    g = generator(4)
    q = torch.randn(3, 1, 16, generator=g, dtype=torch.float64)
    k = torch.randn(3, 5, 16, generator=g, dtype=torch.float64)
    a = torch.softmax((q[..., :8] @ k[..., :8].transpose(1, 2)).squeeze(1) / math.sqrt(8), -1)
    assert curve.entropy[0] == pytest.approx(-(a * a.log()).sum(-1).mean().item(), rel=1e-9)
    assert curve.max_weight[0] == pytest.approx(a.max(-1).values.mean().item(), rel=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(dims=[]), "dims"),
        (dict(dims=[0, 4]), "dims"),
        (dict(dims=[4], n_keys=1), "2 keys"),
        (dict(dims=[4096], n_keys=1024, trials=1024), "exceeds"),
    ],
)
def test_saturation_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        op.softmax_saturation(**kwargs)


# Q and K versus V ----------------------------------------------------------------------------------------------


@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 16), st.integers(1, 6), st.integers(0, 100), st.booleans())
@settings(max_examples=40, deadline=None)
def test_replacing_values_never_changes_the_weights(nq, nk, d, dv, seed, scaled):
    q, k, v = op.random_qkv(nq, nk, d, dv, seed)
    r = op.replace_input(q, k, v, "V", seed=seed + 1, scaled=scaled)
    assert r.weights_diff == 0.0
    assert torch.equal(r.after.weights, r.before.weights)
    assert r.out_diff > 0


def test_replacing_keys_changes_the_weights():
    q, k, v = op.random_qkv(3, 4, 8, 2, seed=0)
    r = op.replace_input(q, k, v, "K", seed=1)
    assert r.weights_diff > 0.05 and r.out_diff > 0
    assert r.weights_diff == pytest.approx((r.after.weights - r.before.weights).abs().max().item())


def test_replace_input_rejects_q():
    q, k, v = op.random_qkv(2, 2, 2, 2, seed=0)
    with pytest.raises(ValueError, match="'K' or 'V'"):
        op.replace_input(q, k, v, "Q", seed=0)


# Cross-attention and the seeded layer --------------------------------------------------------------------------


@pytest.mark.parametrize(("nq", "nx"), [(3, 7), (7, 3), (1, 5)])
def test_cross_attention_matches_torch_multihead_attention(nq, nx):
    dim, heads, seed = 16, 4, 3
    ca = op.cross_attention(nq, nx, dim, heads, seed)
    assert ca.out.shape == (nq, dim) and ca.weights.shape == (heads, nq, nx)
    assert torch.allclose(ca.weights.sum(-1), torch.ones(heads, nq), atol=1e-6)
    ours = seeded_mha(dim, heads, seed)
    ref = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.qkv.weight)
        ref.in_proj_bias.copy_(ours.qkv.bias)
        ref.out_proj.weight.copy_(ours.proj.weight)
        ref.out_proj.bias.copy_(ours.proj.bias)
    out, w = ref(ca.queries[None], ca.context[None], ca.context[None], average_attn_weights=False)
    assert torch.allclose(ca.out, out[0], atol=1e-5)
    assert torch.allclose(ca.weights, w[0], atol=1e-6)
    # §3.1: self-attention = cross-attention with context = X, the layer's two paths against torch's self-attention
    x = ca.queries[None]
    with torch.no_grad():
        torch_self = ref(x, x, x, need_weights=False)[0]
        assert torch.allclose(ours(x), torch_self, atol=1e-5) and torch.allclose(
            ours(x, context=x), torch_self, atol=1e-5
        )
    assert ca.self_diff < 1e-6


def test_cross_attention_rejects_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match="does not divide"):
        op.cross_attention(2, 3, 10, 4, seed=0)


def test_cross_attention_rejects_empty_sets():
    with pytest.raises(ValueError, match="N_X"):
        op.cross_attention(2, 0, 8, 2, seed=0)


def test_seeded_mha_is_reproducible_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    a, b, c = seeded_mha(12, 3, 5), seeded_mha(12, 3, 5), seeded_mha(12, 3, 6)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.qkv.weight, b.qkv.weight) and not torch.equal(a.qkv.weight, c.qkv.weight)
    assert not a.training and not any(p.requires_grad for p in a.parameters())
    # N(0, 1/fan_in): unit-variance inputs give unit-variance queries.
    assert a.qkv.weight.std().item() * math.sqrt(12) == pytest.approx(1.0, abs=0.2)
