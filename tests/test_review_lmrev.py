"""Review of the language-model page on SmolLM2 and Gemma 3 (tag lmrev): the loop claim measured on the
continuation shown, an empty text's message about the model selected, a dropped turn said in the singular."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.analysis import lm
from tx_explorer.views import language_model as view


def _generation(prompt: list[int], new: list[int]) -> lm.Generation:
    ids = [*prompt, *new]
    return lm.Generation(ids, [f"t{i}" for i in ids], len(prompt), False, 64, np.zeros((1, 1, len(ids), len(ids))))


def test_repeats_counts_the_tokens_that_end_a_run_written_before_and_the_longest_span_written_twice() -> None:
    assert lm.repeats([1, 2, 3, 4, 5, 6]) == lm.Repeats(6, 4, 0, None)
    assert lm.repeats([1, 2, 3, 9, 1, 2, 3, 8]) == lm.Repeats(8, 4, 0, None)  # a 3-token run twice: no 4-token one
    assert lm.repeats([1, 2, 3, 4, 1, 2, 3, 4, 1, 2]) == lm.Repeats(10, 4, 3, (0, 4))
    assert lm.repeats([7] * 6) == lm.Repeats(6, 4, 2, (0, 3))  # without overlap: 7 7 7 | 7 7 7


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_loop_check_is_measured_on_the_continuation_not_typed(lang: str) -> None:
    """§6.3's "greedy decoding of a small model often falls into a loop (“the list of the list of …”)" was typed,
    tiny-gpt's loop, under every model's continuation (Gemma 3's repeats “items you want to add to your”, SmolLM2's
    none): the page now says how many tokens of the continuation shown repeat a 4-token run, and which span."""
    assert "the list of the list" not in locales.text("language_model", "gen_intro", lang)
    looped = view.loop_check(_generation([50, 51], [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]), lang=lang)
    span = "‹t1› ‹t2› ‹t3› ‹t4› ‹t5›"  # 1234 2345 3451 4512 written again: 4 of the 12 tokens end a run seen before
    assert looped == locales.text("language_model", "gen_loop", lang).format(copied=4, new=12, n=4, span=span, k=5)
    fresh = view.loop_check(_generation([50], [1, 2, 3, 9, 1, 2, 3, 8]), lang=lang)
    assert fresh == locales.text("language_model", "gen_loop_none", lang).format(n=4, new=8)
    once = view.loop_check(_generation([50], [1, 2, 3, 4, 1, 2, 3, 4]), lang=lang)
    assert once.startswith(locales.text("language_model", "gen_loop_one", lang)[:12])
    assert view.loop_check(_generation([50], [1, 1, 1, 1]), lang=lang) is None  # too short to hold a run twice
    marked = view.loop_check(_generation([50], [1, 2, 3, 4, 1, 2, 3, 4]), escape=lambda s: s.replace("t", "\\t"))
    assert "‹\\t1› ‹\\t2›" in marked  # the page's Markdown escape reaches the tokens


def test_the_page_says_the_loop_check_of_the_continuation_it_shows() -> None:
    at = open_page("language_model", lm_open_gen=True)  # SmolLM2, greedy
    assert_clean(at)
    said = [m.value for m in at.markdown if "Loop check" in m.value]
    assert len(said) == 1 and "24 generated tokens" in said[0], said


@pytest.mark.parametrize("model", ["smollm2-135m-instruct", "gemma3-270m"])
def test_an_empty_text_names_the_model_selected_and_claims_nothing_about_it(model: str) -> None:
    """The message said "the model knows English technical prose": tiny-gpt's corpus, not SmolLM2's or Gemma 3's."""
    at = open_page("language_model", lm_model=model, lm_text="  ")
    assert_clean(at)
    said = [w.value for w in at.warning]
    assert said == [f"The text is empty: type a few words for {model} to read and continue."], said


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_dropped_turn_is_said_in_the_singular(lang: str) -> None:
    """ "the oldest 1 turn(s) are left out": the count's own form, in both languages."""

    def note(dropped: int) -> str:
        prompt = lm.ChatPrompt([], [], dropped, None, 373, 0)
        return view.chat_notices(prompt, lang=lang)[0]

    assert "(s)" not in note(1) + note(2)
    if lang == "en":
        assert "the oldest turn is left out" in note(1) and "the oldest 2 turns are left out" in note(2)
    else:
        assert "最早的一轮" in note(1) and "最早的 2 轮" in note(2)
