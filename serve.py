"""``make run``: ``streamlit run app.py`` while torch, the app's library and the bundled models load in a
background thread.

Streamlit runs app.py only when the first visitor connects; importing torch then (about 3 s of a 10 s cold
start on 2 cores) made that visitor wait. Here the import overlaps the server's own start-up and the browser
loading the page instead; a visitor who arrives earlier simply waits on Python's import lock. The warm-up does
first what the first chart needs and nothing else; the bundled models load into the process-wide cache the pages
read (:mod:`tx_explorer.model_cache`) once the server is idle, so no visitor waits for one either. Streamlit's
frontend files go out gzipped, each compressed once (:func:`tx_explorer.ui.compat.serve_static_compressed`;
``TX_EXPLORER_STATIC_GZIP=0`` leaves Streamlit's own handler, the load benchmark's reference).
Arguments go to ``streamlit run``.
"""

import gc
import os
import sys
import threading
import time
from collections.abc import Callable

from tx_explorer.ui import compat

STATIC_GZIP = "TX_EXPLORER_STATIC_GZIP"  # "0": Streamlit serves its frontend files itself (uncompressed)


def _process_idle(window_s: float = 1.0) -> bool:
    """Whether this process used under a tenth of a core for ``window_s``: no script run, no other start-up work."""
    start = time.process_time()  # every thread's CPU time, the caller's sleep excluded
    time.sleep(window_s)
    return time.process_time() - start < 0.1 * window_s


def warm(
    *,
    ready: Callable[[], bool] = compat.server_answers,
    idle: Callable[[], bool] = _process_idle,
    poll_s: float = 0.1,
    patience_s: float = 30.0,
) -> list[str]:
    """Import torch and the library and draw the home chart once, wait until ``ready()`` (the server answers) and
    ``idle()`` (no visitor's script is running; at most ``patience_s``), then load every bundled model.

    Returns the names of the models in the shared cache."""
    from tx_explorer.views import home

    # The home page's chart, built and serialised once: torch and Plotly import more on first use, which the first
    # visitor's script run would otherwise wait for.
    home.example().figure.to_json()

    # What is loaded now lives as long as the process: out of the cyclic collector's sight, Streamlit's gc.collect
    # after every script run no longer walks it (0.2 s a run on 2 cores once torch is in).
    gc.freeze()

    from tx_explorer import jobs, model_cache

    jobs.pool()  # sizes the heavy-job pool and sets torch's threads before any page computes with them

    # Models last: the first visitor's script run competes with them for the interpreter (one thread runs Python
    # at a time), so they wait until the server is up and idle, and a visitor who asks for a model meanwhile waits
    # only for that one (the cache locks per name).
    while not ready():
        time.sleep(poll_s)
    deadline = time.monotonic() + patience_s
    while not idle() and time.monotonic() < deadline:
        time.sleep(poll_s)
    names = model_cache.preload()
    gc.freeze()  # the models too (a session's objects frozen with them are still freed when unreferenced)
    return names


if __name__ == "__main__":
    compat.skip_first_run_detours()
    if os.environ.get(STATIC_GZIP, "1") != "0":
        compat.serve_static_compressed()
    threading.Thread(target=warm, name="warm-up", daemon=True).start()
    sys.exit(compat.main(["run", "app.py", *sys.argv[1:]]))
