"""A language switch after a visitor's choices (sweep A: seq2seq, operator, self-attention, position lab, masks,
multi-head, norms, model sizes, language model, KV cache).

A select box's value travels to the browser as its label, in the language it was drawn in. On a switch the sidebar
assigns every kept plain value (str, int, float) to itself again (``ui.pickers._relabel_choices``), so the browser
is sent the new language's label; a value of None is not, and the browser kept the old one: seq2seq's "mean of the
heads" read so in 中文, and switched back to English the mosaic vanished behind "only integers, slices … are valid
indices" (the stale label came back as the head). The "every head"/"every token" choice is now -1, a number."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean, open_page

pytestmark = pytest.mark.usefixtures("one_thread")
PLAIN = (str, int, float)  # what the switch relabels (ui.pickers._relabel_choices)


def _unrelabelled(at) -> list[str]:
    """The select boxes and radios whose value the language switch would not send again in the new labels."""
    return [
        f"{w.key}={w.value!r}"
        for w in [*at.selectbox, *at.radio]
        if w.key and (not isinstance(w.value, PLAIN) or isinstance(w.value, bool))
    ]


def _both_languages(at) -> None:
    for lang in ("zh", "en"):
        at.session_state["lang"] = lang
        at.run()
        assert_clean(at)
        assert not _unrelabelled(at)


def test_seq2seq_head_mean_is_relabelled_on_a_switch():
    at = open_page("seq2seq", s2s_open_mosaic=True)
    assert_clean(at)
    assert at.selectbox(key="s2s_head").options[0] == "mean of the heads"
    assert not _unrelabelled(at)
    _both_languages(at)
    assert at.selectbox(key="s2s_head").options[0] == "mean of the heads"


def test_multihead_every_token_focus_is_relabelled_on_a_switch():
    at = open_page("multihead", mh_model="tiny-gpt", mh_view="head")
    assert_clean(at)
    assert at.selectbox(key="mh_focus").index == 0
    assert not _unrelabelled(at)
    _both_languages(at)


def test_language_model_generation_mean_head_is_relabelled_on_a_switch():
    at = open_page("language_model", timeout=300, lm_model="tiny-gpt", lm_open_gen=True)
    assert_clean(at)
    assert at.selectbox(key="lm_gen_head").index == 0
    assert not _unrelabelled(at)
    _both_languages(at)


def test_masks_open_tab_stays_open_on_a_switch():
    """A tab's value is its label: after a switch the old label opened the first tab (Causal) again."""
    at = open_page("masks", mask_kind="Sliding window")
    assert_clean(at)
    assert at.session_state["mask_kind"] == "Sliding window"
    for lang, label in (("zh", "滑动窗口"), ("en", "Sliding window")):
        at.session_state["lang"] = lang
        at.run()
        assert_clean(at)
        assert at.session_state["mask_kind"] == label
