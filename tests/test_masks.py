"""Mask builders: exact patterns, shapes and refusals."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tx_explorer import masks


def test_causal_pattern():
    assert masks.causal(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_padding_hides_pad_keys_for_every_query():
    m = masks.padding([2, 4], 4)
    assert m.shape == (2, 1, 4)
    assert m[0, 0].tolist() == [True, True, False, False] and m[1, 0].all()


@given(st.integers(1, 20), st.integers(1, 25))
def test_sliding_window_sees_itself_and_window_minus_one_before(n, window):
    m = masks.sliding_window(n, window)
    for i in range(n):
        visible = m[i].nonzero().flatten().tolist()
        assert visible == list(range(max(0, i - window + 1), i + 1))


@given(st.integers(1, 16), st.data())
def test_prefix_lm_is_full_in_prefix_and_causal_after(n, data):
    p = data.draw(st.integers(0, n))
    m = masks.prefix_lm(n, p)
    assert m[:p, :p].all()
    assert torch.equal(m[:, p:], masks.causal(n)[:, p:])
    assert m[:, :p].all()


def test_block_diagonal_and_combine():
    m = masks.block_diagonal([2, 3])
    assert m.shape == (5, 5) and m[:2, :2].all() and m[2:, 2:].all() and not m[:2, 2:].any()
    packed = masks.combine(m, masks.causal(5))
    assert packed[3].tolist() == [False, False, True, True, False]
    assert masks.combine(masks.causal(4), masks.padding([2], 4)).shape == (1, 4, 4)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: masks.causal(0), "positive"),
        (lambda: masks.sliding_window(4, 0), "window"),
        (lambda: masks.prefix_lm(4, 5), "prefix"),
        (lambda: masks.padding([5], 4), "length"),
        (lambda: masks.block_diagonal([]), "at least one"),
        (lambda: masks.combine(), "at least one"),
    ],
)
def test_bad_arguments_are_explained(call, message):
    with pytest.raises(ValueError, match=message):
        call()
