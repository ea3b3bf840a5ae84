"""Head science: a language switch rewords the same numbers. Each view's model work runs once per (model, inputs)
and is shared by English and 中文 (it was keyed with the language: switching re-ablated and re-patched every
head), and wording those numbers in either language runs no model and draws the same values."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer import models
from tx_explorer.analysis import head_science as hs
from tx_explorer.views import head_science as view

TEXT = "A language switch rewords the numbers of this sentence, it does not measure them again."  # its own memo keys
PROMPTS = ("When the file is missing, the", "When the path is missing, the")  # equal token lengths
CJK = re.compile("[\u4e00-\u9fff]")
COSTLY = {  # each view's model work, as the view calls it
    "importance": "head_importance",
    "patching": "activation_patching",
    "lens": "logit_lens",
    "taxonomy": "taxonomy",
    "attribution": "attribution",
}


@pytest.fixture(scope="module")
def page():
    # opened on the shipped patching pair: the views under test then meet TEXT and PROMPTS for the first time
    return open_page("head_science", hs_model="tiny-gpt", hs_view="patching", hs_text=TEXT)


def _count_calls(monkeypatch, name: str) -> list[int]:
    """Calls of ``hs.<name>``, from the script's thread or a job pool's worker (AppTest runs in this process)."""
    calls, real = [], getattr(hs, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(hs, name, counted)
    return calls


def _array(value) -> np.ndarray:
    """A trace's values: a list, or Plotly's typed array ``{"dtype", "bdata" (base64)}``."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value)


def _numeric(spec: dict) -> list[np.ndarray]:
    """Every numeric x, y and z of a figure's traces (labels and titles left out: they are words)."""
    arrays = [_array(t[axis]) for t in spec["data"] for axis in ("x", "y", "z") if axis in t]
    return [a for a in arrays if a.dtype.kind in "fiub"]


@pytest.mark.parametrize("choice", list(COSTLY))
def test_a_language_switch_does_not_measure_again(page, monkeypatch, choice: str) -> None:
    calls = _count_calls(monkeypatch, COSTLY[choice])
    page.session_state["lang"] = "en"
    if choice == "patching":  # prompts of its own, so that no earlier test has memoised them
        page.session_state["hs_clean_tiny-gpt_0"], page.session_state["hs_corrupt_tiny-gpt_0"] = PROMPTS
    page.segmented_control(key="hs_view").set_value(choice).run()
    assert_clean(page)
    assert len(calls) == 1, f"{choice}: English measured {len(calls)} times"
    english = plotly_specs(page)
    assert not any(CJK.search(c.value) for c in page.caption)

    page.session_state["lang"] = "zh"
    page.run()
    assert_clean(page)
    assert len(calls) == 1, f"{choice}: the switch to 中文 measured again"
    assert any(CJK.search(c.value) for c in page.caption)  # reworded: the notes are Chinese
    chinese = plotly_specs(page)
    assert len(chinese) == len(english)
    for en, zh in zip(english, chinese):
        assert _numeric(en) and all(np.array_equal(a, b) for a, b in zip(_numeric(en), _numeric(zh), strict=True))
    page.session_state["lang"] = "en"


WORDING = {  # view → the inputs of its numbers step (after the model), the options of its wording step
    "importance": ((TEXT,), ()),
    "patching": ((*PROMPTS, (" file", " path")), ()),
    "lens": ((TEXT,), ("entropy",)),
    "taxonomy": ((TEXT,), ("sink",)),
    "attribution": ((TEXT,), ()),
}


@pytest.fixture(scope="module")
def tiny():
    return hs.text_model(models.load_model("tiny-gpt"))


def _no_model(module, inputs):
    raise AssertionError(f"wording ran {type(module).__name__}: it is to reuse the numbers")


@pytest.mark.parametrize("choice", list(WORDING))
def test_both_languages_word_the_same_numbers_without_the_model(tiny, choice: str) -> None:
    inputs, options = WORDING[choice]
    numbers = getattr(view, f"{choice}_numbers")(tiny, *inputs)
    words = getattr(view, f"{choice}_words")
    hooks = [m.register_forward_pre_hook(_no_model) for m in tiny.model.modules()]
    try:
        en, zh = (words(tiny, numbers, *options, lang=lang) for lang in ("en", "zh"))
    finally:
        for hook in hooks:
            hook.remove()
    assert en.notes != zh.notes and any(CJK.search(n) for n in zh.notes)
    assert [p.key for p in en.panels] == [p.key for p in zh.panels]
    for a, b in zip(en.panels, zh.panels):
        assert a.figure.layout.title.text != b.figure.layout.title.text
        numbers_en, numbers_zh = (_numeric(p.figure.to_plotly_json()) for p in (a, b))
        assert numbers_en and all(np.array_equal(x, y) for x, y in zip(numbers_en, numbers_zh, strict=True))
