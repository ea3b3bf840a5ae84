"""Does every page read like a textbook? A layout check of the rendered page, for the tests and on the command line.

In a real browser (the browser suite's Chromium), with every section of the default view drawn and the sections
that open on demand opened (but a live training run and a chat), it reads the DOM and each Plotly figure's SVG
boxes, on a 1400 px window and again on a 1280 px one, and reports, with page, language (and the narrow width) and
chart:

- a legend's box over the chart's title, a subplot title or an axis title (or a colour bar);
- a chart title wider than its chart (Plotly clips it), tick labels of one axis drawn over each other;
- an axis title cut at the figure's edge, point labels or annotations drawn over each other, a colour bar labelled
  at numbers that are not round (0.248, 0.495 …), a panel drawn with no data in it (axes waiting for a button);
- margins Plotly had to grow after measuring the labels (it then draws the chart twice: :mod:`tx_explorer.viz.margins`),
  or a chart drawn again with its data calculated again (Streamlit's copy of it: :mod:`tx_explorer.viz.sent`);
- a button with no label, or one whose label is cut ("Dat…");
- notation that did not render: raw TeX (``_{``, ``^{``, ``\\frac``, ``x_t``), Markdown (``**``), HTML entities
  (``&lt;``) or tags, a sub- or superscript after a bracket or norm (``‖A‖_F``), in the page's text or a chart's
  text and hovers (KaTeX, code and inputs are not read).
- in 中文, English in the page's text or its figures' words (:mod:`tests.zh_text`).

``python -m tests.layout_check`` starts the app (as ``make run`` does) and prints every problem of every page in
both languages; ``--url`` checks a server already running, ``--pages operator masks`` and ``--lang zh`` narrow
it. Full-page screenshots go to ``test-artifacts/layout/<lang>-<page>.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from harness.browser import (
    ARGS,
    ARTIFACTS,
    CHROMIUM,
    IDLE,
    LONG,
    PAINTED,
    PLOT,
    app_pages,
    draw_below_fold,
    page_url,
    running_server,
)
from tests.conftest import lazy_sections
from tests.zh_text import english_in_figure, english_words

SHOTS = ARTIFACTS / "layout"
VIEWPORT = {"width": 1400, "height": 1000}
# The narrowest window the layout holds to (a common laptop's; tx_explorer.viz.style.NARROWEST): each language is
# checked again there, in the same tab made narrower (a page's visit and run cost more than a second look).
NARROW_WIDTH = 1280
LANGS = ("en", "zh")
PAGE_HEIGHT = """() => { let el = document.querySelector('[data-testid="stMainBlockContainer"]');
  while (el && !/(auto|scroll)/.test(getComputedStyle(el).overflowY)) el = el.parentElement;
  return (el || document.body).scrollHeight + 100; }"""  # Streamlit's main area scrolls inside the window
# Sections opened on demand that the check leaves closed: a live training run (minutes of CPU). The chat is opened:
# its first reply (48 tokens of SmolLM2, a few seconds) draws the stop reason and the reply's attention to check.
NOT_OPENED = {"norms_open_live"}
FAILED = '[data-testid="stException"], [data-testid="stAlertContentError"]'  # a traceback or an error box

# Notation that should have been rendered: (what it is, pattern). Applied to rendered text, never to KaTeX or code.
TEX = [
    ("raw TeX subscript", re.compile(r"_\{")),
    ("raw TeX superscript", re.compile(r"\^\{")),
    ("raw TeX command", re.compile(r"\\(?!x[0-9a-f]{2}|u[0-9a-f]{4})[A-Za-z]{2,}")),  # not a token label's \xe2, \ufeff
    # x_t, D_H, M_ij, h_T: one or two letters, an underscore, up to three letters or digits (snake_case words have
    # longer stems and are not flagged)
    ("raw subscript", re.compile(r"(?<![\w\\])[A-Za-zΑ-Ωα-ω]{1,2}_[A-Za-z0-9]{1,3}(?![\w(])")),
    ("raw superscript", re.compile(r"(?<![\^])[\w)\]}‖|]\^[\w−\-+(∞{]")),  # e^loss, e^−∞, 2^n, ‖W‖^2
    # a subscript after a bracket or a norm: ‖A‖_F, (x)_i, [a]_{ij} (a word's underscore follows a letter)
    ("raw subscript", re.compile(r"[)\]}‖|]_[\w{(]")),
]
MARKUP = [
    ("Markdown bold", re.compile(r"\*\*")),
    ("Markdown code", re.compile(r"`[^`\s][^`]*`")),  # a code span left as text (one backtick may be a token)
]
ENTITIES = [
    ("HTML entity", re.compile(r"&(?:[A-Za-z]{2,8}|#\d{1,6}|#x[0-9A-Fa-f]{1,6});")),
    ("HTML tag", re.compile(r"</?(?:b|i|em|strong|br|sub|sup|span|div|p)\b[^>]*>")),
]
# Hovers are Plotly markup, read before Plotly draws them: <br> and entities are theirs to render.
HOVER_RULES = TEX + MARKUP
TEXT_RULES = TEX + MARKUP + ENTITIES

# Installed in a tab before its pages load: counts each chart's full draws after its first that calculated its data
# again. Streamlit hands Plotly.react a copy of every chart it mounts, which drops the data and draws the chart all
# over again when anything in the copy compares as changed: a template or a typed array always did (viz.sent's form
# carries neither). Plotly starts every full draw with "plotly_beforeplot" (the hook is set once the chart exists,
# so it misses only the first); a draw that keeps the data is not counted: Streamlit gives a chart in a column its
# width once it has measured the column, on some pages after the first draw, and no figure can avoid that.
COUNT_DRAWS = """new MutationObserver((changes) => {
  for (const c of changes) {
    const gd = c.target;
    if (gd.on && gd.classList.contains('js-plotly-plot') && !('redraws' in gd.dataset)) {
      gd.dataset.redraws = 0;
      gd.on('plotly_beforeplot', () => { if (!gd.calcdata) gd.dataset.redraws = +gd.dataset.redraws + 1; });
    }
  }
}).observe(document, {attributes: true, attributeFilter: ['class'], subtree: true});"""

# What the page shows, read in the browser: text (outside KaTeX, code and inputs) per block, every chart's boxes
# and texts, every button's label. Returns plain JSON; the checks run in Python (``problems``).
READ_PAGE = r"""() => {
  const SKIP = '.katex, .katex-display, [data-testid="stCode"], code, pre, textarea, input, style, script, '
    + '[data-testid="stPlotlyChart"], [data-testid="stIconMaterial"], [data-testid="stToolbar"], svg';
  const shown = (el) => {
    if (!el.getClientRects().length) return false;
    const s = getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none';
  };
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  // Text per block element (a paragraph, a list item, a label…): Markdown that half-rendered is split over
  // several nodes (h_T and s_{t−1} → h, <em>T and s</em>, {t−1}), so the nodes are joined first.
  const texts = [];
  const roots = document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebarUserContent"]');
  const BLOCK = 'p, li, h1, h2, h3, h4, h5, h6, th, td, label, summary, button, [data-testid="stCaptionContainer"], '
    + '[data-testid="stMetricValue"], [data-testid="stMetricLabel"], [data-testid="stText"]';
  for (const root of roots) {
    for (const block of root.querySelectorAll(BLOCK)) {
      if (block.closest(SKIP) || block.querySelector(BLOCK) || !shown(block)) continue;
      const walk = document.createTreeWalker(block, NodeFilter.SHOW_TEXT);
      let text = '';
      for (let n = walk.nextNode(); n; n = walk.nextNode()) if (!n.parentElement.closest(SKIP)) text += n.textContent;
      if (text.trim()) texts.push(text.trim());
    }
  }
  const buttons = [];
  for (const root of roots) {
    for (const b of root.querySelectorAll('button')) {
      if (b.closest('.modebar, [data-testid="stElementToolbar"]') || !shown(b)) continue;
      const r = b.getBoundingClientRect();
      if (r.width < 1 || r.height < 1) continue;
      const icon = b.querySelector('svg, img, [data-testid="stIconMaterial"]');
      const label = b.innerText.trim();
      // Cut: the button or an element inside it holds more text than its box shows (ellipsis or overflow).
      const cut = [b, ...b.querySelectorAll('*')].some((el) => el.scrollWidth > el.clientWidth + 1
        && el.clientWidth > 0 && getComputedStyle(el).overflowX !== 'visible');
      buttons.push({label, icon: !!icon, aria: b.getAttribute('aria-label') || '', cut});
    }
  }
  const charts = [];
  for (const gd of document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')) {
    if (!shown(gd)) continue;
    const keyed = gd.closest('[class*="st-key-fig_"]');
    const key = keyed ? [...keyed.classList].find((c) => c.startsWith('st-key-fig_')).slice(11) : '';
    const svg = gd.querySelector('.main-svg');
    const title = gd.querySelector('.g-gtitle .gtitle');
    const one = (el) => ({text: el.textContent, box: box(el)});
    const axisTitles = [...gd.querySelectorAll('.infolayer [class*="title"] text')]
      .filter((t) => !t.classList.contains('gtitle') && shown(t) && t.textContent.trim()).map(one);
    const annotations = [...gd.querySelectorAll('.annotation-text-g text, .annotation text')]
      .filter((t) => shown(t) && t.textContent.trim()).map(one);
    const legend = gd.querySelector('.infolayer .legend .bg');
    const colorbars = [...gd.querySelectorAll('.colorbar')].filter(shown).map(box);
    // Tick labels grouped by axis (each axis layer of each subplot), with their rotation and font size.
    const axes = [];
    for (const layer of gd.querySelectorAll('.xaxislayer-above, .yaxislayer-above')) {
      const labels = [...layer.querySelectorAll('text')].filter((t) => shown(t) && t.textContent.trim());
      if (!labels.length) continue;
      const turn = (t) => +(/rotate\((-?[\d.]+)/.exec(t.getAttribute('transform') || '') || [0, 0])[1];
      axes.push({x: layer.classList.contains('xaxislayer-above'), labels: labels.map((t) => ({text: t.textContent,
        box: box(t), angle: turn(t), size: parseFloat(getComputedStyle(t).fontSize) || 12}))});
    }
    // Tick labels are often the user's tokens (a backtick, two stars): read for leaks of our own markup only.
    const TICK = '.xaxislayer-above, .yaxislayer-above';
    const texts = [...gd.querySelectorAll('.main-svg text')].filter((t) => t.textContent.trim() && !t.closest(TICK))
      .map((t) => t.textContent);
    const ticks = [...gd.querySelectorAll('.main-svg text')].filter((t) => t.closest(TICK)).map((t) => t.textContent);
    const hovers = (gd.data || []).flatMap((t) => [t.hovertemplate, t.name].flat())
      .filter((h) => typeof h === 'string');
    // Words drawn at points of the data (a scatter's text, annotations): they may land on each other.
    const labels = [...gd.querySelectorAll('.textpoint text, .annotation-text-g text')]
      .filter((t) => shown(t) && t.textContent.trim()).map(one);
    const colorbarTicks = [...gd.querySelectorAll('.colorbar .cbaxis text')]
      .filter((t) => shown(t) && t.textContent.trim()).map((t) => t.textContent);
    // Panels (x–y subplots) with nothing drawn in them: no trace with a value, no shape or image on their axes.
    const full = gd._fullLayout || {};
    const has = (v) => v != null && (typeof v === 'string' || v.length > 0);
    const filled = new Set((gd._fullData || []).filter((t) => t.visible === true && ['x', 'y', 'z', 'source']
      .some((k) => has(t[k]))).map((t) => (t.xaxis || 'x') + (t.yaxis || 'y')));
    const axisOf = (ref) => (ref || '').split(' ')[0];
    for (const item of [...(full.shapes || []), ...(full.images || [])]) {
      filled.add(axisOf(item.xref) + axisOf(item.yref));
    }
    const drawn = [...gd.querySelectorAll('.cartesianlayer > g.subplot')].map((g) => g.classList[1]);
    const emptyPanels = drawn.filter((id) => id && !filled.has(id));
    // Margins Plotly grew once it had measured the labels: it then drew the whole chart a second time. A miss of
    // 2 px or less is let pass: fonts round differently between machines, and viz.margins errs wide by more.
    const size = full._size || {}, margin = full.margin || {};
    const grown = ['l', 'r', 't', 'b'].filter((s) => size[s] > margin[s] + 2)
      .map((s) => `${s} +${Math.round(size[s] - margin[s])} px`);
    charts.push({key, title: title ? one(title) : null, chart: svg ? box(svg) : box(gd), axisTitles, annotations,
      legend: legend && shown(legend) ? box(legend) : null, colorbars, axes, texts, ticks, hovers, labels,
      colorbarTicks, emptyPanels, grown, redraws: +(gd.dataset.redraws || 0)});
  }
  return {texts, buttons, charts};
}"""


@dataclass(frozen=True)
class Problem:
    page: str
    lang: str
    where: str  # "page text", "button", or the chart's title (its key when it has none)
    what: str

    def __str__(self) -> str:
        return f"{self.page} [{self.lang}] {self.where}: {self.what}"


def _overlap(a: list[float], b: list[float], tol: float = 1.0) -> bool:
    """Whether boxes [left, top, right, bottom] share more than ``tol`` px each way."""
    return min(a[2], b[2]) - max(a[0], b[0]) > tol and min(a[3], b[3]) - max(a[1], b[1]) > tol


def _notation(text: str, rules: Iterable[tuple[str, re.Pattern]]) -> list[str]:
    return [f"{name} in {text[:100]!r}" for name, rule in rules if rule.search(text)]


def _ticks_collide(axis: dict) -> list[str]:
    """Neighbouring tick labels of one axis drawn over each other.

    Horizontal labels collide when their boxes overlap along the axis; rotated ones when their anchored ends are
    closer across the text's direction than a digit's height (their axis-aligned boxes overlap even when the text
    does not, and a long label's box centre lies far from its tick).
    """
    along = 0 if axis["x"] else 1
    labels = sorted(axis["labels"], key=lambda t: t["box"][along] + t["box"][along + 2])
    out = []
    for a, b in itertools.pairwise(labels):
        angle = a["angle"] % 180
        if not axis["x"]:  # y labels stack: centres closer than the text's height
            gap = abs((a["box"][1] + a["box"][3]) - (b["box"][1] + b["box"][3])) / 2
            hit = gap < 0.9 * a["size"] and _overlap(a["box"], b["box"], 0)
        elif angle == 0:
            hit = _overlap(a["box"], b["box"])
        else:
            edge = 2 if angle > 90 else 0  # the anchored end: the right one when turned counter-clockwise
            spacing = abs(a["box"][edge] - b["box"][edge])
            hit = spacing * abs(math.sin(math.radians(angle))) < 0.75 * a["size"]  # about a digit's height
        if hit:
            out.append((a["text"], b["text"]))
    if not out:
        return []
    first = ", ".join(f"{a!r} and {b!r}" for a, b in out[:3])
    return [f"tick labels overlap: {first}{f' and {len(out) - 3} more pairs' if len(out) > 3 else ''}"]


def _clipped(title: dict, chart: list[float]) -> bool:
    """Whether a title's box leaves the figure's (Plotly draws it anyway, and the page cuts it at the edge)."""
    b = title["box"]
    return b[0] < chart[0] - 1 or b[1] < chart[1] - 1 or b[2] > chart[2] + 1 or b[3] > chart[3] + 1


def _labels_collide(labels: list[dict]) -> list[str]:
    """Text labels of one chart (a scatter's point labels, annotations) drawn over each other."""
    hits = [
        (a["text"], b["text"])
        for a, b in itertools.combinations(labels, 2)
        if a["box"] != b["box"] and _overlap(a["box"], b["box"])
    ]
    if not hits:
        return []
    first = ", ".join(f"{a!r} and {b!r}" for a, b in hits[:3])
    return [f"labels overlap: {first}{f' and {len(hits) - 3} more pairs' if len(hits) > 3 else ''}"]


SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "µ": 1e-6, "μ": 1e-6, "n": 1e-9}
NUMBER = re.compile(r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)\s*([kMGTmµμn]?)\s*%?")


def _value(label: str) -> float | None:
    """A tick label's number (Plotly's "−", thousands separators and SI suffixes read); None for a word."""
    text = label.strip().replace("−", "-").replace(",", "").replace("\u2009", "").replace("\u202f", "")
    m = NUMBER.fullmatch(text)
    return float(m.group(1)) * SCALE[m.group(2)] if m else None


def _short(x: float) -> bool:
    """At most two significant digits (0.25, 1500, 3e-4), or a whole number."""
    return x == round(x) or math.isclose(x, float(f"{x:.2g}"), rel_tol=1e-9)


def _round_ticks(labels: list[str]) -> list[str]:
    """The labels of a colour bar's ticks that are not round numbers. A tick is round when it is short
    (:func:`_short`) or when the ticks are evenly spaced by a short step from a multiple of it (0.25, 0.5, …,
    1.25); 0.248 / 0.495 / 0.743, a range cut in equal parts, is neither."""
    values = [(t, v) for t in labels if (v := _value(t)) is not None]
    odd = [t for t, v in values if not _short(v)]
    if not odd or len(values) < 2:
        return odd
    xs = sorted(v for _, v in values)
    step = xs[1] - xs[0]
    even = all(math.isclose(b - a, step, rel_tol=1e-3) for a, b in itertools.pairwise(xs))
    return [] if even and _short(step) and _short(xs[0] / step) else odd


def problems(read: dict, page: str, lang: str) -> list[Problem]:
    """Every problem in what :data:`READ_PAGE` read from one page in one language."""
    out = [Problem(page, lang, "page text", p) for t in read["texts"] for p in _notation(t, TEXT_RULES)]
    for b in read["buttons"]:
        if not b["label"] and not b["icon"] and not b["aria"]:
            out.append(Problem(page, lang, "button", "a button with no label"))
        if b["cut"]:
            out.append(Problem(page, lang, "button", f"label cut: {b['label']!r}"))
    for c in read["charts"]:
        where = f"chart {c['title']['text']!r}" if c["title"] else f"chart {c['key'] or '(untitled)'}"
        add: list[str] = []
        title = c["title"]
        if title and (title["box"][0] < c["chart"][0] - 1 or title["box"][2] > c["chart"][2] + 1):
            add.append(
                f"title wider than its chart ({title['box'][2] - title['box'][0]:.0f} px in "
                f"{c['chart'][2] - c['chart'][0]:.0f} px)"
            )
        if c["legend"]:
            named = (
                ([("the title", title)] if title else [])
                + [(f"axis title {t['text']!r}", t) for t in c["axisTitles"]]
                + [(f"subplot title {t['text']!r}", t) for t in c["annotations"]]
            )
            add += [f"legend over {name}" for name, t in named if _overlap(c["legend"], t["box"])]
            add += ["legend over a colour bar" for bar in c["colorbars"] if _overlap(c["legend"], bar)]
        for axis in c["axes"]:
            add += _ticks_collide(axis)
        add += [
            f"axis title cut at the figure's edge: {t['text']!r}" for t in c["axisTitles"] if _clipped(t, c["chart"])
        ]
        add += _labels_collide(c["labels"])
        if odd := _round_ticks(c["colorbarTicks"]):
            add.append(f"colour bar ticks not round: {', '.join(odd[:4])}")
        add += [f"empty panel: axes {p} with no data" for p in c["emptyPanels"]]
        if c["grown"]:  # viz.margins.fit's estimate fell short: the browser drew the chart twice
            add.append(f"margins grown after the first draw: {', '.join(c['grown'])}")
        if c["redraws"]:  # a copy of the figure Plotly.react found changed: viz.sent's form was not sent
            add.append(f"drawn {1 + c['redraws']} times in full, its data calculated each time")
        add += [p for t in dict.fromkeys(c["texts"]) for p in _notation(t, TEXT_RULES)]
        add += [f"tick label: {p}" for t in dict.fromkeys(c["ticks"]) for p in _notation(t, ENTITIES)]
        add += [f"hover: {p}" for h in dict.fromkeys(c["hovers"]) for p in _notation(h, HOVER_RULES)]
        out += [Problem(page, lang, where, p) for p in add]
    return out


# Text nodes the 中文 check reads (no English in what a page shows): the page body, our part of the sidebar and the
# page names in its navigation; not code, LaTeX, charts, italics (variables, paper titles), data (table cells,
# ``st.text``, the text in input boxes), icons (Material Symbols are ligatures: the icon "home" is the text "home")
# or Streamlit's own controls ("View 5 more"), and only what is rendered.
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


def english_shown(page, slug: str) -> list[Problem]:
    """English words in what a page in 中文 shows: its text (:data:`READ_TEXT`) and its figures' words
    (:data:`READ_FIGURES`), through :mod:`tests.zh_text`."""
    found = [
        Problem(slug, "zh", "page text", f"English {w} in {t[:120]!r}")
        for t in page.evaluate(READ_TEXT)
        if (w := english_words(t, prose=True))
    ]
    figures = page.evaluate(READ_FIGURES)
    found += [
        Problem(slug, "zh", f"figure {i}", f"English: {hit}")
        for i, spec in enumerate(figures)
        for hit in english_in_figure(spec)
    ]
    return found


def switch_to_chinese(page) -> None:
    """The sidebar's 中文 button, as a user clicks it; back once the page has rerun in Chinese."""
    page.locator('[data-testid="stSidebar"]').get_by_text("中文", exact=True).click()
    page.locator('[data-testid="stSidebarNav"]').get_by_text("首页").wait_for(timeout=LONG)
    page.wait_for_selector(IDLE, timeout=LONG)


def open_lazy_sections(page, slug: str) -> None:
    """Open the page's sections that open on demand (expanders keyed ``*_open_*``), one at a time, except the
    long-running ones (:data:`NOT_OPENED`), and draw what they hold."""
    for key in lazy_sections(slug):
        box = page.locator(f".st-key-{key}")
        if key in NOT_OPENED or not box.count() or box.locator("details[open]").count():
            continue
        box.locator("summary").first.click()
        page.wait_for_selector(IDLE, timeout=LONG)
        draw_below_fold(page)
        page.wait_for_selector(IDLE, timeout=LONG)


# Resolves once every chart is laid out at its container's new width (Streamlit hands Plotly the width it measures).
RELAID = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].every((gd) =>
  !gd.getClientRects().length || !gd._fullLayout || Math.abs(gd._fullLayout.width - gd.clientWidth) < 2)"""


def narrowed(page, height: int) -> dict:
    """What :data:`READ_PAGE` reads once the window is :data:`NARROW_WIDTH` wide. Plotly lays each chart out again
    at its new width from the figure's own margins, growing them where labels turn or a legend wraps as a first draw
    at that width would; titles, ticks and buttons are measured as drawn there. No section opens or closes."""
    page.set_viewport_size({"width": NARROW_WIDTH, "height": height})
    page.wait_for_function(RELAID, timeout=LONG)
    page.evaluate(PAINTED)
    return page.evaluate(READ_PAGE)


def check_page(browser, server: str, slug: str, langs: Iterable[str] = LANGS) -> list[Problem]:
    """Open ``slug`` in a fresh tab, draw every section, then for each of ``langs`` in turn (中文 by the sidebar's
    button, as a user switches) screenshot it and check what it shows, on a 1400 px window and on a
    :data:`NARROW_WIDTH` one. One tab serves both languages and widths: the switch reruns the page with its sections
    drawn and opened as they were, so the second language costs a rerun, not a second visit."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(COUNT_DRAWS)
    found: list[Problem] = []
    try:
        page.goto(page_url(server, slug))
        page.wait_for_selector(f"{PLOT} .main-svg, {FAILED}", timeout=LONG)  # a page that failed has no chart
        page.wait_for_selector(IDLE, timeout=LONG)
        for lang in langs:
            if lang == "zh":
                page.set_viewport_size(VIEWPORT)
                switch_to_chinese(page)
            draw_below_fold(page)
            page.wait_for_selector(IDLE, timeout=LONG)
            open_lazy_sections(page, slug)
            page.wait_for_timeout(500)  # Plotly lays out a figure after Streamlit mounts it
            found += [
                Problem(slug, lang, "page", f"error shown: {t[:200]!r}") for t in page.locator(FAILED).all_inner_texts()
            ]
            found += problems(page.evaluate(READ_PAGE), slug, lang)
            if lang == "zh":
                found += english_shown(page, slug)
            # Streamlit scrolls its main area inside the window: a window as tall as the page shows all of it at once.
            # A taller window changes no width, so nothing is laid out again: two frames painted suffice.
            tall = min(page.evaluate(PAGE_HEIGHT), 30_000)
            page.set_viewport_size({**VIEWPORT, "height": tall})
            page.evaluate(PAINTED)
            page.screenshot(path=str(SHOTS / f"{lang}-{slug}.png"))
            seen = {(p.where, p.what) for p in found}  # one found at both widths is told once
            narrow = problems(narrowed(page, tall), slug, f"{lang}, {NARROW_WIDTH} px")
            found += [p for p in narrow if (p.where, p.what) not in seen]
        return found
    finally:
        page.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.layout_check", description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a server already running (default: start one, as make run does)")
    parser.add_argument("--pages", nargs="*", help="page names (default: every page)")
    parser.add_argument("--lang", nargs="*", choices=LANGS, default=list(LANGS))
    args = parser.parse_args(argv)
    slugs = args.pages or [Path(p).stem for p in app_pages()]
    found: list[Problem] = []
    with sync_playwright() as p, contextlib.ExitStack() as stack:
        if args.url:
            url = args.url.rstrip("/")
        else:
            srv = stack.enter_context(running_server())
            srv.wait_healthy()
            url = srv.url
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for slug in slugs:
            try:
                here = check_page(browser, url, slug, args.lang)
            except PlaywrightError as exc:  # a page that never drew: say so and go on with the others
                here = [Problem(slug, "/".join(args.lang), "page", f"not drawn: {str(exc).splitlines()[0]}")]
            print("\n".join(map(str, here)) or f"{slug} [{', '.join(args.lang)}]: ok", flush=True)
            found += here
        browser.close()
    print(f"{len(found)} problems" if found else "no problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
