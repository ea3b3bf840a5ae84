"""``python -m benchmarks load --replicas K`` without a server: the proxy's configuration from deploy/nginx.conf, its
log read back into each session's replicas, each protocol session's routing cookie on every request and on its
websocket (against a stand-in that speaks just enough HTTP and websocket), and the per-replica report."""

from __future__ import annotations

import asyncio
import re

import websockets
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from benchmarks import load
from harness.proxy import CONF, proxy_config, replicas_reached, route_header, routes

PAGE = '<html><script src="./static/js/main.js"></script><link href="./static/css/main.css"></html>'


def test_proxy_config_replaces_only_the_port_the_replicas_and_the_paths(tmp_path):
    text = proxy_config(CONF.read_text(), 40123, [40001, 40002], tmp_path)
    assert "listen 127.0.0.1:40123;" in text and "listen 80;" not in text
    assert re.findall(r"server 127\.0\.0\.1:(\d+);", text) == ["40001", "40002"]
    assert f"access_log {tmp_path / 'access.log'} routed;" in text and f"pid {tmp_path / 'nginx.pid'};" in text
    assert f"proxy_temp_path {tmp_path / 'proxy'};" in text and "daemon off;" in text
    for kept in ("hash $tx_route consistent;", "proxy_read_timeout 1h;", "add_header Set-Cookie $tx_route_cookie;"):
        assert kept in text


def test_each_session_is_found_on_the_replicas_its_requests_reached(tmp_path):
    (tmp_path / "access.log").write_text(
        "\n".join(
            [
                '127.0.0.1 "GET /_stcore/health HTTP/1.1" 200 route=0f3a9c upstream=127.0.0.1:1',  # the start-up check
                '127.0.0.1 "GET /masks HTTP/1.1" 200 route=load-0 upstream=127.0.0.1:1',
                '127.0.0.1 "GET /_stcore/stream HTTP/1.1" 101 route=load-0 upstream=127.0.0.1:1',
                '127.0.0.1 "GET /operator HTTP/1.1" 200 route=load-1 upstream=127.0.0.1:2',
                '127.0.0.1 "GET /static/a.js HTTP/1.1" 200 route=load-2 upstream=127.0.0.1:2, 127.0.0.1:1',  # retried
            ]
        )
        + "\n"
    )
    log = routes(tmp_path)
    assert log[1] == ("GET /masks", "load-0", "127.0.0.1:1")
    reached = replicas_reached(log, [load.route_key(i) for i in range(4)])
    assert reached == {
        "load-0": ["127.0.0.1:1"],
        "load-1": ["127.0.0.1:2"],
        "load-2": ["127.0.0.1:2", "127.0.0.1:1"],
        "load-3": [],  # never got through the proxy
    }


async def _session_through_stand_in(routed: bool) -> tuple[load.SessionResult, list[tuple[str, str | None]]]:
    """One load session (its page's HTML and files, then its websocket) against a stand-in for the proxy on a free
    port; the session's result and each request's path and Cookie header."""
    seen: list[tuple[str, str | None]] = []

    def http(connection, request):
        seen.append((request.path, request.headers.get("Cookie")))
        if request.path != "/_stcore/stream":  # the page and what it names; the websocket's handshake goes on
            return connection.respond(200, PAGE if request.path == "/masks" else "ok")
        return None

    async def stream(ws):
        await ws.recv()  # the page by its path, as a browser asks for it
        finished = ForwardMsg()
        finished.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
        await ws.send(finished.SerializeToString())
        await ws.wait_closed()

    async with websockets.serve(stream, "127.0.0.1", 0, process_request=http, subprotocols=["streamlit"]) as server:
        port = server.sockets[0].getsockname()[1]
        plan = load.Plan(1, 0.0, 0.0, 5.0)  # no inputs: the page's load and first run only
        res = await load.run_session(
            f"http://127.0.0.1:{port}", 7, load.SCENARIOS[0], 0, load.Class(), plan, arrive_s=0.0, routed=routed
        )
    return res, seen


def test_a_routed_session_sends_its_own_cookie_with_every_request_and_its_websocket():
    res, seen = asyncio.run(_session_through_stand_in(routed=True))
    assert not res.failure and res.first_run_s > 0
    paths = [path for path, _ in seen]
    assert paths == [
        "/masks",
        "/static/js/main.js",
        "/static/css/main.css",
        "/_stcore/health",
        "/_stcore/host-config",
        "/_stcore/stream",
    ]
    assert {cookie for _, cookie in seen} == {route_header("load-7")["Cookie"]} == {"tx_route=load-7"}
    _, plain = asyncio.run(_session_through_stand_in(routed=False))
    assert {cookie for _, cookie in plain} == {None}  # one server, straight: nothing added


def _two_replicas() -> load.LoadResult:
    a, b = load.Replica("127.0.0.1:1", 40.0, 1300.0, 1500.0), load.Replica("127.0.0.1:2", 20.0, 1290.0, 1400.0)
    sessions = [
        load.SessionResult(0, "masks", False, first_run_s=1.0, answers=[(0.4, 2)] * 4, replicas=[a.address]),
        load.SessionResult(1, "multihead", True, first_run_s=2.0, answers=[(1.2, 2)] * 4, replicas=[a.address]),
        load.SessionResult(2, "operator", False, first_run_s=1.0, answers=[(0.2, 2)] * 4, replicas=[b.address]),
        load.SessionResult(
            3, "seq2seq", False, first_run_s=1.0, answers=[(0.3, 2)] * 2, replicas=[b.address, a.address]
        ),
    ]
    return load.LoadResult(
        sessions, 4.0, 100.0, 60.0, 2900.0, 2590.0, {"masks": (0.02, 0.1)}, replicas=[a, b], proxy_cpu_s=3.0
    )


def test_the_report_gives_each_replica_its_sessions_cpu_and_memory_and_says_they_share_the_cores():
    res = _two_replicas()
    assert [len(res.routed_to(r)) for r in res.replicas] == [2, 1]  # the split session is on neither
    assert res.problems == ["session 3 (seq2seq): split across replicas 127.0.0.1:2, 127.0.0.1:1"]
    text = load.section([res], "python -m benchmarks load --replicas 2", "machine", 5.0, 60.0, "")
    cores = load.CORES
    assert text.startswith(f"## Load behind nginx: 2 replicas on the same {cores} cores")
    assert f"The 2 replicas, nginx and the client share the same {cores} cores" in text
    assert f"— 2 replicas behind nginx, sharing the {cores} cores" in text
    assert "One session at a time on the warm first replica (straight on its port)" in text
    assert (
        "- Servers' CPU (2 replicas together): 60 s over the class" in text and "nginx 3.0 s (0.03 of a core)" in text
    )
    assert "- Servers' memory (2 replicas together): 2,590 MB before the class, peak (VmHWM) 2,900 MB." in text
    assert "| 127.0.0.1:1 | 2 | 8 | 0.80 s | 1.20 s | 40 s | 0.40 | 1,300 MB | 1,500 MB |" in text
    assert "| 127.0.0.1:2 | 1 | 4 | 0.20 s | 0.20 s | 20 s | 0.20 | 1,290 MB | 1,400 MB |" in text


def test_one_server_keeps_its_section_and_replicas_write_their_own(monkeypatch):
    """``--replicas 1`` (the default) publishes the one server's ``load`` section as before; ``--replicas 2``
    its own section, every class run on that many replicas."""
    asked, published = [], []
    monkeypatch.setattr(load, "load", lambda plan, **kw: asked.append(kw["replicas"]) or _two_replicas())
    monkeypatch.setattr(load, "publish", lambda key, text, no_write: published.append((key, text.splitlines()[0])))
    load.main(["--sessions", "4", "--arrivals", "4", "--no-write"])
    load.main(["--sessions", "4", "8", "--arrivals", "4", "8", "--replicas", "2", "--no-write"])
    assert asked == [1, 2, 2]
    assert [key for key, _ in published] == ["load", load.REPLICAS_KEY]
