"""The language and each page's main choices in the URL (tx_explorer.ui.url_state): parsed as untrusted input,
restored into a new session (a reload, a shared link), written back as the visitor chooses, and the table in step
with the pages' widget keys."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tx_explorer import locales
from tx_explorer.ui import compat
from tx_explorer.ui import url_state as us

ROOT = Path(__file__).resolve().parent.parent
PAGES = re.findall(r'"pages/(\w+)\.py"', (ROOT / "app.py").read_text(encoding="utf-8"))


def arrive(tmp_path: Path, page: str, query: dict[str, str], **state: object) -> AppTest:
    """A new session opening ``/<page>?<query>``, run through app.py's ``st.navigation`` as a server runs it.

    AppTest, finding pages/ beside app.py, runs a page it switches to on its own, without app.py (Streamlit's legacy
    multipage mode, which a server leaves at the first run): a copy of app.py naming the pages by absolute path,
    in a folder without pages/, runs the real navigation, sidebar and page. ``state``: set before the first run."""
    script = tmp_path / "app.py"
    script.write_text((ROOT / "app.py").read_text(encoding="utf-8").replace('"pages/', f'"{ROOT}/pages/'))
    at = AppTest.from_file(str(script), default_timeout=120)
    at.query_params.update(query)
    for key, value in state.items():
        at.session_state[key] = value
    if page != "home":
        at.switch_page(f"{ROOT}/pages/{page}.py")
    return at.run()


def shown(at: AppTest, key: str):
    """The value a keyed widget shows."""
    return next(w for kind in ("selectbox", "segmented_control", "radio") for w in at.get(kind) if w.key == key).value


TINY_HEAD = {"mh_model": "tiny-gpt", "mh_view": "head", "mh_layer": "1", "mh_head": "2"}


# ---- kinds: what a URL may say ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind, raw, value",
    [
        (us.Whole(), "3", 3),
        (us.Whole(), " 3 ", 3),
        (us.Whole(), "-2", 0),  # clamped
        (us.Whole(1, 64), "99999", 64),
        (us.Whole(), "abc", None),
        (us.Whole(), "1e3", None),
        (us.Whole(), "", None),
        (us.Whole(), "9" * 50, None),  # no number of ours is that long
        (us.Real(0.0, 0.95), "0.5", 0.5),
        (us.Real(0.0, 0.95), "7", 0.95),
        (us.Real(0.0, 0.95), "nan", None),
        (us.Real(0.0, 0.95), "-inf", None),
        (us.Real(0.0, 0.95), "1e400", None),
        (us.Flag(), "TRUE", True),
        (us.Flag(), "false", False),
        (us.Flag(), "yes", None),
        (us.Word(), "tiny-gpt", "tiny-gpt"),
        (us.Word(), "\0folder", None),
        (us.Model(), "tiny-gpt", "tiny-gpt"),
        (us.Model(), "gpt-5", None),
        (us.Model(), "/etc", None),  # a checkpoint folder is the server's: never a link's
        (us.Model(), "\0folder", None),  # nor is the picker's "a checkpoint folder" choice
        (us.Word(), "a\nb", None),
        (us.Word(), "x" * (us.WORD_MAX + 1), None),
        (us.Word(("en", "zh")), "zh", "zh"),
        (us.Word(("en", "zh")), "fr", None),
        (us.Text(500), "The cat sat.", "The cat sat."),
        (us.Text(500), "x" * 501, None),
        (us.Text(20_000), "x" * 100_000, None),
        (us.Text(20_000), "中" * 500, None),  # 500 characters, 4,500 once URL-encoded
        (us.Text(20_000), "中" * 400, "中" * 400),
    ],
)
def test_a_url_value_is_parsed_clamped_or_dropped(kind, raw, value) -> None:
    assert kind.parse(raw) == value


@pytest.mark.parametrize(
    "kind, value",
    [(us.Whole(), 7), (us.Real(0.0, 1.0), 0.25), (us.Flag(), False), (us.Word(), "grid"), (us.Text(99), "a & b?")],
)
def test_a_value_written_reads_back_the_same(kind, value) -> None:
    assert kind.parse(kind.show(value)) == value


@pytest.mark.parametrize(
    "kind, value",
    [(us.Whole(), True), (us.Whole(), 2.5), (us.Flag(), 1), (us.Word(), None), (us.Text(10), "x" * 11)],
)
def test_a_value_the_url_cannot_hold_is_left_out(kind, value) -> None:
    assert kind.show(value) is None


def test_a_key_may_name_another_kept_key() -> None:
    row = us.Kept("mh_text_{mh_example}", us.Text(100))
    assert row.resolve({"mh_example": "example_prose"}) == "mh_text_example_prose"
    assert row.resolve({}) is None
    assert row.resolve({"mh_example": "a\0b"}) is None
    assert row.pattern().fullmatch("mh_text_example_code") and not row.pattern().fullmatch("mh_textual")


# ---- the table -----------------------------------------------------------------------------------------------------
def test_the_table_names_pages_of_the_app_and_keys_of_their_widgets() -> None:
    """A renamed widget key (or page) fails here instead of silently leaving the URL."""
    assert set(us.KEPT) <= set(PAGES)
    for page, rows in us.KEPT.items():
        source = (ROOT / "pages" / f"{page}.py").read_text(encoding="utf-8")
        literal, formatted = set(re.findall(r'"(\w+)"', source)), re.findall(r'f"(\w+)\{', source)
        for row in rows:
            if isinstance(row, us.Kept):
                key = row.key.split("{")[0]
                found = any(key.startswith(f) for f in formatted) or ("{" not in row.key and key in literal)
                assert found, f"{page}: no widget keyed {row.key}"
    assert us.kept("home") == (us.LANGUAGE,)
    assert us.LANGUAGE.kind.among == tuple(locales.LANGUAGES)


def _in_fragments(source: str) -> tuple[set[str], set[str]]:
    """The strings (an f-string: its text before the first field, then "{") and the declared sections laid out by
    ``ui.inputs(view.NAME, …)`` inside the page's fragments (``@st.fragment``, ``@ui.below_fold(…)``), and inside the
    page's functions they call (the atlas's head boxes are drawn by a helper its fragment calls)."""
    strings: set[str] = set()
    sections: set[str] = set()
    functions = {fn.name: fn for fn in ast.walk(ast.parse(source)) if isinstance(fn, ast.FunctionDef)}
    inside = [
        fn
        for fn in functions.values()
        if any(d == "st.fragment" or d.startswith("ui.below_fold") for d in map(ast.unparse, fn.decorator_list))
    ]
    seen: set[str] = set()
    while inside:
        fn = inside.pop()
        if fn.name in seen:
            continue
        seen.add(fn.name)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                inside.append(functions[node.func.id])
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                strings.add(f"{node.values[0].value}{{")
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "ui.inputs" and node.args:
                sections.add(ast.unparse(node.args[0]).split(".")[-1])
    return strings, sections


def test_a_row_is_marked_fragment_exactly_when_its_widget_is_drawn_in_a_fragment() -> None:
    """A fragment's rerun writes only the rows so marked (their widget's value is current there); a widget moved into
    or out of a fragment fails here until its row follows."""
    for page, rows in us.KEPT.items():
        strings, sections = _in_fragments((ROOT / "pages" / f"{page}.py").read_text(encoding="utf-8"))
        for row in rows:
            if isinstance(row, us.Declared):
                assert row.fragment == (row.name in sections), f"{page}: {row.name}"
                continue
            key = row.key.split("{")[0]
            inside = key in strings or any(s.endswith("{") and key.startswith(s[:-1]) for s in strings)
            assert row.fragment == inside, f"{page}: {row.key}"


def test_every_declared_row_is_a_section_of_its_page() -> None:
    for page, rows in us.KEPT.items():
        for row in rows:
            if isinstance(row, us.Declared):
                section = getattr(__import__(f"tx_explorer.views.{row.module}", fromlist=[row.name]), row.name)
                assert section.page == page
                assert [k.key for k in row.kept()] == [section.key(inp) for inp in section.inputs]


# ---- a session: restored, written, kept across pages ---------------------------------------------------------------
def test_a_link_opens_the_same_view(tmp_path) -> None:
    link = {"lang": "zh", "mh_example": "example_prose", "mh_repeat": "true", **TINY_HEAD}
    at = arrive(tmp_path, "multihead", link)
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == locales.text("common", "page_multihead", "zh")
    assert [shown(at, k) for k in ("mh_model", "mh_example", "mh_view", "mh_layer", "mh_head")] == [
        "tiny-gpt",
        "example_prose",
        "head",
        1,
        2,
    ]
    assert next(t for t in at.toggle if t.key == "mh_repeat").value is True
    text = locales.text("multihead", "example_prose_text", "zh")
    assert at.query_params == {**link, "mh_text_example_prose": text, "mh_hide": "false"}


def test_a_choice_reaches_the_url_and_a_reload_keeps_it(tmp_path) -> None:
    at = arrive(tmp_path, "multihead", TINY_HEAD)
    next(w for w in at.selectbox if w.key == "mh_head").set_value(3).run()
    assert at.query_params["mh_head"] == "3"
    again = arrive(tmp_path, "multihead", dict(at.query_params))  # a reload: a new session on the same URL
    assert (shown(again, "mh_layer"), shown(again, "mh_head")) == (1, 3)
    assert again.query_params == at.query_params


def test_the_widget_wins_over_the_url_it_wrote_and_back_restores(tmp_path, monkeypatch) -> None:
    """Within a session the URL is restored only when it says something new on the Back button's rerun (AppTest
    sends no Back: the run context's flag is what the browser's rerun carries)."""
    at = arrive(tmp_path, "multihead", TINY_HEAD)
    at.run()  # the URL as written: the widgets keep their values
    assert shown(at, "mh_head") == 2
    at.query_params["mh_head"] = "0"  # what Back brings: an earlier entry of the history
    monkeypatch.setattr(compat, "history_navigation", lambda: True)
    at.run()
    assert shown(at, "mh_head") == 0


def test_a_rerun_carrying_a_url_older_than_the_last_written_keeps_the_widget(tmp_path) -> None:
    """A switch flipped, then a tab clicked before the switch's run has written the URL: that click's rerun carries
    the URL from before the switch. Found in a browser on SmolLM2 ("Repeat my text" flipped back off, and its
    induction ranking never came); the URL may only win on Back or Forward."""
    at = arrive(tmp_path, "multihead", TINY_HEAD)
    at.toggle(key="mh_repeat").set_value(True).run()
    assert at.query_params["mh_repeat"] == "true"
    at.query_params["mh_repeat"] = "false"  # what the browser still showed when the tab was clicked
    at.run()
    assert at.toggle(key="mh_repeat").value is True
    assert at.query_params["mh_repeat"] == "true"  # and the URL is written anew


def test_the_language_survives_a_page_switch(tmp_path) -> None:
    """Streamlit's navigation drops the query string; the next page's run writes the language back."""
    at = arrive(tmp_path, "home", {"lang": "zh"})
    at.query_params.clear()
    at.switch_page(f"{ROOT}/pages/multihead.py").run()
    assert at.session_state["lang"] == "zh"
    assert at.query_params["lang"] == "zh"


def test_a_session_without_a_query_string_gets_the_defaults(tmp_path) -> None:
    """A class's sessions (harness/) arrive with no query string: the page is as before, its choices then written."""
    at = arrive(tmp_path, "multihead", {}, mh_model="tiny-gpt")
    assert not at.exception and not at.error
    assert at.session_state["lang"] == "en"
    assert at.query_params["lang"] == "en" and at.query_params["mh_view"] == "grid"
