"""Margins that already fit a figure's labels, so the browser draws it once.

Plotly measures tick labels, axis titles and colour bars only as it draws them; when they need more room than the
margins give, automargin grows the margins and *draws the whole figure again*. Every chart in the app did that:
twice the browser's time per input (110 ms of a 570-ms input on the flow page's route graph). :func:`fit` grows
the margins beforehand to what the labels need, estimated from their text with :func:`text_width` (which errs
wide) and the constants of Plotly's own pushes, measured in Chromium. Automargin stays on: a label the estimate
misses still gets its room, at the old price of a redraw, and the layout check (tests/layout_check.py) reports
every chart whose margins grew after its first draw.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Iterable

import numpy as np
import plotly.graph_objects as go

FONT_PX = 12  # every figure's font (style.FONT): tick labels
AXIS_TITLE_PX = round(1.2 * FONT_PX)  # Plotly's axis titles: 1.2 × the layout's font
LINE, CJK_LINE = 1.3, 0.25  # Plotly's line height, in font sizes; more where a line holds CJK
# Plotly's pushes beyond the labels' extent, in px, measured in Chromium on every page in both languages:
X_PAD, X_TITLE_PAD, X_PAST = 15, 7, 10  # below an x axis's labels; more below its title; right of its last
Y_PAD, Y_TITLE_PAD, Y_OVER = 11, 10, 18  # left of a y axis's labels; more left of its title; above its top one
BAR_PAD = 28  # a colour bar's push beyond its pad, thickness and labels
LEGEND_ROW, LEGEND_PAD, LEGEND_ITEM = 19, 17, 40  # a legend row's height, its pad, an entry's symbol and gaps
LEGEND_TYPES = {"scatter", "scattergl", "bar", "box", "histogram", "violin"}  # in the legend unless told not
DEFAULT_MARGIN = 80  # Plotly's, where a figure sets none
AUTO_ANGLES = (-45, -90)  # the template's autotickangles after level (style.py)
AUTO_GAP = 80  # px between Plotly's own ticks on a numeric x axis, about


def text_width(text: str, font_px: float, wide: str = "WF") -> float:
    """About how wide ``text`` is drawn: CJK and full-width characters one em, others 0.55 em (Plotly has no text
    measure before the browser draws it; this errs wide). ``wide``: the East Asian widths counted as one em; "WFA"
    adds the ambiguous ones (SentencePiece's "▁", "“", Greek), which a CJK font draws wide."""
    count = sum(1 for c in text if unicodedata.east_asian_width(c) in wide)
    return font_px * (count + 0.55 * (len(text) - count))


def _title_depth(title: object) -> float:
    """An axis title's depth across its axis: its lines, taller where CJK glyphs set the line (Noto CJK)."""
    if title is None:  # Plotly adds a title's depth for any title given, "" included
        return 0.0
    cjk = any(unicodedata.east_asian_width(c) in "WF" for c in str(title))
    return len(plain(title)) * AXIS_TITLE_PX * (LINE + (CJK_LINE if cjk else 0))


def plain(text: object) -> list[str]:
    """A label's lines as drawn: markup removed, entities decoded."""
    lines = re.split(r"<br\s*/?>", str(text))
    return [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in lines]


def _width(texts: Iterable[object], px: float = FONT_PX) -> float:
    """The widest line of ``texts``, as wide as a 中文 page may draw it (a margin too wide costs a little room, one
    too narrow a second draw)."""
    return max((text_width(line, px, "WFA") for t in texts for line in plain(t)), default=0.0)


def _number(v: float, place: int) -> str:
    """Plotly's default tick format for ticks a step of 10^−``place`` apart: plain up to 9 999 with the step's
    decimals, SI suffixes above with the digits the step needs in their unit, trailing zeros dropped ("18.91M" at
    a step of 10k: Gemma 3's cache bytes past its window, where three significant figures, "18.9M", missed a
    digit and Plotly grew the left margin by 3 px), "−" for minus."""
    big = next(((s, e) for s, e in (("T", 12), ("B", 9), ("M", 6), ("k", 3)) if abs(v) >= 10.0**e), None)
    if big is not None and abs(v) >= 1e4:
        suffix, exponent = big
        text = f"{v / 10.0**exponent:.{max(0, place + exponent)}f}"
        return (text.rstrip("0").rstrip(".") if "." in text else text).replace("-", "−") + suffix
    return f"{v:.{max(0, place)}f}".replace("-", "−")


def _auto_ticks(lo: float, hi: float, length_px: float, log: bool = False) -> list[str]:
    """About the labels Plotly picks for a numeric range: a 1-2-5 step, one label per 40-80 px; on a log axis, the
    decades."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if log:
        decades = range(math.floor(lo), math.ceil(hi) + 1)  # lo, hi: log10 of the range
        return [_number(10.0**k, -k) if -4 <= k < 4 else f"{10.0**k:.0e}" for k in decades]
    labels: list[str] = []
    for count in (max(2.0, length_px / 80), max(2.0, length_px / 30)):  # both ends of Plotly's spacing
        raw = (hi - lo) / count or abs(hi) or 1.0
        exp = math.floor(math.log10(raw))
        step = min((m * 10.0**exp for m in (1, 2, 5, 10) if m * 10.0**exp >= raw), default=10.0 ** (exp + 1))
        place = -math.floor(math.log10(step) + 1e-9)
        labels += [_number(k * step, place) for k in (math.floor(lo / step), math.ceil(hi / step))]
        labels += [_number(lo, place), _number(hi, place)]
    return labels


def _finite(values: Iterable) -> np.ndarray:
    """The finite numbers among ``values`` (none where any is not a number: dates, names, colours)."""
    try:
        arr = np.asarray(list(values), dtype=float)
    except (TypeError, ValueError):
        return np.empty(0)
    return arr[np.isfinite(arr)]


def _values(fig: go.Figure, axis: str) -> list:
    """The data drawn along ``axis`` ("xaxis2", …): coordinates, or positions 0… where a heatmap gives none."""
    letter, ref = axis[0], axis[0] + axis[5:]
    found: list = []
    for trace in fig.data:
        if (getattr(trace, f"{letter}axis", None) or letter) != ref:
            continue
        values = getattr(trace, letter, None)
        if values is None and getattr(trace, "z", None) is not None:
            shape = np.shape(trace.z)
            values = range(shape[1] if letter == "x" else shape[0]) if len(shape) == 2 else None
        if values is not None:
            found.extend(np.asarray(values, dtype=object).ravel().tolist())
    return found


def _tick_labels(fig: go.Figure, name: str, length_px: float) -> tuple[list[str], float]:
    """The labels along an axis ``length_px`` long (or about them: a numeric axis's widest), and the px between
    neighbours."""
    axis = fig.layout[name]
    if axis.showticklabels is False:
        return [], length_px
    if axis.ticktext is not None or axis.tickvals is not None:
        shown = axis.ticktext if axis.ticktext is not None else axis.tickvals
        labels = [_number(v, 2) if isinstance(v, float) else str(v) for v in shown]
        return labels, length_px / max(1, len(labels))
    values = _values(fig, name)
    if axis.type == "category" or any(isinstance(v, str) for v in values):
        labels = [str(v) for v in dict.fromkeys(values)]
        return labels, length_px / max(1, len(labels))  # a category's label sits in the middle of its share
    numbers = _finite(v for v in values if v is not None)
    if axis.range is not None:
        lo, hi = sorted(map(float, axis.range))  # a reversed axis's range runs high to low
    elif len(numbers):
        lo, hi = float(numbers.min()), float(numbers.max())
        if axis.type == "log":
            positive = numbers[numbers > 0]
            lo, hi = (math.log10(positive.min()), math.log10(positive.max())) if len(positive) else (0.0, 1.0)
    else:
        return [], length_px
    if lo == hi:  # one value: Plotly's range is it ± 1, labelled to the unit ("18.898943M" for one step's bytes)
        lo, hi = lo - 1, hi + 1
    ticks = _auto_ticks(lo, hi, length_px, axis.type == "log")
    return [f"{axis.tickprefix or ''}{t}{axis.ticksuffix or ''}" for t in ticks], AUTO_GAP


def _domain(fig: go.Figure, name: str) -> tuple[float, float]:
    axis = fig.layout[name]
    return tuple(axis.domain) if axis.domain is not None else (0.0, 1.0)


def _anchor(fig: go.Figure, name: str) -> str:
    """The counter axis ``name`` is drawn along ("yaxis2" for "x2" anchored to "y2")."""
    ref = fig.layout[name].anchor or ("y" if name[0] == "x" else "x")
    return f"{ref[0]}axis{ref[1:]}"


def _axis_names(fig: go.Figure) -> list[str]:
    names = {k for k in fig.layout.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", k)}
    for trace in fig.data:
        for letter in "xy":
            ref = getattr(trace, f"{letter}axis", None) or letter
            names.add(f"{letter}axis{ref[1:]}")
    return sorted(names)


def _categorical(fig: go.Figure, name: str) -> bool:
    return fig.layout[name].type == "category" or any(isinstance(v, str) for v in _values(fig, name))


def _at_edge(fig: go.Figure, name: str) -> bool:
    """An x axis along the figure's bottom, a y axis along its left (those whose labels push a margin)."""
    axis = fig.layout[name]
    if axis.automargin is False or axis.visible is False or axis.overlaying:
        return False
    side = axis.side or ("bottom" if name[0] == "x" else "left")
    return side in ("bottom", "left") and _domain(fig, _anchor(fig, name))[0] <= 0.001


def _x_extent(fig: go.Figure, name: str, plot_px: float) -> tuple[float, float]:
    """How far below the plot an x axis's labels and title reach, and how far its last label passes the plot's
    right edge, at a plot ``plot_px`` wide."""
    axis = fig.layout[name]
    span = plot_px * (_domain(fig, name)[1] - _domain(fig, name)[0])
    labels, gap = _tick_labels(fig, name, span)
    height, past = max((len(plain(t)) for t in labels), default=0) * FONT_PX, 0.0
    if labels:
        width, angle = _width(labels), axis.tickangle
        if angle in (None, "auto"):  # Plotly's rule: level unless neighbours overlap, then the first angle that fits
            angle = 0 if 1.05 * width + 2 <= gap else AUTO_ANGLES[0] if gap >= 1.25 * FONT_PX else AUTO_ANGLES[1]
        turn = math.radians(abs(float(angle)))
        height = (width + 4) * math.sin(turn) + height * math.cos(turn)  # + 4: a turned label's box
        if not _categorical(fig, name) and not turn and _domain(fig, name)[1] >= 0.999:  # a tick at the end: half out
            past = width / 2 + X_PAST
    title = axis.title.text
    return height + X_PAD + (_title_depth(title) + X_TITLE_PAD if title is not None else 0), past


def _y_extent(fig: go.Figure, name: str, plot_px: float) -> float:
    """How far left of the plot a y axis's labels and title reach, the axis ``plot_px`` tall."""
    axis = fig.layout[name]
    span = plot_px * (_domain(fig, name)[1] - _domain(fig, name)[0])
    title = axis.title.text
    labels = _width(_tick_labels(fig, name, span)[0])
    return labels + Y_PAD + (_title_depth(title) + Y_TITLE_PAD if title is not None else 0)


def _colour_bars(fig: go.Figure) -> Iterable[tuple[object, float, float]]:
    """(colorbar, lowest, highest value) of each colour bar drawn."""
    for trace in fig.data:
        holder = trace if hasattr(trace, "colorbar") else getattr(trace, "marker", None)
        if holder is None or getattr(holder, "coloraxis", None) or not hasattr(holder, "colorbar"):
            continue
        values = getattr(holder, "z", None) if holder is trace else holder.color
        # a heatmap shows its bar unless told not; a marker's shows where it is given a colour bar (Plotly's default)
        given = holder is trace or bool(holder.colorbar.to_plotly_json())
        shown = holder.showscale if holder.showscale is not None else given
        if shown is False or values is None or isinstance(values, str):
            continue
        prefix = "z" if holder is trace and hasattr(trace, "zmin") else "c"  # a heatmap's zmin, a marker's cmin
        lo, hi = getattr(holder, f"{prefix}min"), getattr(holder, f"{prefix}max")
        if lo is None or hi is None:
            arr = _finite(np.asarray(values, dtype=object).ravel())
            if not arr.size:  # colours by name ("#1f77b4"): no scale, no bar
                continue
            lo, hi = float(arr.min()), float(arr.max())
        yield holder.colorbar, float(lo), float(hi)
    used = {getattr(t, "coloraxis", None) or getattr(getattr(t, "marker", None), "coloraxis", None) for t in fig.data}
    for key in sorted(k for k in used if k):  # a colour axis no trace uses draws no bar
        ca = fig.layout[key]
        if ca.showscale is not False:
            yield ca.colorbar, float(ca.cmin or 0), float(1 if ca.cmax is None else ca.cmax)


def _bar_push(bar, lo: float, hi: float, height_px: float) -> tuple[float, float]:
    """(x in the plot's widths, the push beyond it in px) of one colour bar."""
    if bar.ticktext is not None:
        labels = list(bar.ticktext)
    elif bar.tickvals is not None:
        labels = [_number(float(v), 2) for v in bar.tickvals]
    else:
        labels = _auto_ticks(lo, hi, max(150.0, height_px * (bar.len or 1)))  # a short bar still gets 3 or more
    thickness = bar.thickness if bar.thickness is not None and bar.thicknessmode != "fraction" else 30
    pad = bar.xpad if bar.xpad is not None else 10
    title = bar.title.text if bar.title is not None else None
    body = thickness + _width(labels) + BAR_PAD
    if title:
        body = max(body, _width([title], AXIS_TITLE_PX) + BAR_PAD / 2)
    return (bar.x if bar.x is not None else 1.02), pad + body


def _legend_height(fig: go.Figure, plot_px: float) -> float:
    """The room a legend in style.LEGEND's place (the figure's bottom, in rows) keeps below the x axis: one row if
    every entry fits across the plot, else Plotly gives each entry the widest one's width."""
    legend = fig.layout.legend
    if fig.layout.showlegend is False or legend.yref != "container" or legend.orientation != "h":
        return 0.0
    shown = [getattr(t, "showlegend", False) for t in fig.data]
    names = [t.name or "" for t, s in zip(fig.data, shown) if s or (s is None and t.type in LEGEND_TYPES)]
    if fig.layout.showlegend is not True and len(names) < 2 and True not in shown:
        return 0.0
    widths = [LEGEND_ITEM + _width([n]) for n in names]
    per_row = len(widths) if sum(widths) <= plot_px else max(1, int(plot_px // max(widths)))
    thickest = max((getattr(t.line, "width", None) or 0 for t in fig.data if hasattr(t, "line")), default=0)
    row = LEGEND_ROW + max(0.0, min(thickest, 10) - 2)  # a thick line's symbol makes its row taller
    return math.ceil(len(widths) / per_row) * row + LEGEND_PAD


def fit(fig: go.Figure, widths: tuple[float, ...]) -> go.Figure:
    """Grow ``fig``'s margins (never shrink them) to what its labels, colour bars and legend need, in place.

    ``widths``: the figure's width in px, or the least and the most it may be drawn at (a chart in a column, whose
    width follows the window's): each margin is the most it needs at any of them, so Plotly grows none at any width
    between. Labels turn and legends wrap at the least (a 1280 px window turned labels and wrapped legends that a
    1400 px one drew level and in one row: drawn twice, with a jump), a colour bar placed past the plot moves out
    at the most; at the most, turned labels' room is left below level ones."""
    margin = fig.layout.margin
    sides = {s: (getattr(margin, s) if getattr(margin, s) is not None else DEFAULT_MARGIN) for s in "lrtb"}
    needs = [_needed(fig, sides, width) for width in ((fig.layout.width,) if fig.layout.width else widths)]
    grown = {s: v for s in "lrtb" if (v := max(n[s] for n in needs)) > sides[s]}
    if grown:
        fig.update_layout(margin=grown)
    return fig


def _needed(fig: go.Figure, sides: dict[str, float], width: float) -> dict[str, float]:
    """The margins ``fig``'s labels, colour bars and legend need at ``width`` px, from its margins ``sides``, as
    drawn: a side grown is rounded up, + 2 px (Plotly rounds its own), and the x axis's labels are measured on the
    plot those rounded sides leave (on a third of the page, 5 px less turned labels that the unrounded plot held
    level)."""

    def drawn(side: str) -> float:
        return math.ceil(need[side]) + 2 if need[side] > sides[side] else sides[side]

    height = fig.layout.height or 450
    plot_h = max(1.0, height - sides["t"] - sides["b"])
    need = dict(sides)
    names = [n for n in _axis_names(fig) if _at_edge(fig, n)]
    for name in (n for n in names if n[0] == "y"):
        need["l"] = max(need["l"], _y_extent(fig, name, plot_h))
        if _domain(fig, name)[1] >= 0.999 and not _categorical(fig, name):  # a tick at the top: half out
            need["t"] = max(need["t"], Y_OVER)
    for bar, lo, hi in _colour_bars(fig):
        x, push = _bar_push(bar, lo, hi, plot_h)
        need["r"] = max(need["r"], push + max(0.0, x - 1) * max(1.0, width - drawn("l") - push))
    below = 0.0
    for name in (n for n in names if n[0] == "x"):
        extent, past = _x_extent(fig, name, max(1.0, width - drawn("l") - drawn("r")))
        below, need["r"] = max(below, extent), max(need["r"], past)
    legend = _legend_height(fig, max(1.0, width - drawn("l") - drawn("r")))
    need["b"] = max(need["b"], below + legend)  # Plotly keeps a legend's room below the axis's
    return {side: drawn(side) for side in need}
