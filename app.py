"""Transformer Explorer: the entry point. ``streamlit run app.py``"""

import streamlit as st

from tx_explorer import ui

st.set_page_config(page_title="Transformer Explorer", page_icon=":material/hub:", layout="wide")

PAGES = [
    ("pages/home.py", "page_home", ":material/home:"),
    ("pages/operator.py", "page_operator", ":material/functions:"),
    ("pages/self_attention.py", "page_self_attention", ":material/swap_horiz:"),
    ("pages/masks.py", "page_masks", ":material/grid_on:"),
    ("pages/multihead.py", "page_multihead", ":material/view_module:"),
    ("pages/moe.py", "page_moe", ":material/call_split:"),
    ("pages/norms.py", "page_norms", ":material/tune:"),
    ("pages/model_sizes.py", "page_model_sizes", ":material/bar_chart:"),
    ("pages/language_model.py", "page_language_model", ":material/edit_note:"),
    ("pages/vision_transformer.py", "page_vit", ":material/image:"),
    ("pages/seq2seq.py", "page_seq2seq", ":material/translate:"),
    ("pages/cost_of_attention.py", "page_cost", ":material/speed:"),
]

ui.sidebar()
nav = st.navigation(
    [st.Page(path, title=ui.nav_title(key), icon=icon, default=(i == 0)) for i, (path, key, icon) in enumerate(PAGES)]
)
nav.run()
