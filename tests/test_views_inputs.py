"""Declared sections (tx_explorer/views/inputs.py): their words are in the page's locale file, their declarations
are checked where they are written, and a section's call is its compute on the declared defaults."""

from __future__ import annotations

import pytest

from tx_explorer import locales
from tx_explorer.views import Panel
from tx_explorer.views.inputs import Choice, Number, Real, Section, Text, declared, label_key, option_key, panels

DECLARED = declared()


@pytest.mark.parametrize("section", DECLARED, ids=lambda s: s.prefix)
def test_a_declared_sections_words_are_in_its_locale_file_in_both_languages(section: Section) -> None:
    table = locales.table(section.page)
    keys = {label_key(inp) for inp in section.inputs} | {inp.help for inp in section.inputs if inp.help}
    keys |= {inp.placeholder for inp in section.inputs if isinstance(inp, Text) and inp.placeholder}
    keys |= {option_key(inp, o) for inp in section.inputs if isinstance(inp, Choice) for o in inp.options}
    missing = sorted(k for k in keys if not (k in table and table[k].get("en") and table[k].get("zh")))
    assert not missing, f"{section.page}.json lacks {missing}"


def test_widget_keys_are_unique_across_the_app() -> None:
    keys = [s.key(inp) for s in DECLARED for inp in s.inputs]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def test_a_declaration_is_checked_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="outside"):
        Number("layers", 1, 12, 0)
    with pytest.raises(ValueError, match="outside"):
        Real("eps", 0.0, 1.0, 2.0, 0.01)
    with pytest.raises(ValueError, match="not one of"):
        Choice("norm", ("layernorm", "rmsnorm"), "batchnorm")


def test_a_section_is_its_compute_on_the_declared_defaults() -> None:
    seen = {}
    section = Section("norms", "probe", (Number("n", 1, 9, 3), Text("x", "a", 10)), lambda **kw: seen.update(kw))
    section(lang="zh", n=5)
    assert seen == {"n": 5, "x": "a", "lang": "zh"}
    with pytest.raises(TypeError, match="no input named y"):
        section(y=1)


def test_panels_are_found_in_whatever_a_compute_returns() -> None:
    a, b = Panel("a", None), Panel("b", None)
    assert panels((a, "words", [b])) == [a, b] and panels(a) == [a] and panels("words") == []
