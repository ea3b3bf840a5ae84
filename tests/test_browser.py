"""The real app in a real browser: every page loads in headless Chromium with a chart and no error.

Starts ``streamlit run app.py`` on a free local port, drives Debian's Chromium through Playwright (never
``playwright install``) and saves one screenshot per page under ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
pytestmark = pytest.mark.browser


def app_pages() -> list[str]:
    """The page files listed in app.py's PAGES, in order."""
    tree = ast.parse((ROOT / "app.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES":
            return [elt.elts[0].value for elt in node.value.elts]
    raise AssertionError("app.py has no PAGES list")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TIMM_FUSED_ATTN": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address", "127.0.0.1"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the app did not answer /_stcore/health within 60 s:\n" + proc.stdout.read().decode(errors="replace"))
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed; `make test` installs Debian's chromium when apt is usable")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def wait_until_idle(page, timeout: float = 120_000) -> None:
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def test_deep_link_on_a_fresh_server_gets_the_whole_app(server, browser):
    """The first visitor after start-up may arrive on /masks: they must still get app.py's sidebar."""
    page = browser.new_page()
    try:
        page.goto(server + "/masks")
        page.get_by_text("中文").wait_for(timeout=180_000)  # the language switch lives in app.py's sidebar
        wait_until_idle(page)
        assert page.locator('[data-testid="stSidebarNav"]').get_by_text("app", exact=True).count() == 0
    finally:
        page.close()


@pytest.mark.parametrize("path", app_pages())
def test_page_renders_a_chart_without_errors(server, browser, path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    slug = Path(path).stem
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(server + ("/" if path == app_pages()[0] else f"/{slug}"))
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=180_000)
        wait_until_idle(page)
        page.screenshot(path=str(SHOTS / f"{slug}.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0, page.locator('[data-testid="stException"]').all_inner_texts()
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0, page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    finally:
        page.close()
