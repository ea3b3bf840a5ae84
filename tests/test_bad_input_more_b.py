"""Bad input found beyond tests/test_bad_input.py's table: each case failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import open_page
from tests.test_checkpoint import english_in_chinese
from tx_explorer.analysis.heads import TextAttention
from tx_explorer.errors import InputError
from tx_explorer.views import multihead as mh_view


def _special_only() -> TextAttention:
    """What MiniLM reads from a zero-width space or from "[CLS] [SEP]": the tokens its tokenizer adds, nothing else."""
    return TextAttention(["[CLS]", "[SEP]"], [True, True], False, 2, np.full((1, 1, 2, 2), 0.5, np.float32), [101, 102])


def test_hiding_the_special_tokens_of_a_text_of_special_tokens_alone_is_told_in_both_languages() -> None:
    with pytest.raises(InputError) as caught:
        mh_view.shown(_special_only(), hide_special=True)
    assert caught.value.key == "heads_all_special"
    assert "[CLS] [SEP]" in caught.value.message("en") and "隐藏特殊 token" in caught.value.message("zh")
    assert not english_in_chinese(caught.value)
    assert mh_view.shown(_special_only(), hide_special=False).labels == ["[CLS]", "[SEP]"]  # the toggle off: shown


@pytest.mark.parametrize("text", ["\u200b", "[CLS] [SEP]"])
def test_multihead_page_in_chinese_refuses_a_text_of_special_tokens_alone_in_chinese(text: str) -> None:
    at = open_page("multihead", mh_model="minilm-l6", lang="zh")
    at.session_state["mh_text_example_code"], at.session_state["mh_hide"] = text, True
    at.session_state["lang"] = "zh"  # AppTest does not send the sidebar's switch back: set it for every run
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    said = [e.value for e in at.error]
    assert said and all("隐藏特殊 token" in e and "every token" not in e for e in said), said
    at.session_state["mh_text_example_code"], at.session_state["lang"] = "The cat sat.", "zh"
    at.run()  # a text with words: the page draws again
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.get("plotly_chart")
