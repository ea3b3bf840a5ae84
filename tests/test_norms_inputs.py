"""The norms page's typed inputs: a vector as a Chinese keyboard types it, refusals that speak of a vector, and the
pair of variants reading Chinese (its byte-level English tokenizer splits the characters into bytes)."""

from __future__ import annotations

import pytest

from tx_explorer import locales
from tx_explorer.analysis import norm_lab
from tx_explorer.errors import InputError
from tx_explorer.families import variants as variants_family
from tx_explorer.views import norms as view

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.mark.parametrize("text", ["1，2，3", "1；2；3", "1、2、3", "1\u30002\u30003", "1， 2；\n3"])
def test_a_vector_takes_a_chinese_keyboards_separators(text):
    """Full-width comma, semicolon, enumeration comma and space, as a Chinese keyboard types them."""
    assert norm_lab.parse_vector(text).tolist() == [1.0, 2.0, 3.0]
    assert view.normalise(text).steps.mean == 2.0


@pytest.mark.parametrize(
    ("text", "key", "en", "zh"),
    [
        ("", "vector_empty", "x is empty: write its numbers separated by commas", "x 为空：请写出它的各个数"),
        (" ，、 ", "vector_empty", "x is empty", "x 为空"),
        ("1, two, 3", "vector_not_a_number", "x, number 2: 'two' is not a number", "x 的第 2 个数：'two' 不是数字"),
        ("1 2 nan", "vector_entry_not_finite", "x, number 3: entries must be finite", "x 的第 3 个数"),
        ("1 2000", "vector_too_large", "x, number 2: entries must lie within ±1000", "x 的第 2 个数"),
        (", ".join(["1"] * 65), "vector_long", "x has 65 numbers; at most 64 are allowed", "x 有 65 个数"),
    ],
)
def test_a_bad_vector_is_told_as_a_vector_not_as_matrix_rows(text, key, en, zh):
    with pytest.raises(InputError) as refused:
        norm_lab.parse_vector(text)
    assert refused.value.key == key
    for lang, phrase in (("en", en), ("zh", zh)):
        message = refused.value.message(lang)
        assert phrase in message and "row" not in message and "行" not in message, message


@pytest.fixture(scope="module")
def variants():
    res = variants_family.load_results()
    return res, res.text_model("pre-ln"), res.text_model("post-ln")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pair_says_what_a_split_characters_bytes_are(variants, lang):
    """Chinese through the variants' byte-level English tokenizer: the axes show \\xNN, and a note says why."""
    res, a, b = variants
    panel, notes = view.pair(res, a, b, "我今天很累，因为下雨了。", lang=lang)
    assert any(t.startswith("\\x") for t in panel.figure.layout.xaxis.ticktext)  # the axis labels
    assert notes.split == locales.text("common", "split_bytes", lang) and notes.truncated is None
    _, notes = view.pair(res, a, b, "The function returns a new list.", lang=lang)
    assert notes.split is None and notes.truncated is None


def test_the_pair_says_when_the_text_was_cut(variants):
    res, a, b = variants
    _, notes = view.pair(res, a, b, "the list " * 400, lang="zh")
    assert notes.truncated == locales.text("norms", "truncated", "zh", n=a.max_len)
