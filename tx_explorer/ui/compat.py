"""Every use of Streamlit's private API, in one place, for the one Streamlit version it was written against.

Streamlit changes its internals without notice; a page that pokes them elsewhere breaks silently on an upgrade.
Here each poke is one function, and importing this module on another Streamlit than ``WRITTEN_FOR`` fails at
once with what to check. ``ui/__init__`` imports it first, so that its import leaves Streamlit's legacy multipage
mode (:func:`leave_legacy_multipage_mode`) before anything else of the ui package loads.
"""

from __future__ import annotations

import sys
import threading

import streamlit as st
from streamlit import delta_generator
from streamlit.runtime import Runtime, RuntimeState
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import SCRIPT_RUN_CONTEXT_ATTR_NAME
from streamlit.web import cli

WRITTEN_FOR = "1.67."  # the release series whose internals every function below was read against


def check_version(version: str = st.__version__) -> None:
    """Raise unless ``version`` is the Streamlit release series this module was written for."""
    if not version.startswith(WRITTEN_FOR):
        raise RuntimeError(
            f"tx_explorer.ui.compat was written for Streamlit {WRITTEN_FOR}x and found {version}: check each "
            "function in it against the new release (PagesManager.uses_pages_directory and intended_page_*, a script "
            "thread's run context and its script_requests.request_rerun(RerunData), "
            "delta_generator._use_warning_has_been_displayed, Runtime.state, streamlit.web.cli.main), then update "
            "WRITTEN_FOR and requirements.txt together"
        )


check_version()


def leave_legacy_multipage_mode() -> int:
    """Make sure every session runs through app.py's ``st.navigation``; the number of runs asked to start again.

    With a ``pages/`` folder beside app.py, a plain ``streamlit run app.py`` starts in Streamlit's legacy multipage
    mode (``serve.py`` leaves it before the server starts, :func:`skip_first_run_detours`): every run that begins
    before app.py first calls ``st.navigation`` runs the page's file alone, without app.py's sidebar, page set-up
    or place in line, and a class arriving at once starts all its first runs that way, before any of this
    project's code has loaded. So the first import of this module, inside one of those runs, switches the mode off
    for every later run and asks each script run in progress (they all began in the legacy mode) to start again on
    the page its visitor asked for. Asking, not raising ``st.rerun()``: that raised inside the first import of
    :mod:`tx_explorer.ui` and abandoned it halfway, and the other sessions' runs waiting on that import failed
    with ``ImportError: cannot import name 'ui'`` (issue 42). Each run starts again at its next Streamlit call,
    after the imports. Outside a running server, and once the mode is off, it does nothing.
    """
    if not PagesManager.uses_pages_directory:
        return 0
    PagesManager.uses_pages_directory = False
    asked = 0
    for thread in threading.enumerate():
        ctx = getattr(thread, SCRIPT_RUN_CONTEXT_ATTR_NAME, None)  # set on each session's script thread
        if ctx is None or ctx.script_requests is None:
            continue
        intent = ctx.pages_manager  # the page the run's request named, before any navigation resolved it
        again = RerunData(
            query_string=ctx.query_string,
            page_script_hash=intent.intended_page_script_hash or "",
            page_name=intent.intended_page_name or "",
            context_info=ctx.context_info,
        )
        asked += ctx.script_requests.request_rerun(again)
    return asked


leave_legacy_multipage_mode()


def skip_first_run_detours() -> None:
    """Spare the first visitor two costs of Streamlit's first script run, both harmless to skip under serve.py.

    - app.py calls ``st.navigation``: leave the legacy ``pages/`` mode now rather than by a rerun of every first
      run (:func:`leave_legacy_multipage_mode` still does it under a plain ``streamlit run app.py``).
    - the first element drawn asks whether Streamlit runs in a REPL to print a warning: ``inspect.stack()``, which
      looks up every frame's module among every module loaded (torch's thousands by then): 0.3–0.7 s. This is
      ``streamlit run``, never a REPL.
    """
    PagesManager.uses_pages_directory = False
    delta_generator._use_warning_has_been_displayed = True


def server_answers() -> bool:
    """Whether this process's Streamlit server has started (its runtime exists and left its initial state)."""
    return Runtime.exists() and Runtime.instance().state != RuntimeState.INITIAL


def main(argv: list[str]) -> int:
    """``streamlit <argv…>`` in this process (e.g. ``["run", "app.py"]``); its exit status."""
    sys.argv = ["streamlit", *argv]
    return cli.main()
