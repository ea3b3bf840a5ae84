"""The self-attention page's analysis: equivariance, word order, positional tables."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tx_explorer import models
from tx_explorer.analysis import mask_gallery, self_attention
from tx_explorer.bundle import save_bundle

TOL = self_attention.EQUIVARIANCE_TOL


# Position tables -----------------------------------------------------------------------------------------------


def test_sinusoidal_table_follows_the_formula():
    table = self_attention.position_table("sinusoidal", 10, 8).double().numpy()
    i, j = np.arange(10)[:, None], np.arange(4)[None, :]
    angle = i / 10000 ** (2 * j / 8)
    assert np.allclose(table[:, 0::2], np.sin(angle), atol=1e-6)
    assert np.allclose(table[:, 1::2], np.cos(angle), atol=1e-6)


def test_no_positions_is_zero_and_learned_is_seeded():
    assert torch.equal(self_attention.position_table("none", 4, 6), torch.zeros(4, 6))
    a, b = (
        self_attention.position_table("learned", 4, 6, seed=1),
        self_attention.position_table("learned", 4, 6, seed=2),
    )
    assert torch.equal(a, self_attention.position_table("learned", 4, 6, seed=1)) and not torch.equal(a, b)


@pytest.mark.parametrize(
    ("kind", "n", "dim", "message"),
    [("rotary", 4, 8, "unknown"), ("sinusoidal", 4, 7, "even"), ("learned", 0, 8, "positive")],
)
def test_position_table_rejects_bad_arguments(kind, n, dim, message):
    with pytest.raises(ValueError, match=message):
        self_attention.position_table(kind, n, dim)


def test_position_similarity_is_cosine():
    table = torch.randn(5, 3, dtype=torch.float64)
    t = table.numpy()
    ref = (t @ t.T) / np.linalg.norm(t, axis=1)[:, None] / np.linalg.norm(t, axis=1)[None, :]
    assert np.allclose(self_attention.position_similarity(table).numpy(), ref, atol=1e-9)


def test_sinusoidal_similarity_depends_only_on_the_offset():
    sim = self_attention.position_similarity(self_attention.position_table("sinusoidal", 32, 64))
    assert torch.allclose(sim.diagonal(), torch.ones(32), atol=1e-6)
    assert torch.allclose(sim[1:, 1:], sim[:-1, :-1], atol=1e-4)  # constant along diagonals (Toeplitz)
    assert sim[0, 1] > sim[0, 8]  # nearby positions are more alike


def test_position_similarity_needs_a_matrix():
    with pytest.raises(ValueError, match=r"\[n, dim\]"):
        self_attention.position_similarity(torch.zeros(2, 3, 4))


# Permutation equivariance --------------------------------------------------------------------------------------


@given(st.integers(2, 12), st.sampled_from([(8, 1), (8, 2), (16, 4), (12, 3)]), st.integers(0, 50), st.integers(0, 50))
@settings(max_examples=15, deadline=None)
def test_self_attention_without_positions_is_permutation_equivariant(n, dim_heads, seed, perm_seed):
    dim, heads = dim_heads
    check = self_attention.permutation_check(n, dim, heads, seed, perm_seed, "none")
    assert check.max_diff < TOL
    p = check.perm
    assert sorted(p.tolist()) == list(range(n))
    assert torch.allclose(check.out_shuffled, check.out[p], atol=TOL)
    # The weights are the same matrix with rows and columns permuted: A(σX) = P A(X) Pᵀ.
    assert torch.allclose(check.weights_shuffled, check.weights[:, p][:, :, p], atol=1e-6)


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_positions_break_equivariance(kind):
    check = self_attention.permutation_check(8, 16, 4, seed=0, perm_seed=1, positions=kind)
    assert not torch.equal(check.perm, torch.arange(8))
    assert check.max_diff > 1e-2


def test_permutation_check_reports_impossible_shapes():
    with pytest.raises(ValueError, match="does not divide"):
        self_attention.permutation_check(4, 10, 4, 0, 1)


# Word order ----------------------------------------------------------------------------------------------------


def test_tokenize_words_lowercases_and_splits_punctuation():
    assert self_attention.tokenize_words("Dog bites man!") == ["dog", "bites", "man", "!"]


def test_each_han_character_is_a_word_and_a_latin_word_stays_whole():
    assert self_attention.tokenize_words("狗咬人") == ["狗", "咬", "人"]
    assert self_attention.tokenize_words("我爱Python，好") == ["我", "爱", "python", "，", "好"]
    r = self_attention.word_order("狗咬人", "人咬狗", 16, 4, "none", seed=0)  # refused as different words before
    assert r.words_b == ["人", "咬", "狗"] and r.max_diff < TOL


def test_an_odd_width_is_refused_for_sinusoidal_positions_in_the_pages_terms():
    with pytest.raises(ValueError, match="the width D must be even; D = 15 is odd") as refused:
        self_attention.position_table("sinusoidal", 3, 15)
    assert "n=" not in str(refused.value)  # the table's own n never appears on the page
    assert self_attention.position_table("learned", 3, 15).shape == (3, 15)  # the other kinds take any width


@pytest.mark.parametrize(
    ("split", "limit", "unit"),
    [
        (self_attention.tokenize_words, self_attention.MAX_WORDS, "words"),
        (mask_gallery.tokens, mask_gallery.MAX_TOKENS, "tokens"),
    ],
)
def test_typed_text_is_refused_when_empty_too_many_or_too_long(split, limit, unit):
    """This page's and the masks page's splitters share errors.checked_words: the same refusals, in their own unit."""
    bad = [
        ("", "empty"),
        (" \n\t ", "empty"),
        ("a " * (limit + 1), f"{limit + 1} {unit}"),
        ("x" * 100_000, "longer than 32"),
    ]
    for text, message in bad:
        with pytest.raises(ValueError, match=message):
            split(text)


def test_dog_bites_man_is_the_same_set_without_positions():
    r = self_attention.word_order("dog bites man", "man bites dog", 16, 4, "none", seed=0)
    assert r.words_a == ["dog", "bites", "man"] and r.words_b == ["man", "bites", "dog"]
    assert r.max_diff < TOL and r.pooled_diff < TOL
    # Same rows, other order: row "dog" of A is row "dog" of B.
    assert torch.allclose(r.out_a[0], r.out_b[2], atol=TOL)
    assert not torch.allclose(r.out_a, r.out_b, atol=1e-3)  # as sequences they are not equal


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_dog_bites_man_differs_with_positions(kind):
    r = self_attention.word_order("dog bites man", "man bites dog", 16, 4, kind, seed=0)
    assert r.max_diff > 1e-2 and r.pooled_diff > 1e-3
    assert r.word_diff.shape == (3,)
    assert r.max_diff == pytest.approx(r.word_diff.max().item())


def test_repeated_words_are_matched_in_order():
    order = self_attention._match(["the", "dog", "saw", "the", "cat"], ["the", "cat", "saw", "the", "dog"])
    assert order == [0, 4, 2, 3, 1]
    r = self_attention.word_order("the dog saw the cat", "the cat saw the dog", 8, 2, "none", seed=3)
    assert r.max_diff < TOL


def test_word_order_needs_the_same_words():
    with pytest.raises(ValueError, match="same words"):
        self_attention.word_order("dog bites man", "cat bites man", 8, 2, "none", seed=0)


# Trained tables from bundles -----------------------------------------------------------------------------------


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "WEIGHTS_DIR", tmp_path)
    monkeypatch.setattr(models, "REGISTRY", {})
    return tmp_path


def test_bundled_position_tables_reads_trained_tables(fake_registry):
    table = torch.randn(6, 4)
    save_bundle(fake_registry / "lm", {"embed.pos_embed.weight": table, "head.weight": torch.ones(2, 4)}, {})
    save_bundle(fake_registry / "rnn", {"rnn.weight": torch.ones(2, 2)}, {})
    models.REGISTRY["lm"] = models.Entry("x:y", "lm", "python -m tx_explorer.train lm")
    models.REGISTRY["rnn"] = models.Entry("x:y", "rnn", "python -m tx_explorer.train rnn")
    tables, problems = self_attention.bundled_position_tables()
    assert list(tables) == ["lm"] and torch.equal(tables["lm"], table) and problems == {}


def test_bundled_position_tables_reports_a_tampered_bundle(fake_registry):
    save_bundle(fake_registry / "lm", {"embed.pos_embed.weight": torch.randn(6, 4)}, {})
    models.REGISTRY["lm"] = models.Entry("x:y", "lm", "python -m tx_explorer.train lm")
    with open(fake_registry / "lm" / "model.safetensors", "ab") as f:
        f.write(b"tampered")
    tables, problems = self_attention.bundled_position_tables()
    assert tables == {} and "checksum" in problems["lm"] and "python -m tx_explorer.train lm" in problems["lm"]


def test_learned_table_before_training_has_no_distance_structure():
    sim = self_attention.position_similarity(self_attention.position_table("learned", 64, 256, seed=0))
    off = sim - torch.eye(64)
    assert off.abs().max() < 0.35  # random 256-dim vectors are nearly orthogonal, near or far
    near = torch.diagonal(sim, 1).mean().item()
    assert abs(near) < 0.1 and math.isclose(sim[0, 0].item(), 1.0, abs_tol=1e-6)
