"""Section 3's choices of encoding read as words in both languages: no bundle's raw id where the id is a word."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.errors import InputError
from tx_explorer.views import self_attention as view

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bundle_of_several_models_is_named_in_words_and_a_model_by_its_name(lang):
    for bundle in ("variants", "positions"):  # the block variants' and the position lab's bundles
        words = locales.text("self_attention", f"bundle_{bundle}", lang)
        assert view.source_label(bundle, lang=lang) == locales.text("self_attention", "enc_trained", lang, name=words)
        assert view.source_label(bundle, lang=lang) != locales.text("self_attention", "enc_trained", lang, name=bundle)
    assert view.source_label("tiny-gpt", lang=lang).endswith("tiny-gpt")  # a model: its own name
    assert view.source_label("sinusoidal", lang=lang) == locales.text("self_attention", "enc_sinusoidal", lang)


def test_the_page_offers_the_trained_tables_in_chinese_words():
    at = open_page("self_attention", lang="zh", sa_open_enc=True)
    assert_clean(at)
    options = at.radio(key="enc_source").options
    assert "可学习，已训练：位置编码实验室中的可学习位置模型" in options, options
    assert not any(o.endswith(("：variants", "：positions")) for o in options), options


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_word_order_conclusion_follows_all_three_differences(lang):
    T = lambda key, **kw: locales.text("self_attention", key, lang, **kw)  # noqa: E731
    same = view.word_order(a="dog bites man", b="dog bites man", lang=lang)  # one sentence typed twice
    assert set(same.max_diff.values()) == {0.0}
    assert same.conclusion == T("order_same_sentence")  # not "with positions the outputs differ"
    swapped = view.word_order(a="狗咬人", b="人咬狗", lang=lang)
    assert swapped.conclusion == T("order_conclusion")
    odd = {"none": 0.0, "sinusoidal": 0.0, "learned": 0.5}  # one kind of position telling nothing apart
    told = view._order_conclusion(False, odd, T)
    assert told == T("order_unexpected", none="0", sinusoidal="0", learned="0.50")


def test_the_word_order_heading_is_chinese_in_chinese():
    assert "狗咬人" in locales.text("self_attention", "order_header", "zh")
    assert "dog" not in locales.text("self_attention", "order_header", "zh")


def test_the_width_is_even_and_an_odd_one_is_refused_in_the_students_terms():
    (dim,) = [inp for inp in view.LAYER.inputs if inp.name == "dim"]
    assert dim.low % 2 == 0 and dim.step == 2 and dim.default % 2 == 0  # the box steps through even widths only
    with pytest.raises(InputError) as refused:  # typed odd all the same: section 2 runs sinusoidal positions too
        view.word_order(a="dog bites man", b="man bites dog", dim=15, heads=3)
    assert refused.value.key == "sinusoidal_odd_width" and "width D must be even" in refused.value.message("en")


def test_a_chinese_page_s_sentences_are_chinese_and_told_apart_by_position():
    """The sentences' default in 中文 is 狗咬人 / 人咬狗 (it was "dog bites man" on a Chinese page)."""
    at = open_page("self_attention", lang="zh", sa_open_order=True)
    assert_clean(at)
    keys = [view.ORDER.key(inp) for inp in view.ORDER.inputs]
    assert [at.text_input(key=k).value for k in keys] == ["狗咬人", "人咬狗"]
    assert locales.text("self_attention", "order_conclusion", "zh") in [m.value for m in at.markdown]
