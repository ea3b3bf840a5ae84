"""``serve.py`` with the server's own time for each script run written to its log: the classroom's way to tell
the server's part of an answer from the browsers' (``python harness/timed_serve.py`` + serve.py's arguments).

Each run of the page or of a fragment, reruns it chains included, ends with a line ``tx-run <start> <end>``: seconds
on ``time.monotonic()``, one clock for every process on Linux, so the driver can tell the class's runs from earlier.
Benchmark-only: the app is never patched, and the tests serve plain ``serve.py``.
"""

import runpy
import sys
import time
from pathlib import Path

from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

ROOT = Path(__file__).resolve().parents[1]
RUN_LINE = "tx-run"
_run_script = ScriptRunner._run_script


def _timed_run_script(self, rerun_data) -> None:
    start = time.monotonic()
    try:
        _run_script(self, rerun_data)
    finally:
        sys.stderr.write(f"{RUN_LINE} {start:.3f} {time.monotonic():.3f}\n")


if __name__ == "__main__":
    ScriptRunner._run_script = _timed_run_script
    sys.path[0] = str(ROOT)  # what `python serve.py` has first, not harness/ (whose modules would shadow others)
    runpy.run_path(str(ROOT / "serve.py"), run_name="__main__")
