"""Every widget that holds a value has a key: Streamlit identifies an unkeyed widget by its arguments, label and help
among them, and both change with the language, so a switch to 中文 made a new widget and the visitor's choice (the
ViT's upload, a seed, a slider, a layer) fell back to its default."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("pages/*.py"), *ROOT.glob("tx_explorer/ui/*.py")])
# Streamlit's widgets that keep a value between runs (a button's click lasts one run only), and the expander, whose
# open state is known by its label too
WIDGETS = {
    "checkbox",
    "color_picker",
    "data_editor",
    "date_input",
    "expander",
    "file_uploader",
    "multiselect",
    "number_input",
    "pills",
    "radio",
    "segmented_control",
    "select_slider",
    "selectbox",
    "slider",
    "text_area",
    "text_input",
    "time_input",
    "toggle",
}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_widget_keeps_its_value_across_the_language_switch(source):
    unkeyed = [
        f"{node.func.attr} (line {node.lineno})"
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WIDGETS
        if not any(k.arg == "key" or k.arg is None for k in node.keywords)  # key=, or passed on in **kwargs
    ]
    assert not unkeyed
