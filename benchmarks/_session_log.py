"""``serve.py`` with every session's life in its log: how a class's burst looked for the sessions it left undrawn
(``python benchmarks/_session_log.py`` + serve.py's arguments; ``python -m benchmarks load --session-log``).

Each line is ``tx-ev <monotonic s> <session id, 8 characters> <event> <detail>``: a websocket connecting or going
(``connect``, ``disconnect``), each message the browser sent (``back <type> <page or fragment asked for>``), each
script-runner event (``SCRIPT_STARTED``, ``SCRIPT_STOPPED_FOR_RERUN``, …) and each message the session sent other
than a delta (``forward new_session``, ``forward script_finished <status>``), with the run's first delta marked
(``forward first-delta``). The run times of ``harness/timed_serve.py`` come too: this wraps it. Benchmark-only;
the app is never patched.
"""

import runpy
import sys
import threading
import time
from pathlib import Path

from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession

ROOT = Path(__file__).resolve().parents[1]
EVENT_LINE = "tx-ev"
_lock = threading.Lock()  # one line at a time from the event loop and every script thread
_first_delta_due: set[str] = set()  # sessions whose current run has not sent a delta yet


def note(session_id: str, what: str, detail: str = "") -> None:
    with _lock:
        sys.stderr.write(f"{EVENT_LINE} {time.monotonic():.3f} {session_id[:8]} {what} {detail}\n")


def _patch() -> None:
    connect, disconnect = Runtime.connect_session, Runtime.disconnect_session
    handle_backmsg, on_event = AppSession.handle_backmsg, AppSession._on_scriptrunner_event
    enqueue = AppSession._enqueue_forward_msg

    def connect_session(self, *args, **kwargs) -> str:
        session_id = connect(self, *args, **kwargs)
        note(session_id, "connect", kwargs.get("existing_session_id") or "")
        return session_id

    def disconnect_session(self, session_id: str, *args, **kwargs) -> None:
        note(session_id, "disconnect")
        disconnect(self, session_id, *args, **kwargs)

    def backmsg(self, msg) -> None:
        kind = msg.WhichOneof("type")
        detail = ""
        if kind == "rerun_script":
            rs = msg.rerun_script
            detail = f"page={rs.page_name or rs.page_script_hash[:8] or '-'} fragment={rs.fragment_id[:8] or '-'}"
        note(self.id, f"back {kind}", detail)
        handle_backmsg(self, msg)

    def scriptrunner_event(self, sender, event, **kwargs) -> None:
        if event.name != "ENQUEUE_FORWARD_MSG":
            if event.name == "SCRIPT_STARTED":
                _first_delta_due.add(self.id)
            note(self.id, event.name)
        on_event(self, sender, event, **kwargs)

    def enqueue_forward_msg(self, msg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "delta":
            if self.id in _first_delta_due:
                _first_delta_due.discard(self.id)
                note(self.id, "forward first-delta")
        elif kind == "script_finished":
            note(self.id, "forward script_finished", str(msg.script_finished))
        elif kind != "session_status_changed":
            note(self.id, "forward", kind)
        enqueue(self, msg)

    Runtime.connect_session, Runtime.disconnect_session = connect_session, disconnect_session
    AppSession.handle_backmsg, AppSession._on_scriptrunner_event = backmsg, scriptrunner_event
    AppSession._enqueue_forward_msg = enqueue_forward_msg


if __name__ == "__main__":
    _patch()
    sys.path[0] = str(ROOT)  # what `python serve.py` has first, not benchmarks/ (whose modules would shadow others)
    runpy.run_path(str(ROOT / "harness" / "timed_serve.py"), run_name="__main__")
