"""Lists inside sentences: the last two names joined in words ("a, b and c"), in both languages."""

import pytest

from tx_explorer import locales
from tx_explorer.views import listed, texts


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


def test_a_chinese_string_spaces_a_latin_or_numeric_value_where_it_meets_a_chinese_character():
    """ "在这里只有{schemes}学会了" filled with ALiBi read "只有ALiBi学会了"; a Chinese value, a value beside
    punctuation or beside a space typed in the template, and an English string are as formatted."""
    T = texts("position_lab", "zh")
    assert "只有 ALiBi 学会了" in T("findings_ordered", schemes="ALiBi")
    assert "只有旋转学会了" in T("findings_ordered", schemes="旋转")
    assert locales.spaced("第{n}层，共 {m} 层：{name}。", {"n": 3, "m": 30, "name": "L3"}) == "第 3 层，共 30 层：L3。"
    assert locales.spaced("{a}{b}和{c:.1f}", {"a": "x", "b": "y", "c": 2}) == "xy 和 2.0"
    assert texts("position_lab", "en")("findings_ordered", schemes="ALiBi").startswith("Only ALiBi learned")


def test_a_figure_s_words_space_their_fields_beside_chinese():
    """A figure's words (``fig_*``, :func:`locales.words`) are filled in by the figure, past :func:`locales.spaced`:
    their templates space a field beside a Chinese character themselves ("头0 · KV0" over the grid's columns)."""
    import json
    import re
    from pathlib import Path

    glued = re.compile(r"[\u4e00-\u9fff]\{|\}[\u4e00-\u9fff]")
    found = [
        (f.stem, key)
        for f in sorted(Path(locales.__file__).parent.glob("*.json"))
        for key, entry in json.loads(f.read_text(encoding="utf-8")).items()
        if key.startswith("fig_") and glued.search(entry.get("zh", ""))
    ]
    assert found == []
