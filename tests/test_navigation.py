"""The sidebar: every page in one click, grouped by the lecture's arc, headings in both languages."""

import ast
from pathlib import Path

from tests.conftest import assert_clean, open_page
from tx_explorer import locales

ROOT = Path(__file__).resolve().parent.parent
SOURCE = (ROOT / "app.py").read_text(encoding="utf-8")


def pages() -> list[tuple[str, str, str]]:
    for node in ast.parse(SOURCE).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES":
            return [tuple(elt.value for elt in row.elts) for row in node.value.elts]
    raise AssertionError("app.py has no PAGES list")


def test_every_page_file_is_listed_once():
    listed = [path for path, _, _ in pages()]
    assert sorted(listed) == sorted(f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py"))
    assert len(set(listed)) == len(listed)


def test_sections_are_contiguous_and_translated():
    order = [section for _, _, section in pages()]
    runs = [s for i, s in enumerate(order) if i == 0 or s != order[i - 1]]
    assert len(runs) == len(set(runs)), f"a section is split: {runs}"
    assert order[0] == "" and "inside" in order  # Home first, without a heading; "Inside the model" exists
    common = locales.table("common")
    for section in set(order) - {""}:
        entry = common[f"nav_{section}"]
        assert entry["en"].strip() and entry["zh"].strip() and entry["en"] != entry["zh"]


def test_lecture_order_puts_seq2seq_first_after_home():
    assert pages()[1][0] == "pages/seq2seq.py"  # §1 opens the lecture


def test_menu_never_folds():
    """Streamlit folds a sidebar menu of more than twelve pages after ten unless ``expanded=True``."""
    calls = [
        n
        for n in ast.walk(ast.parse(SOURCE))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "navigation"
    ]
    assert len(calls) == 1
    expanded = {kw.arg: kw.value for kw in calls[0].keywords}["expanded"]
    assert isinstance(expanded, ast.Constant) and expanded.value is True


def test_app_runs_in_chinese_with_sections():
    at = open_page("home")
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
