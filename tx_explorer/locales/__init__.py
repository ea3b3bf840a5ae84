"""Explanatory text in English and 中文: one JSON file per page, ``{"key": {"en": "…", "zh": "…"}}``."""

from __future__ import annotations

import json
import re
import string
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
    """One string in ``lang`` (falling back to English), formatted with ``fmt`` (in 中文 spaced, see :func:`spaced`)."""
    entry = table(page)[key]
    s = entry.get(lang) or entry["en"]
    if not fmt:
        return s
    return spaced(s, fmt) if lang == "zh" and lang in entry else s.format(**fmt)


_CJK = re.compile(r"[\u4e00-\u9fff]")  # Chinese characters (punctuation takes no space beside Latin)
_LATIN = re.compile(r"[A-Za-z0-9]")


def spaced(template: str, fmt: Mapping[str, object]) -> str:
    """``template.format(**fmt)``, with a space where a value that starts or ends with a Latin letter or a digit meets
    a Chinese character of the template, as the prose writes 第 0 层 and "token 头": a name or a number filled in
    ("只有{schemes}学会了" with ALiBi) ran into the characters beside it. Spaces typed in the template stay as they
    are, and a value beside another value or beside punctuation gains none."""
    parts = list(_FORMATTER.parse(template))
    out = []
    for i, (literal, field, spec, conversion) in enumerate(parts):
        out.append(literal)
        if field is None:
            continue
        value = _FORMATTER.format_field(
            _FORMATTER.convert_field(_FORMATTER.get_field(field, (), fmt)[0], conversion), spec or ""
        )
        after = parts[i + 1][0][:1] if i + 1 < len(parts) else ""
        if literal and _CJK.fullmatch(literal[-1]) and _LATIN.fullmatch(value[:1]):
            value = " " + value
        if after and _CJK.fullmatch(after) and _LATIN.fullmatch(value[-1:]):
            value += " "
        out.append(value)
    return "".join(out)


_FORMATTER = string.Formatter()


def words(page: str, defaults: Mapping[str, str], lang: str = "en") -> dict[str, str]:
    """A figure module's words (its English ``WORDS``) in ``lang``: key ``k`` is ``fig_<k>`` in ``<page>.json``."""
    return {key: text(page, f"fig_{key}", lang) for key in defaults}
