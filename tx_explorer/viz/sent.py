"""A shown figure in the form that the browser draws once.

Streamlit draws each new chart, then hands ``Plotly.react`` a JSON copy of the figure it drew (its theming step,
on every chart it mounts), and Plotly redraws the whole chart unless nothing in the copy compares as changed
(plotly.js 3.8, ``react`` → ``diffLayout``/``diffData``). Three things never compare equal in a copy: a layout
template (an object, compared by identity), typed arrays (the base64 numbers ``to_dict`` sends numpy arrays as),
and lists unless the layout sets a ``datarevision`` (then lists are taken as unchanged while it is). So a shown
figure is serialised (:class:`ListFigure`) with its template's layout in its own layout and no template
(:func:`untemplated`, the same look), a ``datarevision``, and its numbers as lists: the second draw finds nothing
to do.

A mounted chart never gets new numbers under the same ``datarevision``: Streamlit mounts a new chart for a new
figure (its element id hashes the figure), so the revision only ever meets copies of what was drawn."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import plotly.graph_objects as go

DATAREVISION = 1
# Typed arrays beyond this many numbers stay typed (and the chart drawn twice): as text a float32 takes up to 19
# characters against base64's 5.3, and a figure this large costs its transfer more than a second draw.
LIST_NUMBERS = 50_000
# Template entries Plotly applies to every subplot of that kind (xaxis to xaxis2 …), and to each item of a list.
_SUBPLOT = re.compile(r"^(xaxis|yaxis|coloraxis|scene|geo|polar|ternary|smith|mapbox|map)(\d*)$")
_DTYPES = {"i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32", "u4": "uint32"}
_DTYPES |= {"f4": "float32", "f8": "float64"}


def _subplots(traces: Sequence[Any], own: dict, kind: str) -> set[str]:
    """The ``kind`` subplots the figure has: set in its layout, or named by a trace ("x2" → "xaxis2"; a cartesian
    trace that names none is on "xaxis"). Polar, ternary and map traces count where the layout sets their subplot
    (the app draws none)."""
    names = {k for k in own if (m := _SUBPLOT.match(k)) and m.group(1) == kind}
    for trace in traces:
        if kind not in trace:
            continue
        if kind in ("xaxis", "yaxis"):
            names.add(kind + (trace[kind] or kind[0])[1:])
        elif trace[kind]:  # a shared colour axis, a 3-D scene, a map: only where the trace names one
            names.add(trace[kind])
    return names


def untemplated(spec: dict, traces: Sequence[Any]) -> dict:
    """A figure's dict (``to_dict``; ``traces``: its traces as objects) with its template's layout written into its
    own layout where it leaves a value unset, as Plotly applies a template, and no template. On the dict, not the
    figure: Plotly's ``update_layout`` validates as it goes, 12 ms a call. Our template has no trace defaults."""
    layout = spec["layout"]
    template = layout.pop("template", {}).get("layout", {})
    defaults: dict[str, Any] = {}
    for key, value in template.items():
        if _SUBPLOT.match(key):
            defaults |= dict.fromkeys(_subplots(traces, layout, key), value)
        elif key.endswith("defaults"):  # annotationdefaults → each of layout.annotations
            items = layout.get(key.removesuffix("defaults") + "s", [])
            items[:] = [_merged(value, item) for item in items]
        else:
            defaults[key] = value
    for key, value in defaults.items():
        own = layout.get(key, {})
        layout[key] = _merged(value, own) if isinstance(value, dict) else layout.get(key, value)
        if key[1:5] == "axis":  # cartesian: keep what the template left to Plotly's defaults
            layout[key] = {**_shown(traces, key, own), **layout[key]}
    return spec


def _merged(defaults: dict, own: dict) -> dict:
    """``own`` with what ``defaults`` sets and it leaves unset, nested dicts merged key by key (``own`` wins)."""
    out = {**defaults, **own}
    for key, value in defaults.items():
        if isinstance(value, dict) and isinstance(own.get(key), dict):
            out[key] = _merged(value, own[key])
    return out


_ORIENTED = {"bar", "box", "violin", "histogram", "funnel", "waterfall"}


def _shown(traces: Sequence[Any], name: str, own: dict) -> dict:
    """Whether axis ``name`` shows its line, grid and zero line, set where the figure leaves them to Plotly: a
    colour or width the user sets makes Plotly show the line it styles (``coerce2``), one from a template does not,
    so baked colours would draw lines the template never drew. Plotly's defaults: no axis line; a grid and a zero
    line except on the axis that positions bars, boxes and the like (their category axis). ``own``: the axis
    before the template's values."""
    ref = name[0] + name.removeprefix(name[:5])  # "xaxis2" → "x2"
    positions = any(
        t.type in _ORIENTED and (t[name[:5]] or name[0]) == ref and ((t.orientation or "v") == "h") == (name[0] == "y")
        for t in traces
    )
    return {
        "showline": "linecolor" in own or "linewidth" in own,
        "showgrid": not positions or any(k in own for k in ("gridcolor", "gridwidth", "griddash")),
        "zeroline": not positions or any(k in own for k in ("zerolinecolor", "zerolinewidth")),
    }


def _numbers(spec: Any) -> int:
    """How many numbers ``spec``'s typed arrays hold (base64: 3 bytes in 4 characters)."""
    if isinstance(spec, dict):
        if "bdata" in spec and "dtype" in spec:
            return len(spec["bdata"]) * 3 // 4 // np.dtype(_DTYPES[spec["dtype"]]).itemsize
        return sum(_numbers(v) for v in spec.values())
    return sum(_numbers(v) for v in spec) if isinstance(spec, list) else 0


def _as_lists(spec: Any) -> Any:
    """``spec`` with each typed array (``{"dtype", "bdata", "shape"}``) as (nested) lists, NaN as null."""
    if isinstance(spec, dict):
        if "bdata" in spec and "dtype" in spec:
            values = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=_DTYPES[spec["dtype"]])
            if "shape" in spec:
                values = values.reshape([int(n) for n in spec["shape"].split(",")])
            if values.dtype.kind == "f" and np.isnan(values).any():
                values = np.where(np.isnan(values), None, values.astype(object))  # null: a gap, as NaN is
            return values.tolist()
        return {k: _as_lists(v) for k, v in spec.items()}
    return [_as_lists(v) for v in spec] if isinstance(spec, list) else spec


class ListFigure(go.Figure):
    """A figure whose dict (what ``st.plotly_chart`` and ``plotly.io.to_json`` serialise) is the form drawn once:
    untemplated, a data revision, its numbers as lists (up to :data:`LIST_NUMBERS` of them), and the layout values
    :func:`as_sent` was given where the figure sets none."""

    _sent_layout: Mapping[str, Any] = MappingProxyType({})  # as_sent's, per figure

    def to_dict(self) -> dict:
        spec = untemplated(super().to_dict(), self.data)
        spec["layout"] = {**self._sent_layout, **spec["layout"], "datarevision": DATAREVISION}
        return _as_lists(spec) if _numbers(spec) <= LIST_NUMBERS else spec


def as_sent(fig: go.Figure, **layout: Any) -> go.Figure:
    """``fig`` (the same object) sent in the form drawn once, with ``layout`` values where it sets none: only how
    it serialises changes (no copy of its arrays, nothing validated again)."""
    fig.__class__ = ListFigure
    fig._sent_layout = layout
    return fig
