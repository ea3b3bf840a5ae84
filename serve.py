"""``make run``: ``streamlit run app.py`` while torch and the app's library import in a background thread.

Streamlit runs app.py only when the first visitor connects; importing torch then (about 3 s of a 10 s cold
start on 2 cores) made that visitor wait. Here the import overlaps the server's own start-up instead; a
visitor who arrives earlier simply waits on Python's import lock. Arguments go to ``streamlit run``.
"""

import sys
import threading

from streamlit.web import cli


def _warm_imports() -> None:
    # Not tx_explorer.ui: its first import must happen inside a script run (it leaves Streamlit's legacy
    # multipage mode there, see ui._leave_legacy_multipage_mode).
    import tx_explorer.analysis.mask_gallery
    import tx_explorer.viz.heatmap  # noqa: F401  (Plotly and its figure classes)


if __name__ == "__main__":
    threading.Thread(target=_warm_imports, name="warm-imports", daemon=True).start()
    sys.argv = ["streamlit", "run", "app.py", *sys.argv[1:]]
    sys.exit(cli.main())
