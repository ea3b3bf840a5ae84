"""One mask per model: the stack builds it, and everyone who runs its blocks by hand asks the stack.

``TextModel.mask`` (the heads inspector, attention inputs, the flow and atlas pages) and head science's reruns
must hide exactly what the model's own forward hides: checked against masks written out here, against the zeros
of the forward's recorded attention, and by rerunning the blocks by hand against the forward's output."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer

from tx_explorer import masks
from tx_explorer.analysis import head_science
from tx_explorer.config import TransformerConfig
from tx_explorer.families.text import TextModel
from tx_explorer.models import WEIGHTS_DIR
from tx_explorer.modules.transformer import CausalLM, Encoder
from tx_explorer.trace import Trace

N, WINDOW = 12, 4
SMALL = dict(vocab_size=2048, max_len=32, dim=32, num_layers=2, num_heads=4)  # tiny-gpt's tokenizer: 2048 ids


def _band(n: int, window: int) -> torch.Tensor:
    """A two-sided band written out cell by cell: key j visible from query i iff |i − j| < window."""
    return torch.tensor([[abs(i - j) < window for j in range(n)] for i in range(n)])


# (stack, sliding window, the mask it must apply to N tokens; None = every key visible)
CASES = {
    "causal": (CausalLM, None, masks.causal(N)),
    "causal-window": (CausalLM, WINDOW, masks.sliding_window(N, WINDOW)),
    "encoder": (Encoder, None, None),
    "encoder-window": (Encoder, WINDOW, _band(N, WINDOW)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request) -> tuple[TextModel, torch.Tensor | None]:
    stack, window, want = CASES[request.param]
    model = stack(TransformerConfig(**SMALL, sliding_window=window))
    tokenizer = Tokenizer.from_file(str(WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"))
    kind = "causal" if stack is CausalLM else "encoder"
    return TextModel(name=request.param, model=model, tokenizer=tokenizer, kind=kind, max_len=32), want


def test_the_text_model_and_the_stack_give_the_mask_written_out(case) -> None:
    tm, want = case
    for got in (tm.mask(N), tm.model.mask(N)):
        assert (got is None) == (want is None)
        if want is not None:
            assert torch.equal(got, want)


def test_the_forward_hides_exactly_what_the_mask_hides(case) -> None:
    tm, want = case
    trace = Trace()
    tm.model(torch.arange(N)[None] + 5, trace=trace)
    visible = torch.ones(N, N, dtype=torch.bool) if want is None else want
    for record in trace.records:  # (1, H, N, N) per layer
        assert torch.all(record.weights[..., ~visible] == 0), record.name
        assert torch.all(record.weights[..., visible] > 0), record.name


@torch.no_grad()
def test_head_science_reruns_the_blocks_with_the_forwards_mask(case) -> None:
    tm, _ = case
    ids = torch.arange(N)[None] + 5  # (1, N)
    x = tm.model.embed(ids)  # (1, N, D): the residual entering block 0
    torch.testing.assert_close(head_science.rerun(tm, 0, x), tm.model(ids), rtol=0, atol=1e-6)


def test_a_padded_encoder_keeps_its_band() -> None:
    """Padding and the band combine: a padded key is hidden even inside the band."""
    model = Encoder(TransformerConfig(**SMALL, sliding_window=WINDOW))
    trace = Trace()
    lengths = torch.tensor([N, N - 3])
    model(torch.arange(N).repeat(2, 1) + 5, attention_mask=masks.padding(lengths, N)[:, 0], trace=trace)
    want = _band(N, WINDOW) & masks.padding(lengths, N)  # (2, N, N)
    for record in trace.records:
        assert torch.all(record.weights[~want[:, None].expand_as(record.weights)] == 0)
        assert torch.all(record.weights[want[:, None].expand_as(record.weights)] > 0)
