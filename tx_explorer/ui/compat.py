"""Every use of Streamlit's private API, in one place, for the one Streamlit version it was written against.

Streamlit changes its internals without notice; a page that pokes them elsewhere breaks silently on an upgrade.
Here each poke is one function, and importing this module on another Streamlit than ``WRITTEN_FOR`` fails at
once with what to check. ``ui/__init__`` imports it first, so that its import leaves Streamlit's legacy multipage
mode (:func:`leave_legacy_multipage_mode`) before anything else of the ui package loads.
"""

from __future__ import annotations

import asyncio
import gzip
import mimetypes
import sys
import threading
from pathlib import Path

import streamlit as st
from streamlit import config, delta_generator, file_util
from streamlit.runtime import Runtime, RuntimeState
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import SCRIPT_RUN_CONTEXT_ATTR_NAME, get_script_run_ctx
from streamlit.web import cli
from streamlit.web.server.starlette.starlette_server_config import STATIC_ASSET_CACHE_MAX_AGE_SECONDS

WRITTEN_FOR = "1.67."  # the release series whose internals every function below was read against


def check_version(version: str = st.__version__) -> None:
    """Raise unless ``version`` is the Streamlit release series this module was written for."""
    if not version.startswith(WRITTEN_FOR):
        raise RuntimeError(
            f"tx_explorer.ui.compat was written for Streamlit {WRITTEN_FOR}x and found {version}: check each "
            "function in it against the new release (PagesManager.uses_pages_directory and intended_page_*, a script "
            "thread's run context and its script_requests.request_rerun(RerunData), get_script_run_ctx().session_id "
            "and .is_history_navigation, Runtime.is_active_session, "
            "delta_generator._use_warning_has_been_displayed, Runtime.state, streamlit.web.cli.main, "
            "starlette_server.create_starlette_app and the static files' folder and cache lifetime), then update "
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


def session_id() -> str | None:
    """The id of the session whose script run calls this (None outside one)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def history_navigation() -> bool:
    """Whether the script run that calls this was asked for by the browser's Back or Forward button (the frontend
    sends ``isHistoryNavigation`` with that rerun); False outside a run."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx is not None and ctx.is_history_navigation


def session_alive(session: str | None) -> bool:
    """Whether ``session`` (:func:`session_id`) is still connected, from any thread: a closed tab's is not. True
    outside a server (AppTest runs no Runtime)."""
    return not Runtime.exists() or Runtime.instance().is_active_session(session)


STATIC_CACHE = f"public, immutable, max-age={STATIC_ASSET_CACHE_MAX_AGE_SECONDS}".encode()  # as Streamlit's
COMPRESSED = (".js", ".css", ".json", ".svg", ".map", ".txt")  # text; fonts and images are compressed already


class GzippedStatic:
    """An ASGI app in front of Streamlit's: its frontend's scripts and styles (``/static/…``, content-hashed, so
    the same name is always the same bytes) answered gzipped, each file compressed once and then kept in memory;
    every other request goes to Streamlit's app unchanged.

    Streamlit 1.67 (Starlette on uvicorn) sends these files uncompressed on purpose, since Starlette's gzip
    middleware would compress them again on every request: 2.3 MB a page load, read from disk in 64 kB pieces
    through a worker thread each and passed through its path-security, session and gzip middleware. Here a file
    is one lookup in a dict of the folder's files (a path not in it, a ``HEAD``, or a client that does not accept
    gzip goes to Streamlit) and one send of about a quarter of the bytes.
    """

    def __init__(self, app, folder: Path, prefix: str = "/static/") -> None:
        self.app = app
        self.files = {
            prefix + path.relative_to(folder).as_posix(): path
            for path in folder.rglob("*")
            if path.suffix in COMPRESSED and path.is_file()
        }
        self._bodies: dict[str, asyncio.Task[bytes]] = {}  # path → its gzipped bytes (one compression per file)

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] != "GET" or path not in self.files or not _accepts_gzip(scope):
            await self.app(scope, receive, send)
            return
        if path not in self._bodies:  # sessions asking for it meanwhile wait for this one compression
            self._bodies[path] = asyncio.ensure_future(asyncio.to_thread(_gzipped, self.files[path]))
        body = await self._bodies[path]
        kind = mimetypes.guess_type(path)[0] or "text/plain"  # Starlette's default, as Streamlit would send it
        headers = [
            (b"content-type", kind.encode() + (b"; charset=utf-8" if kind.startswith("text/") else b"")),
            (b"content-encoding", b"gzip"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", STATIC_CACHE),
            (b"vary", b"Accept-Encoding"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _accepts_gzip(scope) -> bool:
    return any(name == b"accept-encoding" and b"gzip" in value for name, value in scope.get("headers", ()))


def _gzipped(path: Path) -> bytes:
    return gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)


def serve_static_compressed() -> None:
    """Put :class:`GzippedStatic` in front of the app Streamlit's server builds when it starts (call it before
    :func:`main`; a plain ``streamlit run app.py`` has built its server before any of this project loads)."""
    from streamlit.web.server.starlette import starlette_server

    build = starlette_server.create_starlette_app

    def app_with_static(runtime: Runtime) -> GzippedStatic:
        base = (config.get_option("server.baseUrlPath") or "").strip("/")  # read once the command line is in
        prefix = f"/{base}/static/" if base else "/static/"
        return GzippedStatic(build(runtime), Path(file_util.get_static_dir()) / "static", prefix)

    starlette_server.create_starlette_app = app_with_static


def server_answers() -> bool:
    """Whether this process's Streamlit server has started (its runtime exists and left its initial state)."""
    return Runtime.exists() and Runtime.instance().state != RuntimeState.INITIAL


def main(argv: list[str]) -> int:
    """``streamlit <argv…>`` in this process (e.g. ``["run", "app.py"]``); its exit status."""
    sys.argv = ["streamlit", *argv]
    return cli.main()
