"""A classroom on one server: many browser sessions at once, each making an input every few seconds.

Headless Chromium (Debian's, through Playwright's async API: one event loop drives every session, a browser per 8
sessions) and one server started as ``make run`` does. Session ``i`` is its own browser context on the page of
``SCENARIOS[i % n]``, so the class is spread over cheap inputs (a slider, a language switch, a number) and heavy
ones (a language model, an ablation of every head). Each session types its own marker word and checks that its page
shows it and no other session's marker. :func:`classroom` returns every input's time, the server's peak memory
(``VmHWM``) and whatever failed: an exception or error box on a page, a traceback in the server's log, a leaked
marker, an input without an answer. ``tests/test_classroom.py`` asserts correctness on it;
``python -m benchmarks classroom`` publishes its timings (BENCHMARKS.md's ``classroom`` section).
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from harness.browser import (
    APP,
    ARGS,
    BELOW_FOLD,
    CHART,
    CHROMIUM,
    DONE,
    ERRORS,
    IDLE,
    NEXT_BELOW_FOLD,
    PAINTED,
    PLOT,
    QUIET,
    QUIET_MS,
    SHOWN,
    STILL,
    VIEW_DRAWN,
    VIEWPORT,
    WATCH,
    WORDS,
    machine_cpu_s,
    page_url,
    process_cpu_s,
    running_server,
    status_mb,
)
from harness.timed_serve import RUN_LINE
from tx_explorer import locales

log = logging.getLogger("harness.classroom")
TIMED_APP = ("harness/timed_serve.py",)  # serve.py, each script run's server time in its log
CODE = '[data-testid="stCode"]'
OPEN_TIMEOUT_MS = 360_000  # a first visit while others load theirs: 30 floor pages at once took 68–154 s here
CORES = os.cpu_count() or 1
ANSWER_TIMEOUT_MS = 120_000  # one input's answer; past it the input counts as unanswered
# Single tokens in every bundled tokenizer (so they show whole in the token displays), absent from the typed
# templates and from each other: a session that sees another's marker has been given another's state.
MARKERS = (
    "module thread window buffer server stream header widget record format script memory config tuple cache frame"
).split()
# One Chromium stalls past a dozen Streamlit pages at once on this machine (pages stay on their loading skeletons
# with the server idle; BENCHMARKS.md's classroom section), so the class is shared among a few of them.
CONTEXTS_PER_BROWSER = 8
# Pictures are not decoded (no chart needs one); routing requests to block fonts as well would send every request
# of 30 sessions through the driver, which costs more than the fonts.
CHROMIUM_ARGS = [
    *ARGS,
    "--disable-renderer-backgrounding",
    "--blink-settings=imagesEnabled=false",
]


# ---- what each session does --------------------------------------------------------------------------------------

Fire = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    """One page and its input. ``prepare(page, marker, j, k)`` sets up input ``k`` of the ``j``-th session on this
    page and returns the timed action; ``own(marker, j, k)`` is what that input makes the page show (None: nothing
    session-specific to look for), found in ``display`` (None: anywhere on the page)."""

    page: str
    what: str
    prepare: Callable[[object, str, int, int], Awaitable[Fire]]
    own: Callable[[str, int, int], str] | None = None
    display: str | None = None


def typed(selector: str, template: str, submit: str = "Enter") -> Callable:
    async def prepare(page, marker: str, j: int, k: int) -> Fire:
        box = page.locator(selector).first
        await box.fill(template.format(marker=marker, word=WORDS[k % len(WORDS)], n=j, k=k % 2))
        return lambda: box.press(submit)

    return prepare


def opened(header: str, prepare: Callable) -> Callable:
    """``prepare`` for an input inside a section that opens on demand: its header is clicked before the first input
    (that input's time then includes the section's first drawing)."""

    async def wrapped(page, marker: str, j: int, k: int) -> Fire:
        if k == 0:
            target = page.get_by_text(header, exact=True)
            # As a reader does: scroll to the header and let the sections that scrolling brought into view draw
            # before clicking, so the input's time is the section's own. (A click in the same instant travels inside
            # their request; the app draws it all the same: README, "A section whose run was lost".)
            await target.scroll_into_view_if_needed()
            await page.evaluate(QUIET, QUIET_MS)
            await target.click()
        return await prepare(page, marker, j, k)

    return wrapped


def scrolled(prepare: Callable) -> Callable:
    """``prepare`` for an input in a section below the first screen (drawn once scrolled near): the page is scrolled
    through, each section drawn in turn, before the first input."""

    async def wrapped(page, marker: str, j: int, k: int) -> Fire:
        if k == 0:
            await _draw_below_fold(page)
        return await prepare(page, marker, j, k)

    return wrapped


# The top of the box ``selector`` relative to the window's height (1 = its bottom edge), or null once it is drawn
# (gone, or kept hidden: harness.browser's SHOWN).
_BOX_TOP = f"""(selector) => {{ const box = ({SHOWN})(selector)[0];
  return box ? box.getBoundingClientRect().top / window.innerHeight : null; }}"""


async def _draw_below_fold(page) -> None:
    """Scroll to each section not drawn yet, in turn, until it is drawn, as a reader would: a section that moves
    out of view before it is drawn (those above it growing as their charts arrive) is scrolled to again; one that
    stays in view undrawn for ``OPEN_TIMEOUT_MS`` is a failure."""
    while name := await page.evaluate(NEXT_BELOW_FOLD, BELOW_FOLD):
        in_view_since = time.monotonic()
        while (top := await page.evaluate(_BOX_TOP, f".{name}")) is not None:
            if not -1 < top < 1.1:  # out of view (ui.REACH is a tenth of the window): scroll to it again
                break
            if time.monotonic() - in_view_since > OPEN_TIMEOUT_MS / 1000:
                raise RuntimeError(f"section {name} in view for {OPEN_TIMEOUT_MS / 1000:.0f} s and not drawn")
            await asyncio.sleep(0.25)


def clicked(selector: str) -> Callable:
    async def prepare(page, marker: str, j: int, k: int) -> Fire:
        target = page.locator(selector).first
        await target.scroll_into_view_if_needed()
        return target.click

    return prepare


def slider_key(nth: int, keys: tuple[str, str] = ("ArrowRight", "ArrowLeft")) -> Callable:
    """The ``nth`` slider moved one step by ``keys[k % 2]`` (a slider that opens at its end starts with a step back)."""

    async def prepare(page, marker: str, j: int, k: int) -> Fire:
        await page.locator('[data-testid="stSlider"] input[type="range"]').nth(nth).focus()
        return lambda: page.keyboard.press(keys[k % 2])

    return prepare


def picked(container: str, options: tuple[str, ...]) -> Callable:
    """Input ``k`` clicks option ``k + 1`` of a radio (the first is the one shown on opening)."""

    async def prepare(page, marker: str, j: int, k: int) -> Fire:
        target = page.locator(container).get_by_text(options[(k + 1) % len(options)], exact=True)
        await target.scroll_into_view_if_needed()
        return target.click

    return prepare


def language_switch() -> Callable:
    labels = tuple(reversed(locales.LANGUAGES.values()))

    async def prepare(page, marker: str, j: int, k: int) -> Fire:
        return page.locator('[data-testid="stSidebar"]').get_by_text(labels[k % len(labels)], exact=True).click

    return prepare


def _demo(j: int, k: int) -> str:
    from tx_explorer.data import translation as tr

    return tr.DEMO_SENTENCES[(j + k + 1) % len(tr.DEMO_SENTENCES)]  # in the toy language's vocabulary


async def _cost_width(page, marker: str, j: int, k: int) -> Fire:
    """D = 576 or 640 for the first session, 704 or 768 for the second, …: each input a new width that the
    page's 8 heads divide."""
    box = page.locator(".st-key-cost_d input").first
    await box.fill(str(512 + 64 * (2 * j + k % 2 + 1)))
    return lambda: box.press("Enter")


async def _seq2seq(page, marker: str, j: int, k: int) -> Fire:
    box = page.locator(".st-key-s2s_text input").first
    await box.fill(_demo(j, k))
    return lambda: box.press("Enter")


def _marker(marker: str, j: int, k: int) -> str:
    return marker


SENTENCE = "The {marker} is ready {word}"
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("masks", "sentence + Enter", typed(".st-key-sentence input", "the {marker} sat {word}"), _marker, PLOT),
    Scenario("home", "language switch", language_switch()),
    Scenario(
        "language_model",
        "text + Ctrl+Enter",
        typed(".st-key-lm_text textarea", SENTENCE, "Control+Enter"),
        _marker,
        CODE,
    ),
    Scenario("model_sizes", "layers + Enter", scrolled(typed(".st-key-sizes_layers input", "1{n}{k}"))),
    Scenario(
        "multihead",
        "text + Ctrl+Enter",
        typed('[class*="st-key-mh_text_"] textarea', SENTENCE, "Control+Enter"),
        _marker,
        CODE,
    ),
    Scenario("operator", "slider arrow key", slider_key(1)),
    # The prompt's tokens label the cache's tensors, below the first screen: scrolled to, as a student reading them.
    Scenario("kv_cache", "prompt + Enter", scrolled(typed(".st-key-kv_prompt input", SENTENCE)), _marker, PLOT),
    Scenario(
        "position_lab",
        "positions + Enter",
        scrolled(typed(".st-key-rot_pos input", "2{n}{k}")),  # 20–21, 210–211, …: each session its own numbers
        lambda marker, j, k: f"m, n < 2{j}{k % 2}",
    ),
    Scenario(
        "moe",
        "sentence + Enter",
        scrolled(typed(f'input[aria-label="{locales.text("moe", "sentence", "en")}"]', SENTENCE)),
        _marker,
        PLOT,
    ),
    Scenario("self_attention", "Shuffle button", clicked(".st-key-shuffle button")),
    Scenario("block_roles", "text + Enter", typed(".st-key-probe_text input", SENTENCE), _marker, PLOT),
    Scenario(
        "flow", "text + Ctrl+Enter", typed(".st-key-flow_text textarea", SENTENCE, "Control+Enter"), _marker, PLOT
    ),
    # N alternates 10,000 ↔ 11,000 (10,100 ↔ 11,100 for a second session): 1020 → 1021 left the rounded FLOP chart
    # unchanged, and a fragment rerun that fast shows no "running" state either: an answer nobody could see.
    # D, not N: the FLOPs-by-N chart is drawn over every N, so a new N leaves it as it was (nothing to wait for).
    Scenario("cost_of_attention", "D + Enter", _cost_width),
    Scenario("circuit", "checkpoint slider arrow key", slider_key(0, ("ArrowLeft", "ArrowRight"))),
    Scenario(
        "atlas",
        "statistic radio",
        picked(".st-key-atlas_stat", tuple(locales.text("atlas", f"stat_{s}", "en") for s in ("first", "entropy"))),
    ),
    Scenario("vision_transformer", "seed + 1", clicked('[data-testid="stNumberInputStepUp"]')),
    Scenario("seq2seq", "demo sentence + Enter", _seq2seq),
    Scenario(
        "norms",
        "open section 5, sentence + Enter",
        opened(
            locales.text("norms", "pair_header", "en"),
            typed(f'input[aria-label="{locales.text("norms", "sentence", "en")}"]', SENTENCE),
        ),
    ),
    Scenario(
        "head_science",
        "text + Ctrl+Enter (every head ablated)",
        typed(".st-key-hs_text textarea", SENTENCE, "Control+Enter"),
    ),
)


# ---- one session --------------------------------------------------------------------------------------------------


@dataclass
class SessionResult:
    index: int
    page: str
    marker: str
    first_visit_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    late: list[int] = field(default_factory=list)  # inputs whose own answer came after another run had ended
    leaked: list[str] = field(default_factory=list)  # other sessions' markers seen on this page
    errors: list[str] = field(default_factory=list)  # exception / error boxes on the page
    failure: str = ""  # an input without an answer (timeout), a page that did not open


async def _state(page) -> str:
    """Where a page stands (for a failure's message): the app's script state, how many charts it has drawn, where
    the first section still waiting to be drawn (ui.below_fold) is, and each expander: open or not, what it holds."""
    try:
        return await page.evaluate(
            """(notDrawn) => { const app = document.querySelector('[data-testid="stApp"]');
              const boxes = ("""
            + SHOWN
            + """)(notDrawn).map(b => b.getBoundingClientRect());
              return `app ${app ? app.getAttribute('data-test-script-state') : 'absent'}, `
                + `${document.querySelectorAll('[data-testid="stPlotlyChart"]').length} chart(s), `
                + `${document.querySelectorAll('[data-testid="stSkeleton"]').length} skeleton(s), `
                + `${boxes.length} section(s) not drawn` + (boxes.length
                  ? ` (the first at ${Math.round(boxes[0].top)} px of a ${window.innerHeight} px window)` : '')
                + `, expanders: ${[...document.querySelectorAll('details')].map((d) => (d.open ? 'open' : 'closed')
                  + ` (${d.querySelectorAll('[data-testid="stElementContainer"]').length} elements)`).join(', ')
                  || 'none'}`; }""",
            BELOW_FOLD,
        )
    except Exception as exc:  # the page itself is gone
        return type(exc).__name__


# Whether the page shows ``want`` in the text of ``selector`` (``first``: its first match only).
SHOWS = """([selector, first, want]) => (first ? [document.querySelector(selector)]
  : [...document.querySelectorAll(selector)]).some(el => el !== null && el.textContent.includes(want))"""
ANSWERED = f"(own) => ({DONE})() && ({SHOWS})(own)"


def _own(scenario: Scenario, marker: str, j: int, k: int) -> list | None:
    """``SHOWS``'s argument for input ``k``: where its own answer shows and what it is (None: nothing to look for)."""
    if scenario.own is None:
        return None
    return [scenario.display or "body", scenario.display in (None, CODE), scenario.own(marker, j, k)]


async def _leaked(page, scenario: Scenario, res: SessionResult, others: list[str]) -> None:
    if scenario.display is None or not others:
        return
    shown = page.locator(scenario.display if scenario.display != CODE else CODE + " >> nth=0")
    seen = " ".join(await shown.all_text_contents())
    res.leaked += [m for m in others if m in seen and m not in res.leaked]


async def run_session(
    browser,
    url: str,
    index: int,
    scenario: Scenario,
    j: int,
    marker: str,
    others: list[str],
    stop: float,
    *,
    duration_s: float,
    interval_s: float,
    max_inputs: int,
    arrive_s: float = 0.0,
) -> SessionResult:
    """Open the page, then one input every ``interval_s`` (waiting for each answer) for ``duration_s``, at most
    ``max_inputs`` and never past ``stop`` (monotonic); never raises: what went wrong is in the result."""
    # imported here: the protocol load test (benchmarks/load.py) imports this module on machines with no browser
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    res = SessionResult(index, scenario.page, marker)
    await asyncio.sleep(arrive_s)  # when this student comes in
    ctx = await browser.new_context(viewport=VIEWPORT, reduced_motion="reduce")
    await ctx.add_init_script(script=STILL)  # thirty pages' animations would compete with the server for the cores
    ctx.set_default_timeout(ANSWER_TIMEOUT_MS)  # a fill or a click on a page that 29 others keep busy
    page = await ctx.new_page()
    try:
        t0 = time.monotonic()
        await page.goto(url, wait_until="commit", timeout=OPEN_TIMEOUT_MS)  # then the chart, not every script
        await page.wait_for_selector(CHART, timeout=OPEN_TIMEOUT_MS)
        await page.wait_for_selector(IDLE, timeout=OPEN_TIMEOUT_MS)
        res.first_visit_s = time.monotonic() - t0
        await page.wait_for_function(VIEW_DRAWN, arg=BELOW_FOLD, timeout=OPEN_TIMEOUT_MS, polling=100)
        await page.evaluate(QUIET, QUIET_MS)
        stop = min(stop, time.monotonic() + duration_s)  # two minutes of work from the moment the page is up
        await asyncio.sleep(interval_s * (index % 7) / 7)  # the class does not type in step
        for k in range(max_inputs):
            started = time.monotonic()
            if started >= stop:
                break
            fire = await scenario.prepare(page, marker, j, k)
            await page.evaluate(WATCH)
            t = time.monotonic()
            await fire()
            await page.wait_for_function(DONE, timeout=ANSWER_TIMEOUT_MS, polling=100)
            if (own := _own(scenario, res.marker, j, k)) and not await page.evaluate(SHOWS, own):
                # Another run ended first (a section reaching the screen, a fragment's): wait for the input's own.
                res.late.append(k)
                try:
                    await page.wait_for_function(ANSWERED, arg=own, timeout=ANSWER_TIMEOUT_MS, polling=100)
                except PlaywrightTimeout:
                    res.failure = f"input {k}: {own[2]!r} never shown in {own[0]}; page: {await _state(page)}"
                    break
            await page.evaluate(PAINTED)
            res.latencies_s.append(time.monotonic() - t)
            await _leaked(page, scenario, res, others)
            await asyncio.sleep(max(0.0, started + interval_s - time.monotonic()))
    except Exception as exc:  # a timeout or a vanished element: reported, the other sessions go on
        res.failure = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}; page: {await _state(page)}"
    finally:
        try:
            res.errors = await page.locator(ERRORS).all_inner_texts()
        finally:
            await ctx.close()
    return res


def percentile(xs: list[float], q: int) -> float:
    """The ``q``-th percentile (1–99) of ``xs``, nan for none."""
    if len(xs) < 2:
        return xs[0] if xs else float("nan")
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


# ---- the class ----------------------------------------------------------------------------------------------------


@dataclass
class ClassResult:
    sessions: list[SessionResult]
    wall_s: float
    peak_rss_mb: float  # the server's VmHWM at the end
    rss_before_mb: float
    server_log: str  # everything the server printed
    server_cpu_s: float  # CPU seconds the server used during the class
    machine_cpu_s: float  # CPU seconds all cores were busy during the class: the server, Chromium, the driver
    started: float = 0.0  # time.monotonic() when the class began

    @property
    def server_runs_s(self) -> list[float]:
        """Server time of each script run begun during the class, sorted; empty unless the server was
        ``harness/timed_serve.py``, which logs them."""
        runs = []
        for line in self.server_log.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == RUN_LINE and float(parts[1]) >= self.started:
                runs.append(float(parts[2]) - float(parts[1]))
        return sorted(runs)

    @property
    def tracebacks(self) -> list[str]:
        """The server log's tracebacks and error lines (Streamlit logs a script's exception there)."""
        return [line for line in self.server_log.splitlines() if "Traceback" in line or " ERROR " in line][:20]

    @property
    def latencies_s(self) -> list[float]:
        return sorted(t for s in self.sessions for t in s.latencies_s)

    @property
    def problems(self) -> list[str]:
        out = [f"server log: {line}" for line in self.tracebacks]
        for s in self.sessions:
            tag = f"session {s.index} ({s.page}, {s.marker})"
            out += [f"{tag}: {what}" for what in (s.failure and [s.failure]) or []]
            out += [f"{tag}: error on page: {e[:200]}" for e in s.errors]
            out += [f"{tag}: sees another session's marker {m!r}" for m in s.leaked]
        return out


def assign_markers(sessions: int) -> list[str]:
    """Session i's marker: the next unused one for sessions whose page shows typed tokens, "" for the others."""
    shows = [i for i in range(sessions) if SCENARIOS[i % len(SCENARIOS)].display]
    if len(shows) > len(MARKERS):
        raise ValueError(f"{sessions} sessions need {len(shows)} markers; MARKERS has {len(MARKERS)}")
    own = dict(zip(shows, MARKERS, strict=False))
    return [own.get(i, "") for i in range(sessions)]


async def _class(
    url: str, sessions: int, duration_s: float, interval_s: float, arrivals_s: float
) -> list[SessionResult]:
    from playwright.async_api import async_playwright

    markers = assign_markers(sessions)
    typed_markers = [m for m in markers if m]
    max_inputs = int(duration_s / interval_s) + 1
    async with async_playwright() as pw:
        browsers = [
            await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(-(-sessions // CONTEXTS_PER_BROWSER))
        ]
        try:
            # The class comes in over arrivals_s; each session works for duration_s from its page being up, and
            # nobody types after the bell (the last arrival's longest allowed opening and duration_s after it).
            stop = time.monotonic() + arrivals_s + OPEN_TIMEOUT_MS / 1000 + duration_s
            jobs = []
            for i in range(sessions):
                sc = SCENARIOS[i % len(SCENARIOS)]
                others = [m for m in typed_markers if m != markers[i]]
                url_i = page_url(url, sc.page)
                jobs.append(
                    run_session(
                        browsers[i % len(browsers)],
                        url_i,
                        i,
                        sc,
                        i // len(SCENARIOS),
                        markers[i],
                        others,
                        stop,
                        duration_s=duration_s,
                        interval_s=interval_s,
                        max_inputs=max_inputs,
                        arrive_s=arrivals_s * i / sessions,
                    )
                )
            return await asyncio.gather(*jobs)
        finally:
            for browser in browsers:
                await browser.close()


def run_class(
    url: str,
    pid: int,
    log_text: Callable[[], str],
    *,
    sessions: int,
    duration_s: float,
    interval_s: float,
    arrivals_s: float = 0.0,
) -> ClassResult:
    """``sessions`` browser sessions against the server at ``url`` (process ``pid``); blocking, from any thread
    (its own event loop, so it can run beside synchronous Playwright)."""
    before = status_mb(pid)["VmRSS"]
    server_cpu, busy = process_cpu_s(pid), machine_cpu_s()
    out: dict[str, object] = {}

    def drive() -> None:
        try:
            out["sessions"] = asyncio.run(_class(url, sessions, duration_s, interval_s, arrivals_s))
        except BaseException as exc:  # re-raised in the caller's thread
            out["error"] = exc

    t0 = time.monotonic()
    driver = threading.Thread(target=drive, name="classroom")
    driver.start()
    driver.join()
    if "error" in out:
        raise out["error"]
    text = log_text()
    return ClassResult(
        sessions=out["sessions"],
        wall_s=time.monotonic() - t0,
        peak_rss_mb=status_mb(pid)["VmHWM"],
        rss_before_mb=before,
        server_log=text,
        server_cpu_s=process_cpu_s(pid) - server_cpu,
        machine_cpu_s=machine_cpu_s() - busy,
        started=t0,
    )


def teacher_visit(url: str) -> float:
    """The teacher opens the app before the class comes in: seconds until its first chart is drawn."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            t0 = time.monotonic()
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url, timeout=OPEN_TIMEOUT_MS)
            page.wait_for_selector(CHART, timeout=OPEN_TIMEOUT_MS)
            page.wait_for_selector(IDLE, timeout=OPEN_TIMEOUT_MS)
            return time.monotonic() - t0
        finally:
            browser.close()


def classroom(
    *,
    sessions: int,
    duration_s: float,
    interval_s: float,
    arrivals_s: float = 0.0,
    teacher: bool = True,
    timed: bool = False,
) -> ClassResult:
    """A fresh server (as ``make run`` starts it) and the class on it; with ``teacher``, after one visit to the
    home page (the first script run imports the app's interface) and once the server's start-up work (models
    loading in the background) is over; without, the class meets the server as soon as it answers. With ``timed``
    the server logs each script run's time (``harness/timed_serve.py``; ``ClassResult.server_runs_s``)."""
    with running_server(TIMED_APP if timed else APP) as srv:
        srv.wait_healthy()
        if teacher:
            log.info("teacher's visit: %.1f s", teacher_visit(srv.url + "/"))
            log.info("server warm (CPU quiet) %.1f s after the command", srv.wait_settled())
        return run_class(
            srv.url,
            srv.proc.pid,
            lambda: srv.output(tail=None),
            sessions=sessions,
            duration_s=duration_s,
            interval_s=interval_s,
            arrivals_s=arrivals_s,
        )
