"""A declared section's inputs laid out as widgets (:mod:`tx_explorer.views.inputs`): one place turns a declaration
into Streamlit, so every page shows a number, a choice, a switch or a line of text the same way."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import streamlit as st

from tx_explorer.ui.text import lang as visitor_lang
from tx_explorer.views import Text as Texts
from tx_explorer.views import listed, texts
from tx_explorer.views.inputs import Choice, Input, Number, Real, Section, Switch, label_key, option_key


def inputs(section: Section, T: Texts, *, columns: int | Sequence[int] = 4) -> dict[str, Any]:
    """The section's widgets in declaration order, ``columns`` to a row (a count, or the columns' relative widths);
    their values by input name."""
    per_row = columns if isinstance(columns, int) else len(columns)
    values: dict[str, Any] = {}
    for start in range(0, len(section.inputs), per_row):
        for box, inp in zip(st.columns(columns), section.inputs[start : start + per_row]):
            values[inp.name] = _widget(box, inp, section.key(inp), T)
    return values


def _widget(box: Any, inp: Input, key: str, T: Texts) -> Any:
    label, help_ = T(label_key(inp)), T(inp.help) if inp.help else None
    if isinstance(inp, Number | Real):
        draw = box.slider if inp.widget == "slider" else box.number_input
        fmt = inp.format if isinstance(inp, Real) else None
        value = draw(label, inp.low, inp.high, inp.default, inp.step, fmt, key=key, help=help_)
        return int(value) if isinstance(inp, Number) else float(value)
    if isinstance(inp, Choice):
        index, shown = inp.options.index(inp.default), lambda o: T(option_key(inp, o))
        if inp.widget == "radio":
            return box.radio(label, inp.options, index, format_func=shown, key=key, help=help_, horizontal=True)
        return box.selectbox(label, inp.options, index, format_func=shown, key=key, help=help_)
    if isinstance(inp, Switch):
        return (box.toggle if inp.widget == "toggle" else box.checkbox)(label, inp.default, key=key, help=help_)
    placeholder = T(inp.placeholder) if inp.placeholder else None  # a Text: the last kind
    default = T(inp.localized) if inp.localized else inp.default
    return box.text_input(label, default, inp.max_chars, key=key, help=help_, placeholder=placeholder)


def multiselect(
    box: Any,
    label: str,
    options: Sequence[Any],
    default: Sequence[Any],
    *,
    key: str,
    format_func: Any,
    placeholder: str | None = None,
    **kwargs: Any,
) -> list[Any]:
    """``box.multiselect`` in the visitor's language to its last word: Streamlit writes its empty box's placeholder
    ("Choose options") and a "Select all" option in English, so the placeholder comes from the locale (``placeholder``,
    else common.json's) and there is no "Select all" (every option is one click). A language switch relabels the
    chips (:func:`~tx_explorer.ui.pickers.sidebar`)."""
    placeholder = placeholder or texts("common", visitor_lang())("choose_placeholder")
    return box.multiselect(
        label, options, default, format_func, key=key, placeholder=placeholder, select_all=False, **kwargs
    )


def select_or_none(
    box: Any, label: str, count: int, none: str, *, key: str, format_func: Any = str, **kwargs: Any
) -> int | None:
    """``box.selectbox`` of None (labelled ``none``: "mean of the heads", "every token") then 0 … count − 1; the
    widget holds -1 for None: the sidebar re-sends a plain value after a language switch so that the box relabels
    (:func:`~tx_explorer.ui.pickers.sidebar`), and None is not one it can send."""
    shown = lambda i: none if i < 0 else format_func(i)  # noqa: E731
    chosen = box.selectbox(label, [-1, *range(count)], format_func=shown, key=key, **kwargs)
    return None if chosen < 0 else chosen


# Streamlit writes its uploader's button ("Upload") and limits ("20MB per file • PNG, JPG") in English whatever the
# page's language, and takes no words for them. A style scoped to the widget's key hides those texts' glyphs and
# draws the locale's words in their place; the DOM keeps Streamlit's text (what a screen reader reads). A file the
# browser refuses (too large, another type) is a red chip whose tooltip said "File must be 20.0MB or smaller." in
# English: the tooltip is drawn in a portal outside the widget, so its style is the page's (one uploader a page).
_UPLOADER_STYLE = """<style>
.st-key-{key} [data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p,
.st-key-{key} [data-testid="stFileUploaderDropzoneInstructions"] span {{ font-size: 0; }}
.st-key-{key} [data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p::after
  {{ content: {button}; font-size: 0.875rem; }}
.st-key-{key} [data-testid="stFileUploaderDropzoneInstructions"] span::after
  {{ content: {limit}; font-size: 0.875rem; }}
[data-testid="stTooltipErrorContent"] {{ font-size: 0; }}
[data-testid="stTooltipErrorContent"]::after {{ content: {refused}; font-size: 0.875rem; }}
</style>"""


def uploader_words(types: Sequence[str], lang: str) -> tuple[str, str, str]:
    """The uploader's button, limits and refusal of a file in ``lang``: the size Streamlit enforces
    (``server.maxUploadSize``) and the file types as Streamlit lists them (upper case, JPEG folded into JPG)."""
    T = texts("common", lang)
    shown = list(dict.fromkeys("JPG" if t.upper() == "JPEG" else t.upper() for t in types))
    mb = st.get_option("server.maxUploadSize")
    return (
        T("upload_button"),
        T("upload_limit", mb=mb, types=listed(shown, lang)),
        T("upload_refused", mb=mb, types=listed(shown, lang, "or")),
    )


def file_uploader(label: str, *, types: Sequence[str], key: str, help: str | None = None) -> Any:
    """``st.file_uploader`` whose own words are in the visitor's language (see :data:`_UPLOADER_STYLE`)."""
    words = (json.dumps(w, ensure_ascii=False) for w in uploader_words(types, visitor_lang()))  # CSS strings
    st.html(_UPLOADER_STYLE.format(key=key, **dict(zip(("button", "limit", "refused"), words))))  # no room taken
    return st.file_uploader(label, type=list(types), key=key, help=help)
