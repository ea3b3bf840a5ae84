"""The language-model page's chat in a real browser, on SmolLM2 (issue 39 item 5): the conversation keeps two turns,
the second reads the first, each reply says why it stopped (the model's end-of-turn token, then the new-token limit),
and the last reply's attention is drawn.

Drives Debian's Chromium through Playwright on the browser suite's one server (``tests/test_browser.py``); the
screenshot goes to ``test-artifacts/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from harness.browser import LONG, PLOT, SHOTS, assert_no_errors, page_url
from tests.test_browser import (  # noqa: F401  (fixtures: the one server and browser of the browser suite)
    app,
    browser,
    model_root,
    server,
    type_text,
    wait_until_idle,
)
from tx_explorer import locales

pytestmark = pytest.mark.browser

MESSAGE = '[data-testid="stChatMessage"]'


def T(key: str, **params: object) -> str:
    """The page's words (the test follows the app's wording)."""
    return locales.text("language_model", key, "en", **params)


def test_the_chat_keeps_two_turns_and_says_why_each_reply_stopped(server, browser) -> None:  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(page_url(server, "language_model"))
        page.wait_for_selector(f"{PLOT} .main-svg", timeout=LONG)
        wait_until_idle(page)
        page.get_by_text(T("chat_header"), exact=True).click()  # opens on demand and answers the default message
        expect(page.get_by_text(T("chat_stop_end"))).to_be_visible(timeout=LONG)
        wait_until_idle(page)
        expect(page.locator(MESSAGE).nth(1)).to_contain_text("Paris")
        type_text(page, T("chat_message"), "Tell me a long story about a lighthouse keeper.", area=False)
        expect(page.get_by_text(T("chat_stop_limit", new=48))).to_be_visible(timeout=LONG)  # 48: the default limit
        wait_until_idle(page)
        turns = page.locator(MESSAGE)
        expect(turns).to_have_count(4)  # two turns: the first kept above the second
        expect(turns.nth(1)).to_contain_text("Paris")
        expect(turns.nth(2)).to_contain_text("lighthouse keeper")
        expect(page.get_by_text(T("chat_stop_end"))).to_be_visible()  # the first reply's reason, still said
        # PLOT: not the hidden copy Streamlit retains of the first reply's chart (harness.browser); .first: the
        # rerun's faded copy can still be there when the chart is first looked for
        read = page.locator(PLOT).filter(has_text="What reply token 0").first
        expect(read).to_be_attached(timeout=LONG)  # what the second reply's first token read
        read.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "language-model-chat.png"), full_page=True)
        assert_no_errors(page)
    finally:
        page.close()
