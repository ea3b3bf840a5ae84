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


def lazy_section(T: Callable[..., str], name: str, *formulas: str, key: str, intro: bool = True) -> Any | None:
    """A section that opens on demand: an expander labelled ``T(f"{name}_header")``.

    Returns its container (intro and formulas drawn) while open, else None: a closed section computes and sends
    nothing. Inside an ``st.fragment``, opening or closing it reruns that fragment only."""
    keep_open(key)  # the label changes with the language: stay open (or closed) across the switch
    box = st.expander(T(f"{name}_header"), key=key, on_change="rerun")  # closed on a first visit
    if not box.open:
        return None
    with box:
        if intro:
            st.markdown(T(f"{name}_intro"))
        for formula in formulas:
            st.latex(formula)
    return box


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
