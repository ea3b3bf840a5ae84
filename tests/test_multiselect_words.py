"""Streamlit writes a multiselect's empty-box placeholder ("Choose options") in English; ``ui.multiselect`` takes it
from the locale (the page's own, else common.json's) on every page that picks several things (norms, position lab)."""

from streamlit.testing.v1 import AppTest

from tx_explorer import locales


def _page() -> None:
    import streamlit as st

    from tx_explorer import ui

    st.session_state["lang"] = "zh"
    ui.multiselect(st, "变体", ["a", "b"], ["a"], key="picked", format_func=str.upper)
    ui.multiselect(st, "方案", ["a", "b"], [], key="own", format_func=str.upper, placeholder="选择位置方案")


def test_a_chinese_multiselect_asks_in_chinese_with_the_page_s_words_where_it_has_some():
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    shared, own = at.multiselect(key="picked"), at.multiselect(key="own")
    assert shared.placeholder == locales.text("common", "choose_placeholder", "zh") == "请选择"
    assert own.placeholder == "选择位置方案" and shared.value == ["a"]
