"""Section 3's choices of encoding read as words in both languages: no bundle's raw id where the id is a word."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
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
