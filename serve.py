"""``make run``: ``streamlit run app.py`` while torch, the app's library and the bundled models load in a
background thread.

Streamlit runs app.py only when the first visitor connects; importing torch then (about 3 s of a 10 s cold
start on 2 cores) made that visitor wait. Here the import overlaps the server's own start-up instead; a
visitor who arrives earlier simply waits on Python's import lock. Then the bundled models load into the
process-wide cache the pages read (:mod:`tx_explorer.model_cache`), so no visitor waits for one either.
Arguments go to ``streamlit run``.
"""

import sys
import threading
import time
from collections.abc import Callable

from streamlit.runtime import Runtime, RuntimeState
from streamlit.web import cli


def _server_answers() -> bool:
    return Runtime.exists() and Runtime.instance().state != RuntimeState.INITIAL


def warm(*, ready: Callable[[], bool] = _server_answers, poll_s: float = 0.1) -> list[str]:
    """Import torch and the library, wait until ``ready()`` (the server answers), then load every bundled model.

    Returns the names of the models in the shared cache."""
    # pandas first and whole: Plotly's validators look it up in sys.modules without importing it, so a script
    # drawing a chart while another thread is halfway through importing pandas fails ("partially initialized
    # module 'pandas'"), as 30 sessions opening at once showed (tests/test_classroom.py).
    import pandas  # noqa: F401

    # Not tx_explorer.ui: its first import must happen inside a script run (it leaves Streamlit's legacy
    # multipage mode there, see ui._leave_legacy_multipage_mode).
    from tx_explorer import jobs, model_cache
    from tx_explorer.views import home

    jobs.pool()  # sizes the heavy-job pool and sets torch's threads before any page computes with them

    # The home page's chart, built and serialised once: torch and Plotly import more on first use (the operator's
    # shape check, torch.broadcast_shapes, pulls in sympy: 0.7 s; Plotly its JSON encoder: 0.2 s), which the first
    # visitor's script run would otherwise wait for.
    home.example().figure.to_json()

    # Models load last, at the lowest priority we can give them: os.nice would lower the whole process (the
    # server's own threads too), so instead they wait until the imports are done and the server is up, and a
    # visitor who asks for a model meanwhile waits only for that one (the cache locks per name).
    while not ready():
        time.sleep(poll_s)
    return model_cache.preload()


if __name__ == "__main__":
    threading.Thread(target=warm, name="warm-up", daemon=True).start()
    sys.argv = ["streamlit", "run", "app.py", *sys.argv[1:]]
    sys.exit(cli.main())
