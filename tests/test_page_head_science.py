"""AppTest: the head-science page — every view on first load and after switching, in both languages, and the
patching prompts' refusal when their token lengths differ."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean, open_page, plotly_specs

VIEW_CHARTS = {"importance": 3, "patching": 2, "lens": 1, "taxonomy": 3, "attribution": 2}  # taxonomy: + sinks


@pytest.fixture(scope="module")
def page():
    """The views' mechanics on tiny-gpt (seconds); the default model, SmolLM2, has its own test below."""
    return open_page("head_science", hs_model="tiny-gpt")


def test_smollm2s_taxonomy_names_real_heads() -> None:
    at = open_page("head_science", hs_view="taxonomy", hs_model="smollm2-135m-instruct")
    assert_clean(at)
    assert at.selectbox(key="hs_model").value == "smollm2-135m-instruct"
    notes = " ".join(c.value for c in at.caption)
    assert "Strongest induction heads" in notes and "StreamingLLM" in notes
    assert "Best induction head: layer 18, head 6" in notes  # its 0.97 is over the 0.3 that counts
    assert len(plotly_specs(at)) == VIEW_CHARTS["taxonomy"]


def test_first_load_shows_the_importance_maps(page) -> None:
    assert_clean(page)
    assert page.selectbox(key="hs_model").value == "tiny-gpt"
    specs = plotly_specs(page)
    assert len(specs) == VIEW_CHARTS["importance"] and specs[0]["data"][0]["type"] == "heatmap"
    assert any("Δ loss" in c.value for c in page.caption) or specs[0]["layout"]["title"]["text"].startswith("Δ loss")


@pytest.mark.parametrize("view", list(VIEW_CHARTS))
def test_each_view(page, view: str) -> None:
    page.segmented_control(key="hs_view").set_value(view).run()
    assert_clean(page)
    assert len(plotly_specs(page)) == VIEW_CHARTS[view]
    if view == "taxonomy":
        assert len(page.dataframe[0].value) == 16  # a row per head of tiny-gpt: a grid that scrolls and sorts
        # each score to 3 places, numbers still (they sort as numbers): the grid showed 7.2 beside 9.922
        columns = json.loads(page.dataframe[0].proto.columns)
        scores = [c for c in page.dataframe[0].value.columns if c not in ("head", "sink")]
        assert len(scores) == 6 and all(columns[c]["type_config"]["format"] == "%.3f" for c in scores)
    if view == "attribution":
        assert len(page.table[0].value) == 5  # four methods and a random baseline: a whole table


def test_lens_states_that_the_last_readout_is_the_output(page) -> None:
    page.segmented_control(key="hs_view").set_value("lens").run()
    assert any("max |difference| = 0.00e+00" in c.value.replace("\\", "") for c in page.caption)  # escaped Markdown


def test_unequal_patching_prompts_are_refused(page) -> None:
    page.segmented_control(key="hs_view").set_value("patching").run()
    page.text_input(key="hs_corrupt_tiny-gpt_0").set_value("The name of the function and").run()
    assert not page.exception
    assert page.error and "equal token length" in page.error[0].value
    page.text_input(key="hs_corrupt_tiny-gpt_0").set_value("The name is the").run()
    assert_clean(page)


def test_chinese(page) -> None:
    page.session_state["lang"] = "zh"
    page.segmented_control(key="hs_view").set_value("taxonomy").run()
    assert_clean(page)
    assert any("归纳" in c.value for c in page.caption)
    assert any("tiny-gpt 在这里没有任何头达到归纳头的标准" in c.value for c in page.caption)  # its best: 0.028
    page.session_state["lang"] = "en"


def test_locale_entries_are_complete_and_used_keys_exist() -> None:
    import re
    import string
    from pathlib import Path

    from tx_explorer import locales

    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    table = locales.table("head_science")
    for key, entry in table.items():
        assert entry["en"].strip() and entry["zh"].strip() and fields(entry["en"]) == fields(entry["zh"]), key
    root = Path(__file__).resolve().parent.parent
    for source in (root / "pages" / "head_science.py", root / "tx_explorer" / "views" / "head_science.py"):
        used = set(re.findall(r'\bT\("([a-z0-9_]+)"', source.read_text(encoding="utf-8")))
        assert used <= set(table), used - set(table)


def test_text_typed_survives_a_look_at_another_view() -> None:
    """The patching view draws no text box: without writing it back, Streamlit would forget the typed text there."""
    at = open_page("head_science", hs_model="tiny-gpt")
    at.segmented_control(key="hs_view").set_value("lens").run()
    at.text_area(key="hs_text").set_value("The module is ready.").run()
    at.segmented_control(key="hs_view").set_value("patching").run()
    assert_clean(at)
    at.segmented_control(key="hs_view").set_value("lens").run()
    assert_clean(at)
    assert at.text_area(key="hs_text").value == "The module is ready."
    assert not at.warning, [w.value for w in at.warning]  # no "set via Session State and a default" warning


def test_chinese_titles_wrap_between_phrases_not_before_a_last_character() -> None:
    """Titles are wrapped at a column's width (ui: style.tidy); "…（对头与查询取平" then "均" alone was the sink
    chart's. Each zh title, its numbers filled in, ends its last line with more than one character."""
    import re

    from tx_explorer import locales
    from tx_explorer.viz import style

    for key, entry in locales.table("head_science").items():
        if "title" not in key:
            continue
        zh = re.sub(r"\{[a-z_]+\}", "17", entry["zh"])
        last = re.sub(r"<[^>]+>", "", style.wrap(zh, 0.9 * style.NARROWEST * style.COLUMN_PX).split("<br>")[-1])
        assert len(last.strip()) > 2, (key, last)
