"""Norms, MLPs, blocks, attention and the causal LM, each against an independent reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tx_explorer import masks
from tx_explorer.config import TransformerConfig
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.block import TransformerBlock
from tx_explorer.modules.mlp import MLP, SwiGLU
from tx_explorer.modules.norms import LayerNorm, RMSNorm
from tx_explorer.modules.transformer import CausalLM, Encoder, next_token
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread

TOL = {"atol": 1e-5, "rtol": 1e-5}
SMALL = TransformerConfig(vocab_size=50, max_len=16, dim=32, num_layers=2, num_heads=4)


def _randomise(module: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial values everywhere (γ ≠ 1, β ≠ 0), so a missing term cannot hide."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return module


# --- norms --------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(dim=st.integers(1, 40), rows=st.integers(1, 5), eps=st.sampled_from([1e-12, 1e-5, 1e-2]), bias=st.booleans())
def test_layernorm_matches_torch(dim: int, rows: int, eps: float, bias: bool) -> None:
    ours = _randomise(LayerNorm(dim, eps=eps, bias=bias), seed=dim)
    ref = nn.LayerNorm(dim, eps=eps, bias=bias)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(rows, 3, dim) * 3 + 1
    torch.testing.assert_close(ours(x), ref(x), **TOL)


@settings(max_examples=25, deadline=None)
@given(dim=st.integers(1, 40), eps=st.sampled_from([1e-6, 1e-5, 1e-2]))
def test_rmsnorm_matches_torch(dim: int, eps: float) -> None:
    ours = _randomise(RMSNorm(dim, eps=eps), seed=dim)
    ref = nn.RMSNorm(dim, eps=eps)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(2, 5, dim) * 2
    torch.testing.assert_close(ours(x), ref(x), **TOL)


def test_rmsnorm_does_not_centre() -> None:
    x = torch.full((1, 4), 3.0)
    torch.testing.assert_close(RMSNorm(4)(x), torch.ones(1, 4), **TOL)  # LayerNorm would give zeros
    torch.testing.assert_close(LayerNorm(4)(x), torch.zeros(1, 4), **TOL)


# --- MLPs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [8, 64, 768])
def test_mlp_and_swiglu_parameter_counts(dim: int) -> None:
    mlp = MLP(dim, 4 * dim)
    assert sum(p.numel() for p in mlp.parameters()) == 8 * dim * dim + 4 * dim + dim  # W₁, W₂, b₁, b₂
    hidden = TransformerConfig(dim=dim, num_heads=1, mlp="swiglu").mlp_hidden
    n = sum(p.numel() for p in SwiGLU(dim, hidden).parameters())
    assert n == 3 * dim * hidden
    assert abs(n - 8 * dim * dim) <= 3 * dim  # hidden 8D/3, rounded to an integer


def test_swiglu_formula() -> None:
    f = _randomise(SwiGLU(6, 10)).double()
    x = torch.randn(3, 6, dtype=torch.double)
    w1, w2, w3 = f.w1.weight, f.w2.weight, f.w3.weight
    want = (torch.sigmoid(x @ w1.T) * (x @ w1.T) * (x @ w2.T)) @ w3.T
    torch.testing.assert_close(f(x), want)


def test_mlp_formula_with_exact_gelu() -> None:
    f = _randomise(MLP(5, 20, activation="gelu")).double()
    x = torch.randn(4, 5, dtype=torch.double)
    h = x @ f.fc1.weight.T + f.fc1.bias
    want = (0.5 * h * (1 + torch.erf(h / 2**0.5))) @ f.fc2.weight.T + f.fc2.bias
    torch.testing.assert_close(f(x), want)


# --- blocks -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("mlp", ["mlp", "swiglu"])
def test_pre_norm_block_formula(norm: str, mlp: str) -> None:
    b = _randomise(TransformerBlock(SMALL.replace(norm=norm, mlp=mlp, norm_position="pre"))).eval()
    x = torch.randn(2, 7, SMALL.dim)
    mask = masks.causal(7)
    h = x + b.attn(b.norm1(x), mask=mask)
    want = h + b.mlp(b.norm2(h))
    torch.testing.assert_close(b(x, mask), want, **TOL)


def test_post_norm_block_formula() -> None:
    b = _randomise(TransformerBlock(SMALL.replace(norm_position="post"))).eval()
    x = torch.randn(2, 7, SMALL.dim)
    h = b.norm1(x + b.attn(x))
    want = b.norm2(h + b.mlp(h))
    torch.testing.assert_close(b(x), want, **TOL)


def test_pre_and_post_differ() -> None:
    pre = _randomise(TransformerBlock(SMALL.replace(norm_position="pre"))).eval()
    post = TransformerBlock(SMALL.replace(norm_position="post")).eval()
    post.load_state_dict(pre.state_dict())
    x = torch.randn(1, 5, SMALL.dim)
    assert (pre(x) - post(x)).abs().max() > 1e-2


def test_cross_attention_block_formula() -> None:
    b = _randomise(TransformerBlock(SMALL, cross=True)).eval()
    x, ctx = torch.randn(2, 5, SMALL.dim), torch.randn(2, 9, SMALL.dim)
    h = x + b.attn(b.norm1(x))
    h = h + b.cross_attn(b.norm_cross(h), context=ctx)
    want = h + b.mlp(b.norm2(h))
    torch.testing.assert_close(b(x, context=ctx), want, **TOL)
    with pytest.raises(ValueError, match="context"):
        b(x)


# --- multi-head attention vs torch.nn.MultiheadAttention ----------------------------------------------


def _torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(ours.dim, ours.num_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.qkv.weight)  # [W_Q; W_K; W_V] stacked the same way
        ref.in_proj_bias.copy_(ours.qkv.bias)
        ref.out_proj.weight.copy_(ours.proj.weight)
        ref.out_proj.bias.copy_(ours.proj.bias)
    return ref.eval()


@pytest.mark.parametrize("heads", [1, 2, 8])
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_torch(heads: int, causal: bool) -> None:
    torch.manual_seed(heads)
    ours = _randomise(MultiHeadAttention(32, heads)).eval()
    ref = _torch_mha(ours)
    x = torch.randn(3, 10, 32)
    mask = masks.causal(10) if causal else None
    trace = Trace()
    out = ours(x, mask=mask, trace=trace)
    hide = None if mask is None else ~mask  # torch's boolean masks say True = hide
    want, want_w = ref(x, x, x, attn_mask=hide, average_attn_weights=False)
    torch.testing.assert_close(out, want, **TOL)
    torch.testing.assert_close(trace.records[0].weights, want_w, **TOL)
    torch.testing.assert_close(ours(x, mask=mask), out, **TOL)  # the fused path (no trace) gives the same output


def test_cross_attention_matches_torch() -> None:
    torch.manual_seed(0)
    ours = _randomise(MultiHeadAttention(24, 3)).eval()
    ref = _torch_mha(ours)
    x, ctx = torch.randn(2, 4, 24), torch.randn(2, 11, 24)
    hide = torch.zeros(2, 11, dtype=torch.bool)
    hide[1, 6:] = True  # padding in the second source sentence
    keep = ~hide[:, None, None, :]  # (B, 1, 1, Nk): ours says True = may attend
    trace = Trace()
    out = ours(x, context=ctx, mask=keep, trace=trace)
    want, want_w = ref(x, ctx, ctx, key_padding_mask=hide, average_attn_weights=False)
    torch.testing.assert_close(out, want, **TOL)
    rec = trace.records[0]
    assert rec.kind == "cross" and rec.weights.shape == (2, 3, 4, 11)
    torch.testing.assert_close(rec.weights, want_w, **TOL)
    assert rec.weights[1, :, :, 6:].abs().max() == 0


# --- the causal language model and the encoder --------------------------------------------------------


@pytest.fixture(scope="module")
def lm() -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(SMALL).eval()


def test_causal_weights_are_zero_above_the_diagonal_in_every_layer(lm: CausalLM) -> None:
    trace = Trace()
    lm(torch.randint(0, SMALL.vocab_size, (2, 12)), trace=trace)
    assert len(trace) == SMALL.num_layers
    for rec in trace:
        assert rec.kind == "causal"
        above = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)
        assert rec.weights[..., above].abs().max() == 0  # exactly, not approximately
        torch.testing.assert_close(rec.weights.sum(-1), torch.ones(2, SMALL.num_heads, 12), **TOL)


def test_future_tokens_do_not_change_past_logits(lm: CausalLM) -> None:
    idx = torch.randint(0, SMALL.vocab_size, (1, 10))
    other = idx.clone()
    other[0, 6:] = (other[0, 6:] + 1) % SMALL.vocab_size
    torch.testing.assert_close(lm(idx)[:, :6], lm(other)[:, :6], **TOL)


def test_encoder_rows_sum_to_one_and_padding_gets_nothing() -> None:
    torch.manual_seed(1)
    enc = Encoder(SMALL).eval()
    att = torch.ones(2, 9, dtype=torch.long)
    att[1, 5:] = 0
    trace = Trace()
    enc(torch.randint(0, SMALL.vocab_size, (2, 9)), attention_mask=att, trace=trace)
    for rec in trace:
        assert rec.kind == "self"
        torch.testing.assert_close(rec.weights.sum(-1), torch.ones(2, SMALL.num_heads, 9), **TOL)
        assert rec.weights[1, ..., 5:].abs().max() == 0


def test_loss_is_cross_entropy(lm: CausalLM) -> None:
    idx = torch.randint(0, SMALL.vocab_size, (2, 8))
    logits = lm(idx)
    manual = -torch.log_softmax(logits.double(), -1).gather(-1, idx[..., None]).mean()
    torch.testing.assert_close(lm.loss(logits, idx).double(), manual, **TOL)


def test_generation_is_reproducible_with_a_seed(lm: CausalLM) -> None:
    prompt = torch.tensor([[1, 2, 3]])
    a = lm.generate(prompt, 10, temperature=1.0, seed=7)
    b = lm.generate(prompt, 10, temperature=1.0, seed=7)
    c = lm.generate(prompt, 10, temperature=1.0, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a[:, :3], prompt) and a.shape == (1, 13)
    # Without a seed each call draws from the global generator: two calls differ.
    assert not torch.equal(lm.generate(prompt, 10), lm.generate(prompt, 10))


def test_greedy_and_top1_follow_the_argmax(lm: CausalLM) -> None:
    prompt = torch.tensor([[4, 5]])
    greedy = lm.generate(prompt, 6, greedy=True)
    idx = prompt
    for _ in range(6):
        idx = torch.cat([idx, lm(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(greedy, idx)
    assert torch.equal(lm.generate(prompt, 6, top_k=1, seed=3), greedy)


def test_generation_crops_to_the_context(lm: CausalLM) -> None:
    out = lm.generate(torch.zeros(1, SMALL.max_len, dtype=torch.long), 3, greedy=True)
    assert out.shape == (1, SMALL.max_len + 3)


def test_next_token_rejects_bad_temperature() -> None:
    with pytest.raises(ValueError, match="temperature"):
        next_token(torch.zeros(1, 5), temperature=0.0)


def test_top_k_never_samples_outside_the_top_k() -> None:
    logits = torch.tensor([[5.0, 4.0, 3.0, -1.0, -2.0]])
    gen = torch.Generator().manual_seed(0)
    picks = {int(next_token(logits, temperature=5.0, top_k=2, generator=gen)) for _ in range(200)}
    assert picks == {0, 1}


def test_a_few_training_steps_lower_the_loss() -> None:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=12, max_len=16, dim=32, num_layers=2, num_heads=2)
    model = CausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.arange(12).repeat(4)[None, :17]  # a cyclic pattern: every next token is predictable
    x, y = data[:, :-1], data[:, 1:]
    first = model.loss(model(x), y).item()
    for _ in range(40):
        loss = model.loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5 * first
