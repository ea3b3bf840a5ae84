"""Every page in the 中文 interface, in a real browser: a screenshot each, and no English in what it shows.

The language is switched the way a user does (the sidebar's 中文 button). The page's visible text is read from
the DOM (code blocks, LaTeX and the charts left out) and the charts' titles, axes, legends and hovers from the
Plotly figures in the page (``gd.layout`` / ``gd.data``); both go through :mod:`tests.zh_text`. Screenshots:
``test-artifacts/screenshots/zh-<page>.png`` (the CJK font comes from Debian's ``fonts-noto-cjk``, installed by
``make test`` with Chromium).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_browser import (  # noqa: F401  (fixtures: the one server and browser of the browser suite's setup)
    IDLE,
    LONG,
    PLOT,
    SHOTS,
    app,
    app_pages,
    browser,
    charted_page,
    draw_below_fold,
    model_root,
    page_url,
    server,
)
from tests.zh_text import english_in_figure, english_words

pytestmark = pytest.mark.browser

# Text nodes the check reads: the page body, our part of the sidebar and the page names in its navigation; not
# code, LaTeX, charts, italics (variables, paper titles), data (table cells, ``st.text``, the text in input
# boxes), icons (Material Symbols are ligatures: the icon "home" is the text "home") or Streamlit's own controls
# ("View 5 more"), and only what is rendered.
READ_TEXT = """() => {
  const skip = '[data-testid="stCode"], code, pre, .katex, .katex-display, [data-testid="stPlotlyChart"], em, '
    + 'style, script, [data-testid="stToolbar"], textarea, input, td, [data-testid="stText"], '
    + '[data-testid="stIconMaterial"]';
  const roots = document.querySelectorAll(
    '[data-testid="stMain"], [data-testid="stSidebarUserContent"], [data-testid="stSidebarNavLink"]');
  const out = [];
  for (const root of roots) {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      const el = node.parentElement;
      if (!node.textContent.trim() || el.closest(skip) || !el.getClientRects().length) continue;
      if (getComputedStyle(el).fontFamily.includes('Material')) continue;  // an icon without its test id
      out.push(node.textContent.trim());
    }
  }
  return out;
}"""
# The words of every Plotly figure on the page (not its data): the figure JSON the check reads.
READ_FIGURES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => {
  const layout = {title: gd.layout.title, annotations: (gd.layout.annotations || []).map(a => ({text: a.text}))};
  for (const [k, v] of Object.entries(gd.layout)) if (/^[xy]axis\\d*$/.test(k)) layout[k] = {title: v.title};
  const data = gd.data.map(t => ({name: t.name, showlegend: t.showlegend, hovertemplate: t.hovertemplate,
    colorbar: t.colorbar && {title: t.colorbar.title},
    marker: {colorbar: t.marker && t.marker.colorbar && {title: t.marker.colorbar.title}}}));
  return {layout, data};
})"""


def switch_to_chinese(page) -> None:
    page.locator('[data-testid="stSidebar"]').get_by_text("中文", exact=True).click()
    page.locator('[data-testid="stSidebarNav"]').get_by_text("首页").wait_for(timeout=LONG)
    page.wait_for_selector(IDLE, timeout=LONG)


@pytest.mark.parametrize("path", app_pages())
def test_page_in_chinese_shows_no_english(server, browser, path):  # noqa: F811
    slug = Path(path).stem
    with charted_page(browser, server, slug) as page:
        page.wait_for_selector(IDLE, timeout=LONG)
        switch_to_chinese(page)
        draw_below_fold(page)  # every section drawn, so every section is read
        page.wait_for_selector(f"{PLOT} .main-svg", timeout=LONG)
        page.screenshot(path=str(SHOTS / f"zh-{slug}.png"), full_page=True)
        for testid in ("stException", "stAlertContentError"):
            found = page.locator(f'[data-testid="{testid}"]')
            assert found.count() == 0, found.all_inner_texts()
        english = [f"text: {t[:120]!r} {w}" for t in page.evaluate(READ_TEXT) if (w := english_words(t, prose=True))]
        figures = page.evaluate(READ_FIGURES)
        assert figures, "the page draws its figures in 中文 too"
        english += [f"figure {i} {hit}" for i, spec in enumerate(figures) for hit in english_in_figure(spec)]
        assert not english, "\n".join(english)
