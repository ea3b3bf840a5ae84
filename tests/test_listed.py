"""Lists inside sentences: the last two names joined in words ("a, b and c"), in both languages."""

import pytest

from tx_explorer.views import listed


@pytest.mark.parametrize(
    ("names", "last", "en", "zh"),
    [
        (["a", "b", "c"], "and", "a, b and c", "a、b和c"),
        (["a", "b"], "and", "a and b", "a和b"),
        (["a", "b", "c"], "or", "a, b or c", "a、b或c"),
        (["a"], "and", "a", "a"),
        ([], "or", "", ""),
        ([5, 11, 17], None, "5, 11, 17", "5、11、17"),  # an enumeration (layers), not prose: commas only
    ],
)
def test_the_last_two_names_are_joined_in_words(names, last, en, zh):
    assert listed(names, "en", last) == en
    assert listed(iter(names), "zh", last) == zh
