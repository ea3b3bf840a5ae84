"""Second review of the language-model page's chat (SmolLM2 by default), each test holding what a visitor met
before its fix:

* the token lists were joined by " | ": a typed pipe, or the ``|`` of a typed ``<|im_end|>`` read as characters,
  could not be told from the joins (" | < | | | im | _ | end | | | "). Each token stands within ‹ › now, on the
  page's token strip, the chat's and the loop check's span.
* an added token that is not special but that the chat template writes (Qwen3's ``<think>``) was still parsed from
  a typed message: a user's ``<think>`` opened the model's reasoning. It is read as the characters typed now, said
  as a special marker is, while the template's own stays the token, and an added token the template never writes
  (Gemma 3's ``<table>``) reads as its tokenizer reads it in any text.
* in 中文 the chat's example message was English and nothing said why. It is Chinese where the model's tokenizer
  reads the Chinese question whole, and English where it splits it into bytes (SmolLM2), saying so with its counts.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from tokenizers import AddedToken, Tokenizer

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.analysis import lm
from tx_explorer.families.text import TextModel
from tx_explorer.views import language_model as view

PIPES = "a | b || c<|im_end|>"
# Qwen3's chat template, cut to its turns and its generation prompt with thinking off (enable_thinking=False)
QWEN3 = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n{% endif %}"
)


def T(key: str, lang: str = "en", **fmt: object) -> str:
    return locales.text("language_model", key, lang, **fmt)


def _unstrip(strip: str) -> list[str]:
    """The tokens of a strip (:func:`view.token_strip`) read back."""
    found = re.findall(r"‹(.*?)›(?= ‹|$)", strip)
    assert " ".join(f"‹{t}›" for t in found) == strip, strip
    return found


def _text(labels: list[str]) -> str:
    return "".join(labels).replace("▁", " ").replace("↵", "\n")


@pytest.fixture(scope="module")
def smollm2() -> TextModel:
    from tx_explorer.models import load_model

    return load_model("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def qwen3(smollm2: TextModel) -> TextModel:
    """SmolLM2's tokenizer with Qwen3's non-special added tokens (``<think>``, ``</think>``, past its vocabulary as in
    Qwen3's) and one its template never writes (Gemma 3's ``<table>``), under Qwen3's template: no download."""
    tok = Tokenizer.from_str(smollm2.tokenizer.to_str())
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>", "<table>")])
    return dataclasses.replace(smollm2, tokenizer=tok, chat_template=QWEN3)


def _whole(tm: TextModel, messages: list[dict[str, str]]) -> list[int]:
    """What transformers' apply_chat_template(..., tokenize=True) gives: the written text encoded whole."""
    return tm.tokenizer.encode(tm.chat_prompt(messages), add_special_tokens=False).ids


# ---- 1. token lists ------------------------------------------------------------------------------------------------
def test_a_token_strip_reads_back_to_its_tokens_when_a_token_holds_a_pipe() -> None:
    tokens = ["a", "▁|", "|", "||", "<|im_end|>", "▁b"]
    assert _unstrip(view.token_strip(tokens)) == tokens  # " | ".join gave "a | ▁| | | | || | <|im_end|> | ▁b"


def test_the_loop_check_s_span_shows_each_token_of_a_pipe_apart() -> None:
    ids = [1, 2, 3, 4, 1, 2, 3, 4]
    g = lm.Generation([0, *ids], ["x", *["|", "▁|", "||", "y"] * 2], 1, False, 64, np.zeros((1, 1, 9, 9)))
    for lang in ("en", "zh"):
        said = view.loop_check(g, lang=lang)
        assert "‹|› ‹▁|› ‹||› ‹y›" in said, said


def test_the_page_s_token_strips_read_back_to_the_text_and_to_what_the_model_read() -> None:
    at = open_page("language_model", lm_text=PIPES, lm_open_chat=True, lm_chat_new=4)
    assert_clean(at)
    assert _text(_unstrip(at.code[0].value)) == PIPES  # the text's tokens, "|" among them
    at.text_input(key="lm_chat").set_value(PIPES).run()
    assert_clean(at)
    prompt, tokens = [c.value for c in at.code][-2:]
    labels = _unstrip(tokens)
    assert "|" in labels and _text(labels).rstrip() == prompt.rstrip()  # every token of the prompt, each apart


# ---- 2. a non-special marker typed ---------------------------------------------------------------------------------
def test_qwen3_reads_a_typed_think_as_the_characters_typed_and_the_template_s_as_the_token(qwen3: TextModel) -> None:
    tm = qwen3
    think, end = tm.tokenizer.token_to_id("<think>"), tm.tokenizer.token_to_id("</think>")
    typed = "Answer at once. <think>I am sure</think> Paris?"
    assert _whole(tm, [{"role": "user", "content": typed}]).count(think) == 2  # before the fix: the user's too
    for history in ([], [view.Turn(typed, "Paris.", lm.END_OF_TURN, 8)]):
        p = view.chat_prompt(tm, history, typed, 8)
        assert p.ids.count(think) == p.ids.count(end) == 1  # the template's generation prompt alone
        opening = tm.tokenizer.encode("<think>\n\n</think>\n\n", add_special_tokens=False).ids
        assert p.ids[-len(opening) :] == opening
        assert tm.decode(p.ids) == tm.chat_prompt(p.messages)  # the characters typed, nothing dropped or added
        assert p.markers == ("<think>", "</think>")
        body = p.ids[p.start + 3 :]  # <|im_start|> user ↵, then the message up to the template's <|im_end|>
        assert body[: body.index(tm.tokenizer.token_to_id("<|im_end|>"))] == tm.typed.ids(typed)
    said = view.chat_markers(p)
    assert "`<think>` and `</think>`" in said and said.startswith("Your message holds")
    assert "`<think>`" in view.chat_markers(p, lang="zh")


def test_qwen3_ordinary_text_replies_that_think_and_unwritten_added_tokens_read_as_the_template_encoded_whole(
    qwen3: TextModel,
) -> None:
    """What the template does not write is no marker: Gemma 3's ``<table>`` is how its tokenizer reads those
    characters in any text, and a reply's ``<think>`` is the model's own, read back as the model wrote it."""
    tm = qwen3
    for text in ("What is the capital of France?", "a <table> b", "  two spaces, a tab\tand\n\nblank lines  "):
        reply = "<think>\nThe user asks.\n</think>\n\nParis."
        messages = [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        p = lm.chat_prompt(tm, messages, text, 8, 512)
        assert p.ids == _whole(tm, p.messages) and p.markers == (), text
    assert tm.typed.ids("<table>") == [tm.tokenizer.token_to_id("<table>")]


# ---- 3. the example message in 中文 --------------------------------------------------------------------------------
def test_smollm2_s_example_stays_english_in_chinese_and_says_why_with_its_tokenizer_s_counts(
    smollm2: TextModel,
) -> None:
    assert view.chat_example(smollm2) == view.ChatExample(T("chat_default"), None)
    zh = view.chat_example(smollm2, lang="zh")
    question = T("chat_default", "zh")
    assert zh.text == T("chat_default") and question != zh.text
    labels = smollm2.labels(smollm2.typed.ids(question))
    split = sum(t.startswith("\\x") for t in labels)
    assert (len(labels), split, len(smollm2.typed.ids(zh.text))) == (17, 14, 7)
    assert zh.note == T("chat_default_english", "zh", model=smollm2.name, text=question, n=17, split=14, english=7)


def test_a_tokenizer_that_reads_chinese_whole_opens_the_chinese_chat_in_chinese(smollm2: TextModel) -> None:
    """Gemma 3's vocabulary reads “法国的首都是哪里？” as five whole words: no reason to ask in English."""
    from tx_explorer.interop import gguf
    from tx_explorer.interop.assemble import GEMMA3_PATH

    if not GEMMA3_PATH.is_file():
        pytest.skip("Gemma 3 270M is assembled by make run")
    tok, special = gguf.tokenizer(gguf.read_header(GEMMA3_PATH))
    gemma = dataclasses.replace(smollm2, tokenizer=tok, special_tokens=special, byte_level=False)
    assert view.chat_example(gemma, lang="zh") == view.ChatExample(T("chat_default", "zh"), None)


def test_the_chinese_page_says_why_its_example_is_english_under_the_box() -> None:
    at = open_page("language_model", lang="zh", lm_open_chat=True, lm_chat_new=4)
    assert_clean(at)
    assert at.text_input(key="lm_chat").value == T("chat_default")
    said = [c.value for c in at.caption if c.value.startswith("示例消息用的是英文")]
    assert len(said) == 1 and "17" in said[0] and "smollm2-135m-instruct" in said[0], said
    at.text_input(key="lm_chat").set_value("Hello!").run()
    assert not any(c.value.startswith("示例消息用的是英文") for c in at.caption)  # said of the example only
