"""Figures on the page: Plotly charts with the numbers behind them as CSV and NPY downloads, rows, metrics."""

from __future__ import annotations

import functools
import io
import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from tx_explorer.ui.text import escape_markdown, texts
from tx_explorer.views import Result
from tx_explorer.viz import sent, style


def _csv(data: np.ndarray) -> bytes:
    buf = io.StringIO()
    arr = np.asarray(data)
    np.savetxt(buf, arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr[None], delimiter=",", fmt="%.6g")
    return buf.getvalue().encode()


def _npy(data: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(data), allow_pickle=False)
    return buf.getvalue()


def show_figure(
    fig: go.Figure,
    key: str,
    data: np.ndarray | Mapping[str, np.ndarray] | None = None,
    *,
    clickable: bool = False,
    width_px: float | None = None,
) -> list[Any]:
    """Show a Plotly figure (PNG from its toolbar) with a "Data" menu: the numbers behind it as CSV and NPY.

    ``clickable``: a click on a point reruns the page, and the clicked points' ``customdata`` are returned.
    ``width_px``: about how wide the figure is drawn, where known (its title is wrapped to it and its margins fit
    to it, :func:`~tx_explorer.viz.style.tidy`).
    """
    # Drawn once: Streamlit's copy of it redraws nothing. A chart with point selection also carries the modes
    # Streamlit gives it, which set after the first draw would draw it again.
    modes = dict(clickmode="event+select", dragmode="pan") if clickable else {}
    event = st.plotly_chart(
        sent.as_sent(style.tidy(fig, width_px), **modes),
        key=f"fig_{key}",
        theme=None,
        config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": key, "scale": 2}},
        **(dict(on_select="rerun", selection_mode="points") if clickable else {}),
    )
    picked = [_as_list(p["customdata"]) for p in event.selection.points if "customdata" in p] if clickable else []
    if data is not None:
        _downloads(key, data)
    return picked


def _as_list(custom: Any) -> Any:
    """A point's ``customdata`` as sent: an array arrives as {"0": …, "1": …} from the browser."""
    return [custom[k] for k in sorted(custom, key=int)] if isinstance(custom, Mapping) else custom


def show_clickable(*panels: Any, width_px: float | None = None) -> list[Any] | None:
    """Show panels whose figures carry clickable points; the ``customdata`` of the point last clicked, if any."""
    picked = None
    for panel in panels:
        points = show_figure(panel.figure, panel.key, panel.data, clickable=True, width_px=width_px)
        picked = points[0] if points else picked
    return picked


def _downloads(key: str, data: np.ndarray | Mapping[str, np.ndarray]) -> None:
    """One "Data" menu under a figure: each array behind it as CSV and as NPY (a row of buttons per figure did
    not fit beside narrow charts and cut its labels)."""
    T = texts("common")
    arrays = data if isinstance(data, Mapping) else {key: data}
    with st.popover(T("download_menu"), icon=":material/download:", help=T("download_menu_help")):
        for name, arr in arrays.items():
            # Files are made on click (deferred), not on every rerun: a 6 × 12 × 512² grid is 200 MB of CSV.
            for fmt, make, mime in (("csv", _csv, "text/csv"), ("npy", _npy, "application/octet-stream")):
                st.download_button(
                    T(f"download_{fmt}", file=f"`{name}.{fmt}`"),
                    functools.partial(make, arr),
                    file_name=f"{name}.{fmt}",
                    mime=mime,
                    key=f"{fmt}_{key}_{name}",
                    on_click="ignore",
                )


def show(*panels: Any, width_px: float | None = None) -> None:
    """Show :class:`tx_explorer.views.Panel` s (figure, key, the numbers behind it) one below the other."""
    for panel in panels:
        if panel is not None:
            show_figure(panel.figure, panel.key, panel.data, width_px=width_px)


SHORT_TABLE = 12  # rows a table may have and still be shown whole, its long cells wrapped (a grid cuts them and
# hides columns past its width); a longer one (a row per head: 270 on SmolLM2) scrolls and sorts in a grid


def show_result(
    result: Result, clickable: bool = False, side_by_side: bool = False, width_px: float | None = None
) -> list[Any] | None:
    """A view's result (``panels``, ``notes``, ``table``): the panels, each note as a caption (notes quote tokens
    and replies, so Markdown in them is escaped), the table (a short one whole; a long one, or one whose numbers
    have ``decimals``, in a grid); with ``clickable``, the ``customdata`` of a clicked point, if any.
    ``side_by_side``: the panels in a row, not one below the other; else ``width_px``: how wide they are drawn,
    where known (:func:`show_figure`)."""
    if side_by_side:
        picked = row(*result.panels)
    else:
        show_panels = show_clickable if clickable else show
        picked = show_panels(*result.panels, width_px=width_px)
    for note in result.notes:
        st.caption(escape_markdown(note))
    if result.table:
        places = result.decimals  # numbers to sort, each column shown to its places: a grid
        if places is None and len(next(iter(result.table.values()))) <= SHORT_TABLE:
            literal_table(result.table)
        else:
            config = {c: st.column_config.NumberColumn(format=f"%.{d}f") for c, d in (places or {}).items()}
            st.dataframe(result.table, hide_index=True, column_config=config)
    return picked


def literal_table(table: Mapping[str, list] | list[dict]) -> None:
    """``st.table`` (no index) with its text cells shown as they are: st.table reads cells as Markdown, and
    tokens hold backticks, asterisks and underscores (a flow row showed ``▁`_`` as code, its backticks gone)."""
    literal = lambda v: escape_markdown(v) if isinstance(v, str) else v  # noqa: E731
    if isinstance(table, Mapping):
        st.table({k: [literal(v) for v in column] for k, column in table.items()}, hide_index=True)
    else:
        st.table([{k: literal(v) for k, v in row.items()} for row in table], hide_index=True)


PAGE_PX = style.PAGE_PX


def row(*panels: Any, headings: tuple[str, ...] = ()) -> None:
    """Panels side by side, one column each (a heading in Markdown above each when given)."""
    for i, (col, panel) in enumerate(zip(st.columns(len(panels)), panels)):
        with col:
            if i < len(headings):
                st.markdown(headings[i])
            show(panel, width_px=PAGE_PX / len(panels))


def metrics(values: Mapping[str, str]) -> None:
    """A row of ``st.metric`` s, one column each: ``{label: value}``."""
    for col, (label, value) in zip(st.columns(len(values)), values.items()):
        col.metric(label, value)


_redraws = itertools.count()


def redraw(placeholder: Any, panel: Any) -> None:
    """Draw a panel's figure into an ``st.empty()`` placeholder, replacing what was there (a growing curve)."""
    fig = sent.as_sent(style.tidy(panel.figure))
    placeholder.plotly_chart(fig, key=f"{panel.key}_live_{next(_redraws)}", theme=None)
