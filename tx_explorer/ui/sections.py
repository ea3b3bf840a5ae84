"""A page's sections: a header with its intro and formulas, sections opened on demand, when a page's run stops."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import streamlit as st

OPEN_KEY = "_open_"  # in every key of a section opened on demand: how the page finds their boxes
LOST_AFTER_MS = 3000  # an open section still empty after the app has been idle this long had its run lost


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
    nothing. Inside an ``st.fragment``, opening or closing it reruns that fragment only. ``key`` holds
    :data:`OPEN_KEY` (``<page>_open_<section>``), so :func:`refill_lost_sections` finds the box."""
    if OPEN_KEY not in key:
        raise ValueError(f"a section opened on demand needs {OPEN_KEY!r} in its key, not {key!r}")
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


@functools.cache
def _refill_watch() -> Callable[..., Any]:
    """The watcher of open sections left empty (``lazy_sections.js``), registered once per process."""
    js = (Path(__file__).parent / "lazy_sections.js").read_text(encoding="utf-8")
    return st.components.v2.component("tx_refill_lost_sections", html="", js=js)


def refill_lost_sections() -> None:
    """Once per page, in the sidebar: a section opened on demand that stays open and empty while the app is idle
    (its run was lost under a burst of visitors) makes the page run again, until it is filled: the visitor never
    has to close and reopen it. The rerun is the point, so its callback does nothing."""
    with st.sidebar:
        _refill_watch()(
            key="refill_lost_sections",
            data={"boxes": f'[class*="{OPEN_KEY}"] details', "idle_ms": LOST_AFTER_MS},
            default={"asked": 0},
            on_asked_change=lambda: None,
        )


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
