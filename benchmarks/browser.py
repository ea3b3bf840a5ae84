"""The app in headless Chromium: cold start, first visit and input → chart rendered on every page (each against
its target, beside the numbers before it and as a multiple of a minimal Streamlit page's), memory per session.

    python -m benchmarks browser                      # 3 cold starts, 3 first visits and 3 inputs per page, 4 sessions
    python -m benchmarks browser --repeats 1 --starts 1 --visits 1 --sessions 2 --only masks

The floor is ``benchmarks/_floor_app.py`` (one text box, one Plotly chart) measured the same way.

Starts the app as ``make run`` and the browser tests do (``serve.py``: ``streamlit run app.py`` with the library's
imports warmed meanwhile; Debian's Chromium through Playwright, never ``playwright install``). Writes the section
``browser`` of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from benchmarks import before, machine, parse, parser, publish, verdict
from harness.browser import (
    APP,
    ARGS,
    BELOW_FOLD,
    CHART,
    CHROMIUM,
    DONE,
    ERRORS,
    IDLE,
    PAINTED,
    QUIET,
    QUIET_MS,
    ROOT,
    VIEW_DRAWN,
    VIEWPORT,
    WATCH,
    WORDS,
    app_pages,
    draw_below_fold,
    running_server,
    status_mb,
)
from tx_explorer import locales

if TYPE_CHECKING:
    from playwright.sync_api import Browser

log = logging.getLogger("benchmarks.browser")
# The targets, Chromium on the same 2-core machine as the server.
INPUT_TARGET_S = 1.0  # an input → its chart drawn, every page
VISIT_TARGET_S = 3.0  # the first visit to any page on a warm server
COLD_TARGET_S = 6.0  # command → first chart
# The numbers before the felt-speed work (benchmarks/before.json): page → (first visit s, input → chart ms).
_BEFORE = before("browser")
BEFORE_DATE, BEFORE_COLD_S = _BEFORE["date"], _BEFORE["cold_s"]
BEFORE = {page: tuple(numbers) for page, numbers in _BEFORE["pages"].items()}
FLOOR = ("-m", "streamlit", "run", "benchmarks/_floor_app.py")  # one text box, one Plotly chart


# ---- what the user does on each page -------------------------------------------------------------------------------

Act = Callable[[object, int], Callable[[], None]]  # (page, i) → prepares the input, returns the timed keystroke/click


def type_text(selector: str, texts: Callable[[int], str], submit: str = "Enter") -> Act:
    """Fill a text box (not timed), then the timed key that submits it (Enter; Ctrl+Enter in a text area)."""

    def act(page, i: int) -> Callable[[], None]:
        box = page.locator(selector).first
        box.fill(texts(i))
        return lambda: box.press(submit)

    return act


def in_section(header: str, act: Act) -> Act:
    """``act`` on an input inside a section that opens on demand: its header is clicked before the first (warm-up)
    input, and ``act``'s own locator waits until the section's inputs are drawn."""

    def prepare(page, i: int) -> Callable[[], None]:
        if i == 0:
            page.get_by_text(header, exact=True).click()
        return act(page, i)

    return prepare


def below_fold(act: Act) -> Act:
    """``act`` on an input in a section below the first screen: the page is scrolled through (every section
    drawn) before the first (warm-up) input."""

    def prepare(page, i: int) -> Callable[[], None]:
        if i == 0:
            draw_below_fold(page)
        return act(page, i)

    return prepare


def click(selector: str) -> Act:
    def act(page, i: int) -> Callable[[], None]:
        target = page.locator(selector).first
        target.scroll_into_view_if_needed()
        return target.click

    return act


def click_text(within: str, labels: tuple[str, ...]) -> Act:
    """Click the i-th of ``labels`` (cycled) inside ``within``, e.g. the sidebar's language switch."""

    def act(page, i: int) -> Callable[[], None]:
        return page.locator(within).get_by_text(labels[i % len(labels)], exact=True).click

    return act


def slider_key(nth: int) -> Act:
    """One arrow key on the ``nth`` slider of the page, back and forth: always a new value (away from the end the
    slider starts at: a slider at its maximum, like the circuit page's last checkpoint, ignores a first right)."""

    def act(page, i: int) -> Callable[[], None]:
        thumb = page.locator('[data-testid="stSlider"] input[type="range"]').nth(nth)  # the thumb's hidden input
        thumb.focus()
        at_max = thumb.input_value() == thumb.get_attribute("max")
        first, back = ("ArrowLeft", "ArrowRight") if at_max else ("ArrowRight", "ArrowLeft")
        return lambda: page.keyboard.press(back if i % 2 else first)

    return act


def _sentences(text: str) -> Callable[[int], str]:
    return lambda i: f"{text} {WORDS[i % len(WORDS)]}"


def _demo_sentence(i: int) -> str:
    from tx_explorer.data import translation as tr

    return tr.DEMO_SENTENCES[(i + 1) % len(tr.DEMO_SENTENCES)]  # in the toy language's vocabulary


def _label(page: str, key: str) -> str:
    return locales.text(page, key, "en")


INPUTS: dict[str, tuple[str, Act]] = {
    "home": (
        "language switch (English ↔ 中文)",
        click_text('[data-testid="stSidebar"]', tuple(reversed(locales.LANGUAGES.values()))),
    ),
    "operator": ("N_K slider, one arrow key (Streamlit debounces slider input)", slider_key(1)),
    "self_attention": ("press Shuffle", click(".st-key-shuffle button")),
    "masks": ("type a sentence + Enter", type_text(".st-key-sentence input", _sentences("the cat sat on the mat"))),
    "multihead": (
        "type a text + Ctrl+Enter (SmolLM2, the default)",
        type_text(
            '[class*="st-key-mh_text_"] textarea',
            _sentences("Return a new list containing all items from the iterable"),
            "Control+Enter",
        ),
    ),
    "head_science": (
        "type a text + Ctrl+Enter (tiny-gpt: every head ablated)",
        type_text(".st-key-hs_text textarea", _sentences("Return a new list containing all items"), "Control+Enter"),
    ),
    "moe": (
        "type a sentence + Enter",
        below_fold(
            type_text(
                f'input[aria-label="{_label("moe", "sentence")}"]',
                _sentences("The function returns a new list of the keys"),
            )
        ),
    ),
    "norms": (
        "open section 5, type a sentence + Enter",
        in_section(
            _label("norms", "pair_header"),
            type_text(
                f'input[aria-label="{_label("norms", "sentence")}"]',
                _sentences("The function returns a new list of the items"),
            ),
        ),
    ),
    "block_roles": (
        "type a text + Enter",
        type_text(".st-key-probe_text input", _sentences("The function returns a new list of the items")),
    ),
    "flow": (
        "type a text + Ctrl+Enter (decomposition and route graph; the edge and the node below it once scrolled to)",
        type_text(".st-key-flow_text textarea", _sentences("The function returns a new list of the"), "Control+Enter"),
    ),
    "atlas": (
        "pick another statistic (the grid of every head redrawn)",
        click_text(
            ".st-key-atlas_stat", tuple(_label("atlas", f"stat_{s}") for s in ("entropy", "local", "distance", "first"))
        ),
    ),
    "circuit": ("checkpoint slider, one arrow key", slider_key(0)),
    "model_sizes": ("layers + Enter", below_fold(type_text(".st-key-sizes_layers input", lambda i: str(13 + i)))),
    "language_model": (
        "type a text + Ctrl+Enter",
        type_text(".st-key-lm_text textarea", _sentences("Return a new list"), "Control+Enter"),
    ),
    "vision_transformer": ("sample seed + 1 (button)", click('[data-testid="stNumberInputStepUp"]')),
    "seq2seq": ("type a sentence + Enter", type_text(".st-key-s2s_text input", _demo_sentence)),
    # D, not N: the FLOPs-by-N chart is drawn over every N, so N changes the table and summary, not the chart.
    "cost_of_attention": ("D + Enter", type_text(".st-key-cost_d input", lambda i: str(512 + 8 * (i + 1)))),
    "position_lab": (
        "rotary positions + Enter",
        below_fold(type_text(".st-key-rot_pos input", lambda i: str(48 + 8 * i))),
    ),
    "kv_cache": (
        "type a prompt + Enter (decoded token by token)",
        type_text(".st-key-kv_prompt input", _sentences("The function returns a new list of the keys")),
    ),
}


def _path(page_file: str) -> str:
    return "/" if page_file == app_pages()[0] else f"/{Path(page_file).stem}"


def open_page(browser, url: str):
    """A new browser context (its own Streamlit session) on ``url``, once a chart is drawn and the app idle."""
    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector(CHART, timeout=180_000)
    page.wait_for_selector(IDLE, timeout=180_000)
    page.evaluate(PAINTED)
    return ctx, page


# ---- the three measurements -----------------------------------------------------------------------------------------


def cold_starts(browser, starts: int, argv: tuple[str, ...] = APP) -> list[tuple[float, float, float]]:
    """(health answered, app shell drawn, first chart rendered): seconds from the command, a fresh server each."""
    out = []
    for _ in range(starts):
        with running_server(argv) as srv:
            healthy = srv.wait_healthy()
            ctx = browser.new_context(viewport=VIEWPORT)
            page = ctx.new_page()
            page.goto(srv.url + "/")
            page.wait_for_selector('[data-testid="stApp"]', timeout=180_000)
            shell = time.perf_counter() - srv.started
            page.wait_for_selector(CHART, timeout=180_000)
            page.wait_for_selector(IDLE, timeout=180_000)
            page.evaluate(PAINTED)
            out.append((healthy, shell, time.perf_counter() - srv.started))
            ctx.close()
        log.info("cold start: health %.2f s, app shell %.2f s, first chart %.2f s", *out[-1])
    return out


@dataclass
class Latency:
    first_visit_s: float
    times_ms: list[float]
    errors: int
    failure: str = ""


def input_latency(browser, url: str, act: Act, repeats: int) -> Latency:
    """Input → rerun finished, a chart present and two frames painted; median of ``repeats`` after a warm-up."""
    t0 = time.perf_counter()
    ctx, page = open_page(browser, url)
    first = time.perf_counter() - t0
    page.wait_for_function(VIEW_DRAWN, arg=BELOW_FOLD, timeout=120_000, polling=100)
    page.evaluate(QUIET, QUIET_MS)
    times = []
    try:
        for i in range(repeats + 1):
            fire = act(page, i)
            page.evaluate(WATCH)
            t0 = time.perf_counter()
            fire()
            page.wait_for_function(DONE, timeout=120_000, polling="raf")
            page.evaluate(PAINTED)
            if i:  # the first input is a warm-up
                times.append(1000 * (time.perf_counter() - t0))
        return Latency(first, times, page.locator(ERRORS).count())
    except Exception as exc:
        message = (str(exc).splitlines() or [""])[0]
        return Latency(first, times, page.locator(ERRORS).count(), f"{type(exc).__name__}: {message}")
    finally:
        ctx.close()


def visits(browser, url: str, n: int) -> list[float]:
    """Seconds to open ``url`` in ``n`` new sessions one after the other (each its own browser context)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        ctx, _ = open_page(browser, url)
        out.append(time.perf_counter() - t0)
        ctx.close()
    return out


def navigations(browser, url: str, stem: str, n: int) -> list[float]:
    """Seconds from a click on the page's sidebar link to its chart drawn and the app idle, in ``n`` new sessions
    each first opened on the home page: the first visit of a visitor moving through the app, whose browser has
    Streamlit's code and Plotly loaded already."""
    out = []
    for _ in range(n):
        ctx, page = open_page(browser, url + "/")
        try:
            link = page.locator(f'[data-testid="stSidebarNav"] a[href$="/{stem}"]')
            more = page.locator('[data-testid="stSidebarNavViewButton"]')  # the sidebar lists 10 pages, then more
            if more.count() and not link.count():
                more.click()
            page.evaluate(WATCH)
            t0 = time.perf_counter()
            link.click()
            page.wait_for_function(DONE, timeout=120_000, polling="raf")
            page.evaluate(PAINTED)
            out.append(time.perf_counter() - t0)
        finally:
            ctx.close()
    return out


@dataclass
class PageRun:
    """One page's numbers on a warm server: the input's latencies, every first visit's seconds in a new session and
    from the sidebar of an open one (none for the page the app opens on)."""

    what: str
    latency: Latency
    visits_s: list[float]
    navigations_s: list[float] = field(default_factory=list)

    @property
    def visit_s(self) -> float:
        return statistics.median(self.visits_s)

    @property
    def navigation_s(self) -> float | None:
        return statistics.median(self.navigations_s) if self.navigations_s else None

    @property
    def input_s(self) -> float | None:
        return statistics.median(self.latency.times_ms) / 1000 if self.latency.times_ms else None


def warm_page(browser, url: str, what: str, act: Act, repeats: int, n_visits: int, stem: str | None = None) -> PageRun:
    """The input latency (its session's opening is the first visit), then ``n_visits`` − 1 more first visits, and
    with ``stem`` (``url`` = the app's root + ``/stem``) ``n_visits`` first visits from the home page's sidebar."""
    lat = input_latency(browser, url, act, repeats)
    run = PageRun(what, lat, [lat.first_visit_s, *visits(browser, url, max(0, n_visits - 1))])
    if stem is not None:
        run.navigations_s = navigations(browser, url.removesuffix(f"/{stem}"), stem, n_visits)
    return run


FLOOR_INPUT = ("type a text + Enter", type_text(".st-key-floor_text input", _sentences("The floor of Streamlit")))
# The floor divides every page's number: three times a page's inputs steady it (its medians of 5 ranged 124–164 ms
# between runs on this machine, which moved every ratio by a third).
FLOOR_REPEATS = 3


def session_memory(browser, sessions: int) -> list[tuple[int, dict[str, float]]]:
    """Server RSS after start-up, then after each of ``sessions`` browser sessions opened the multi-head page."""
    path = next(p for p in app_pages() if Path(p).stem == "multihead")
    with running_server() as srv:
        srv.wait_healthy()
        rows = [(0, status_mb(srv.proc.pid))]
        contexts = []
        try:
            for k in range(1, sessions + 1):
                contexts.append(open_page(browser, srv.url + _path(path))[0])
                time.sleep(1.0)  # let the server finish sending before reading its memory
                rows.append((k, status_mb(srv.proc.pid)))
                log.info("%d session(s): RSS %.0f MB", k, rows[-1][1]["VmRSS"])
        finally:
            for ctx in contexts:
                ctx.close()
    return rows


def per_session_mb(rows: list[tuple[int, dict[str, float]]]) -> float | None:
    """(RSS with the most sessions − RSS with one) / (sessions − 1): what each further session adds."""
    if len(rows) < 3:
        return None
    (k1, one), (kn, last) = rows[1], rows[-1]
    return (last["VmRSS"] - one["VmRSS"]) / (kn - k1)


# ---- report ------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = parser("browser", __doc__)
    p.add_argument("--repeats", type=int, default=3, help="timed inputs per page (after one warm-up input)")
    p.add_argument("--starts", type=int, default=3, help="fresh server starts for the cold-start time")
    p.add_argument("--visits", type=int, default=3, help="first visits per page (new sessions) on the warm server")
    p.add_argument("--sessions", type=int, default=4, help="browser sessions on the multi-head page for memory")
    p.add_argument("--only", nargs="+", default=None, help="page names for the input latencies (default: all)")
    p.add_argument(
        "--reference",
        metavar="REV",
        help="also time the pages' inputs on this git revision (e.g. the commit before a change), served the same "
        "way in the same run, side by side",
    )
    return p


def _times(x: float | None, floor: float | None) -> str:
    return f"{x / floor:.1f}×" if x is not None and floor else "—"


def _before(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:.2f} s" if unit == "s" else f"{value:,.0f} ms"


def page_row(name: str, run: PageRun, floor: PageRun | None) -> str:
    """One row of the per-page table: before → now, verdict and multiple of the floor, for both measurements."""
    before_visit, before_ms = BEFORE.get(name, (None, None))
    lat = run.latency
    note = f" (failed: {lat.failure})" if lat.failure else ""
    now_ms = f"{1000 * run.input_s:,.0f} ms" if run.input_s is not None else "—"
    input_verdict = verdict(run.input_s, INPUT_TARGET_S, "s") if run.input_s is not None else "not measured"
    fv, fi = (floor.visit_s, floor.input_s) if floor else (None, None)
    nav = run.navigation_s
    nav_cells = f"{nav:.2f} s | {verdict(nav, VISIT_TARGET_S, 's')}" if nav is not None else "— | —"
    return (
        f"| {name} | {run.what}{note} | {_before(before_visit, 's')} | {run.visit_s:.2f} s "
        f"| {verdict(run.visit_s, VISIT_TARGET_S, 's')} | {_times(run.visit_s, fv)} | {nav_cells} "
        f"| {_before(before_ms, 'ms')} "
        f"| {now_ms} | {input_verdict} | {_times(run.input_s, fi)} | {len(lat.times_ms)} | {lat.errors} |"
    )


def opening(
    key: str, title: str, p: argparse.ArgumentParser, argv: list[str] | None
) -> tuple[argparse.Namespace, list[str] | None]:
    """A browser benchmark's parsed arguments and its first lines (its title, the command, the machine); the lines
    are None once it has published that this machine has no Chromium to run it."""
    args, command = parse(p, argv)
    lines = [
        f"## {title}",
        "",
        f"Command: `{command.strip()}` (from the repository root; `make bench` runs every benchmark).",
        "",
        f"Machine: {machine(torch.device('cpu'))}.",
        "",
    ]
    if Path(CHROMIUM).exists():
        return args, lines
    lines.append(f"Not run: no Chromium at {CHROMIUM} (`make chromium` installs Debian's).")
    publish(key, "\n".join(lines), no_write=args.no_write)
    return args, None


def chosen_pages(only: list[str] | None) -> list[str]:
    """The page files of app.py, in order, or those of them named (by stem) in ``--only``."""
    return [p for p in app_pages() if only is None or Path(p).stem in only]


@contextlib.contextmanager
def reference_tree(rev: str) -> Iterator[Path]:
    """``rev``'s files (``git archive``) in a temporary folder, with this checkout's downloaded models beside them."""
    with tempfile.TemporaryDirectory(prefix="tx-reference-") as tmp:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        if (ROOT / ".models").exists():  # made by `make`, not in git
            (Path(tmp) / ".models").symlink_to(ROOT / ".models")
        yield Path(tmp)


def side_by_side(browser, rev: str, pages: list[str], runs: dict[str, PageRun], repeats: int) -> list[str]:
    """The pages' inputs timed on ``rev``'s tree, against this tree's ``runs``: the table's lines."""
    with reference_tree(rev) as root, running_server(root=root) as srv:
        srv.wait_healthy()
        srv.wait_settled()
        old = {}
        for page in pages:
            stem = Path(page).stem
            old[stem] = input_latency(browser, srv.url + _path(page), INPUTS[stem][1], repeats)
    rows = []
    for name, lat in old.items():
        was, now = (statistics.median(t) if t else None for t in (lat.times_ms, runs[name].latency.times_ms))
        ratio = f"{now / was:.2f}" if was and now else "—"
        rows.append(f"| {name} | {was or 0:,.0f} ms | {now or 0:,.0f} ms | {ratio} | {lat.errors} |")
    return [
        "",
        f"### Side by side with `{rev}` (input → chart rendered, medians of {repeats} inputs)",
        "",
        f"The same inputs on `{rev}`'s files (`git archive`), served the same way right after this tree's run, on "
        "the same machine and Chromium: a change's effect without the drift between runs of different days.",
        "",
        f"| page | `{rev}` | this tree | this tree / `{rev}` | errors on `{rev}` |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Headless Chromium (Debian's, through Playwright), closed on the way out."""
    from playwright.sync_api import sync_playwright  # here: importing this module needs no Playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> None:
    title = "Browser: cold start, input → chart rendered, memory per session"
    args, lines = opening("browser", title, _parser(), argv)
    if lines is None:
        return
    pages = chosen_pages(args.only)
    with chromium() as browser:
        starts = cold_starts(browser, args.starts)
        floor_starts = cold_starts(browser, args.starts, FLOOR)
        with running_server(FLOOR) as srv:
            srv.wait_healthy()
            srv.wait_settled()
            floor = warm_page(browser, srv.url + "/", *FLOOR_INPUT, FLOOR_REPEATS * args.repeats, args.visits)
            log.info("floor: %s", floor)
        runs: dict[str, PageRun] = {}
        with running_server() as srv:
            srv.wait_healthy()
            settled = srv.wait_settled()
            log.info("server warm (CPU quiet) %.1f s after the command", settled)
            for path in pages:
                what, act = INPUTS[Path(path).stem]
                stem = None if _path(path) == "/" else Path(path).stem
                runs[Path(path).stem] = warm_page(
                    browser, srv.url + _path(path), what, act, args.repeats, args.visits, stem
                )
                log.info("%s: %s", path, runs[Path(path).stem])
        memory = session_memory(browser, args.sessions)
        compared = side_by_side(browser, args.reference, pages, runs, args.repeats) if args.reference else []

    first = statistics.median(s for *_, s in starts)
    floor_first = statistics.median(s for *_, s in floor_starts)
    met_input = sum(r.input_s is not None and r.input_s <= INPUT_TARGET_S for r in runs.values())
    met_visit = sum(r.visit_s <= VISIT_TARGET_S for r in runs.values())
    navigated = [r.navigation_s for r in runs.values() if r.navigation_s is not None]
    met_nav = sum(s <= VISIT_TARGET_S for s in navigated)
    lines += [
        "Headless Chromium (Debian's, through Playwright; launched before the clock starts) on a server started "
        "with the browser tests' command, `python serve.py --server.port P --server.address 127.0.0.1` "
        "(what `make run` runs: `streamlit run app.py` while torch and the library import in a background thread). "
        "A chart counts as rendered when the page has a Plotly chart drawn (`.main-svg`), the app reports "
        '`data-test-script-state="notRunning"` after the input\'s rerun, and two animation frames have passed.',
        "",
        "Targets: input → chart ≤ "
        f"{INPUT_TARGET_S:.1f} s on every page, first visit to any page on a warm server ≤ {VISIT_TARGET_S:.0f} s, "
        f"cold start ≤ {COLD_TARGET_S:.0f} s. *Before* = this table on {BEFORE_DATE}, before the felt-speed work "
        "(sections drawn when reached, the job pool). "
        "*Floor* = the same measurement on `benchmarks/_floor_app.py` (one text box, one Plotly chart), served the "
        "same way (`python -m streamlit run benchmarks/_floor_app.py` with the same flags and config): what "
        'Streamlit and Chromium themselves cost here; "× floor" reads each page\'s number as a multiple of it.',
        "",
        f"### Cold start: command → first page's chart rendered (median of {len(starts)} fresh servers)",
        "",
        "serve.py imports torch and the library while the server starts (competing with it for the two cores); "
        "between the app shell and the chart the first script runs and Chromium loads Plotly and draws the page.",
        "",
        "| start | /_stcore/health answers | app shell drawn | first chart rendered | floor: first chart |",
        "|---:|---:|---:|---:|---:|",
        *[
            f"| {i + 1} | {h:.2f} s | {a:.2f} s | {s:.2f} s | {f[2]:.2f} s |"
            for i, ((h, a, s), f) in enumerate(zip(starts, floor_starts, strict=False))
        ],
        "",
        f"Median {first:.2f} s (before, {BEFORE_DATE}: {BEFORE_COLD_S:.2f} s) — target ≤ {COLD_TARGET_S:.0f} s: "
        f"{verdict(first, COLD_TARGET_S, 's')}; floor {floor_first:.2f} s, so the app's cold start is "
        f"{first / floor_first:.1f}× Streamlit's own.",
        "",
        f"### First visit and input → chart rendered, per page (warm server; medians of {args.visits} first visits "
        f"and of {args.repeats} inputs after a warm-up input, {FLOOR_REPEATS * args.repeats} on the floor)",
        "",
        "Warm = the server's CPU has been quiet for 2 s after start-up (anything it loads in the background is "
        "loaded). First visit, *new session* = opening the page's address in a new browser context (nothing cached: "
        "Chromium loads and compiles Streamlit's code and Plotly, as the floor does) until a chart is drawn and the "
        "app idle; the first of them is the first visit to that page since the server started. *From the sidebar* = "
        "a click on the page's link in a session open on the home page, until its chart is drawn and the app idle: "
        "how a visitor moving through the app first meets the page. Each input "
        "makes a new value, so no Streamlit cache returns the previous answer; the server's share of an input is its "
        "sections' compute and figures (the pages table covers the main one) plus Streamlit's own work, the rest is "
        "Chromium drawing what changed, on the same two cores as the server.",
        "",
        "| page | input | first visit before | new session | ≤ 3 s | × floor | from the sidebar | ≤ 3 s "
        "| input → chart before | now | ≤ 1 s | × floor | inputs | errors on page |",
        "|---|---|---:|---:|---|---:|---:|---|---:|---:|---|---:|---:|---:|",
        page_row("*floor*", floor, None),
        *[page_row(name, run, floor) for name, run in runs.items()],
        "",
        f"Targets met: input → chart on {met_input} of {len(runs)} pages; first visit in a new session on "
        f"{met_visit} of {len(runs)}, from the sidebar on {met_nav} of {len(navigated)}.",
        *compared,
    ]
    each = per_session_mb(memory)
    lines += [
        "",
        f"### Memory per session (server RSS from /proc/<pid>/status; {args.sessions} sessions on the multi-head page)",
        "",
        "Each session is its own browser context that opens the multi-head page with its default text and model; "
        "models and cached analyses are shared by all sessions, so further sessions add only their own state and "
        "messages.",
        "",
        "| sessions open | server RSS | peak RSS (VmHWM) |",
        "|---:|---:|---:|",
        *[f"| {k} | {mb['VmRSS']:,.0f} MB | {mb['VmHWM']:,.0f} MB |" for k, mb in memory],
        "",
        (
            f"Each further session: {each:,.1f} MB; "
            f"the first one {memory[1][1]['VmRSS'] - memory[0][1]['VmRSS']:,.0f} MB "
            "(models loaded, caches filled)."
            if each is not None
            else "Too few sessions for a per-session figure."
        ),
    ]
    text = "\n".join(lines)
    publish("browser", text, no_write=args.no_write)


if __name__ == "__main__":
    main()
