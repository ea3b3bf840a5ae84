"""The notebook API: every page's figures without Streamlit, in English or 中文, the same as the pages draw."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tx_explorer import explore
from tx_explorer.views import operator as v_op
from tx_explorer.views.inputs import Section, declared, panels

ROOT = Path(__file__).resolve().parents[1]
FAST = {  # every public function on small inputs; minilm-l6 and GPT-2 are not bundled, tiny-gpt is
    "operator": {},
    "self_attention": {"layer": {"n": 4, "dim": 8, "heads": 2}},
    "positions": {"n": 16, "dim": 8},
    "masks": {},
    "heads": {"text": "The cat sat on the mat."},
    "inspector": {"text": "The cat sat."},
    "next_token": {"new": 3},
    "moe": {},
    "seq2seq": {},
    "vit": {},
    "norms": {},
    "cost": {},
    "sizes": {},
    "position_lab": {"schemes": ("rotary", "alibi")},
    "kv_cache": {"new_tokens": 3},
    "block_roles": {},
    "circuit": {},
    "flash_io": {},
    "flow": {"model": "tiny-llama", "text": "The cat sat on the mat."},
    "atlas": {"model": "tiny-llama", "tokens": 64},
}


def test_the_pages_functions_are_public():
    assert set(FAST) <= set(explore.__all__)  # the head-science functions are tested with their page


@pytest.mark.parametrize("name", sorted(FAST))
def test_each_function_returns_named_plotly_figures(name, one_thread):
    figures = getattr(explore, name)(**FAST[name])
    assert isinstance(figures, explore.Figures) and len(figures) >= 1
    assert all(type(f).__name__ == "Figure" and f.data for f in figures.values()), name


def test_every_page_has_a_function_that_draws_its_declared_sections():
    """A page's first declared section reaches the notebook with no edit in explore.py: the page's function already
    draws every section declared for its page (the home page has none)."""
    import inspect

    from harness.browser import app_pages

    for page in (Path(p).stem for p in app_pages()):
        if page == "home":
            continue
        source = inspect.getsource(getattr(explore, explore.PAGE_FUNCTIONS.get(page, page)))
        assert f'_declared("{page}"' in source or f'_sections("{page}"' in source, page


@functools.cache
def _drawn(name: str) -> frozenset[str]:
    return frozenset(getattr(explore, name)(**FAST[name]))


@pytest.mark.parametrize("section", declared(), ids=lambda s: s.prefix)
def test_the_notebook_draws_every_declared_section(section: Section, one_thread):
    """A section declared in a view (views/inputs.py) is drawn by its page's function with no edit here."""
    assert {p.key for p in panels(section())} <= _drawn(explore.PAGE_FUNCTIONS.get(section.page, section.page))


def test_the_language_comes_from_the_page_locale_files():
    en, zh = explore.operator(lang="en"), explore.operator(lang="zh")
    assert list(en) == list(zh)
    title = lambda f: f.layout.title.text  # noqa: E731
    assert title(en["curve_entropy"]) == v_op.texts("operator", "en")("curve_entropy")
    assert title(zh["curve_entropy"]) == v_op.texts("operator", "zh")("curve_entropy") != title(en["curve_entropy"])
    with pytest.raises(ValueError, match="language"):
        explore.operator(lang="fr")


def test_the_figures_are_the_pages_numbers():
    """The detail map is the model's own head: the analysed map, each row summing to 1."""
    import numpy as np

    from tx_explorer import models
    from tx_explorer.analysis import heads

    text = "one two three four"
    detail = explore.heads("tiny-gpt", text, layer=1, head=2)["mh_detail"]
    z = np.array(detail.data[0].z, dtype=float)
    np.testing.assert_allclose(z, heads.analyse(models.load_model("tiny-gpt"), text).maps[1, 2], atol=1e-6)
    np.testing.assert_allclose(z.sum(axis=-1), 1.0, atol=1e-5)


def test_save_writes_one_offline_html_file(tmp_path):
    path = explore.masks(kind="prefix_lm", prefix=2).save(tmp_path / "sub" / "masks.html", title="<masks>")
    html = path.read_text(encoding="utf-8")
    assert html.count("plotly.js v") == 1 and html.count("Plotly.newPlot") == 2
    assert "<title>&lt;masks&gt;</title>" in html


def test_every_string_key_the_views_use_exists_in_both_languages():
    """The views hold the pages' words now: each literal ``T("key")`` is in the page's locale file, en and zh."""
    import re

    from tx_explorer import locales

    for path in sorted((ROOT / "tx_explorer" / "views").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        page = re.search(r'^PAGE = "([a-z_]+)"', source, re.M)
        if page is None:
            continue
        table = locales.table(page.group(1))
        used = set(re.findall(r'\bT\("([a-z0-9_]+)"', source))
        assert used <= set(table), (path.name, sorted(used - set(table)))
        assert all(table[k].get("en") and table[k].get("zh") for k in used), path.name


def test_the_circuit_compares_several_models_as_its_page_does(one_thread):
    figs = explore.circuit(compare=["tiny-gpt", "tiny-llama"])
    assert [t.name for t in figs["circuit_compare"].data] == ["induction-2l", "tiny-gpt", "tiny-llama"]
    assert [t.name for t in explore.circuit(compare="tiny-gpt")["circuit_compare"].data] == ["induction-2l", "tiny-gpt"]
