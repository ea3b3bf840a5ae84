"""The server alone under a class: sessions that speak Streamlit's own protocol, without a browser.

    python -m benchmarks load                                  # 30, then 100 sessions, one arriving each second
    python -m benchmarks load --sessions 30 --arrivals 5       # a burst: 30 sessions opening within 5 s
    python -m benchmarks load --sessions 5 --duration 20 --no-write   # a smoke run
    python -m benchmarks load --sessions 100 --replicas 2      # two servers behind nginx (deploy/nginx.conf)

Each session is to the server what a browser is, and costs nothing else: first the page's HTML and the scripts and
styles it names over HTTP (gzip accepted, plus the health check and host configuration: what a browser loads before
it connects; ``--no-static`` skips it; scripts the frontend loads later are left out), then one websocket on
``/_stcore/stream`` (subprotocols ``streamlit`` and the auth placeholder, as Streamlit's client sends them), on
arrival the ``BackMsg`` a browser sends for a deep link (``rerun_script`` with the page's name from its path), then
inputs: ``rerun_script`` with the page's script hash from the ``navigation`` message, the changed widget's state
(``WidgetStates``; the widget's id and fragment read from the ``delta`` that drew it, as the browser does) and that
fragment's id. Every ``ForwardMsg`` is parsed; a run ends at its ``script_finished``. Sections below the first screen
(``ui.below_fold``) stay boxes: nobody scrolls. The sessions are spread over light pages (masks, operator, seq2seq)
and heavy ones (multihead, language_model, on their default model: SmolLM2 once registered), in that order, one
driver process with one asyncio loop.

Reports first run (connect → the page's ``script_finished``), input → its run's last delta p50/p95 per page,
the server's CPU seconds per input (``/proc/<pid>/stat``; alone, one session at a time, and under the class) and
peak memory (``VmHWM``), errors (an exception or error box in a delta, a run that never finished, a dropped
websocket), and, with the class coming in one by one, p95 by how many sessions were connected when the input was
sent: the number at which it passes 5 s. Alone, a page load's server CPU is split into the page's HTML, the files it
names (Streamlit's frontend) and each page's first run. ``--reference`` runs each class first on a server whose
frontend files Streamlit serves itself (``TX_EXPLORER_STATIC_GZIP=0``: uncompressed, through its middleware), then
on ``make run``'s (gzipped once, kept in memory), side by side. Writes the section ``load`` of BENCHMARKS.md; the
browser-based class is the ``classroom`` section.

``--replicas K`` (K > 1) starts K such servers on free ports and nginx from ``deploy/nginx.conf`` in front of them
(``harness/proxy.py``), and the class goes through the proxy, each session with its own routing cookie on every
request and on its websocket, as a browser with its own key. Reported besides: the sessions the proxy sent to each
replica (from its log: all of a session's requests on one replica, or a problem), each replica's CPU and memory, and
nginx's CPU. Writes the section ``load_replicas`` instead, so the one server's stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from streamlit.proto.WidgetStates_pb2 import WidgetState

from benchmarks import machine, parse, parser, publish, verdict
from harness.browser import WORDS, Server, process_cpu_s, status_mb
from harness.classroom import SENTENCE, percentile
from harness.protocol import ProtocolSession, fetch_all, page_html
from harness.proxy import NGINX, behind_nginx, replicas_reached, route_header, routes
from harness.timed_serve import RUN_LINE
from serve import STATIC_GZIP
from tx_explorer import admission

log = logging.getLogger("benchmarks.load")
SESSION_LOG = ("benchmarks/_session_log.py",)  # serve.py with each session's runs and messages in its log
TIMED_APP = ("harness/timed_serve.py",)  # serve.py with each script run's time in its log
LIGHT_TARGET_S = 2.0  # the target: p95 input → answer on the light pages, 100 sessions on one 2-core server
PASSES_S = 5.0  # the p95 whose crossing gives the class size one server holds
BUCKET = 10  # p95 by connected sessions, in steps of this many
CORES = os.cpu_count() or 1
UNGATED = 10_000  # first-visit places for --ungated: more than any class, i.e. no line
REFERENCE = "reference: Streamlit serves its frontend files itself"  # --reference's servers
REPLICAS_KEY = "load_replicas"  # --replicas K's section: the one server's `load` section stays beside it


# ---- what each session does ---------------------------------------------------------------------------------------


def _text(template: str) -> Callable[[WidgetState, int, int], None]:
    def fill(state: WidgetState, j: int, k: int) -> None:
        state.string_value = template.format(marker=f"class{j}", word=WORDS[k % len(WORDS)])

    return fill


def _slider(values: tuple[float, ...]) -> Callable[[WidgetState, int, int], None]:
    def fill(state: WidgetState, j: int, k: int) -> None:
        state.double_array_value.data[:] = [values[k % len(values)]]

    return fill


def _demo(state: WidgetState, j: int, k: int) -> None:
    from tx_explorer.data import translation as tr

    state.string_value = tr.DEMO_SENTENCES[(j + k + 1) % len(tr.DEMO_SENTENCES)]  # in the toy language


@dataclass(frozen=True)
class Input:
    """One page and its input: the widget whose key is ``key`` (or starts with it, ``prefix``) gets the state
    ``fill(state, j, k)`` writes for input ``k`` of the ``j``-th session on this page."""

    page: str
    what: str
    key: str
    fill: Callable[[WidgetState, int, int], None]
    heavy: bool = False
    prefix: bool = False

    async def send(self, session: ProtocolSession, j: int, k: int) -> float:
        """Input ``k`` of the ``j``-th session on this page; seconds to its run's last delta."""
        return await session.input(self.key, lambda state, k: self.fill(state, j, k), k, prefix=self.prefix)


SCENARIOS: tuple[Input, ...] = (
    Input("masks", "sentence", "sentence", _text("the {marker} sat {word}")),
    Input("operator", "D slider", "d", _slider((9.0, 8.0))),
    Input("seq2seq", "demo sentence", "s2s_text", _demo),
    Input("multihead", "text", "mh_text_", _text(SENTENCE), heavy=True, prefix=True),
    Input("language_model", "text", "lm_text", _text(SENTENCE), heavy=True),
)


# ---- the class ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A class: ``sessions`` arriving evenly over ``arrivals_s`` (0: at once), each making an input every
    ``interval_s`` for ``duration_s`` once its page is up; with ``static``, each first loads the page's HTML and
    scripts over HTTP as a browser does."""

    sessions: int
    arrivals_s: float
    duration_s: float
    interval_s: float
    static: bool = True


@dataclass
class SessionResult:
    index: int
    page: str
    heavy: bool
    arrived: float = 0.0  # time.monotonic() when it connected
    first_run_s: float = float("nan")
    page_load_s: float = float("nan")  # the first run's first part: the page's HTML and files over HTTP
    # (seconds to the last delta, sessions connected when it was sent) per answered input
    answers: list[tuple[float, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failure: str = ""  # a first run or an input without an answer, a dropped websocket
    replicas: list[str] = field(default_factory=list)  # behind the proxy: the replicas its requests reached


class Class:
    """Counts the sessions connected at each moment (for p95 by class size)."""

    def __init__(self) -> None:
        self.connected = 0


def route_key(index: int) -> str:
    """Session ``index``'s routing key behind the proxy: its own, as each browser gets its own random one, so that
    every request of the session reaches one replica."""
    return f"load-{index}"


async def run_session(
    url: str,
    index: int,
    scenario: Input,
    j: int,
    room: Class,
    plan: Plan,
    *,
    arrive_s: float,
    routed: bool = False,
) -> SessionResult:
    """Arrive after ``arrive_s``, open the page, then one input every ``plan.interval_s`` for ``plan.duration_s``
    from the page being up, each waited for; never raises: what went wrong is in the result. ``routed``: every
    request and the websocket carry the session's routing cookie (:func:`route_key`)."""
    res = SessionResult(index, scenario.page, scenario.heavy)
    await asyncio.sleep(arrive_s)
    session = ProtocolSession(url, scenario.page, headers=route_header(route_key(index)) if routed else None)
    res.arrived = time.monotonic()
    room.connected += 1
    try:
        res.first_run_s = await session.open(static=plan.static)
        if plan.static:
            res.page_load_s = session.static_s
        stop, k = time.monotonic() + plan.duration_s, 0
        while (started := time.monotonic()) < stop:
            connected = room.connected
            res.answers.append((await scenario.send(session, j, k), connected))
            k += 1
            await asyncio.sleep(max(0.0, started + plan.interval_s - time.monotonic()))
    except Exception as exc:  # a timeout, a dropped websocket: reported, the other sessions go on
        res.failure = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:300]
    finally:
        room.connected -= 1
        res.errors = session.errors
        await session.close()
    return res


@dataclass(frozen=True)
class Replica:
    """One of the servers behind the proxy: its address (as the proxy logs it), the CPU seconds it used during the
    class, its memory before the class and its peak (VmHWM) at the end."""

    address: str
    cpu_s: float
    rss_before_mb: float
    peak_rss_mb: float


@dataclass
class LoadResult:
    sessions: list[SessionResult]
    arrivals_s: float
    wall_s: float
    server_cpu_s: float  # CPU seconds the server used during the class (behind the proxy: every replica's)
    peak_rss_mb: float  # the server's VmHWM at the end (behind the proxy: the replicas' summed)
    rss_before_mb: float
    alone: dict[str, tuple[float, float]]  # page → (server CPU s per input, input → last delta s), one session
    server_log: str = ""
    started: float = 0.0  # time.monotonic() when the class began
    label: str = ""  # what differs from the default server (e.g. the first-visit gate opened)
    replicas: list[Replica] = field(default_factory=list)  # the servers behind the proxy; none: one server, direct
    proxy_cpu_s: float = 0.0  # CPU seconds nginx used during the class

    @property
    def inputs(self) -> int:
        return sum(len(s.answers) for s in self.sessions)

    def latencies(self, keep: Callable[[SessionResult], bool] = lambda s: True) -> list[float]:
        return sorted(t for s in self.sessions if keep(s) for t, _ in s.answers)

    @property
    def problems(self) -> list[str]:
        out = [f"server log: {line}" for line in self.server_log.splitlines() if "Traceback" in line][:10]
        for s in self.sessions:
            tag = f"session {s.index} ({s.page})"
            out += [f"{tag}: {s.failure}"] if s.failure else []
            out += [f"{tag}: error on page: {e}" for e in s.errors]
            out += [f"{tag}: split across replicas {', '.join(s.replicas)}"] if len(s.replicas) > 1 else []
        return out

    def routed_to(self, replica: Replica) -> list[SessionResult]:
        """The sessions whose every request the proxy sent to ``replica``."""
        return [s for s in self.sessions if s.replicas == [replica.address]]

    def by_size(self) -> list[tuple[int, int, float]]:
        """(sessions connected up to, inputs, p95 s) per step of ``BUCKET`` connected sessions."""
        rows = []
        top = max((n for s in self.sessions for _, n in s.answers), default=0)
        for hi in range(BUCKET, top + BUCKET, BUCKET):
            xs = sorted(t for s in self.sessions for t, n in s.answers if hi - BUCKET < n <= hi)
            if xs:
                rows.append((hi, len(xs), percentile(xs, 95)))
        return rows

    def passes(self, limit_s: float = PASSES_S) -> int | None:
        """The first class size (a step of ``BUCKET``) whose inputs' p95 passed ``limit_s``; None if none did."""
        return next((hi for hi, n, p95 in self.by_size() if n >= 5 and p95 > limit_s), None)

    @property
    def server_runs_s(self) -> list[float]:
        """Server time of each script run begun during the class (``harness/timed_serve.py``'s log lines)."""
        runs = []
        for line in self.server_log.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == RUN_LINE and float(parts[1]) >= self.started:
                runs.append(float(parts[2]) - float(parts[1]))
        return sorted(runs)


async def _class(url: str, plan: Plan, *, routed: bool = False) -> list[SessionResult]:
    room, per_page = Class(), {}
    jobs = []
    for i in range(plan.sessions):
        scenario = SCENARIOS[i % len(SCENARIOS)]
        j = per_page[scenario.page] = per_page.get(scenario.page, -1) + 1
        arrive_s = plan.arrivals_s * i / plan.sessions
        jobs.append(run_session(url, i, scenario, j, room, plan, arrive_s=arrive_s, routed=routed))
    return await asyncio.gather(*jobs)


def _page_load(url: str, pid: int) -> dict[str, tuple[float, float]]:
    """One browser's page load over HTTP, its two parts: server CPU seconds and seconds for the page's HTML, then
    for the files it names (labelled with their count and the bytes received)."""
    cpu, t0 = process_cpu_s(pid), time.monotonic()
    _, urls = page_html(url, SCENARIOS[0].page)
    html = (process_cpu_s(pid) - cpu, time.monotonic() - t0)
    cpu, t0 = process_cpu_s(pid), time.monotonic()
    received = fetch_all(urls)
    files = (process_cpu_s(pid) - cpu, time.monotonic() - t0)
    return {"page's HTML": html, f"the {len(urls)} files it names ({received / 1e6:.2f} MB received)": files}


async def _alone(url: str, pid: int, inputs: int) -> dict[str, tuple[float, float]]:
    """Each page by one session on an otherwise idle server: CPU seconds and seconds of a browser's page load over
    HTTP (:func:`_page_load`, the second load: the first reads and compresses the files), of each page's first run
    (connect → ``script_finished``) and per input (median input → last delta)."""
    await asyncio.to_thread(_page_load, url, pid)
    out = await asyncio.to_thread(_page_load, url, pid)
    for scenario in SCENARIOS:
        session = ProtocolSession(url, scenario.page)
        try:
            cpu = process_cpu_s(pid)
            first = await session.open()
            out[f"{scenario.page} first run"] = (process_cpu_s(pid) - cpu, first)
            await scenario.send(session, 999, inputs)  # a first input warms what the page's inputs share
            cpu, times = process_cpu_s(pid), []
            for k in range(inputs):
                times.append(await scenario.send(session, 999, k))
            out[scenario.page] = ((process_cpu_s(pid) - cpu) / inputs, percentile(sorted(times), 50))
        finally:
            await session.close()
    return out


def _blocking(coro) -> object:
    """``coro`` run to its end on a fresh event loop in its own thread (callable beside a running loop too)."""
    out: dict[str, object] = {}

    def drive() -> None:
        try:
            out["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=drive, name="load")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def load(
    plan: Plan,
    *,
    alone_inputs: int = 3,
    session_log: bool = False,
    env: dict[str, str] | None = None,
    replicas: int = 1,
) -> LoadResult:
    """Fresh servers, ``replicas`` of them (as ``make run`` starts each, on its own free port, each script run's
    time in its log; with ``session_log`` each session's runs and messages too), each warmed by one session per page
    (``alone_inputs`` inputs each; the first server's measured), then the class of ``plan``: on the one server
    directly, or through nginx run from deploy/nginx.conf in front of the replicas, each session with its own
    routing cookie. ``env``: more environment variables for the servers."""
    servers = [Server(argv=SESSION_LOG if session_log else TIMED_APP, env=env or {}) for _ in range(replicas)]
    with contextlib.ExitStack() as stack:
        for srv in servers:  # all at once, as a teacher starts them: they load their models side by side
            srv.start()
            stack.callback(srv.stop)
        for srv in servers:
            srv.wait_healthy()
            # Quiet first: serve.py's warm-up (imports, then the models) would be counted as the page load's CPU.
            log.info("server warm (CPU quiet) %.1f s after the command", srv.wait_settled())
        # Straight on each replica's port: every replica is as warm as the one server would be.
        alone = [_blocking(_alone(srv.url, srv.proc.pid, alone_inputs)) for srv in servers] if alone_inputs else [{}]
        pids = [srv.proc.pid for srv in servers]
        before, cpu = [status_mb(p)["VmRSS"] for p in pids], [process_cpu_s(p) for p in pids]
        proxied = (
            behind_nginx([srv.port for srv in servers], Path(stack.enter_context(tempfile.TemporaryDirectory())))
            if replicas > 1
            else contextlib.nullcontext()
        )
        with proxied as proxy:
            proxy_cpu = proxy.cpu_s() if proxy else 0.0
            t0 = time.monotonic()
            results = _blocking(_class(proxy.url if proxy else servers[0].url, plan, routed=proxy is not None))
            wall_s = time.monotonic() - t0
            used = [process_cpu_s(p) - c for p, c in zip(pids, cpu, strict=True)]
            proxy_cpu = proxy.cpu_s() - proxy_cpu if proxy else 0.0
        peaks = [status_mb(p)["VmHWM"] for p in pids]
        if proxy:  # nginx has stopped: every request it served is in its log, each session's websocket too
            reached = replicas_reached(routes(proxy.folder), [route_key(s.index) for s in results])
            for s in results:
                s.replicas = reached[route_key(s.index)]
        return LoadResult(
            sessions=results,
            arrivals_s=plan.arrivals_s,
            wall_s=wall_s,
            server_cpu_s=sum(used),
            peak_rss_mb=sum(peaks),
            rss_before_mb=sum(before),
            alone=alone[0],
            server_log="\n".join(srv.output(tail=None) for srv in servers),
            started=t0,
            replicas=[
                Replica(f"127.0.0.1:{srv.port}", *usage)
                for srv, *usage in zip(servers, used, before, peaks, strict=True)
            ]
            if proxy
            else [],
            proxy_cpu_s=proxy_cpu,
        )


# ---- report -------------------------------------------------------------------------------------------------------


def _p(xs: list[float], q: int) -> str:
    return f"{percentile(xs, q):.2f} s" if xs else "–"


def level_lines(res: LoadResult, interval_s: float, duration_s: float) -> list[str]:
    n = len(res.sessions)
    light = res.latencies(lambda s: not s.heavy)
    heavy = res.latencies(lambda s: s.heavy)
    first = sorted(s.first_run_s for s in res.sessions if s.first_run_s == s.first_run_s)
    loads = sorted(s.page_load_s for s in res.sessions if s.page_load_s == s.page_load_s)
    problems = res.problems
    passes = res.passes()
    arrival = f"within {res.arrivals_s:g} s" if res.arrivals_s else "at once"
    k = len(res.replicas)
    tags = [t for t in (res.label, f"{k} replicas behind nginx, sharing the {CORES} cores" if k else "") if t]
    # behind the proxy the class's CPU and memory are the replicas' summed
    server, summed, whose = ("Servers'", f" ({k} replicas together)", "servers'") if k else ("Server", "", "server's")
    lines = [
        f"### {n} sessions arriving {arrival}, an input every {interval_s:g} s for {duration_s:g} s each"
        + (f" — {'; '.join(tags)}" if tags else ""),
        "",
        f"- Wall time {res.wall_s:.0f} s; inputs answered {res.inputs}; first runs finished {len(first)}/{n}; "
        f"problems {len(problems)}"
        + (" (no exception or error box, no lost run, no dropped websocket)." if not problems else ":"),
        *[f"  - {p}" for p in problems[:12]],
        f"- First run (connect → the page's `script_finished`): p50 {_p(first, 50)}, p95 {_p(first, 95)}, "
        f"longest {first[-1]:.1f} s"
        + (f"; of which the page load over HTTP p50 {_p(loads, 50)}, p95 {_p(loads, 95)}." if loads else ".")
        if first
        else "- First run: none finished.",
        f"- Input → last delta, light pages (masks, operator, seq2seq): p50 {_p(light, 50)}, p95 {_p(light, 95)}"
        + (
            f" — target p95 ≤ {LIGHT_TARGET_S:g} s: {verdict(percentile(light, 95), LIGHT_TARGET_S, 's')}."
            if light
            else "."
        )
        + f" Heavy pages (multihead, language_model): p50 {_p(heavy, 50)}, p95 {_p(heavy, 95)}.",
        f"- {server} CPU{summed}: {res.server_cpu_s:,.0f} s over the class, "
        f"{res.server_cpu_s / max(res.inputs, 1):.2f} s per input answered (first runs included), "
        f"{res.server_cpu_s / res.wall_s:.2f} of the {CORES} cores on average"
        + (f"; nginx {res.proxy_cpu_s:,.1f} s ({res.proxy_cpu_s / res.wall_s:.2f} of a core)." if k else "."),
        f"- {server} memory{summed}: {res.rss_before_mb:,.0f} MB before the class, "
        f"peak (VmHWM) {res.peak_rss_mb:,.0f} MB.",
        "- p95 passes 5 s "
        + (f"at {passes - BUCKET + 1}–{passes} connected sessions." if passes else "at no class size reached here.")
        + (
            " By connected sessions when the input was sent: "
            + ", ".join(f"≤ {hi}: {p95:.2f} s ({k} inputs)" for hi, k, p95 in res.by_size())
            + "."
            if res.by_size()
            else ""
        ),
    ]
    if runs := res.server_runs_s:
        lines.append(
            f"- The {whose} own part: {len(runs)} script runs took p50 {_p(runs, 50)}, p95 {_p(runs, 95)}, longest "
            f"{runs[-1]:.1f} s from start to end (waits for the shared cores included)."
        )
    lines += replica_lines(res)
    lines += [
        "",
        "| page | input | sessions | first run p50 | inputs answered | input → last delta p50 | p95 | problems |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for sc in SCENARIOS:
        group = [s for s in res.sessions if s.page == sc.page]
        if not group:
            continue
        xs = res.latencies(lambda s, page=sc.page: s.page == page)
        firsts = sorted(s.first_run_s for s in group if s.first_run_s == s.first_run_s)
        bad = sum(bool(s.failure) + len(s.errors) for s in group)
        lines.append(
            f"| {sc.page} | {sc.what} | {len(group)} | {_p(firsts, 50)} | {len(xs)} | {_p(xs, 50)} | {_p(xs, 95)} "
            f"| {bad} |"
        )
    return lines


def replica_lines(res: LoadResult) -> list[str]:
    """Behind the proxy, a table of the replicas: the sessions the proxy sent to each (all of a session's requests),
    their inputs, and the replica's CPU and memory over the class. None for one server."""
    if not res.replicas:
        return []
    lines = [
        "",
        "| replica | sessions routed to it | inputs answered | input → last delta p50 | p95 | server CPU "
        f"| of the {CORES} cores | memory before | peak (VmHWM) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res.replicas:
        group = res.routed_to(r)
        xs = sorted(t for s in group for t, _ in s.answers)
        lines.append(
            f"| {r.address} | {len(group)} | {len(xs)} | {_p(xs, 50)} | {_p(xs, 95)} | {r.cpu_s:,.0f} s "
            f"| {r.cpu_s / res.wall_s:.2f} | {r.rss_before_mb:,.0f} MB | {r.peak_rss_mb:,.0f} MB |"
        )
    return lines


def section(
    levels: list[LoadResult], command: str, header: str, interval_s: float, duration_s: float, note: str
) -> str:
    k = max((len(res.replicas) for res in levels), default=0)
    lines = [
        "## Load: the server alone, sessions speaking Streamlit's protocol (no browser)"
        if not k
        else f"## Load behind nginx: {k} replicas on the same {CORES} cores, sessions speaking Streamlit's protocol",
        "",
        f"Command: `{command.strip()}` (from the repository root; `benchmarks/load.py`).",
        "",
        f"Machine: {header}." + (f" {note}" if note else ""),
        "",
        "Each session first loads the page's HTML, scripts and styles over HTTP as a browser does before it connects, "
        "then opens one websocket on `/_stcore/stream` sending the `BackMsg`s a browser sends (the page by its "
        "path on arrival, then `rerun_script` with the changed widget's state and fragment) and reading every "
        "`ForwardMsg`, so the server does all it does for a real student on their own machine and the cores are "
        "not shared with browsers (the `classroom` section's are). Sessions below the first screen stay boxes "
        "(nobody scrolls). Session *i* works on the page of scenario *i* mod "
        f"{len(SCENARIOS)}: " + ", ".join(f"{s.page} ({s.what})" for s in SCENARIOS) + "; the server starts as "
        "`make run` does and is warmed by one session per page first.",
        "",
    ]
    if k:
        lines += [
            f"Here {k} such servers are replicas, each on its own free port and warmed the same way, behind nginx "
            "run from `deploy/nginx.conf` as it is (only its listen port, the replicas' addresses and its paths "
            "replaced: `harness/proxy.py`). Each session sends its own routing cookie (`tx_route=load-<i>`, as "
            "each browser gets its own random key) with every HTTP request and with its websocket, so the proxy "
            f"keeps all of it on one replica; the proxy's log tells which. The {k} replicas, nginx and the client "
            f"share the same {CORES} cores of one machine: replicas add Python interpreters, not cores. One server "
            "alone is the `load` section.",
            "",
        ]
    for res in levels:
        if res.alone:
            where = "first replica (straight on its port)" if k else "server"
            lines += [
                f"One session at a time on the warm {where}{f' ({res.label})' if res.label else ''} (server CPU from "
                "`/proc/<pid>/stat`; a page load over HTTP, each page's first run, then per input with the median "
                "input → last delta): "
                + "; ".join(f"{what} {cpu:.2f} CPU s, {t:.2f} s" for what, (cpu, t) in res.alone.items())
                + ".",
                "",
            ]
        lines += [*level_lines(res, interval_s, duration_s), ""]
    return "\n".join(lines).rstrip()


def _parser():
    p = parser("load", __doc__)
    p.add_argument("--sessions", type=int, nargs="+", default=[30, 100], help="class sizes, each on fresh servers")
    p.add_argument(
        "--arrivals",
        type=float,
        nargs="+",
        default=None,
        help="seconds over which each class comes in (default: 1 s per session)",
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds of inputs per session")
    p.add_argument("--interval", type=float, default=5.0, help="seconds from one input of a session to its next")
    p.add_argument("--alone", type=int, default=3, help="inputs per page by one session before the class (0: none)")
    p.add_argument(
        "--ungated",
        action="store_true",
        help=f"the first class again with every first run let in at once ({admission.ENV_SLOTS}={UNGATED})",
    )
    p.add_argument("--no-static", action="store_true", help="sessions skip the page's HTML and scripts over HTTP")
    p.add_argument(
        "--reference",
        action="store_true",
        help=f"each class first on a server whose frontend files Streamlit serves itself ({STATIC_GZIP}=0)",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help=f"servers behind nginx from deploy/nginx.conf (more than 1: section {REPLICAS_KEY})",
    )
    p.add_argument("--session-log", action="store_true", help="each session's runs and messages in the server's log")
    p.add_argument("--server-log", default="", help="write each class's server log to this path + '.<sessions>'")
    p.add_argument("--note", default="", help="a sentence for the section (e.g. what else ran on the machine)")
    p.add_argument("--repeats", type=int, default=1, help="accepted for `python -m benchmarks --repeats N`; one class")
    return p


def main(argv: list[str] | None = None) -> None:
    args, command = parse(_parser(), argv)
    header = machine(torch.device("cpu"))
    arrivals = args.arrivals or [float(n) for n in args.sessions]
    if len(arrivals) != len(args.sessions):
        raise SystemExit("--arrivals needs one value per --sessions value")
    if args.replicas < 1 or (args.replicas > 1 and NGINX is None):
        raise SystemExit("--replicas needs 1 or more, and nginx for more than 1 (make chromium installs Debian's)")
    plans = [
        Plan(n, spread, args.duration, args.interval, static=not args.no_static)
        for n, spread in zip(args.sessions, arrivals, strict=True)
    ]
    servers = [(REFERENCE, {STATIC_GZIP: "0"})] if args.reference else []
    servers.append(("", {}))
    levels = []
    for i, plan in enumerate(plans):
        for label, env in servers:  # side by side: the reference's class, then the same class on make run's server
            res = load(
                plan,
                alone_inputs=args.alone if i == 0 else 0,
                session_log=args.session_log,
                env=env,
                replicas=args.replicas,
            )
            res.label = label
            n = plan.sessions
            log.info(
                "load %d%s: %d inputs, %d problems", n, f" ({label})" if label else "", res.inputs, len(res.problems)
            )
            if args.server_log:
                Path(f"{args.server_log}.{n}{'.reference' if label else ''}").write_text(res.server_log)
            levels.append(res)
    if args.ungated and levels:  # the same first class on a server that lets every first run in at once
        res = load(plans[0], alone_inputs=0, env={admission.ENV_SLOTS: str(UNGATED)}, replicas=args.replicas)
        res.label = f"every first run let in at once ({admission.ENV_SLOTS}={UNGATED})"
        levels.append(res)
    text = section(levels, command, header, args.interval, args.duration, args.note)
    publish("load" if args.replicas == 1 else REPLICAS_KEY, text, no_write=args.no_write)


if __name__ == "__main__":
    main()
