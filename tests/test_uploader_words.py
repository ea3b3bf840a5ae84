"""Streamlit's file uploader says "Upload" and "20MB per file • PNG, JPG" in English whatever the page's language;
``ui.file_uploader`` draws the locale's words over them with a style scoped to the widget."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from tx_explorer.ui.inputs import uploader_words


def _page() -> None:
    import streamlit as st

    from tx_explorer import ui

    st.session_state["lang"] = "zh"
    ui.file_uploader("Image", types=["png", "jpg", "jpeg"], key="pic")


@pytest.mark.parametrize(
    ("lang", "button", "limit"),
    [("en", "Upload", "20 MB per file • PNG, JPG, TXT"), ("zh", "上传", "每个文件不超过 20 MB · PNG、JPG、TXT")],
)
def test_the_uploader_s_words_are_the_locale_s_with_streamlit_s_limit_and_types(lang, button, limit):
    """The limit is the one .streamlit/config.toml gives Streamlit (20 MB), the types listed as Streamlit lists them."""
    assert uploader_words(["png", "jpg", "jpeg", "txt"], lang) == (button, limit)


def test_a_chinese_page_s_uploader_is_styled_with_its_words_under_its_own_key():
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    style = next(e.proto.body for e in at.get("html") if "stFileUploaderDropzone" in e.proto.body)
    assert ".st-key-pic " in style and f"content: {json.dumps('上传', ensure_ascii=False)}" in style
    assert "每个文件不超过" in style and "PNG、JPG" in style
