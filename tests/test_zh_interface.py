"""The 中文 interface shows no English (fast, through AppTest): every page's figures and text, its error messages,
and the locale files behind them. The browser version with screenshots is the layout check's 中文 run
(``test_layout.py``)."""

from __future__ import annotations

import json
import pickle
import re
import string
from pathlib import Path

import pytest

from tests.conftest import assert_clean, open_page, open_sections, plotly_specs
from tests.zh_text import english_in_figure, english_words
from tx_explorer import locales
from tx_explorer.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
PAGES = re.findall(r'"pages/(\w+)\.py"', (ROOT / "app.py").read_text(encoding="utf-8"))
TEXT_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")
WIDGETS = (
    "button",
    "download_button",
    "checkbox",
    "toggle",
    "radio",
    "selectbox",
    "slider",
    "number_input",
    "text_input",
    "text_area",
)
# Page → (widget kind, key, value) runs after the first load: views that only appear after a choice.
MORE_VIEWS = {
    "multihead": [("segmented_control", "mh_view", v) for v in ("head", "search", "compare", "qk")],
    "head_science": [("segmented_control", "hs_view", v) for v in ("patching", "lens", "taxonomy", "attribution")],
}
# Page → (session-state key, value) runs after the first load: lazy tabs, opened one at a time by their label.
MORE_TABS = {
    "masks": [
        ("mask_kind", locales.text("masks", f"kind_{k}", "zh"))
        for k in ("padding", "sliding_window", "prefix_lm", "block_diagonal", "custom")
    ],
}


def english_on_page(at) -> list[str]:
    found = [f"figure {i} {hit}" for i, spec in enumerate(plotly_specs(at)) for hit in english_in_figure(spec)]
    for kind in TEXT_ELEMENTS:
        for el in at.get(kind):
            if words := english_words(str(el.value), prose=True):
                found.append(f"{kind}: {str(el.value)[:120]!r} {words}")
    for kind in WIDGETS:
        for el in at.get(kind):
            if words := english_words(el.label or "", prose=True):
                found.append(f"{kind} label: {el.label!r} {words}")
    for kind in ("radio", "segmented_control"):  # their choices (a selectbox's may be tokens)
        for el in at.get(kind):
            found += [f"{kind} option: {o!r} {w}" for o in el.options if (w := english_words(str(o), prose=True))]
    for el in at.get("metric"):
        if words := english_words(el.label, prose=True):
            found.append(f"metric label: {el.label!r} {words}")
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_page_in_chinese_shows_no_english(page, one_thread):
    at = open_page(page)
    at.session_state["lang"] = "zh"
    open_sections(at, page).run()
    assert_clean(at)
    assert plotly_specs(at), "the page draws its figures in 中文 too"
    found = english_on_page(at)
    for key, value in MORE_TABS.get(page, []):
        at.session_state[key] = value
        at.session_state["lang"] = "zh"
        at.run()
        assert_clean(at)
        found += [f"[{key}={value}] {hit}" for hit in english_on_page(at)]
    for kind, key, value in MORE_VIEWS.get(page, []):
        next(el for el in at.get(kind) if el.key == key).set_value(value)
        at.session_state["lang"] = "zh"
        at.run()
        assert_clean(at)
        found += [f"[{key}={value}] {hit}" for hit in english_on_page(at)]
    assert not found, "\n".join(found)


def test_the_checker_finds_english_and_lets_terms_pass():
    assert english_words("query %{y}: %{customdata[0]}<br>key %{x}<br>weight %{z:.4f}") == ["weight"]
    assert english_words("本模型的位置编码（learned）") == ["learned"]
    assert english_words("查询 query（行）") == []
    assert english_words("在 “containing” 之后 · softmax · tiny-gpt · 12.5 MB · LayerNorm · num_heads") == []
    assert english_words("每个 token 的损失（teacher forcing）") == ["teacher", "forcing"]
    assert english_words("每个 token 的损失（teacher forcing），见 *Attention Is All You Need*", prose=True) == []
    assert english_words("Vaswani 等 2017 · the head", prose=True) == ["the", "head"]
    assert english_words("数据 (CSV) · `scaled.csv` · meta-llama/Llama-2-7b-hf config.json · logit(▁name)") == []


def test_an_input_error_is_shown_in_the_chosen_language():
    at = open_page("masks")
    at.session_state["lang"] = "zh"
    at.run()
    next(el for el in at.text_input if el.key == "sentence").set_value("  ")
    at.session_state["lang"] = "zh"  # AppTest does not send the sidebar's switch back: set it for every run
    at.run()
    assert [e.value for e in at.error] and all("句子为空" in e.value for e in at.error), [e.value for e in at.error]
    at.session_state["lang"] = "en"
    at.run()
    assert any("the sentence is empty" in e.value for e in at.error), [e.value for e in at.error]


def test_input_errors_read_english_in_python_and_survive_pickling():
    exc = InputError("positive_integer", name="N_Q", value=0)
    assert isinstance(exc, ValueError) and str(exc) == "N_Q must be a positive integer, got 0"
    assert exc.message("zh") == "N_Q 必须是正整数，当前为 0"
    again = pickle.loads(pickle.dumps(exc))
    assert (type(again), again.key, again.params, str(again)) == (InputError, exc.key, exc.params, str(exc))


def _fields(s: str) -> list[str]:
    return sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)


def test_every_error_key_is_used_and_translated_with_the_same_fields():
    table = locales.table("errors")
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tx_explorer").rglob("*.py"))
    used = {
        *re.findall(r'InputError\(\s*"(\w+)"', source),  # raise InputError("key", …)
        *re.findall(r'positive_int\([^()]*key="(\w+)"', source),  # positive_int(name, value, key="key")
        *re.findall(r'"(naive_too_big\w*)"', source),  # MemoryBudgetError, an InputError
        "positive_integer",  # positive_int's default
        *(  # checked_words(…, unit="token") raises no_tokens, too_many_tokens, token_too_long
            key.format(unit)
            for unit in re.findall(r'checked_words\(.*unit="(\w+)"', source)
            for key in ("no_{}s", "too_many_{}s", "{}_too_long")
        ),
    }
    assert used == set(table), (used - set(table), set(table) - used)
    for key, entry in table.items():
        assert entry["en"].strip() and entry["zh"].strip(), key
        assert _fields(entry["en"]) == _fields(entry["zh"]), key
        assert not english_words(re.sub(r"\{[^{}]*\}", " ", entry["zh"]), prose=True), (key, entry["zh"])


def test_figure_words_are_translated_with_the_same_fields():
    """Every ``fig_*`` string, in every locale file, keeps its English fields in Chinese."""
    for path in sorted((ROOT / "tx_explorer" / "locales").glob("*.json")):
        for key, entry in json.loads(path.read_text(encoding="utf-8")).items():
            if key.startswith("fig_"):
                assert _fields(entry["en"]) == _fields(entry["zh"]), (path.name, key)


def test_each_page_has_one_name():
    """The sidebar, the page's own title and the Home map all read ``page_<name>`` of common.json."""
    common = locales.table("common")
    assert {f"page_{p}" for p in PAGES} <= set(common)
    for page in PAGES:
        assert "title" not in locales.table(page) or page == "home", f"{page}.json keeps a second name"
        assert not [k for k in locales.table(page) if k.startswith("page_")], page
