"""Review of the multi-head, language-model, KV-cache and masks pages in 中文 and English with Gemma 3 270M (and
SmolLM2): the symbols the prose names are written as maths ($…$), in both languages."""

import re

import pytest

from tx_explorer.views import texts

LANGS = ("en", "zh")


def _outside_maths(markdown: str) -> str:
    """The prose of ``markdown`` with every inline $…$ formula taken out."""
    return re.sub(r"\$[^$]*\$", " ", markdown)


def _raw_symbols(markdown: str, symbols: str) -> list[str]:
    """The single-letter ``symbols`` that stand alone in the prose, outside $…$ (a student sees a plain letter)."""
    return re.findall(rf"(?<![\w\\])[{symbols}](?!\w)", _outside_maths(markdown))


@pytest.mark.parametrize("lang", LANGS)
def test_multihead_metrics_intro_writes_the_entropy_bound_as_maths(lang):
    intro = texts("multihead", lang)("metrics_intro")
    assert r"$\ln n$" in intro and "ln n" not in _outside_maths(intro), intro
    assert _raw_symbols(intro, "n") == [], intro


@pytest.mark.parametrize(
    ("page", "key", "symbols"),
    [
        ("language_model", "intro", "t"),
        ("language_model", "gen_intro", "Tt"),  # not k: "top-k" is a name
        ("masks", "intro", "Mij"),
        ("masks", "why_causal", "i"),
        ("kv_cache", "sharing_note", "W"),
    ],
)
@pytest.mark.parametrize("lang", LANGS)
def test_the_prose_writes_its_symbols_as_maths(page, key, symbols, lang):
    """Letters beside $M_{ij}$ and $D_h$ in the same sentences: "position t sees only tokens 1…t", "divides the
    logits by T", "query i may attend to key j", "caps it at W rows" (the KV bytes intro: tests/test_kv_cache.py)."""
    text = texts(page, lang)(key)
    assert _raw_symbols(text, symbols) == [], text
