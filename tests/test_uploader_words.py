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
    ("lang", "button", "limit", "refused"),
    [
        (
            "en",
            "Upload",
            "20 MB per file • PNG, JPG, TXT",
            "This file was not sent: PNG, JPG or TXT files of at most 20 MB only.",
        ),
        (
            "zh",
            "上传",
            "每个文件不超过 20 MB · PNG、JPG、TXT",
            "此文件未上传：只接受不超过 20 MB 的 PNG、JPG 或 TXT 文件。",
        ),
    ],
)
def test_the_uploader_s_words_are_the_locale_s_with_streamlit_s_limit_and_types(lang, button, limit, refused):
    """The limit is the one .streamlit/config.toml gives Streamlit (20 MB), the types listed as Streamlit lists them;
    a refused file's words name both, whichever the browser found wrong (too large, another type)."""
    assert uploader_words(["png", "jpg", "jpeg", "txt"], lang) == (button, limit, refused)


def test_a_chinese_page_s_uploader_is_styled_with_its_words_under_its_own_key():
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    style = next(e.proto.body for e in at.get("html") if "stFileUploaderDropzone" in e.proto.body)
    assert ".st-key-pic " in style and f"content: {json.dumps('上传', ensure_ascii=False)}" in style
    assert "每个文件不超过" in style and "PNG、JPG" in style
    # a refused file's tooltip (drawn outside the widget, so not under its key) in the page's language
    assert '[data-testid="stTooltipErrorContent"]::after' in style and "此文件未上传" in style
