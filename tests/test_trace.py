"""The Trace contract: scoped names, layers, labels, detached CPU copies, normal return types."""

import pytest
import torch

from tx_explorer.config import TransformerConfig
from tx_explorer.modules.transformer import CausalLM, Encoder
from tx_explorer.trace import Trace

CFG = TransformerConfig(vocab_size=50, max_len=16, dim=32, num_layers=3, num_heads=4)


def test_causal_lm_records_every_layer_and_keeps_its_return_type():
    torch.manual_seed(0)
    model = CausalLM(CFG).eval()
    idx = torch.randint(0, 50, (2, 7))
    trace = Trace()
    logits = model(idx, trace=trace)
    torch.testing.assert_close(logits, model(idx))  # tracing does not change the computation
    assert [r.name for r in trace] == ["blocks.0.attn", "blocks.1.attn", "blocks.2.attn"]
    assert [r.layer for r in trace] == [0, 1, 2]
    for r in trace:
        assert r.kind == "causal" and r.weights.shape == (2, 4, 7, 7)
        assert not r.weights.requires_grad and r.weights.device.type == "cpu"
        assert torch.equal(r.weights.triu(1), torch.zeros_like(r.weights))
    assert trace.stack().shape == (3, 2, 4, 7, 7)


def test_labels_and_selection():
    trace = Trace()
    Encoder(CFG).eval()(torch.randint(0, 50, (1, 3)), trace=trace)
    trace.label(["a", "b", "c"])
    assert all(r.row_labels == ("a", "b", "c") == r.col_labels for r in trace)
    assert len(trace.select(kind="self")) == 3 and trace.select(kind="cross") == []
    with pytest.raises(LookupError):
        trace.stack(kind="router")


def test_encoder_padding_mask_hides_pad_keys():
    trace = Trace()
    Encoder(CFG).eval()(torch.randint(0, 50, (1, 4)), attention_mask=torch.tensor([[1, 1, 1, 0]]), trace=trace)
    assert (trace.records[0].weights[..., 3] == 0).all()


def test_record_validation():
    with pytest.raises(ValueError, match="kind"):
        Trace().add("bogus", torch.zeros(1, 1, 1, 1))
    with pytest.raises(ValueError, match="B, H, Nq, Nk"):
        Trace().add("self", torch.zeros(2, 2))


def test_stack_without_a_kind_keeps_the_maps_and_leaves_router_probabilities_out() -> None:
    """A mixture of experts records its router ([B, 1, T, E]) beside the maps ([B, H, T, T]): the maps stack alone."""
    trace = Trace()
    for layer in range(2):
        trace.scope(f"blocks.{layer}", layer=layer).add("causal", torch.rand(1, 4, 5, 5), "attn")
        trace.scope(f"blocks.{layer}", layer=layer).add("router", torch.rand(1, 1, 5, 8), "router")
    assert trace.stack().shape == (2, 1, 4, 5, 5)
    assert trace.stack(kind="router").shape == (2, 1, 1, 5, 8)
