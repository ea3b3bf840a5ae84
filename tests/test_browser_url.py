"""The URL keeps the view (tx_explorer.ui.url_state) in a real browser: on the multi-head page with SmolLM2, 中文 and
a head chosen survive a reload, the Back button brings back the head chosen before, and the link opens the same view
in a new browser context (a student's browser).

The head is chosen inside the page's views fragment, whose rerun does not pass through app.py: this is the test that
such a choice reaches the URL."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from harness.browser import LONG, PLOT, assert_no_errors, page_url
from tests.test_browser import (  # noqa: F401  (fixtures: the one server and browser of the browser suite)
    app,
    browser,
    model_root,
    server,
    wait_until_idle,
)
from tx_explorer import locales

pytestmark = pytest.mark.browser

LAYER, HEAD = "17", "4"  # SmolLM2's induction head on the IOI sentence (issue 39): any head would do
OTHER = "2"  # another head, chosen and then undone with the browser's Back button


def zh(page: str, key: str) -> str:
    return locales.text(page, key, "zh")


def pick(page, key: str, option: str) -> None:
    """Type ``option`` into the select box keyed ``key`` and take the first match (its list shows a few options)."""
    box = page.locator(f".st-key-{key} input")
    box.click()
    box.fill(option)
    box.press("Enter")
    wait_until_idle(page)


def query(page) -> dict[str, str]:
    return page.evaluate("() => Object.fromEntries(new URLSearchParams(location.search))")


def assert_same_view(page) -> None:
    """中文, SmolLM2, the one head's view with layer and head chosen, no error."""
    expect(page.get_by_role("heading", name=zh("common", "page_multihead"), exact=True)).to_be_visible(timeout=LONG)
    expect(page.locator(".st-key-lang label").filter(has=page.locator("input:checked"))).to_have_text("中文")
    expect(page.locator(".st-key-mh_layer input")).to_have_value(LAYER, timeout=LONG)
    expect(page.locator(".st-key-mh_head input")).to_have_value(re.compile(rf"^{HEAD}\b"))  # "4", or "4 · kv1"
    expect(page.locator(f"{PLOT} .main-svg").first).to_be_attached(timeout=LONG)
    assert_no_errors(page)


def test_a_reload_and_a_shared_link_keep_the_language_and_the_head(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(page_url(server, "multihead"))
        page.wait_for_selector(f"{PLOT} .main-svg", timeout=LONG)
        wait_until_idle(page)
        assert query(page).get("mh_model", "").startswith("smollm2")  # the page's default, written to the URL
        page.locator(".st-key-lang").get_by_text("中文", exact=True).click()
        wait_until_idle(page)
        # A select box drawn in English shows its choice in 中文 now (it kept "Documentation sentence")
        expect(page.locator(".st-key-mh_example input")).to_have_value(zh("multihead", "example_code"))
        page.locator(".st-key-mh_view").get_by_text(zh("multihead", "tab_head"), exact=True).click()
        wait_until_idle(page)
        pick(page, "mh_layer", LAYER)
        pick(page, "mh_head", HEAD)
        page.wait_for_function(f"() => new URLSearchParams(location.search).get('mh_head') === '{HEAD}'")
        assert {k: query(page).get(k) for k in ("lang", "mh_view", "mh_layer")} == {
            "lang": "zh",
            "mh_view": "head",
            "mh_layer": LAYER,
        }
        shared = page.url

        # Back: the earlier head again (the URL wins only on Back or Forward: ui.url_state)
        pick(page, "mh_head", OTHER)
        page.wait_for_function(f"() => new URLSearchParams(location.search).get('mh_head') === '{OTHER}'")
        page.go_back()
        expect(page.locator(".st-key-mh_head input")).to_have_value(re.compile(rf"^{HEAD}\b"), timeout=LONG)
        wait_until_idle(page)
        assert page.url == shared

        page.reload()
        wait_until_idle(page)
        assert_same_view(page)
        assert page.url == shared
    finally:
        page.close()

    context = browser.new_context(viewport={"width": 1400, "height": 1000})  # another browser: no state of ours
    try:
        student = context.new_page()
        student.goto(shared)
        wait_until_idle(student)
        assert_same_view(student)
    finally:
        context.close()
