"""Sections below the first screen (``ui.below_fold``): a first visit computes and draws none of them; a section is
drawn once its placeholder reports that the visitor scrolled near it, and stays drawn.

AppTests cannot scroll, so ``tests/conftest.py`` sets ``TX_EXPLORER_DRAW_ALL`` for the suite; these tests switch it
off. The browser side (the placeholder's report, several at once) is in ``tests/test_browser.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales, ui

PAGES = Path(__file__).resolve().parents[1] / "pages"


def three_sections() -> None:
    import streamlit as st

    from tx_explorer import ui

    st.session_state.setdefault("computed", [])

    def section(name: str) -> None:
        st.session_state.computed.append(name)
        st.markdown(f"section {name}")

    for name in "abc":
        ui.below_fold(f"t_{name}", height=300)(section)(name)


def two_views() -> None:
    import streamlit as st

    from tx_explorer import ui

    view = st.session_state.setdefault("view", "x")
    ui.fold_again("t_a", "t_b", shown=view)
    for name in "ab":
        ui.below_fold(f"t_{name}", height=300)(st.markdown)(f"section {name} of view {view}")


def placeholders(at: AppTest) -> list[str]:
    """The keys of the sections shown as placeholders."""
    return [el.proto.id.rsplit("-below_fold_", 1)[1] for el in at.get("bidi_component")]


@pytest.fixture
def deferring(monkeypatch):
    monkeypatch.delenv(ui.DRAW_ALL, raising=False)


def test_a_section_not_reached_computes_nothing_until_reached_then_stays(deferring):
    at = AppTest.from_function(three_sections, default_timeout=60).run()
    assert_clean(at)
    assert placeholders(at) == ["t_a", "t_b", "t_c"]
    assert not at.markdown and at.session_state.computed == []

    at.session_state["reached_t_b"] = True  # what the placeholder's report sets
    at.run()
    assert [m.value for m in at.markdown] == ["section b"]
    assert placeholders(at) == ["t_a", "t_c"]
    assert at.session_state.computed == ["b"]

    at.run()  # a later run (another input) keeps it drawn
    assert [m.value for m in at.markdown] == ["section b"]


def test_a_view_shown_again_draws_only_what_is_reached_again(deferring):
    """``ui.fold_again``: another view, then this one again, and the sections once reached are placeholders again;
    reruns of the same view keep them drawn."""
    at = AppTest.from_function(two_views, default_timeout=60).run()
    at.session_state["reached_t_b"] = True
    at.run()
    assert [m.value for m in at.markdown] == ["section b of view x"]
    at.run()
    assert placeholders(at) == ["t_a"]  # the same view: still drawn
    at.session_state["view"] = "y"
    at.run()
    assert placeholders(at) == ["t_a", "t_b"] and not at.markdown
    at.session_state["reached_t_b"] = True
    at.run()
    assert [m.value for m in at.markdown] == ["section b of view y"]
    at.session_state["view"] = "x"
    at.run()
    assert placeholders(at) == ["t_a", "t_b"]


def test_the_switch_draws_every_section_at_once(monkeypatch):
    monkeypatch.setenv(ui.DRAW_ALL, "1")
    at = AppTest.from_function(three_sections, default_timeout=60).run()
    assert [m.value for m in at.markdown] == ["section a", "section b", "section c"]
    assert not placeholders(at)


def test_a_page_draws_its_first_section_and_defers_the_rest(deferring):
    at = open_page("model_sizes")
    assert_clean(at)
    assert placeholders(at) == ["model_sizes_breakdown", "model_sizes_stack", "model_sizes_custom"]
    assert len(at.get("plotly_chart")) == 1  # the lecture's table and its chart, on the first screen
    shown = json.loads(at.get("bidi_component")[0].proto.json)
    assert shown["caption"] == locales.text("common", "below_fold", "en") and shown["height"] > 0

    at.session_state["reached_model_sizes_custom"] = True
    at.run()
    assert_clean(at)
    assert placeholders(at) == ["model_sizes_breakdown", "model_sizes_stack"]
    assert len(at.get("plotly_chart")) == 2
    assert at.number_input(key="sizes_layers").value == 12


def test_deferred_section_keys_are_unique_across_pages():
    files = sorted(PAGES.glob("*.py")) + sorted((PAGES.parent / "tx_explorer" / "ui").glob("*.py"))
    keys = [k for f in files for k in re.findall(r'below_fold\("(\w+)"', f.read_text())]
    assert keys and len(keys) == len(set(keys)), keys
