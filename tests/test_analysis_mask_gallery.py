"""The masks page's analysis: parameters, user-drawn grids, the −∞ → 0 check."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from tokenizers import Tokenizer
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.analysis.seeding import generator
from tx_explorer.config import TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.models import WEIGHTS_DIR
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import masks as view


def reference(kind: str, n: int, **p) -> torch.Tensor:
    """Each mask written out cell by cell, straight from its definition."""
    rule = {
        "causal": lambda i, j: j <= i,
        "padding": lambda i, j: j < p["length"],
        "sliding_window": lambda i, j: 0 <= i - j < p["window"],
        "prefix_lm": lambda i, j: j <= i or j < p["prefix"],
        "block_diagonal": lambda i, j: (
            np.searchsorted(np.cumsum(p["sizes"]), i, side="right")
            == np.searchsorted(np.cumsum(p["sizes"]), j, side="right")
        ),
    }[kind]
    return torch.tensor([[bool(rule(i, j)) for j in range(n)] for i in range(n)])


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("causal", {}),
        ("padding", {"length": 4}),
        ("sliding_window", {"window": 3}),
        ("prefix_lm", {"prefix": 3}),
        ("block_diagonal", {"sizes": [2, 3, 2]}),
    ],
)
def test_build_mask_matches_the_definition(kind, params):
    assert torch.equal(mg.build_mask(kind, 7, **params), reference(kind, 7, **params))


@pytest.mark.parametrize(("kind", "params"), [("padding", {"length": 5}), ("block_diagonal", {"sizes": [3, 4]})])
def test_build_mask_can_add_the_causal_mask(kind, params):
    combined = mg.build_mask(kind, 7, causal=True, **params)
    assert torch.equal(combined, reference(kind, 7, **params) & reference("causal", 7))


def test_build_mask_custom_uses_the_grid():
    grid = np.eye(4, dtype=bool)
    assert torch.equal(mg.build_mask("custom", 4, grid=grid), torch.eye(4, dtype=torch.bool))


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("block_diagonal", {"sizes": [2, 2]}, "sequence has 5 tokens"),
        ("custom", {"grid": np.ones((3, 3), dtype=bool)}, "sequence has 5 tokens"),
        ("padding", {"length": 6}, r"\[0, 5\]"),
        ("sliding_window", {"window": 0}, "positive"),
        ("prefix_lm", {"prefix": 9}, "prefix"),
        ("dilated", {}, "unknown mask kind"),
    ],
)
def test_build_mask_rejects_impossible_parameters(kind, params, message):
    with pytest.raises(ValueError, match=message):
        mg.build_mask(kind, 5, **params)


# Parameters typed by the user ----------------------------------------------------------------------------------


def test_tokens_split_on_whitespace():
    assert mg.tokens("  Attention is\tvery ") == ["Attention", "is", "very"]


def test_parse_sizes():
    assert mg.parse_sizes(" 3, 4;3 ", 10) == [3, 4, 3]


@pytest.mark.parametrize("text", ["3，4，3", "3；4；3", "3、4、3", "3\u30004\u30003", "3， 4、 3"])
def test_parse_sizes_takes_a_chinese_keyboards_separators(text):
    """Full-width comma, semicolon, enumeration comma and space, as a Chinese keyboard types them."""
    assert mg.parse_sizes(text, 10) == [3, 4, 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "summing to 10"),
        ("3, x", "whole numbers"),
        ("5, 0, 5", "at least 1"),
        ("3, 3", "sum to 6"),
        ("2.5, 7.5", "whole"),
    ],
)
def test_parse_sizes_explains_bad_text(text, message):
    with pytest.raises(ValueError, match=message):
        mg.parse_sizes(text, 10)


@given(st.integers(1, 30), st.integers(1, 6))
def test_even_split_covers_every_token(n, parts):
    sizes = mg.even_split(n, parts)
    assert sum(sizes) == n and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_start_grids():
    assert np.array_equal(mg.start_grid("causal", 3), np.tril(np.ones((3, 3), dtype=bool)))
    assert mg.start_grid("full", 3).all() and not mg.start_grid("empty", 3).any()
    assert np.array_equal(mg.start_grid("diagonal", 3), np.eye(3, dtype=bool))
    with pytest.raises(ValueError, match="unknown starting grid"):
        mg.start_grid("random", 3)


def test_mask_from_grid_accepts_ticks_and_zero_one():
    assert torch.equal(mg.mask_from_grid([[1, 0], [True, np.True_]]), torch.tensor([[True, False], [True, True]]))


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (np.zeros((3, 3), dtype=bool), "empty"),
        (np.ones((2, 3), dtype=bool), "square"),
        (np.zeros((0, 0), dtype=bool), "square"),
        ([[True, None], [True, True]], "ticked or unticked"),
        ([[True, "yes"], [True, True]], "ticked or unticked"),
        ([[True, 2], [True, True]], "ticked or unticked"),
    ],
)
def test_mask_from_grid_explains_bad_grids(grid, message):
    with pytest.raises(ValueError, match=message):
        mg.mask_from_grid(grid)


# The check the page prints -------------------------------------------------------------------------------------


@given(arrays(bool, st.tuples(st.integers(1, 10)).map(lambda t: (t[0], t[0]))), st.integers(0, 1000))
@settings(max_examples=60, deadline=None)
def test_hidden_weights_are_exactly_zero_for_any_mask(grid, seed):
    mask = torch.from_numpy(grid)
    r = mg.masked_attention(mask, seed)
    assert r.hidden == int((~mask).sum())
    assert torch.all(r.steps.weights[~mask] == 0.0) and r.max_hidden_weight == 0.0
    assert torch.all(torch.isneginf(r.steps.masked[~mask]))
    empty = [i for i in range(len(grid)) if not grid[i].any()]
    assert r.empty_rows == empty
    assert torch.all(r.steps.weights[empty] == 0) and torch.all(r.steps.out[empty] == 0)
    assert r.max_row_error < 1e-5


def test_masked_attention_matches_torch_math_backend():
    mask = mg.build_mask("sliding_window", 6, window=2)
    r = mg.masked_attention(mask, seed=4, dim=16)
    g = generator(4)
    q, k, v = (torch.randn(6, 16, generator=g) for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask)[0]
    assert torch.allclose(r.steps.out, ref, atol=1e-5)


def test_masked_attention_needs_a_square_mask():
    with pytest.raises(ValueError, match=r"\[N, N\]"):
        mg.masked_attention(torch.ones(2, 3, dtype=torch.bool), seed=0)


def test_attention_is_very():
    mask = mg.build_mask("causal", 3)
    assert mg.visible_keys(mask, ["Attention", "is", "very"]) == [
        ["Attention"],
        ["Attention", "is"],
        ["Attention", "is", "very"],
    ]
    with pytest.raises(ValueError, match="labels"):
        mg.visible_keys(mask, ["Attention", "is"])


# A model's own masks, layer by layer -------------------------------------------------------------------------------
CONTEXT = 32


@pytest.fixture(scope="module")
def small_lm() -> TextModel:
    """A random two-layer causal model with tiny-gpt's tokenizer and a context of 32 tokens (tiny-gpt's is 128)."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=2048, max_len=CONTEXT, dim=32, num_layers=2, num_heads=4)
    tokenizer = Tokenizer.from_file(str(WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"))
    return TextModel(name="small", model=CausalLM(cfg).eval(), tokenizer=tokenizer, kind="causal", max_len=CONTEXT)


def test_one_token_has_nothing_to_check_and_is_refused(small_lm):
    """One token sees only itself: no layer hides a key, so "the largest hidden weight is 0" would pass unchecked."""
    for ids in ([5], []):
        with pytest.raises(InputError, match="at least 2 tokens") as refused:
            mg.model_masks(small_lm, ids)
        assert "至少需要 2 个 token" in refused.value.message("zh")


def test_two_tokens_hide_a_key_and_the_check_passes(small_lm):
    found = view.read_layers(small_lm, 2)
    assert [layer.hidden for layer in found.layers] == [1, 1] and all(layer.max_hidden == 0.0 for layer in found.layers)
    shown = view.model_masks(small_lm, found, 2)
    assert shown.ok and "exactly 0" in shown.check and shown.cut is None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_more_tokens_than_the_context_are_said_to_be_cut(small_lm, lang):
    """Asked for 640 tokens, a model of context 32 reads 32: the page says so, naming both counts and the context."""
    n = view.model_tokens(small_lm, 640)
    assert n == CONTEXT and view.model_tokens(small_lm, 20) == 20
    shown = view.model_masks(small_lm, view.read_layers(small_lm, n), 640, lang=lang)
    assert shown.ok and all(str(v) in shown.cut for v in ("small", CONTEXT, 640)), shown.cut
    assert view.model_masks(small_lm, view.read_layers(small_lm, 20), 20, lang=lang).cut is None
