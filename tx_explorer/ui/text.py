"""The visitor's language and the page's strings in it; errors shown as messages in that language."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import streamlit as st
import torch

from tx_explorer import locales, models, views
from tx_explorer.errors import InputError
from tx_explorer.ui.url_state import write_after_fragment

log = logging.getLogger("tx_explorer")


def lang() -> str:
    """The language chosen in the sidebar ("en" or "zh")."""
    return st.session_state.get("lang", "en")


def texts(page: str) -> views.Text:
    """``T = texts("operator"); T("intro")`` gives the page's string in the chosen language (:func:`views.texts`)."""
    return views.texts(page, lang())


def page_title(page: str) -> str:
    """The one name of ``pages/<page>.py`` (sidebar, its own title, the Home map): ``page_<page>`` in common.json."""
    return texts("common")(f"page_{page}")


def model_description(name: str) -> str:
    """A registered model's description in the chosen language (``model_<name>`` in common.json, else English)."""
    key = f"model_{name}"
    return texts("common")(key) if key in locales.table("common") else models.REGISTRY[name].description


_MARKDOWN_SPECIALS = "\\`*_{}[]<>#|~$"  # what Markdown, HTML or LaTeX would act on mid-line


def escape_markdown(text: str) -> str:
    """Show ``text`` literally inside Markdown elements (error messages may quote user input)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in text)


def error_text(exc: BaseException) -> str:
    """An exception's message for the user: an :class:`InputError` in the chosen language, others as they are."""
    return exc.message(lang()) if isinstance(exc, InputError) else str(exc)


@contextlib.contextmanager
def friendly_errors() -> Iterator[None]:
    """Turn exceptions inside a page section into a clear message; the app keeps serving.

    ``ValueError``/``TypeError``/``LookupError`` are input problems and their message is shown (in the chosen
    language for an :class:`~tx_explorer.errors.InputError`); anything else is logged server-side with its
    traceback and summarised for the user. On leaving it, a fragment's rerun writes the page's choices to the URL
    (:func:`~tx_explorer.ui.url_state.write_after_fragment`).
    """
    T = texts("common")
    try:
        yield
    except (ValueError, TypeError, LookupError) as exc:
        st.error(T("error_input", message=escape_markdown(error_text(exc))))
    except torch.OutOfMemoryError:
        log.exception("out of memory")
        st.error(T("error_internal", kind=T("out_of_memory")))
    except Exception as exc:
        log.exception("page error")
        st.error(T("error_internal", kind=type(exc).__name__))
    # Every section runs its inputs inside this block, fragments too, and a fragment's rerun does not pass through
    # app.py, which writes the URL after a full run: here is where a head chosen in a fragment reaches the URL.
    write_after_fragment()
