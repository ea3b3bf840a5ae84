"""Errors a user can fix by changing an input, in both languages.

An :class:`InputError` is a ``ValueError`` whose message lives in ``locales/errors.json`` under a key, with its
parameters: ``str(exc)`` is the English message (the Python API reads as before), and the app shows
``exc.message(lang)`` in the language of the interface.
"""

from __future__ import annotations

from typing import Literal

from tx_explorer import locales


class InputError(ValueError):
    """A bad input, named by a key of ``locales/errors.json`` and the values its message quotes."""

    def __init__(self, key: str, **params: object) -> None:
        self.key, self.params = key, params
        super().__init__(self.message("en"))

    def __reduce__(self) -> tuple:  # pickled by key and parameters (caches, worker processes)
        return _rebuild, (type(self), self.key, self.params)

    def message(self, lang: str) -> str:
        """The message in ``lang`` ("en" or "zh"). A value that is an ``InputError`` itself (a checkpoint's reason)
        is told in the same language: a refusal and its reason never come in two."""
        told = {k: v.message(lang) if isinstance(v, InputError) else v for k, v in self.params.items()}
        return locales.text("errors", self.key, lang, **told)


def _rebuild(cls: type[InputError], key: str, params: dict[str, object]) -> InputError:
    return cls(key, **params)


def positive_int(name: str, value: object, *, key: str = "positive_integer") -> int:
    """``value`` as an ``int`` when it is a whole number ≥ 1, else an :class:`InputError`.

    The message ``key`` quotes ``name`` and ``value``; booleans are refused (``True`` is no size).
    """
    try:
        ok = not isinstance(value, bool) and int(value) == value and value >= 1
    except (TypeError, ValueError, OverflowError):  # None, text, nan, inf
        ok = False
    if not ok:
        raise InputError(key, name=name, value=value)
    return int(value)


def checked_words(words: list[str], *, limit: int, max_chars: int, unit: Literal["token", "word"]) -> list[str]:
    """``words`` when there are 1 to ``limit`` of them, none longer than ``max_chars``; else an :class:`InputError`
    that counts in ``unit`` s (``no_tokens``, ``too_many_tokens``, ``token_too_long`` and the same for words)."""
    if not words:
        raise InputError(f"no_{unit}s")
    if len(words) > limit:
        raise InputError(f"too_many_{unit}s", count=len(words), limit=limit)
    if max(len(w) for w in words) > max_chars:
        raise InputError(f"{unit}_too_long", limit=max_chars)
    return words
