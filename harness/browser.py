"""What the browser tests, the browser benchmark and the classroom share: the app served on a free port as ``make
run`` serves it, Debian's Chromium and its flags, the page's selectors, waits and timing scripts, and drawing every
section below the first screen. ``tests/`` and ``benchmarks/`` both import it; neither imports the other's helpers.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
ARTIFACTS = ROOT / "test-artifacts"
SHOTS = ARTIFACTS / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# A chart the visitor sees: Streamlit 1.67 keeps an element it "retains" (a keyed chart drawn again elsewhere, as a
# chat's last reply moves below a new turn) in the page, hidden (display: none) and marked data-retained on every
# element container inside it; a lookup that took such a copy waited on it forever (a CI run of the chat's test).
PLOT = '[data-testid="stPlotlyChart"]:not([data-retained] *)'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
CODE = '[data-testid="stCode"]'
LONG = 180_000  # ms: a page's first run loads its models on a loaded 2-core machine
CHART = f"{PLOT} .main-svg"
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'
VIEWPORT = {"width": 1400, "height": 1000}
# Run in every page of a context before the app's own scripts: no CSS animation or transition (a loading skeleton's
# shimmer, the running indicator, an expander's slide). Thirty such pages on the two cores that also serve them spent
# a third of their browsers' CPU repainting animations (288 → 224 s for the class); on a real class each student's
# machine draws its own. What the app sends and draws is unchanged.
STILL = """(() => { const still = () => { const style = document.createElement('style');
  style.textContent = '*, *::before, *::after { animation: none !important; transition: none !important; }';
  document.head.appendChild(style); };
  if (document.head) still(); else document.addEventListener('DOMContentLoaded', still); })();"""
BELOW_FOLD = '[class*="st-key-below_fold_"]'  # a section not drawn yet (ui.below_fold): drawn once scrolled near
# The boxes still shown. Once a fragment's rerun has drawn the section, Streamlit may keep the box in the page hidden
# (display: none, no client rect) until the page's next full run; a box not laid out yet still has its rect.
SHOWN = """(selector) => [...document.querySelectorAll(selector)].filter((b) => b.getClientRects().length > 0)"""
NONE_SHOWN = f"(selector) => ({SHOWN})(selector).length === 0"
# Scroll the first section not drawn yet into view, in one step (it may be drawn meanwhile); its class, or null.
NEXT_BELOW_FOLD = f"""(selector) => {{
  const box = ({SHOWN})(selector)[0];
  if (!box) return null;
  box.scrollIntoView({{block: "center"}});
  return [...box.classList].find((c) => c.startsWith("st-key-below_fold_"));
}}"""
# Counts script runs that end after the input (the state attribute leaves "running"/"rerunRequested"), so a
# rerun too fast to be seen while it runs is still noticed; and changes inside a Plotly chart, for a rerun so fast
# (the floor's) that React never writes "running" to the attribute at all.
WATCH = """() => {
  window.__benchRuns = 0;
  window.__benchCharts = 0;
  if (window.__benchObserver) return;
  const app = document.querySelector('[data-testid="stApp"]');
  window.__benchObserver = new MutationObserver(records => {
    for (const r of records) if (r.oldValue === 'running' || r.oldValue === 'rerunRequested') window.__benchRuns++;
  });
  window.__benchObserver.observe(app, {attributes: true, attributeOldValue: true,
                                       attributeFilter: ['data-test-script-state']});
  const chart = '[data-testid="stPlotlyChart"]';
  new MutationObserver(records => {
    for (const r of records)
      if ((r.target.closest && r.target.closest(chart))
          || [...r.addedNodes].some(n => n.matches && (n.matches(chart) || n.querySelector(chart)))) {
        window.__benchCharts++;
        return;
      }
  }).observe(app, {subtree: true, childList: true, attributes: true});
}"""
DONE = """() => (window.__benchRuns > 0 || window.__benchCharts > 0)
  && document.querySelector('[data-testid="stApp"]').getAttribute('data-test-script-state') === 'notRunning'
  && document.querySelector('[data-testid="stPlotlyChart"] .main-svg') !== null"""
PAINTED = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
# Resolves once the app has stayed idle for ``ms``: after a first visit, the sections in view that were drawn as
# boxes (ui.below_fold) report and run; an input timed before they are done would count their runs as its answer.
QUIET = """(ms) => new Promise(done => {
  const app = document.querySelector('[data-testid="stApp"]');
  const busy = () => app.getAttribute('data-test-script-state') !== 'notRunning';
  let timer = setTimeout(finish, ms);
  const watch = new MutationObserver(() => { clearTimeout(timer); timer = setTimeout(finish, ms); });
  watch.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  function finish() { if (busy()) { timer = setTimeout(finish, ms); return; } watch.disconnect(); done(); }
})"""
QUIET_MS = 500
# True once no section within a tenth of a screen below the visible part is still a box (ui.below_fold's reach):
# what a first visit shows is drawn, so no box's own run can be taken for an input's answer.
VIEW_DRAWN = f"""(boxes) => ({SHOWN})(boxes).every(box => box.getBoundingClientRect().top > 1.1 * window.innerHeight)"""
WORDS = ("today", "again", "at noon", "in the morning", "slowly", "twice", "for now", "once more", "here", "there")
APP = ("serve.py",)  # what `make run` runs


def app_pages() -> list[str]:
    """The page files listed in app.py's PAGES, in order."""
    tree = ast.parse((ROOT / "app.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES":
            return [elt.elts[0].value for elt in node.value.elts]
    raise AssertionError("app.py has no PAGES list")


def page_url(server: str, slug: str) -> str:
    return server + ("/" if f"pages/{slug}.py" == app_pages()[0] else f"/{slug}")


def assert_no_errors(page) -> None:
    for testid in ("stException", "stAlertContentError"):
        found = page.locator(f'[data-testid="{testid}"]')
        assert found.count() == 0, found.all_inner_texts()


def draw_below_fold(page, timeout_ms: float = 180_000, again_ms: float = 10_000) -> None:
    """Scroll to each section not drawn yet, in turn, and wait until it is drawn: the whole page is there.

    A box reports again only while in view (ui.below_fold): one whose report was lost while the sections after it
    were drawn and the page moved on (a scroll made while the page's last run still went on: the multi-head page's
    three boxes right after a view switch, 3 tabs in 30) is scrolled back to every ``again_ms``, as a visitor
    scrolls back to a section still a box."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # the harness imports without a browser

    while name := page.evaluate(NEXT_BELOW_FOLD, BELOW_FOLD):
        for waited in range(0, int(timeout_ms), int(again_ms)):
            try:
                page.wait_for_function(NONE_SHOWN, arg=f".{name}", timeout=min(again_ms, timeout_ms - waited))
                break
            except PlaywrightTimeout:
                if waited + again_ms >= timeout_ms:
                    raise
                page.evaluate(NEXT_BELOW_FOLD, f".{name}")  # back into view: it reports again


# ---- the server: serve.py on a free port --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process from ``/proc/<pid>/status``, in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024 / 1e6  # kB
    return out


def process_cpu_s(pid: int) -> float:
    """CPU seconds a process has used so far (user + system, from ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, in clock ticks


def machine_cpu_s() -> float:
    """CPU seconds every core of the machine has spent busy so far (``/proc/stat``: all but idle and iowait)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    """``serve.py`` (``streamlit run app.py``) on a free port with the browser tests' flags.

    ``started`` = before the command.
    """

    port: int = field(default_factory=free_port)
    argv: tuple[str, ...] = APP  # after the Python interpreter, before the port and address flags
    started: float = 0.0
    proc: subprocess.Popen | None = None
    log_file: object = None
    env: dict[str, str] = field(default_factory=dict)  # more environment variables for the server
    root: Path = ROOT  # the tree served (a reference revision's, for a benchmark side by side)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TIMM_FUSED_ATTN": "0"}
        env.pop("TX_EXPLORER_DRAW_ALL", None)  # the AppTests' switch (tests/conftest.py): a browser scrolls
        env.update(self.env)
        self.log_file = tempfile.TemporaryFile()  # a pipe nobody reads could fill and stall the server
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, *self.argv, "--server.port", str(self.port), "--server.address", "127.0.0.1"],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )

    def wait_healthy(self, timeout: float = 120.0) -> float:
        """Seconds from the command to ``/_stcore/health`` answering ``ok``."""
        while time.perf_counter() - self.started < timeout:
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=1).read() == b"ok":
                    return time.perf_counter() - self.started
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the app did not answer /_stcore/health within {timeout:.0f} s:\n{self.output()}")

    def output(self, tail: int | None = 4000) -> str:
        """The server's log so far (its last ``tail`` characters; None: all of it)."""
        self.log_file.seek(0)
        text = self.log_file.read().decode(errors="replace")
        self.log_file.seek(0, os.SEEK_END)
        return text[-tail:] if tail else text

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()

    def wait_settled(self, timeout: float = 180.0, quiet_s: float = 2.0) -> float:
        """Seconds until the server has used under 10 % of a core for ``quiet_s`` (its start-up work, e.g. models
        loading in the background, is over): a warm server. Gives up quietly after ``timeout``."""
        quiet, last = 0.0, process_cpu_s(self.proc.pid)
        while time.perf_counter() - self.started < timeout and quiet < quiet_s:
            time.sleep(0.5)
            now = process_cpu_s(self.proc.pid)
            quiet = quiet + 0.5 if now - last < 0.05 else 0.0
            last = now
        return time.perf_counter() - self.started


@contextlib.contextmanager
def running_server(argv: tuple[str, ...] = APP, root: Path = ROOT) -> Iterator[Server]:
    srv = Server(argv=argv, root=root)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
