"""Today's attention parts: rotary, ALiBi, GQA/MQA, sliding windows, the KV cache, the operator's bias.

Each is checked against a float64 reference written here from the paper, against an independent implementation
where one exists (transformers' rotary, PyTorch's SDPA with ``enable_gqa`` or a float mask), and by exact
identities (GQA = MHA with duplicated K/V weights; cached decoding = one full pass).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from tx_explorer import masks
from tx_explorer.attention import flash_attention, scaled_dot_product_attention
from tx_explorer.config import TransformerConfig
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.positional import ALiBi, Rotary, alibi_slopes
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")


def rotary_reference(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Float64, as complex numbers: pair (i, i + d/2) is z = x_i + i·x_{i+d/2}, turned by e^{i·pos·θ^(−2i/d)}."""
    d = x.shape[-1]
    x = x.double()
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :])
    freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = z * torch.polar(torch.ones(len(pos), d // 2, dtype=torch.float64), pos.double()[:, None] * freq)
    return torch.cat([z.real, z.imag], dim=-1)


@pytest.mark.parametrize("theta", [10000.0, 500.0, 1e6])
def test_rotary_against_float64_complex_reference(theta):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 11, 16)
    pos = torch.arange(5, 16)
    got = Rotary(16, theta=theta).rotate(x, pos)
    torch.testing.assert_close(got.double(), rotary_reference(x, pos, theta), atol=2e-5, rtol=1e-5)
    assert torch.equal(Rotary(16, theta=theta).rotate(x, torch.zeros(11, dtype=torch.long)), x)  # position 0: identity


def test_rotary_against_transformers_rotate_half_and_rotary_class():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb, rotate_half

    torch.manual_seed(1)
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=500.0, max_position_embeddings=64)
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)
    pos = torch.arange(3, 12)
    cos, sin = LlamaRotaryEmbedding(cfg)(q, pos[None])  # (1, N, Dh)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    ours = Rotary(16, theta=500.0)
    torch.testing.assert_close(ours.rotate(q, pos), q_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ours.rotate(k, pos), k_ref, atol=1e-6, rtol=1e-5)
    x1, x2 = q.chunk(2, dim=-1)
    assert torch.equal(rotate_half(q), torch.cat([-x2, x1], dim=-1))  # the half-split pairing we implement


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(0, 200),
    n=st.integers(0, 200),
    shift=st.integers(-200, 200),
    seed=st.integers(0, 2**16),
)
def test_rotary_scores_depend_only_on_the_offset(m, n, shift, seed):
    """⟨R(m)q, R(n)k⟩ = ⟨R(m + s)q, R(n + s)k⟩ for every shift s keeping the positions ≥ 0."""
    shift = max(shift, -min(m, n))
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64), torch.randn(1, 1, 1, 8, generator=g)
    rot = Rotary(8, theta=10000.0)

    def score(a: int, b: int) -> float:
        return float((rot.rotate(q, torch.tensor([a])) * rot.rotate(k.double(), torch.tensor([b]))).sum())

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=2e-4)


def test_rotary_scores_do_change_with_the_offset():
    torch.manual_seed(9)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)
    rot = Rotary(8)
    scores = [float((rot.rotate(q, torch.tensor([d])) * rot.rotate(k, torch.tensor([0]))).sum()) for d in range(6)]
    assert len({round(s, 4) for s in scores}) == 6


def press_slopes(n: int) -> list[float]:
    """The ALiBi authors' reference ``get_slopes`` (ofirpress/attention_with_linear_biases), verbatim in logic."""

    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + press_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("heads", [1, 2, 6, 8, 12, 16])
def test_alibi_slopes_match_the_papers_reference(heads):
    torch.testing.assert_close(alibi_slopes(heads).double(), torch.tensor(press_slopes(heads), dtype=torch.float64))
    if heads == 8:
        assert alibi_slopes(8).tolist() == [2.0**-h for h in range(1, 9)]  # 1/2, 1/4, …, 1/256


@pytest.mark.parametrize("kv_heads", [6, 3, 1])
def test_alibi_attention_equals_torch_sdpa_with_a_float_mask(kv_heads):
    torch.manual_seed(2)
    attn = MultiHeadAttention(24, 6, num_kv_heads=kv_heads, position=ALiBi(6)).eval()
    x, n = torch.randn(2, 9, 24), 9
    mask = masks.causal(n)
    q, k, v = attn.project_qkv(x)
    k, v = attn.expand_kv(k), attn.expand_kv(v)
    i = torch.arange(n)
    bias = -alibi_slopes(6)[:, None, None] * (i[:, None] - i[None, :])  # −m_h·(i − j), (H, N, N)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~mask, float("-inf")))
    ref = attn.proj(ref.transpose(1, 2).reshape(2, n, 24))
    trace = Trace()
    with torch.no_grad():
        traced, fused = attn(x, mask=mask, trace=trace), attn(x, mask=mask)
    torch.testing.assert_close(traced, ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(fused, ref, atol=1e-6, rtol=1e-5)
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
    torch.testing.assert_close(next(iter(trace)).weights, weights)


def test_values_alone_are_the_values_of_the_fused_projection():
    """project_values reads W_V's rows only: the V that project_qkv makes, with its bias, whatever turns q and k."""
    torch.manual_seed(4)
    attn = MultiHeadAttention(32, 8, num_kv_heads=2, qkv_bias=True, position=Rotary(4)).eval()
    with torch.no_grad():
        attn.qkv.bias.normal_()
        x = torch.randn(2, 7, 32)
        _, _, v = attn.project_qkv(x)
        torch.testing.assert_close(attn.project_values(x), v, atol=1e-6, rtol=1e-6)
    assert attn.project_values(x).shape == (2, 2, 7, 4)  # (B, H_kv, N, Dh)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_gqa_equals_torch_enable_gqa_and_traces_query_heads(kv_heads):
    torch.manual_seed(3)
    attn = MultiHeadAttention(32, 8, num_kv_heads=kv_heads).eval()
    assert attn.qkv.weight.shape == (32 + 2 * kv_heads * 4, 32)
    x = torch.randn(2, 7, 32)
    q, k, v = attn.project_qkv(x)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = attn.proj(ref.transpose(1, 2).reshape(2, 7, 32))
    trace = Trace()
    with torch.no_grad():
        got = attn(x, mask=masks.causal(7), trace=trace)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)
    record = next(iter(trace))
    assert record.weights.shape == (2, 8, 7, 7)  # one map per query head
    assert record.meta["kv_heads"] == kv_heads
    assert record.meta["groups"] == tuple(h // (8 // kv_heads) for h in range(8))


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_gqa_is_exactly_mha_with_key_value_weights_duplicated_per_group(kv_heads):
    torch.manual_seed(4)
    heads, dh, dim = 4, 6, 24
    gqa = MultiHeadAttention(dim, heads, num_kv_heads=kv_heads, qkv_bias=True).eval()
    mha = MultiHeadAttention(dim, heads, qkv_bias=True).eval()
    with torch.no_grad():
        for p in gqa.qkv.parameters():
            p.add_(torch.randn_like(p))
        w_q, w_k, w_v = gqa.qkv.weight.split([dim, kv_heads * dh, kv_heads * dh])
        b_q, b_k, b_v = gqa.qkv.bias.split([dim, kv_heads * dh, kv_heads * dh])

        def per_head(t):
            return t.unflatten(0, (kv_heads, dh)).repeat_interleave(heads // kv_heads, dim=0).flatten(0, 1)

        mha.qkv.weight.copy_(torch.cat([w_q, per_head(w_k), per_head(w_v)]))
        mha.qkv.bias.copy_(torch.cat([b_q, per_head(b_k), per_head(b_v)]))
        mha.proj.load_state_dict(gqa.proj.state_dict())
    x = torch.randn(1, 5, dim)
    t_gqa, t_mha = Trace(), Trace()
    with torch.no_grad():
        assert torch.equal(gqa(x, trace=t_gqa), mha(x, trace=t_mha))
    assert torch.equal(next(iter(t_gqa)).weights, next(iter(t_mha)).weights)


@pytest.mark.parametrize(("n", "window"), [(9, 1), (9, 3), (12, 5), (6, 20)])
def test_sliding_window_mask_against_sliding_window_and_a_float64_reference(n, window):
    pos = torch.arange(n)
    got = masks.causal_between(pos, pos, window)
    assert torch.equal(got, masks.sliding_window(n, window))
    ref = torch.tensor([[0 <= i - j < window for j in range(n)] for i in range(n)])
    assert torch.equal(got, ref)
    assert got.sum(-1).tolist() == [min(i + 1, window) for i in range(n)]  # the window counts the query itself
    # the same rows for queries that come later, with keys from a cache further back
    assert torch.equal(masks.causal_between(pos[-2:], pos, window), ref[-2:])


def test_a_sliding_window_model_puts_no_weight_outside_the_window():
    torch.manual_seed(5)
    model = CausalLM(TransformerConfig(vocab_size=50, dim=32, num_layers=1, num_heads=4, sliding_window=4)).eval()
    trace = Trace()
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 10)), trace)
    outside = ~masks.sliding_window(10, 4)
    assert next(iter(trace)).weights[..., outside].abs().max() == 0
    torch.testing.assert_close(next(iter(trace)).weights.sum(-1), torch.ones(1, 4, 10))


# ---------------------------------------------------------------------------------------------------------
# The KV cache: decoding through it gives exactly the logits of one full pass.

CACHE_CONFIGS = {
    "mha-learned": dict(positions="learned"),
    "sinusoidal": dict(positions="sinusoidal"),
    "gqa-rotary": dict(positions="rotary", num_kv_heads=2, norm="rmsnorm", mlp="swiglu", bias=False),
    "mqa-rotary": dict(positions="rotary", num_kv_heads=1, rope_theta=500.0),
    "alibi": dict(positions="alibi", num_kv_heads=2),
    "window-rotary": dict(positions="rotary", num_kv_heads=2, sliding_window=4),
    "window-learned": dict(positions="learned", sliding_window=3),
}


def _tiny_lm(**overrides) -> CausalLM:
    torch.manual_seed(6)
    cfg = TransformerConfig(vocab_size=61, max_len=32, dim=32, num_layers=2, num_heads=4, **overrides)
    return CausalLM(cfg).eval()


@pytest.mark.parametrize("chunks", [(6, 1, 1, 1, 1, 1, 1), (5, 3, 4), (1,) * 12], ids=["prompt+1", "chunks", "one"])
@pytest.mark.parametrize("name", list(CACHE_CONFIGS))
def test_cached_decoding_equals_the_full_pass(name, chunks):
    model = _tiny_lm(**CACHE_CONFIGS[name])
    idx = torch.randint(0, 61, (2, sum(chunks)))
    cache = KVCache()
    got, start = [], 0
    with torch.no_grad():
        full = model(idx)
        for size in chunks:
            got.append(model(idx[:, start : start + size], cache=cache))
            start += size
    torch.testing.assert_close(torch.cat(got, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.seen == idx.shape[1]


@pytest.mark.parametrize(("layers", "kv_heads", "tokens"), [(2, 4, 7), (3, 2, 5), (1, 1, 9)])
def test_cache_bytes_are_two_layers_kv_heads_head_dim_four_tokens(layers, kv_heads, tokens):
    model = CausalLM(
        TransformerConfig(vocab_size=40, dim=32, num_layers=layers, num_heads=4, num_kv_heads=kv_heads)
    ).eval()
    cache = KVCache()
    with torch.no_grad():
        model(torch.randint(0, 40, (1, tokens)), cache=cache)
    assert len(cache) == tokens
    assert cache.nbytes == 2 * layers * kv_heads * 8 * 4 * tokens


def test_a_sliding_window_cache_stops_growing_at_the_window():
    model = _tiny_lm(positions="rotary", num_kv_heads=2, sliding_window=4)
    cache, sizes = KVCache(), []
    with torch.no_grad():
        model(torch.randint(0, 61, (1, 2)), cache=cache)
        for _ in range(8):
            model(torch.randint(0, 61, (1, 1)), cache=cache)
            sizes.append((len(cache), cache.nbytes))
    per_token = 2 * 2 * 2 * 8 * 4  # K and V · layers · kv_heads · head_dim · float32
    assert [s for s, _ in sizes] == [3, 4, 4, 4, 4, 4, 4, 4]
    assert [b for _, b in sizes] == [per_token * s for s, _ in sizes]
    assert cache.positions.tolist() == [6, 7, 8, 9]


# ---------------------------------------------------------------------------------------------------------
# The operator's additive bias (scaled_dot_product_attention and flash_attention) against PyTorch's float mask.

BIAS_SHAPES = {"full": (2, 3, 7, 9), "per-head": (3, 7, 9), "per-key": (1, 1, 1, 9)}


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("shape", list(BIAS_SHAPES))
def test_operator_bias_equals_torch_float_mask(shape, with_mask):
    torch.manual_seed(7)
    q, k, v = torch.randn(2, 3, 7, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 5)
    bias = torch.randn(BIAS_SHAPES[shape])
    mask = (torch.rand(7, 9) > 0.4) | torch.eye(7, 9, dtype=torch.bool) if with_mask else None
    float_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask)
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 7))
    for block in (4, (3, 5)):
        torch.testing.assert_close(
            flash_attention(q, k, v, mask=mask, bias=bias, block_size=block), ref, atol=1e-6, rtol=1e-5
        )


@pytest.mark.parametrize("causal", [False, True])
def test_flash_gradients_with_a_bias_match_autograd_of_the_reference(causal):
    torch.manual_seed(8)
    q, k, v = (torch.randn(2, 2, 10, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.randn(2, 10, 10, dtype=torch.float64)
    mask = masks.causal(10) if causal else None
    grad = torch.randn(2, 2, 10, 4, dtype=torch.float64)
    ref_grads = torch.autograd.grad(scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)[0], (q, k, v), grad)
    got_grads = torch.autograd.grad(flash_attention(q, k, v, causal=causal, bias=bias, block_size=3), (q, k, v), grad)
    for got, ref in zip(got_grads, ref_grads, strict=True):
        torch.testing.assert_close(got, ref, atol=1e-10, rtol=1e-8)


def test_queries_and_keys_turned_together_are_each_turned_alone():
    """``rotate_qk`` shares one cos/sin between q and k: the same numbers as two :meth:`rotate` calls, YaRN's scaled
    ones included, and a scheme without rotation leaves both alone."""
    from tx_explorer.modules.positional import RelativePositions, YaRNRotary

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 7, 16, generator=g), torch.randn(2, 2, 7, 16, generator=g)
    pos = torch.arange(3, 10)
    for rot in (Rotary(16, theta=500.0), YaRNRotary(16, 10000.0, factor=8.0, original_len=64)):
        turned = rot.rotate_qk(q, k, pos)
        torch.testing.assert_close(turned[0], rot.rotate(q, pos), rtol=0, atol=0)
        torch.testing.assert_close(turned[1], rot.rotate(k, pos), rtol=0, atol=0)
        assert not torch.allclose(turned[0], q)
    yarn = YaRNRotary(16, 10000.0, factor=8.0, original_len=64)
    plain = Rotary(16, theta=10000.0)
    plain.inv_freq = yarn.inv_freq  # the same frequencies: YaRN's turn is the plain one, scaled
    torch.testing.assert_close(yarn.rotate(q, pos), plain.rotate(q, pos) * yarn.magnitude, rtol=1e-6, atol=1e-6)
    assert all(a is b for a, b in zip(RelativePositions().rotate_qk(q, k, pos), (q, k)))
