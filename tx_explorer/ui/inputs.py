"""A declared section's inputs laid out as widgets (:mod:`tx_explorer.views.inputs`): one place turns a declaration
into Streamlit, so every page shows a number, a choice or a switch the same way."""

from __future__ import annotations

from typing import Any

import streamlit as st

from tx_explorer.views import Text
from tx_explorer.views.inputs import Choice, Number, Section, Switch, label_key, option_key


def inputs(section: Section, T: Text, *, columns: int = 4) -> dict[str, Any]:
    """The section's widgets, ``columns`` to a row, in declaration order; their values by input name."""
    values: dict[str, Any] = {}
    for start in range(0, len(section.inputs), columns):
        for box, inp in zip(st.columns(columns), section.inputs[start : start + columns]):
            key, label = section.key(inp), T(label_key(inp))
            if isinstance(inp, Number):
                help_ = T(inp.help) if inp.help else None
                values[inp.name] = int(box.number_input(label, inp.low, inp.high, inp.default, key=key, help=help_))
            elif isinstance(inp, Choice):
                index = inp.options.index(inp.default)
                values[inp.name] = box.selectbox(
                    label, inp.options, index, format_func=lambda o, c=inp: T(option_key(c, o)), key=key
                )
            elif isinstance(inp, Switch):
                values[inp.name] = box.toggle(label, value=inp.default, key=key)
    return values
