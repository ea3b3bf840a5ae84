"""Transformer Explorer: the entry point. ``streamlit run app.py``"""

from pathlib import Path

import streamlit as st

from tx_explorer import ui

st.set_page_config(page_title="Transformer Explorer", page_icon=":material/hub:", layout="wide")

PAGES = [
    ("pages/home.py", ":material/home:"),
    ("pages/operator.py", ":material/functions:"),
    ("pages/self_attention.py", ":material/swap_horiz:"),
    ("pages/position_lab.py", ":material/straighten:"),
    ("pages/masks.py", ":material/grid_on:"),
    ("pages/multihead.py", ":material/view_module:"),
    ("pages/head_science.py", ":material/science:"),
    ("pages/moe.py", ":material/call_split:"),
    ("pages/norms.py", ":material/tune:"),
    ("pages/block_roles.py", ":material/hub:"),
    ("pages/model_sizes.py", ":material/bar_chart:"),
    ("pages/language_model.py", ":material/edit_note:"),
    ("pages/vision_transformer.py", ":material/image:"),
    ("pages/seq2seq.py", ":material/translate:"),
    ("pages/cost_of_attention.py", ":material/speed:"),
    ("pages/kv_cache.py", ":material/memory:"),
]

ui.sidebar()
nav = st.navigation(
    [
        st.Page(path, title=ui.page_title(Path(path).stem), icon=icon, default=(i == 0))
        for i, (path, icon) in enumerate(PAGES)
    ]
)
nav.run()
