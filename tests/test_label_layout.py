"""Widget labels that wrapped in a real browser stay on one line: a label written with KaTeX ($D_H$, $H_{kv}$) is
wider than its plain letters, and a label on two lines beside neighbours on one pushes its input below theirs. These
are the labels that wrapped at 1400 px (the browser suite's window) or at 1100 px, or were cut short with "…" (a
toggle's label keeps to one line and is cut instead), in English and 中文; each is checked in the column the page
gives it.

One server and browser for the browser suite (``tests/test_browser.py``'s fixtures); the pages are light (no model,
or a tiny one named in the URL), so the module takes a few seconds a page and language."""

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
    "block_roles": [("probe_token", (1400, 1100))],
    "cost_of_attention": [
        ("cost_n", (1400, 1100)),
        ("cost_kv", (1400, 1100)),
        ("cost_dh", (1400, 1100)),
        ("cost_heads", (1400, 1100)),
        ("cost_head_dim", (1400, 1100)),
        ("cost_block", (1400, 1100)),
        ("cost_max_n", (1400, 1100)),
        ("cost_repeats", (1400, 1100)),
        ("cost_dtype", (1400, 1100)),
    ],
    "position_lab": [(key, (1400, 1100)) for key in ("rot_dh", "rot_base", "rot_pos", "rot_pairs", "rot_seed")]
    + [("rot_double", (1400, 1100))],
    "atlas": [(key, (1400, 1100)) for key in ("atlas_q", "atlas_a", "atlas_depth")],
    "multihead": [(key, (1400, 1100)) for key in ("mh_example", "mh_hide", "mh_repeat")],
    # "Key/value heads" first wrapped with "(0: = H)" in it, and five inputs a row cut the MLP and position choices
    "model_sizes": [
        (f"sizes_{name}", (1400, 1100))
        for name in ("layers", "dim", "heads", "kv_heads", "vocab", "context", "mlp", "pos", "tie")
    ]
    + [("sizes_share", (1400, 1100))],
}
# What a page needs before those labels are drawn: a tiny model named in the URL, a section opened on demand.
QUERY = {"atlas": "&atlas_model=tiny-llama", "multihead": "&mh_model=tiny-gpt"}
OPEN = {"atlas": ("atlas_open_needle",)}
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
# A label cut short: a box of it that ends its text with "…" (text-overflow) because the text is wider than the box.
CUT = """(key) => {
  const label = document.querySelector(`.st-key-${key} [data-testid="stWidgetLabel"]`);
  return [label, ...label.querySelectorAll('*')].some(
    (e) => getComputedStyle(e).textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth);
}"""


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("slug", list(LABELS))
def test_labels_fit_on_one_line(browser, server, slug, lang):  # noqa: F811
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{page_url(server, slug)}?lang={lang}{QUERY.get(slug, '')}")
        page.wait_for_selector(IDLE, timeout=LONG)
        draw_below_fold(page)  # the measuring section is drawn once scrolled to
        page.wait_for_selector(IDLE, timeout=LONG)
        for key in OPEN.get(slug, ()):
            page.locator(f".st-key-{key} summary").first.click()
            page.wait_for_selector(IDLE, timeout=LONG)
        for key, _ in LABELS[slug]:
            page.locator(f".st-key-{key} [data-testid='stWidgetLabel']").wait_for(timeout=LONG)
        wrapped = []
        for width in (1400, 1100):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_function(f"() => window.innerWidth === {width}")
            page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
            for key, widths in LABELS[slug]:
                if width not in widths:
                    continue
                lines, cut = page.evaluate(LINES, key), page.evaluate(CUT, key)
                if lines != 1 or cut:
                    text = page.locator(f".st-key-{key} [data-testid='stWidgetLabel']").inner_text()
                    wrapped.append(f"{key} at {width} px: {lines} lines{', cut with …' if cut else ''} ({text!r})")
        assert not wrapped, f"{slug} ({lang}): " + "; ".join(wrapped)
    finally:
        page.close()
