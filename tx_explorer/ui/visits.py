"""A session's first page run, admitted in order of arrival (:mod:`tx_explorer.admission`), with its place shown."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import streamlit as st

from tx_explorer import admission
from tx_explorer.ui.text import texts

POLL_S = 0.5  # how often a waiting visitor's place is redrawn; each redraw is where Streamlit can stop the run
DRAWN = "tx_first_run_done"  # session state: this session's first run has been let through


@contextlib.contextmanager
def first_visit() -> Iterator[None]:
    """Around the page's run (app.py): a session's first run waits for its turn when others' first runs hold every
    slot, showing "busy, you are n-th" at the top of the page meanwhile (redrawn as the line moves); later runs and
    an idle server go straight through. The place is given up when the run ends, is interrupted or fails."""
    if st.session_state.get(DRAWN):
        yield
        return
    ticket = admission.gate().enter()
    try:
        if not ticket.wait(0):
            T, slot = texts("common"), st.empty()
            while not ticket.wait(POLL_S):
                slot.info(T("busy_first_visit", n=ticket.ahead()), icon=":material/hourglass_top:")
            slot.empty()
        st.session_state[DRAWN] = True  # let through once: a rerun that interrupts this run does not queue again
        yield
    finally:
        ticket.leave()
