"""A page's sections: a header with its intro and formulas, sections opened on demand, when a page's run stops."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st


def section(T: Callable[..., str], name: str, *formulas: str, intro: bool = True, level: str = "header") -> None:
    """A page section's start: the header ``T(f"{name}_header")``, its intro ``T(f"{name}_intro")``, formulas."""
    (st.subheader if level == "subheader" else st.header)(T(f"{name}_header"))
    if intro:
        st.markdown(T(f"{name}_intro"))
    for formula in formulas:
        st.latex(formula)


OPEN_KEY = "_open_"  # in the key of every section opened on demand (``<page>_open_<section>``)
_DRAWN = "lazy_drawn_"  # + key, session state: the section's last run drew it open (True) or closed (False)


def lazy_section(T: Callable[..., str], name: str, *formulas: str, key: str, intro: bool = True) -> Any | None:
    """A section that opens on demand: an expander labelled ``T(f"{name}_header")``; ``key`` holds
    :data:`OPEN_KEY`.

    Returns its container (intro and formulas drawn) while open, else None: a closed section computes and sends
    nothing. Inside an ``st.fragment``, opening or closing it reruns that fragment only."""
    if OPEN_KEY not in key:
        raise ValueError(f"a section opened on demand needs {OPEN_KEY!r} in its key, not {key!r}")
    keep_open(key)  # the label changes with the language: stay open (or closed) across the switch
    box = st.expander(T(f"{name}_header"), key=key, on_change="rerun")  # closed on a first visit
    st.session_state[_DRAWN + key] = box.open
    if not box.open:
        return None
    with box:
        if intro:
            st.markdown(T(f"{name}_intro"))
        for formula in formulas:
            st.latex(formula)
    return box


def draw_opened_elsewhere() -> None:
    """Called in the run that another fragment's request started: a section opened in the same instant may have
    had its opening carried by that request (Streamlit's page folds two changes made together into one rerun,
    scoped to one fragment), so the browser shows it open while its own fragment never ran. Such a section is
    open in the session's state yet was last drawn closed: the page runs again, once, and draws it."""
    for key, value in list(st.session_state.items()):
        if (
            OPEN_KEY in key
            and not key.startswith(_DRAWN)
            and value is True
            and st.session_state.get(_DRAWN + key) is False
        ):
            st.session_state[_DRAWN + key] = None  # asked for once: no second rerun if this one cannot draw it
            st.rerun()


def keep_open(*keys: str) -> None:
    """Keep lazy sections open through runs that do not draw them (e.g. after a blank text): Streamlit forgets
    the state of a widget or expander left out of a run unless the script writes it back."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def keep_inputs(views: Mapping[str, str], shown: str) -> None:
    """Keep the inputs of the views not shown in this run (``views``: view → its widget keys, space-separated; a
    key ending in "_" stands for every key it begins): without this, text typed in one view is gone after a look
    at another, since Streamlit forgets a widget left out of a run."""

    def among(key: str, names: str) -> bool:
        return any(key == n or (n.endswith("_") and key.startswith(n)) for n in names.split())

    every = " ".join(views.values())
    keep_open(*(k for k in st.session_state if among(k, every) and not among(k, views[shown])))


def keep_within(key: str, low: int, high: int) -> None:
    """Keep widget ``key``'s value, moved into [low, high] where it fell outside: Streamlit makes a slider whose
    bounds changed anew, at its default ("Generated token" went back to 1 when "New tokens" went from 64 to 5)."""
    if key in st.session_state:
        st.session_state[key] = min(max(st.session_state[key], low), high)


def stop_unless(name: str | None, text: str, empty: str) -> None:
    """End the page's run here while no model is chosen (the picker said why) or the text is blank (``empty``)."""
    if name is None:
        st.stop()
    if not text.strip():
        st.warning(empty)
        st.stop()


def optional(load: Callable[[], Any], error: type[Exception], message: Callable[[Exception], str]) -> Any:
    """``load()``, or None after a warning ``message(exc)`` when it raises ``error`` (e.g. a bundle not built)."""
    try:
        return load()
    except error as exc:
        st.warning(message(exc))
        return None
