"""Widget labels that wrapped in a real browser stay on one line: a label written with KaTeX ($D_H$, $H_{kv}$) is
wider than its plain letters, and a label on two lines beside neighbours on one pushes its input below theirs. These
are the labels that wrapped at 1400 px (the browser suite's window) or left a lone bracket on a second line at
1100 px, in English and 中文; each is checked in the column the page gives it.

One server and browser for the browser suite (``tests/test_browser.py``'s fixtures); the two pages are light (no
model to load), so the module takes a few seconds a page and language."""

from __future__ import annotations

import pytest

from harness.browser import IDLE, LONG, draw_below_fold, page_url
from tests.test_browser import (  # noqa: F401  (fixtures: the one server and browser of the browser suite)
    app,
    browser,
    model_root,
    server,
)

pytestmark = pytest.mark.browser

# page → [(widget key, window widths at which its label must fit on one line)]
LABELS = {
    "block_roles": [("probe_token", (1400,))],
    "cost_of_attention": [
        ("cost_n", (1400, 1100)),
        ("cost_kv", (1400, 1100)),
        ("cost_dh", (1400, 1100)),
        ("cost_repeats", (1400,)),
    ],
}
# Lines of a label: its text's boxes (KaTeX's visible glyphs included, its MathML copy not) grouped by their vertical
# centres; a sub- or superscript sits within a line's height of its base, a second line a full line height below.
LINES = """(key) => {
  const where = `.st-key-${key} [data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"]`;
  const label = document.querySelector(where);
  if (!label) return null;
  const centres = [];
  const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    if (!node.textContent.trim() || node.parentElement.closest('.katex-mathml')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) if (r.width > 0) centres.push((r.top + r.bottom) / 2);
  }
  const height = parseFloat(getComputedStyle(label.querySelector('p') || label).lineHeight);
  centres.sort((a, b) => a - b);
  let lines = 0, last = -Infinity;
  for (const y of centres) if (y - last > 0.6 * height) { lines++; last = y; }
  return lines;
}"""


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("slug", list(LABELS))
def test_labels_fit_on_one_line(browser, server, slug, lang):  # noqa: F811
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{page_url(server, slug)}?lang={lang}")
        page.wait_for_selector(IDLE, timeout=LONG)
        draw_below_fold(page)  # the measuring section is drawn once scrolled to
        page.wait_for_selector(IDLE, timeout=LONG)
        for key, _ in LABELS[slug]:
            page.locator(f".st-key-{key} [data-testid='stWidgetLabel']").wait_for(timeout=LONG)
        wrapped = []
        for width in (1400, 1100):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_function(f"() => window.innerWidth === {width}")
            page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
            for key, widths in LABELS[slug]:
                if width in widths and (lines := page.evaluate(LINES, key)) != 1:
                    text = page.locator(f".st-key-{key} [data-testid='stWidgetLabel']").inner_text()
                    wrapped.append(f"{key} at {width} px: {lines} lines ({text!r})")
        assert not wrapped, f"{slug} ({lang}): " + "; ".join(wrapped)
    finally:
        page.close()
