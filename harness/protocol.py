"""One visitor as the server sees it, without a browser: Streamlit 1.67's session protocol over the websocket
``/_stcore/stream`` (``BackMsg`` out, ``ForwardMsg`` in), for the load benchmark and the burst test.

On arrival a browser asks for the page by its path (``rerun_script`` with ``page_name``); an input is
``rerun_script`` with the page's script hash (from the ``navigation`` message: ``new_session`` names app.py, whose
hash would open the home page), the changed widget's state (``WidgetStates``; the widget's id is
``$$ID-<hash>-<key>``, read with its fragment's id from the delta that drew it) and that fragment's id. A run ends at
its ``script_finished``.
"""

from __future__ import annotations

import asyncio
import gzip
import re
import time
import urllib.request
from collections.abc import Callable

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

OPEN_TIMEOUT_S = 360.0  # a first visit while the whole class opens its own
ANSWER_TIMEOUT_S = 120.0  # one input's answer; past it the input counts as unanswered
FINISHED = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)
Fill = Callable[[WidgetState, int], None]  # writes input k's value into the widget's state
ASSET = re.compile(r'(?:src|href)="\./(static/[^"]+)"')  # the scripts and styles the page loads before it connects


def _get(url: str, headers: dict[str, str] | None = None) -> int:
    """GET ``url`` as a browser does (gzip accepted, and ``headers``); the bytes received."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip", **(headers or {})})
    with urllib.request.urlopen(request, timeout=OPEN_TIMEOUT_S) as response:
        return len(response.read())


def page_html(base: str, page: str, headers: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """The page's HTML, fetched as a browser does (with ``headers``): the bytes received, and what the browser
    fetches next before it opens the websocket (the scripts and styles the HTML names, the health check, the host's
    configuration)."""
    request = urllib.request.Request(f"{base}/{page}", headers={"Accept-Encoding": "gzip", **(headers or {})})
    with urllib.request.urlopen(request, timeout=OPEN_TIMEOUT_S) as response:
        body = response.read()
        html = gzip.decompress(body) if response.headers.get("Content-Encoding") == "gzip" else body
    assets = dict.fromkeys(ASSET.findall(html.decode(errors="replace")))
    return len(body), [*(f"{base}/{path}" for path in assets), f"{base}/_stcore/health", f"{base}/_stcore/host-config"]


def fetch_all(urls: list[str], headers: dict[str, str] | None = None) -> int:
    """GET each of ``urls`` in turn as a browser does (with ``headers``); the bytes received."""
    return sum(_get(url, headers) for url in urls)


def page_load(base: str, page: str, headers: dict[str, str] | None = None) -> int:
    """What a browser fetches before it opens the websocket (:func:`page_html`, then what it names), each request
    with ``headers``. The bytes received."""
    received, urls = page_html(base, page, headers)
    return received + fetch_all(urls, headers)


class ProtocolSession:
    """One visitor as the server sees it: a websocket, the page's messages read, inputs sent as a browser would.
    ``headers`` go with every request and the websocket's handshake, as a browser sends its cookies (a proxy's
    routing key: ``harness.proxy.route_header``)."""

    def __init__(self, url: str, page: str, *, headers: dict[str, str] | None = None) -> None:
        self.base = url
        self.headers = headers or {}
        self.url = url.replace("http", "ws", 1) + "/_stcore/stream"
        self.static_bytes = 0  # received over HTTP before connecting (open(static=True))
        self.static_s = 0.0  # seconds those took
        self.page = page
        self.page_hash = ""  # the page's script hash, from the navigation message (as the browser keeps it)
        self.menu: list[str] = []  # the latest navigation's url paths: app.py's pages, or legacy mode's pages/
        self.widgets: dict[str, tuple[str, str]] = {}  # widget key → (widget id, its fragment's id)
        self.errors: list[str] = []  # exception and error boxes the server drew
        self.notices: list[str] = []  # info boxes, in order (e.g. "busy, you are n-th")
        self.finished = 0  # runs ended by script_finished (successfully, or a fragment's)
        self.last_delta = 0.0  # time.monotonic() of the latest delta
        self._changed = asyncio.Event()
        self._ws = None
        self._reader: asyncio.Task | None = None

    async def open(self, *, static: bool = False) -> float:
        """Connect and ask for the page as a browser does on a deep link; seconds until its run has finished.
        With ``static``, first fetch what a browser loads over HTTP before it connects (:func:`page_load`)."""
        t0 = time.monotonic()
        if static:
            self.static_bytes = await asyncio.to_thread(page_load, self.base, self.page, self.headers)
            self.static_s = time.monotonic() - t0
        self._ws = await websockets.connect(
            self.url,
            subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"],
            additional_headers=self.headers,
            max_size=None,
            open_timeout=OPEN_TIMEOUT_S,
        )
        self._reader = asyncio.create_task(self._read())
        msg = BackMsg()
        msg.rerun_script.page_name = self.page  # the browser's first request: the page by its path, hash unknown
        await self._ws.send(msg.SerializeToString())
        await self._until_finished(0, OPEN_TIMEOUT_S)
        return time.monotonic() - t0

    async def input(self, key: str, fill: Fill, k: int = 0, *, prefix: bool = False) -> float:
        """Input ``k`` into the widget keyed ``key`` (with ``prefix``: the first whose key starts so), its state
        written by ``fill``; seconds from sending it to the last delta of the run it started."""
        found = [name for name in self.widgets if name == key or (prefix and name.startswith(key))]
        if not found:
            raise RuntimeError(f"no widget {key!r} on {self.page}: {sorted(self.widgets)}")
        widget_id, fragment_id = self.widgets[found[0]]
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.page_script_hash = self.page_hash
        rerun.fragment_id = fragment_id
        state = rerun.widget_states.widgets.add()
        state.id = widget_id
        fill(state, k)
        done, t0 = self.finished, time.monotonic()
        await self._ws.send(msg.SerializeToString())
        await self._until_finished(done, ANSWER_TIMEOUT_S)
        return self.last_delta - t0

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _until_finished(self, done: int, timeout: float) -> None:
        """Wait until more than ``done`` runs have finished (raises TimeoutError, or the reader's error)."""
        deadline = time.monotonic() + timeout
        while self.finished <= done:
            if self._reader.done():
                self._reader.result()  # the websocket's error, if any
                raise ConnectionError("the server closed the session's websocket")
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - time.monotonic()))

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                self._take(raw)
        finally:
            self._changed.set()

    def _take(self, raw: bytes) -> None:
        fwd = ForwardMsg()
        fwd.ParseFromString(raw)
        kind = fwd.WhichOneof("type")
        if kind == "navigation":  # st.navigation's page: new_session names app.py, whose hash would open the home page
            self.page_hash = fwd.navigation.page_script_hash
            self.menu = [page.url_pathname for page in fwd.navigation.app_pages]
        elif kind == "delta":
            self.last_delta = time.monotonic()
            if fwd.delta.WhichOneof("type") == "new_element":
                self._element(fwd.delta.new_element, fwd.delta.fragment_id)
        elif kind == "script_finished" and fwd.script_finished in FINISHED:
            self.finished += 1
            self._changed.set()

    def _element(self, element, fragment_id: str) -> None:
        kind = element.WhichOneof("type")
        if kind == "exception":
            self.errors.append(f"{element.exception.type}: {element.exception.message}"[:200])
        elif kind == "alert" and element.alert.format == Alert.ERROR:
            self.errors.append(element.alert.body[:200])
        elif kind == "alert" and element.alert.format == Alert.INFO:
            self.notices.append(element.alert.body)
        widget_id = getattr(getattr(element, kind), "id", "")
        if widget_id.startswith("$$ID-"):  # "$$ID-<hash>-<key>" for a widget with a key
            self.widgets[widget_id.split("-", 2)[2]] = (widget_id, fragment_id)
