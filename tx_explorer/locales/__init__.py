"""Explanatory text in English and 中文: one JSON file per page, ``{"key": {"en": "…", "zh": "…"}}``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path

LANGUAGES = {"en": "English", "zh": "中文"}
_DIR = Path(__file__).parent


@cache
def table(page: str) -> dict[str, dict[str, str]]:
    """The strings of one page (``locales/<page>.json``)."""
    return json.loads((_DIR / f"{page}.json").read_text(encoding="utf-8"))


def text(page: str, key: str, lang: str = "en", **fmt: object) -> str:
    """One string in ``lang`` (falling back to English), formatted with ``fmt``."""
    entry = table(page)[key]
    s = entry.get(lang) or entry["en"]
    return s.format(**fmt) if fmt else s


def words(page: str, defaults: Mapping[str, str], lang: str = "en") -> dict[str, str]:
    """A figure module's words (its English ``WORDS``) in ``lang``: key ``k`` is ``fig_<k>`` in ``<page>.json``."""
    return {key: text(page, f"fig_{key}", lang) for key in defaults}
