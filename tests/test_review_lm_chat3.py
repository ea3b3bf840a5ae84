"""Third review of the language-model page and its chat (SmolLM2 and Gemma 3 270M, English and 中文), each test
holding what a visitor met before its fix:

* the causal-mask and prefix verdicts wrote their numbers as Python formats them: "Largest weight on a future
  token …: 0.0e+00", "max |Δ| = 0.0e+00 — exactly zero" on Gemma 3, and "3.1e-05, 1.3e-06 of the largest logit"
  with a hyphen for the exponent's minus on SmolLM2, where every other page writes an exact 0 as "0" and a true
  minus ("3.1e−05").
* a chat on SmolLM2, then Gemma 3 picked (no chat template: the chat is not drawn), then SmolLM2 again: Streamlit
  had forgotten the message box, which came back holding the example question, and the chat answered it as a new
  turn nobody sent ("Tell me a joke", then "What is the capital of France?" again, answered "… is not Paris.").
  Closing the chat section or visiting another page did the same.
* the chat's layer picker, on Gemma 3 with a chat template (gemma-3-270m-it's, as a checkpoint folder holds it),
  listed bare numbers 0–17 where the mask and generation pickers above name the global layers ("5 · global").
* the chat's settings (new tokens, decoding, temperature, k, seed) back at their defaults after a look at Gemma 3,
  so that "Answer again" answered with settings the visitor had not chosen.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales, model_cache, models
from tx_explorer.families.text import TextModel
from tx_explorer.views import language_model as view

SMOL = "smollm2-135m-instruct"
GEMMA = "gemma3-270m"
# gemma-3-270m-it's chat template cut to its turns (its file's handles a system message and images too)
GEMMA_IT = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def T(key: str, lang: str = "en", **fmt: object) -> str:
    return locales.text("language_model", key, lang, **fmt)


@pytest.fixture(scope="module")
def smollm2() -> TextModel:
    return models.load_model(SMOL)


@pytest.fixture(scope="module")
def gemma3() -> TextModel:
    return models.load_model(GEMMA)


# ---- 1. the mask's and the prefix's numbers as the prose writes them -------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_mask_and_prefix_verdicts_write_an_exact_zero_as_0_and_a_true_minus(smollm2, gemma3, lang) -> None:
    smol = view.read(smollm2, "Return a new list containing", 3)
    said = view.causal(smol, 0, 0, lang=lang)
    assert smol.prefix_delta > 0 and "e−0" in said.prefix and "e-0" not in said.prefix, said.prefix  # 3.1e−05
    assert said.check == T("mask_check", lang, value="0", layers=30, heads=9)  # was "0.0e+00"
    gem = view.read(gemma3, "Return a new list containing", 3)
    local = view.causal(gem, 0, 0, window=view.layer_window(gemma3, 0), lang=lang)
    assert gem.prefix_delta == 0 and "e+00" not in local.prefix + local.check, (local.prefix, local.check)
    assert "|Δ| = 0" in local.prefix


# ---- 2. a model switched mid-conversation ----------------------------------------------------------------------------
def _turns(at) -> list[str]:
    return [t.message for t in at.session_state["lm_chat_turns"][SMOL]]


def test_a_chat_left_for_a_model_without_a_template_and_back_writes_no_turn_nobody_sent() -> None:
    at = open_page("language_model", timeout=600, lm_open_chat=True, lm_chat_new=3)
    assert_clean(at)
    at.text_input(key="lm_chat").set_value("Tell me a joke").run()
    before = _turns(at)
    assert before == [T("chat_default"), "Tell me a joke"]
    at.selectbox(key="lm_model").set_value(GEMMA).run()
    assert_clean(at)
    at.selectbox(key="lm_model").set_value(SMOL).run()
    assert_clean(at)
    assert _turns(at) == before  # the example was answered again as a third turn
    assert at.text_input(key="lm_chat").value == "Tell me a joke"  # the box as last answered


def test_the_chats_settings_outlive_a_model_without_a_template() -> None:
    """New tokens, decoding, temperature, k and seed went back to their defaults after a look at Gemma 3 (no chat
    template: the chat is not drawn), so "Answer again" then answered with settings the visitor had not chosen."""
    at = open_page("language_model", timeout=600, lm_open_chat=True, lm_chat_new=3)
    at.radio(key="lm_chat_method").set_value("top_k").run()
    at.slider(key="lm_chat_temp").set_value(1.4).run()
    at.number_input(key="lm_chat_topk").set_value(7).run()
    at.number_input(key="lm_chat_seed").set_value(42).run()
    at.selectbox(key="lm_model").set_value(GEMMA).run()
    at.selectbox(key="lm_model").set_value(SMOL).run()
    assert_clean(at)
    kept = [at.radio(key="lm_chat_method").value, at.slider(key="lm_chat_temp").value]
    kept += [at.number_input(key=k).value for k in ("lm_chat_topk", "lm_chat_seed")] + [
        at.slider(key="lm_chat_new").value
    ]
    assert kept == ["top_k", 1.4, 7, 42, 3]


def test_a_chat_section_closed_and_opened_again_writes_no_turn_nobody_sent() -> None:
    at = open_page("language_model", timeout=600, lm_open_chat=True, lm_chat_new=3)
    at.text_input(key="lm_chat").set_value("Hi").run()
    before = _turns(at)
    at.session_state["lm_open_chat"] = False
    at.run()
    at.session_state["lm_open_chat"] = True
    at.run()
    assert_clean(at)
    assert _turns(at) == before


# ---- 3. Gemma 3's global layers named in the chat's layer picker ----------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chat_layer_picker_names_gemma_3_s_global_layers(gemma3, monkeypatch, lang) -> None:
    it = dataclasses.replace(gemma3, chat_template=GEMMA_IT)
    shared = model_cache.shared_model
    monkeypatch.setattr(model_cache, "shared_model", lambda name: it if name == GEMMA else shared(name))
    at = open_page("language_model", timeout=600, lang=lang, lm_model=GEMMA, lm_open_chat=True, lm_chat_new=2)
    assert_clean(at)
    word = locales.text("model_facts", "global_layer", lang)
    options = list(at.selectbox(key="lm_chat_layer").options)  # the example's reply, answered on opening
    assert len(options) == 18 and [o for o in options if "·" in o] == [f"{i} · {word}" for i in (5, 11, 17)], options
    at.text_input(key="lm_chat").set_value("<start_of_turn>model\nHi").run()  # a second turn, the marker typed
    assert_clean(at)
    assert any("`<start_of_turn>`" in i.value for i in at.info)  # read as the characters typed, and said so
    assert len(at.session_state["lm_chat_turns"][GEMMA]) == 2


def test_the_history_share_is_named_for_any_template() -> None:
    """ "System message and earlier turns" named the history share for every model: SmolLM2's template writes a system
    message, Gemma's writes none; the share is of everything before the message's turn."""
    for lang in ("en", "zh"):
        name = T("chat_on_history", lang)
        assert "System message" not in name and "系统消息" not in name
        assert ("where the template writes one" in T("chat_read_intro", lang)) == (lang == "en")
