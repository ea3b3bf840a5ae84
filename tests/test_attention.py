"""The reference operator against PyTorch and float64, plus the invariants it must keep."""

import math
import zlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tx_explorer import masks
from tx_explorer.attention import attention_steps, broadcast_shape, scaled_dot_product_attention
from tx_explorer.errors import InputError
from tx_explorer.modules.attention import MultiHeadAttention

MASKS = {
    "none": lambda n: None,
    "causal": masks.causal,
    "sliding": lambda n: masks.sliding_window(n, 3),
    "prefix": lambda n: masks.prefix_lm(n, n // 2),
    "blocks": lambda n: masks.block_diagonal([n // 2, n - n // 2]),
}


def torch_reference(q, k, v, mask):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("shape", [(1, 1, 4, 8), (2, 3, 7, 16), (3, 2, 16, 5)])
def test_matches_torch_sdpa(kind, shape):
    # A seed of its own per case, the same in every process (hash() of a str varies with PYTHONHASHSEED).
    g = torch.Generator().manual_seed(zlib.crc32(repr((kind, shape)).encode()))
    b, h, n, d = shape
    q, k, v = (torch.randn(b, h, n, d, generator=g) for _ in range(3))
    mask = MASKS[kind](n) if n >= 2 else None
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, torch_reference(q, k, v, mask), atol=1e-5, rtol=1e-5)
    assert w.shape == (b, h, n, n)


def test_float64_recomputation_with_cross_shapes():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 12), torch.randn(2, 9, 12), torch.randn(2, 9, 7)
    out, w = scaled_dot_product_attention(q, k, v)
    e = q.double() @ k.double().transpose(-2, -1) / math.sqrt(12)
    a = torch.exp(e - e.max(-1, keepdim=True).values)
    a = a / a.sum(-1, keepdim=True)
    torch.testing.assert_close(w.double(), a, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.double(), a @ v.double(), atol=1e-5, rtol=0)
    assert out.shape == (2, 5, 7)  # output count = query count (cross-attention)


def test_scale_argument_and_unscaled_scores():
    q, k, v = torch.randn(3, 4), torch.randn(6, 4), torch.randn(6, 2)
    steps = attention_steps(q, k, v, scale=1.0)
    torch.testing.assert_close(steps.scores, q @ k.T)


def test_fully_masked_row_gives_zero_weights_and_output():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 2)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.equal(w[0, 1], torch.zeros(3)) and torch.equal(out[0, 1], torch.zeros(2))
    assert not torch.isnan(out).any()


@pytest.mark.parametrize(
    "args, message",
    [
        ((torch.randn(2, 4), torch.randn(3, 5), torch.randn(3, 5)), "last dimension"),
        ((torch.randn(2, 4), torch.randn(3, 4), torch.randn(2, 5)), "same number of rows"),
        ((torch.randn(4),) * 3, "at least two"),
    ],
)
def test_bad_shapes_are_explained(args, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*args)


@pytest.mark.parametrize(
    ("q", "k", "v", "key", "en", "zh"),
    [
        ((1, 2), (2, 3), (2, 2), "qk_width", "Q and K must share their last dimension D", "Q 有 2 列，K 有 3 列"),
        ((1, 3), (2, 3), (3, 2), "kv_rows", "K and V must have the same number of rows", "K 有 2 行，V 有 3 行"),
    ],
)
def test_shapes_that_do_not_fit_are_told_in_the_users_language(q, k, v, key, en, zh):
    """The operator page's typed matrices: the refusal was an English f-string after a Chinese prefix in 中文."""
    with pytest.raises(InputError) as refused:
        attention_steps(torch.ones(q), torch.ones(k), torch.ones(v))
    assert refused.value.key == key and en in str(refused.value)
    assert zh in refused.value.message("zh") and "must" not in refused.value.message("zh")


def test_bad_masks_are_explained():
    q = torch.randn(3, 4)
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, q, q, mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, mask=torch.ones(2, 2, dtype=torch.bool))


@given(st.lists(st.lists(st.integers(0, 3), max_size=4), min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_the_broadcast_rule_is_torchs(shapes):
    """The operator's plain-Python shape check (no SymPy on the first call) agrees with torch.broadcast_shapes."""
    try:
        expected = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        expected = None
    assert broadcast_shape(*map(tuple, shapes)) == expected


@st.composite
def qkv_and_mask(draw):
    nq, nk, d = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(nq, d, generator=g), torch.randn(nk, d, generator=g), torch.randn(nk, 3, generator=g)
    mask = torch.rand(nq, nk, generator=g) < draw(st.floats(0.2, 1.0))
    return q * draw(st.floats(0.1, 5.0)), k, v, mask


@settings(max_examples=60, deadline=None)
@given(qkv_and_mask())
def test_rows_sum_to_one_and_hidden_weights_are_exactly_zero(data):
    q, k, v, mask = data
    _, w = scaled_dot_product_attention(q, k, v, mask=mask)
    visible_rows = mask.any(-1)
    torch.testing.assert_close(w.sum(-1)[visible_rows], torch.ones(int(visible_rows.sum())))
    assert (w[~mask] == 0).all()
    assert (w >= 0).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**16))
def test_causal_weights_are_lower_triangular(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, n, 8, generator=g)
    _, w = scaled_dot_product_attention(x, x, x, mask=masks.causal(n))
    assert torch.equal(w.triu(1), torch.zeros_like(w))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 10), st.integers(0, 2**16))
def test_self_attention_without_positions_is_permutation_equivariant(n, seed):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, n, 16)
    perm = torch.randperm(n)
    with torch.no_grad():
        torch.testing.assert_close(mha(x[:, perm]), mha(x)[:, perm], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cross", [False, True])
def test_multihead_matches_torch_multiheadattention(cross):
    torch.manual_seed(1)
    dim, heads = 24, 3
    ours = MultiHeadAttention(dim, heads).eval()
    ref = torch.nn.MultiheadAttention(dim, heads, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.qkv.weight)
        ref.in_proj_bias.copy_(ours.qkv.bias)
        ref.out_proj.weight.copy_(ours.proj.weight)
        ref.out_proj.bias.copy_(ours.proj.bias)
    x = torch.randn(2, 5, dim)
    ctx = torch.randn(2, 7, dim) if cross else x
    mask = None if cross else masks.causal(5)
    from tx_explorer.trace import Trace

    trace = Trace()
    with torch.no_grad():
        out = ours(x, context=ctx if cross else None, mask=mask, trace=trace)
        ref_out, ref_w = ref(x, ctx, ctx, attn_mask=None if mask is None else ~mask, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(trace.records[0].weights, ref_w, atol=1e-6, rtol=1e-5)
    assert trace.records[0].kind == ("cross" if cross else "self")


def test_head_count_must_divide_width():
    with pytest.raises(ValueError, match="does not divide"):
        MultiHeadAttention(10, 3)
