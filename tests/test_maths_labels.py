"""Widget labels and their help write their symbols as maths: Streamlit renders their $…$ with KaTeX, as the
prose's, so a slider reads "Model width $D$" beside prose that says $D$, not "Model width D" (and not "$N_K$" beside a
plain "D" on the same page, as the operator page had). Every label and help of every page in both languages: those of
the views' input sections and those the pages pass to a widget themselves."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import tx_explorer.views
from tx_explorer import locales
from tx_explorer.views import inputs

ROOT = Path(__file__).resolve().parents[1]
WIDGETS = {
    "slider", "number_input", "toggle", "checkbox", "radio", "selectbox", "text_input", "text_area", "select_slider",
    "multiselect", "button", "file_uploader",
}  # fmt: skip
# A letter standing alone outside $…$ and {fields}: a symbol (K/V, a pair of names, is a term of its own)
RAW = re.compile(r"(?<![A-Za-z0-9_/\\])[A-Za-z](?![A-Za-z0-9_/])")
NAMES = {  # single letters that are not symbols, and why
    ("atlas", "upload"): "the article in 'A plain-text file'",
    ("norms", "budget"): "the unit in 'Time budget (s)'",
    ("self_attention", "sentence_a"): "sentence A, a name",
    ("self_attention", "sentence_b"): "sentence B, a name",
}


def _texts_aliases(tree: ast.Module) -> dict[str, str]:
    """``T = ui.texts("page")`` and ``T, F = ui.texts("a"), ui.texts("b")`` at a page's top: name → locale page."""
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        target, value = node.targets[0], node.value
        pairs = zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) else []
        for name, call in [*pairs, (target, value)]:
            if isinstance(name, ast.Name) and isinstance(call, ast.Call) and ast.unparse(call.func) == "ui.texts":
                found[name.id] = ast.literal_eval(call.args[0])
    return found


def page_helps() -> set[tuple[str, str]]:
    """(locale page, key) of each ``help=T("key")`` in pages/."""
    found = set()
    for path in sorted((ROOT / "pages").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _texts_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "help" and isinstance(call := node.value, ast.Call):
                if getattr(call.func, "id", None) in aliases and call.args and isinstance(call.args[0], ast.Constant):
                    found.add((aliases[call.func.id], call.args[0].value))
    return found


def page_labels() -> tuple[set[tuple[str, str]], set[str]]:
    """The first argument of each widget call in pages/: (locale page, key) where written ``st.slider(T("key"), …)``,
    and the labels written as they are, the same in both languages (``st.slider("$N_Q$", …)``)."""
    keys, literal = set(), set()
    for path in sorted((ROOT / "pages").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _texts_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in WIDGETS and node.args:
                label = node.args[0]
                if isinstance(label, ast.Constant):
                    literal.add(label.value)
                elif isinstance(label, ast.Call) and getattr(label.func, "id", None) in aliases and label.args:
                    if isinstance(key := label.args[0], ast.Constant):  # T(f"class_{k}") is an option's, not a label
                        keys.add((aliases[label.func.id], key.value))
    return keys, literal


def section_inputs() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(locale page, key) of every input's label, and of every help, of the views' sections (drawn by ui.inputs)."""
    labels, helps = set(), set()
    for info in pkgutil.iter_modules(tx_explorer.views.__path__):
        module = importlib.import_module(f"tx_explorer.views.{info.name}")
        for section in (v for v in vars(module).values() if isinstance(v, inputs.Section)):
            labels |= {(section.page, inputs.label_key(inp)) for inp in section.inputs}
            helps |= {(section.page, inp.help) for inp in section.inputs if inp.help}
    return labels, helps


def raw_letters(label: str) -> list[str]:
    """The letters standing alone in ``label`` outside its maths, its {fields} and its possessives ("model's")."""
    return RAW.findall(re.sub(r"['’]s\b|\{[^{}]*\}", " ", re.sub(r"\$[^$]*\$", " ", label)))


PAGE_KEYS, LITERAL = page_labels()
SECTION_LABELS, SECTION_HELPS = section_inputs()
LABELS = sorted(PAGE_KEYS | SECTION_LABELS)
HELPS = sorted(page_helps() | SECTION_HELPS)
WORDS = re.compile(r"\b(?:e\.g\.|i\.e\.|[aAI])(?![A-Za-z0-9_/])")  # English words of one letter, and e.g.


def test_the_labels_are_found():
    """The parser finds the labels of both kinds, including the operator's, drawn through a second alias."""
    assert len(LABELS) > 100
    assert {("cost_of_attention", "d"), ("mixers", "dim"), ("operator", "scale_toggle"), ("norms", "offset")} <= set(
        LABELS
    )
    assert raw_letters("Model width D, $N_K$, K/V heads, {n} keys") == ["D"]
    assert {"$N_Q$", "$D$"} <= LITERAL


@pytest.mark.parametrize("label", sorted(LITERAL))
def test_a_label_written_in_the_page_writes_its_symbols_as_maths(label):
    assert raw_letters(label) == [], label


@pytest.mark.parametrize(("page", "key"), [label for label in LABELS if label not in NAMES])
def test_a_widget_label_writes_its_symbols_as_maths(page, key):
    for lang in ("en", "zh"):
        label = locales.table(page)[key][lang]
        assert raw_letters(label) == [], f"{page}.{key} [{lang}]: {label}"
        assert label.count("$") % 2 == 0, label


def test_the_helps_are_found():
    assert {("atlas", "window_help"), ("moe", "top_k_help"), ("operator", "help_nk")} <= set(HELPS)


@pytest.mark.parametrize(("page", "key"), HELPS)
def test_a_widget_help_writes_its_symbols_as_maths(page, key):
    for lang in ("en", "zh"):
        text = locales.table(page)[key][lang]
        assert raw_letters(WORDS.sub(" ", re.sub(r"`[^`]*`", " ", text))) == [], f"{page}.{key} [{lang}]: {text}"


# The same quantity asked for in two sections of one page, where the section says which
SHARED = {("cost_of_attention", "h", "heads"), ("norms", "metric", "quantity")}


def test_two_widgets_of_a_page_never_share_a_label():
    """Self-attention had two sliders labelled "Positions" (the encoding, and how many positions to draw): a reader,
    a screen reader and a test looking a widget up by its label cannot tell them apart."""
    by_page: dict[str, list[str]] = {}
    for page, key in LABELS:
        by_page.setdefault(page, []).append(key)
    for page, keys in by_page.items():
        for lang in ("en", "zh"):
            seen: dict[str, str] = {}
            for key in sorted(keys):
                label = locales.table(page)[key][lang]
                if label in seen and (page, seen[label], key) not in SHARED:
                    raise AssertionError(f"{page}: {seen[label]} and {key} are both labelled {label!r} [{lang}]")
                seen.setdefault(label, key)
