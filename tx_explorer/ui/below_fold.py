"""Sections below the first screen, drawn when the visitor scrolls near them (a first visit does not pay for them).

A section not drawn yet is a box (``below_fold.css``) watched by an IntersectionObserver (``below_fold.js``) that
reports while any of it is within ``REACH`` below the visible part of the page. Reports go out one at a time
app-wide, the next only once the app has run: two boxes reporting in the same tick would share one message with one
fragment id, and a report during a fragment's run interrupts that run, so the section it was drawing would stay a
box. A box still shown after the app has run (a busy server, an interrupted run, a report lost in a run) reports
again, ever less often, also once the visitor has scrolled on past it: a section reached is drawn.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from tx_explorer.ui.sections import draw_opened_elsewhere
from tx_explorer.ui.text import texts

DRAW_ALL = "TX_EXPLORER_DRAW_ALL"  # set to "1": every section is drawn at once (AppTests cannot scroll)
REACH = "10%"  # of the window's height: a section this close below the visible part is drawn already

_HERE = Path(__file__).parent
_PLACEHOLDER_CSS = (_HERE / "below_fold.css").read_text(encoding="utf-8")
_SENTINEL_JS = (_HERE / "below_fold.js").read_text(encoding="utf-8")


@functools.cache
def _below_fold_box() -> Callable[..., Any]:
    """The placeholder-and-sentinel component, registered once per process."""
    return st.components.v2.component(
        "tx_below_fold", html='<div class="box"></div>', css=_PLACEHOLDER_CSS, js=_SENTINEL_JS
    )


def _reached(key: str) -> str:
    return f"reached_{key}"


def below_fold(key: str, *, height: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Use instead of ``@st.fragment`` on a page section below the first screen: a first visit does not pay for it.

    The section is a fragment. Until the visitor scrolls near it, it computes nothing and shows a box of about
    its usual ``height`` (px, so the page does not jump) saying so; once the box comes into view the section runs,
    and stays drawn for the rest of the session (unless :func:`fold_again` folds it). ``key``: unique across the
    app (``<page>_<section>``). With ``TX_EXPLORER_DRAW_ALL=1`` every section is drawn at once."""
    reached, reporting = _reached(key), f"reporting_{key}"

    def mark() -> None:
        st.session_state[reached] = True  # plain state, not the sentinel's: a widget not drawn is forgotten
        st.session_state[reporting] = True  # this run is the report's

    def decorate(section: Callable[..., None]) -> Callable[..., None]:
        @st.fragment
        @functools.wraps(section)
        def deferred(*args: Any, **kwargs: Any) -> None:
            if st.session_state.pop(reporting, False):
                draw_opened_elsewhere()  # a click made as this box reported may have travelled in its request
            if st.session_state.get(reached) or os.environ.get(DRAW_ALL) == "1":
                section(*args, **kwargs)
                return
            caption = texts("common")("below_fold")
            data = {"margin": REACH, "height": height, "caption": caption}
            _below_fold_box()(key=f"below_fold_{key}", data=data, default={"reached": 0}, on_reached_change=mark)

        return deferred

    return decorate


def fold_again(*keys: str, shown: object) -> None:
    """Sections ``keys`` (of :func:`below_fold`) become boxes again, drawn when next scrolled near, whenever
    ``shown`` differs from the last run's: for sections of a view picked among several, so that a view shown again
    draws what is near the screen rather than every section the visitor once scrolled to."""
    last = f"fold_shown_{keys[0]}"
    if st.session_state.get(last, shown) != shown:
        for key in keys:
            st.session_state.pop(_reached(key), None)
    st.session_state[last] = shown
