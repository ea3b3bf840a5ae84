"""Every section's opening in headless Chromium: each page's first visit and each section that opens on demand, from
the click until the app is idle, the first time since the server started (cold caches) and again in a new session.

    python -m benchmarks sections                     # every page of app.py
    python -m benchmarks sections --only cost_of_attention vision_transformer --no-write

On a warm server started as ``make run`` starts it (``serve.py``; Debian's Chromium through Playwright, never
``playwright install``), per page, two new browser contexts one after the other: each opens the home page (for the
home page itself, the page after it), clicks the page's sidebar link (its first visit), draws every section below
the first screen, then opens each section that opens on demand (``ui.lazy_section``: expanders keyed
``*_open_*``) one at a time, including those an opened section reveals. Notes whether a progress bar
(``st.progress``: the job helpers' bar) was shown while it opened. Writes the section ``sections`` of BENCHMARKS.md.
"""

from __future__ import annotations

import logging
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError

from benchmarks import before, parser, publish, verdict
from benchmarks.browser import chosen_pages, chromium, opening
from harness.browser import IDLE, LONG, VIEWPORT, app_pages, draw_below_fold, running_server

log = logging.getLogger("benchmarks.sections")
TARGET_S = 2.0  # no section takes longer to open without a progress bar
QUIET_MS = 500  # idle this long after an opening's last run: the sections it drew as boxes have run too
# Arms the clock for one opening: the next click (capture phase: before the app sees it) starts it; each script run
# that ends afterwards (the state attribute leaves "running") moves its end, and so does each change drawn inside
# ``where`` (the section; the main area for a first visit): a rerun served from caches can be over before React
# ever writes "running", and then only what it drew tells that it happened. A progress bar added meanwhile is noted.
ARM = """(where) => {
  window.__open = {start: null, end: null, runs: 0, drawn: null, bar: false, where: where};
  if (window.__openWatch) return;
  window.__openWatch = true;
  document.addEventListener('click', () => {
    if (window.__open.start === null) window.__open.start = performance.now();
  }, true);
  const app = document.querySelector('[data-testid="stApp"]');
  const bar = '[data-testid="stProgress"]';
  new MutationObserver(records => {
    const o = window.__open;
    if (o.start === null) return;
    for (const r of records) {
      if (r.type === 'attributes') {
        if (r.target === app && (r.oldValue === 'running' || r.oldValue === 'rerunRequested')
            && app.getAttribute('data-test-script-state') === 'notRunning') {
          o.runs++;
          o.end = performance.now();
        }
        continue;
      }
      const box = document.querySelector(o.where);
      if (box && box.contains(r.target)) o.drawn = performance.now();
      if (!o.bar && [...r.addedNodes].some(n => n.matches && (n.matches(bar) || n.querySelector(bar)))) o.bar = true;
    }
  }).observe(app, {subtree: true, childList: true, attributes: true, attributeOldValue: true,
                   attributeFilter: ['data-test-script-state']});
}"""
# Done: a run ended, or, none seen, something was drawn and 1.5 s have passed (time for a busy server to start the
# run the click asked for: the expander itself draws at once, before any run).
RAN = """() => (window.__open.runs > 0
                || (window.__open.drawn !== null && performance.now() - window.__open.start > 1500))
  && document.querySelector('[data-testid="stApp"]').getAttribute('data-test-script-state') === 'notRunning'"""
# Resolves once the app has stayed idle for ``ms`` (a run or a change drawn meanwhile restarts the wait), then the
# opening: click → the last run's end or the last change drawn, whichever came later.
SETTLED = """(ms) => new Promise(done => {
  const app = document.querySelector('[data-testid="stApp"]');
  const mark = () => `${window.__open.runs} ${window.__open.drawn}`;
  let last = mark();
  const look = () => {
    if (mark() !== last || app.getAttribute('data-test-script-state') !== 'notRunning') {
      last = mark();
      setTimeout(look, ms);
      return;
    }
    const o = window.__open;
    const shown = document.querySelector('[data-testid="stProgress"]') !== null;
    done({seconds: (Math.max(o.end ?? 0, o.drawn ?? 0) - o.start) / 1000, bar: o.bar || shown});
  };
  setTimeout(look, ms);
})"""
MAIN = '[data-testid="stMain"]'
# The sections that open on demand drawn and still closed, in page order: (key, header).
CLOSED = """() => [...document.querySelectorAll('[class*="st-key-"]')].flatMap(el => {
  const key = [...el.classList].find(c => /^st-key-\\w+_open_\\w+$/.test(c));
  if (!key || !el.querySelector('details') || el.querySelector('details[open]')) return [];
  // the header without the arrow icon's name, its maths as the TeX it was written in (KaTeX draws it twice)
  const label = (el.querySelector('summary [data-testid="stMarkdownContainer"]') || el.querySelector('summary'))
    .cloneNode(true);
  label.querySelectorAll('.katex').forEach(k => {
    const tex = k.querySelector('annotation');
    k.replaceWith('$' + (tex ? tex.textContent : k.textContent) + '$');
  });
  return [[key.slice('st-key-'.length), label.textContent.replace(/\\s+/g, ' ').trim()]];
})"""
FIRST_VISIT = "(first visit, from the sidebar)"
# First opens over the target, measured by this benchmark before their fixes (benchmarks/before.json):
# (page, section key) → seconds.
_BEFORE = before("sections")
BEFORE_DATE = _BEFORE["date"]
BEFORE = {tuple(key.split("/")): seconds for key, seconds in _BEFORE["first_open_s"].items()}


@dataclass
class Opening:
    seconds: float | None  # None: not done within the browser's wait (``failure`` says what happened)
    bar: bool
    failure: str = ""


@dataclass
class Row:
    page: str
    section: str  # the section's header in English, or FIRST_VISIT
    key: str
    opens: list[Opening] = field(default_factory=list)  # the first session's (cold caches), the later ones'

    def first(self) -> Opening | None:
        return self.opens[0] if self.opens else None

    def second(self) -> Opening | None:
        """The opens in the later sessions: their median (a failure if none finished)."""
        done = [o for o in self.opens[1:] if o.seconds is not None]
        if not done:
            return self.opens[1] if len(self.opens) > 1 else None
        return Opening(statistics.median(o.seconds for o in done), any(o.bar for o in done))


def timed(page, fire, where: str = MAIN) -> Opening:
    """``fire()`` (a click) → the app idle after its runs and what they drew inside ``where`` (a selector), and
    whether a progress bar was shown meanwhile."""
    page.evaluate(ARM, where)
    fire()
    try:
        page.wait_for_function(RAN, timeout=LONG, polling=50)
    except PlaywrightError as exc:  # one section that never answers must not cost the other sections' numbers
        return Opening(None, False, (str(exc).splitlines() or [""])[0])
    found = page.evaluate(SETTLED, QUIET_MS)
    return Opening(found["seconds"], found["bar"])


def settle(page) -> None:
    """Wait until the app has been idle for a moment (a page's own follow-up runs done), outside any timing."""
    page.wait_for_selector(IDLE, timeout=LONG)
    page.wait_for_timeout(QUIET_MS)
    page.wait_for_selector(IDLE, timeout=LONG)


def session(browser, server: str, stem: str, start: str, rows: dict[str, Row]) -> None:
    """One new browser context: the page's first visit from ``start``'s sidebar, then every section opened."""
    ctx = browser.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    try:
        page.goto(server + start)
        page.wait_for_selector('[data-testid="stSidebarNav"] a', timeout=LONG)
        settle(page)
        href = "/" if stem == Path(app_pages()[0]).stem else f"/{stem}"
        link = page.locator(f'[data-testid="stSidebarNav"] a[href="{server}{href}"]')
        rows.setdefault(FIRST_VISIT, Row(stem, FIRST_VISIT, "visit")).opens.append(timed(page, link.click))
        draw_below_fold(page)
        settle(page)
        done: set[str] = set()
        while todo := [(k, h) for k, h in page.evaluate(CLOSED) if k not in done]:
            key, header = todo[0]
            done.add(key)
            summary = page.locator(f".st-key-{key} summary").first
            summary.scroll_into_view_if_needed()
            settle(page)  # a section scrolled into view may start its own run: not this opening's
            opening = timed(page, summary.click, f".st-key-{key}")
            rows.setdefault(key, Row(stem, header, key)).opens.append(opening)
            log.info("%s / %s: %s%s", stem, key, _cell(opening), " (progress bar)" if opening.bar else "")
            draw_below_fold(page)  # what the section holds below the screen, and sections it reveals
            settle(page)
    finally:
        ctx.close()


def measure(browser, server: str, stems: list[str], sessions: int) -> list[Row]:
    out = []
    home, after = (Path(p).stem for p in app_pages()[:2])
    # Every page is reached from the home page's sidebar; the home page last, from the page after it (measured by
    # then: its caches are not what the home page's first visit is timed on).
    for stem in sorted(stems, key=lambda s: s == home):
        rows: dict[str, Row] = {}
        start = f"/{after}" if stem == home else "/"
        for _ in range(sessions):
            session(browser, server, stem, start, rows)
        out += rows.values()
    return out


def _cell(o: Opening | None) -> str:
    if o is None:
        return "—"
    return f"{o.seconds:.2f} s" if o.seconds is not None else f"failed ({o.failure})"


def _bar(row: Row) -> str:
    shown = [o.bar for o in row.opens]
    return "yes" if all(shown) else "no" if not any(shown) else "first open" if shown[0] else "later opens"


def needs_fixing(row: Row) -> bool:
    """Over the target on the first open (cold caches) without a progress bar."""
    o = row.first()
    return o is not None and (o.seconds is None or o.seconds > TARGET_S) and not o.bar


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| page | section | before | first open (cold caches) | second open (new session) | ≤ 2 s (first open) "
        "| progress bar shown |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        first = r.first()
        name = r.section if r.section == FIRST_VISIT else f"{r.section} (`{r.key}`)"
        ok = verdict(first.seconds, TARGET_S, "s") if first and first.seconds is not None else "not measured"
        before = f"{BEFORE[r.page, r.key]:.2f} s" if (r.page, r.key) in BEFORE else "—"
        lines.append(f"| {r.page} | {name} | {before} | {_cell(first)} | {_cell(r.second())} | {ok} | {_bar(r)} |")
    return lines


def _parser():
    # --repeats: the new sessions per page after the first (which finds the caches cold); their median is reported
    p = parser("sections", __doc__, repeats=1)
    p.add_argument("--only", nargs="+", default=None, help="page names (default: every page of app.py)")
    return p


def main(argv: list[str] | None = None) -> None:
    title = "Sections: each page's first visit and each section opened on demand, click → app idle"
    args, lines = opening("sections", title, _parser(), argv)
    if lines is None:
        return
    stems = [Path(p).stem for p in chosen_pages(args.only)]
    with chromium() as browser, running_server() as srv:
        srv.wait_healthy()
        log.info("server warm (CPU quiet) %.1f s after the command", srv.wait_settled())
        rows = measure(browser, srv.url, stems, 1 + args.repeats)
    load = f" Load average after the run {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    over = [r for r in rows if needs_fixing(r)]
    lines += [
        "A server started as `make run` starts it (`python serve.py`, on a free port), warm (its CPU quiet for 2 s "
        "after start-up). Per page, new browser contexts one after the other, each opened on the home page (the "
        "home page's own: on the page after it): the click on the page's sidebar link is its *first visit*; the "
        "page is then scrolled through (every section drawn) and each section that opens on demand "
        "(`ui.lazy_section`) opened in turn. Time: from the click until the app's last script run ends "
        '(`data-test-script-state` leaves "running", watched by a MutationObserver) or the last change drawn inside '
        "the section, whichever is later (a rerun served from caches can end before the attribute shows it), with "
        f"the app then idle for {QUIET_MS} ms, so the sections an opening draws as boxes count too. *First open* = "
        "the first since the server started (cold caches: nothing computed yet for these inputs); *second open* = "
        f"the same in a new session (median of {args.repeats}). *Before* = the first open on {BEFORE_DATE}, before "
        "the slow ones were moved behind a progress bar (once per server) or a button. *Progress bar* = an "
        "`st.progress` bar (the job helpers') was shown while it opened.",
        "",
        f"Target: no section takes over {TARGET_S:.0f} s to open without a progress bar.",
        "",
        *table(rows),
        "",
        f"Over {TARGET_S:.0f} s on the first open without a progress bar: "
        + (", ".join(f"{r.page} / {r.section}" for r in over) if over else "none")
        + f".{load} (the load average before it is in the machine line: on 2 cores the times move with it).",
    ]
    publish("sections", "\n".join(lines), no_write=args.no_write)


if __name__ == "__main__":
    main()
