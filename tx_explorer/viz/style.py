"""One visual language for every figure: colour scales, axis conventions, safe labels, legend and title layout."""

import functools
import html
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from tx_explorer.viz import margins
from tx_explorer.viz.margins import text_width

WEIGHTS = "Viridis"  # attention weights in [0, 1]: one scale everywhere so maps compare at a glance
DIVERGING = "RdBu_r"  # signed values (scores, differences), centred on 0
SEQUENTIAL = "Blues"  # counts and magnitudes
QUERY_AXIS = "queries (rows)"
KEY_AXIS = "keys (columns)"
FONT = dict(size=margins.FONT_PX)

# Plotly's default template also carries per-trace-type defaults, which every new figure deep-copies: a third of a
# small figure's build time and 4 kB of its JSON. This template keeps the default look (its layout) only.
pio.templates["tx_explorer"] = go.layout.Template(layout=pio.templates["plotly"].layout)
# Unless overflow is allowed, Plotly checks every tick label against every other one to hide those past the
# figure's edge: quadratic in the labels, about 1 s of the browser's time per input for the 64 columns of the KV
# cache maps on 2 cores. Labels past the edge are clipped by the figure's own box either way.
pio.templates["tx_explorer"].layout.xaxis.ticklabeloverflow = "allow"
pio.templates["tx_explorer"].layout.yaxis.ticklabeloverflow = "allow"
# Tick labels turn only as far as they must not to overlap: level, then slanted, then upright (Plotly tries each).
pio.templates["tx_explorer"].layout.xaxis.autotickangles = [0, -45, -90]
pio.templates.default = "tx_explorer"


def safe_labels(labels: Sequence[object]) -> list[str]:
    """Token labels for Plotly text: it reads ``<…>`` as markup, so ``<b>`` typed by a user is escaped and shows
    literally (Plotly decodes the entities back when drawing)."""
    return [html.escape(str(t), quote=False) for t in labels]


# One legend placement for every figure: a horizontal row at the bottom of the figure (container coordinates),
# which Plotly keeps below the x-axis title by pushing the bottom margin, so it never lies on a title, an axis
# title or a colour bar (on the right). Legends placed above the plot covered the titles, worse in Chinese.
LEGEND = dict(
    orientation="h", x=0, xanchor="left", yref="container", y=0.01, yanchor="bottom"
)  # x: the plot's left edge
COLUMN_PX = 460  # a figure's width when nothing else is known: half of a wide page, the usual two-up chart
PAGE_PX = 920  # the main column of the wide layout beside the sidebar, on a 1400 px window
# The narrowest window the layout holds to is a common laptop's, 1280 px wide (the widths above are a 1400 px
# one's). The sidebar (300 px) and the page's padding (80 px a side) keep their widths, so the main column loses
# all 120 px, and a chart planned w px wide is drawn NARROWEST × w or more there (measured: half of PAGE_PX, 460,
# is drawn 385 px wide, the least share; a third, 307, 263; three quarters, 690, 582; the page, 920, 820).
NARROWEST = 0.835
TITLE_PX = 17  # Plotly's title size for our 12 px font (1.4 × the font)
CELL_FONT_PX = 9  # Plotly shrinks a heatmap cell's number to fit its cell; smaller than this it cannot be read
_DECIMALS = re.compile(r"([-−]?\d+)\.(\d+)")


def marked(names: Sequence[str], marks: Mapping[int, str] | None) -> list[str]:
    """Layers' names with a word beside those ``marks`` sets apart ("layer 5 · global"): in a layers × heads figure
    of Gemma 3, the rows of its global layers among the local ones."""
    marks = marks or {}
    return [f"{name} · {marks[i]}" if i in marks else name for i, name in enumerate(names)]


def decimal(v: float, places: int) -> str:
    """``v`` with ``places`` decimals as the prose writes numbers: a true minus ("−0.47"), and 0 for what rounds to
    it (a cell of −0.001 read "-0.00" beside "0.00", as if it were below zero by a visible amount)."""
    text = f"{v:.{places}f}"
    return text.lstrip("-") if float(text) == 0 else text.replace("-", "−")


def numbers_fit(text: np.ndarray, cell_px: float) -> bool:
    """Whether a heatmap's cell numbers are drawn at :data:`CELL_FONT_PX` or more in cells ``cell_px`` wide: Plotly
    sizes them all as ⌊cell / (0.65 × the longest's characters)⌋ (plotly.js heatmap/plot.js: LINE_SPACING / 2)."""
    longest = max((len(str(t)) for t in np.asarray(text).flat), default=0)
    return longest == 0 or math.floor(cell_px / (0.65 * longest)) >= CELL_FONT_PX


def fitted_numbers(text: np.ndarray, cell_px: float) -> np.ndarray | None:
    """A heatmap's cell numbers as they fit cells ``cell_px`` wide: as written, else with one decimal fewer at a
    time down to one (the masks page's scores "−0.47" were drawn 8 px high, "−0.5" is 10), else None: the hover
    gives each value. Cells that are not decimals ("−∞", "") stay as they are."""
    text = np.asarray(text, dtype=object)
    while not numbers_fit(text, cell_px):
        places = [len(m.group(2)) for t in text.flat if (m := _DECIMALS.fullmatch(str(t)))]
        if not places or max(places) <= 1:
            return None
        text = np.vectorize(functools.partial(_shortened, places=max(places) - 1), otypes=[object])(text)
    return text


def _shortened(cell: object, *, places: int) -> object:
    """A decimal cell written with ``places`` decimals; any other cell as it is."""
    return decimal(float(str(cell).replace("−", "-")), places) if _DECIMALS.fullmatch(str(cell)) else cell


def _cell_numbers_fitted(fig: go.Figure, width_px: float) -> None:
    """A heatmap drawn ``width_px`` wide: its cell numbers as they fit its cells (:func:`fitted_numbers`; Q and K
    of the operator page, eight columns in a third of the page, were written 6 px high)."""
    plot_px = width_px - (fig.layout.margin.l or 0) - (fig.layout.margin.r or 0)
    for trace in fig.data:
        if trace.type == "heatmap" and trace.texttemplate and trace.text is not None:
            text = fitted_numbers(trace.text, plot_px / len(trace.text[0]))
            trace.update(text=text, texttemplate=None if text is None else trace.texttemplate)


def wrap(text: str, width_px: float, font_px: float = TITLE_PX) -> str:
    """``text`` with ``<br>`` where a line would be wider than ``width_px``: between words (not at a no-break space),
    or anywhere in CJK text (which has no spaces). Plotly draws a title on one line however long, and clips what
    leaves the figure."""
    lines = []
    for line in re.split(r"<br\s*/?>", text):
        current, wrapped = "", []
        for piece in re.findall(_PIECE, line):
            drawn = margins.plain((current + piece).rstrip())[0]  # y<sub>A</sub> is drawn as yA
            if current.strip() and text_width(drawn, font_px) > width_px:
                cut = _cjk_break(current, piece, width_px / 2, font_px) if CJK.match(piece) else len(current)
                wrapped.append(current[:cut].rstrip())
                current = (current[cut:] + piece).lstrip()
            else:
                current += piece
        lines += _kept_together([*wrapped, current.rstrip()])
    return "<br>".join(lines)


CJK = re.compile(r"[\u2e80-\u9fff\uff00-\uffef]")  # Chinese characters and full-width punctuation


def colon(*words: str) -> str:
    """The colon of the language ``words`` are in, for a label before a value: "查询 3：the" in 中文, "3: the" else."""
    return "：" if any(CJK.search(w) for w in words) else ": "


# A CJK character, a word with the spaces after it, or spaces. A no-break space is part of a word: a formula
# written "1\u00a0−\u00a0Σⱼ\u00a0Aᵢⱼ" stays on one line (its title broke as "1 − Σⱼ<br>Aᵢⱼ").
_PIECE = re.compile(
    r"[\u2e80-\u9fff\uff00-\uffef]|(?:[^\s\u2e80-\u9fff\uff00-\uffef]|\u00a0)+[^\S\u00a0]*|[^\S\u00a0]+"
)
_CLOSING = "）」』】》〉、。，：；！？"  # CJK punctuation that never starts a line
_OPENING = "（「『【《〈“"  # … and that never ends one
_LOOK_BACK = 6  # characters a CJK line may hand down to end at punctuation or a space


def _cjk_break(line: str, piece: str, room_px: float, font_px: float) -> int:
    """Where ``line`` ends when CJK text must break before ``piece``: after its nearest punctuation or space among
    the last :data:`_LOOK_BACK` characters, or before an opening bracket, when what moves down with ``piece`` takes
    at most ``room_px``; else at its end. Chinese leaves no space between words, so a break between any two
    characters may split one ("位<br>置"); punctuation and spaces are the breaks that never do."""
    text = line + piece
    for j in range(len(line), max(1, len(line) - _LOOK_BACK) - 1, -1):
        if text[j - 1] in _CLOSING + " " or text[j] in _OPENING:
            moved = margins.plain(text[j:].strip())[0]
            return j if j == len(line) or text_width(moved, font_px) <= room_px else len(line)
    return len(line)


def _kept_together(lines: list[str]) -> list[str]:
    """CJK text broken anywhere: a line never starts with closing punctuation, nor does the last hold one or two
    characters alone ("…取平" then "均"); the line before gives up its last character or two (shorter lines only)."""
    for i in range(1, len(lines)):
        for _ in range(2):
            alone = i == len(lines) - 1 and len(lines[i]) < 3 and all(CJK.match(c) for c in lines[i])
            if not (lines[i][:1] in _CLOSING or alone) or len(lines[i - 1]) < 2 or not CJK.match(lines[i - 1][-1]):
                break
            lines[i - 1], lines[i] = lines[i - 1][:-1], lines[i - 1][-1] + lines[i]
    return lines


def drawn_widths(width_px: float | None = None) -> tuple[float, float]:
    """The least and the most a figure is drawn wide, on the narrowest window and on a 1400 px one: ``width_px``
    there, where known, else the page's width (:func:`tidy` fits the margins to both)."""
    widest = width_px or PAGE_PX
    return NARROWEST * widest, widest


def tidy(fig: go.Figure, width_px: float | None = None) -> go.Figure:
    """The layout rules every shown figure follows (in place, and the same figure again: showing it twice is
    harmless): the one legend placement, a title wrapped to fit a figure ``width_px`` wide on the narrowest window
    (:data:`NARROWEST`), its top margin grown by the added lines, the other margins grown to the labels' room at
    every window from the narrowest on (:func:`margins.fit`: one draw). ``width_px``: how wide it is drawn on a
    1400 px window, where known (then a heatmap's cell numbers are fitted to its cells on the narrowest); else it
    may be from a column's (its title) to the page's width (its margins)."""
    if fig.layout.showlegend is not False and any(getattr(t, "showlegend", False) is not False for t in fig.data):
        fig.update_layout(legend=LEGEND)
    title = fig.layout.title.text
    if title:
        size = fig.layout.title.font.size or TITLE_PX
        # the title starts 5 % in from the left: 90 % of the width keeps it 5 % clear of the right edge too
        wrapped = wrap(title, 0.9 * NARROWEST * (width_px or COLUMN_PX), size)
        added = wrapped.count("<br>") - title.count("<br>")
        if added:  # the plot keeps its height: a figure of fixed height grows by the lines added above it
            top, grown = fig.layout.margin.t, added * 1.3 * size
            fig.update_layout(title_text=wrapped, margin_t=(80 if top is None else top) + grown)
            if fig.layout.height is not None:
                fig.update_layout(height=fig.layout.height + grown)
    margins.fit(fig, drawn_widths(width_px))
    if width_px:  # the plot's width is known only now: the figure's width less margins
        _cell_numbers_fitted(fig, NARROWEST * width_px)
    return fig


LABEL_GAP_PX, LABEL_HEIGHT_PX = 4, 16  # between two point labels; a label's line at the 12 px font
PLOT_PAD_PX = 8  # Plotly's autorange pads the points' span by about this much each side (markers of 14 px)
# Tried in order: centred above or below a point; to one side (from the marker's edge on), where the edge of the
# plot would cut a centred label
LABEL_PLACES = ("top center", "bottom center", "top right", "bottom right", "top left", "bottom left")


def label_positions(
    coords: np.ndarray,
    names: Sequence[str],
    plot_px: tuple[float, float],
    *,
    marker_px: float,
    origin: bool = False,
    limit: int | None = None,
    pad_px: float = PLOT_PAD_PX,
) -> list[str | None]:
    """Where each point's label goes (a Plotly ``textposition``: above or below, centred or to one side), so that
    no two labels overlap (two heads a few pixels apart had their names drawn one on the other), none lies on a
    marker and none leaves the plot (Plotly clips it: a label below a point on the x axis, or centred on a point on
    the y axis, was cut); None where no place has room: the hover and a table name that point. Points far from the
    centre are placed first, ``limit`` of them at most. ``plot_px``: the plot area's size, which the axes' span fills
    (``origin``: the axes start at 0, as with ``rangemode="tozero"``); ``pad_px``: the room the axes leave past the
    points' span, Plotly's autorange's unless a figure sets its ranges wider."""
    xy = np.asarray(coords, dtype=float)[:, :2]
    lo, hi = xy.min(0), xy.max(0)
    if origin:
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    low = 0.0 if origin else pad_px  # an axis from 0 (rangemode "tozero") starts at 0 exactly; else padded
    inner = np.asarray(plot_px, dtype=float) - low - pad_px  # the points' span, less the pads
    px = low + (xy - lo) / (np.maximum(hi - lo, 1e-12) / inner)  # (K, 2) points in px from the plot's corner, y up
    half_height = LABEL_HEIGHT_PX / 2 + marker_px / 2  # a label's centre sits this far above or below its marker
    r = marker_px / 2  # the markers are taken first: a label over another point hid it (the flow page's H4, H8)
    markers = [(x - r, x + r, y - r, y + r) for x, y in px]

    def apart(box, others) -> bool:
        return all(box[1] <= b[0] or b[1] <= box[0] or box[3] <= b[2] or b[3] <= box[2] for b in others)

    def clear(box, i: int) -> bool:
        """Whether ``box`` keeps a gap from every other point: a label beside one reads as its name."""
        g = LABEL_GAP_PX
        return apart((box[0] - g, box[1] + g, box[2] - g, box[3] + g), markers[:i] + markers[i + 1 :])

    def places(i: int) -> list[tuple[str, tuple[float, float, float, float]]]:
        """The places inside the plot whose label lies on no marker, those clear of other points first."""
        width = text_width(names[i], FONT["size"]) + LABEL_GAP_PX
        found = []
        for where in LABEL_PLACES:
            dy = half_height if where.startswith("top") else -half_height
            x = px[i, 0] + {"center": 0.0, "right": r + width / 2, "left": -r - width / 2}[where.split()[1]]
            y = px[i, 1] + dy
            box = (x - width / 2, x + width / 2, y - LABEL_HEIGHT_PX / 2, y + LABEL_HEIGHT_PX / 2)
            inside = 0 <= box[0] and box[1] <= plot_px[0] and 0 <= box[2] and box[3] <= plot_px[1]
            if inside and apart(box, markers):
                found.append((where, box))
        return sorted(found, key=lambda place: not clear(place[1], i))  # stable: LABEL_PLACES' order within

    options = [places(i) for i in range(len(xy))]
    spread = np.hypot(*(px - px.mean(0)).T)
    # A point with one place left (at the plot's edge) first, lest a neighbour's label take it and, beside it, read
    # as its name (Gemma 3's H1 was named in H3's one place, H3 not at all); then the far ones
    order = sorted(range(len(xy)), key=lambda i: (len(options[i]) > 1, -spread[i]))
    labels: list[tuple[float, float, float, float]] = []
    out: list[str | None] = [None] * len(xy)
    for i in order:
        if limit is not None and len(labels) >= limit:
            break
        for where, box in options[i]:
            if apart(box, labels):
                labels.append(box)
                out[i] = where
                break
    return out
