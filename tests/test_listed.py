"""Lists inside sentences: the last two names joined in words ("a, b and c"), in both languages."""

import pytest

from tx_explorer.views import listed


@pytest.mark.parametrize(
    ("names", "last", "en", "zh"),
    [
        (["a", "b", "c"], "and", "a, b and c", "a、b 和 c"),  # a Latin word beside 和 or 或: a space, as in 第 0 层
        (["甲", "乙"], "and", "甲 and 乙", "甲和乙"),
        (["正弦 0.0002", "可学习 0.3"], "and", "正弦 0.0002 and 可学习 0.3", "正弦 0.0002 和可学习 0.3"),
        (["a", "b", "c"], "or", "a, b or c", "a、b 或 c"),
        (["a"], "and", "a", "a"),
        ([], "or", "", ""),
        ([5, 11, 17], None, "5, 11, 17", "5、11、17"),  # an enumeration (layers), not prose: commas only
    ],
)
def test_the_last_two_names_are_joined_in_words(names, last, en, zh):
    assert listed(names, "en", last) == en
    assert listed(iter(names), "zh", last) == zh
