"""Every use of Streamlit's private API, in one place, for the one Streamlit version it was written against.

Streamlit changes its internals without notice; a page that pokes them elsewhere breaks silently on an upgrade.
Here each poke is one function, and importing this module on another Streamlit than ``WRITTEN_FOR`` fails at
once with what to check. It lives beside :mod:`tx_explorer.ui`, not in it: ``serve.py`` needs it before the
server starts, and importing anything inside the ui package first runs ``ui/__init__`` (torch, Plotly), which
serve.py overlaps with the server's start-up instead.
"""

from __future__ import annotations

import sys

import streamlit as st
from streamlit import delta_generator
from streamlit.runtime import Runtime, RuntimeState
from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

WRITTEN_FOR = "1.67."  # the release series whose internals every function below was read against


def check_version(version: str = st.__version__) -> None:
    """Raise unless ``version`` is the Streamlit release series this module was written for."""
    if not version.startswith(WRITTEN_FOR):
        raise RuntimeError(
            f"tx_explorer.ui.compat was written for Streamlit {WRITTEN_FOR}x and found {version}: check each "
            "function in it against the new release (PagesManager.uses_pages_directory, "
            "delta_generator._use_warning_has_been_displayed, Runtime.state, streamlit.web.cli.main), then update "
            "WRITTEN_FOR and requirements.txt together"
        )


check_version()


def leave_legacy_multipage_mode() -> None:
    """Make sure every session runs through app.py's ``st.navigation``.

    With a ``pages/`` folder beside app.py, Streamlit starts in its legacy multipage mode and leaves it only
    when app.py first calls ``st.navigation``; until then a visitor arriving on a deep link (``/masks``) would
    get the bare page without the sidebar. :mod:`tx_explorer.ui` calls this on its first import, which happens
    inside such a run, so switching the mode there and rerunning serves that visitor the whole app on the page
    they asked for. Outside a running server it does nothing.
    """
    if PagesManager.uses_pages_directory and st.runtime.exists():
        PagesManager.uses_pages_directory = False
        st.rerun()


def skip_first_run_detours() -> None:
    """Spare the first visitor two costs of Streamlit's first script run, both harmless to skip under serve.py.

    - app.py calls ``st.navigation``: leave the legacy ``pages/`` mode now rather than by a rerun in that run
      (:func:`leave_legacy_multipage_mode` still does it under a plain ``streamlit run app.py``).
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
