"""Transformer Explorer: the entry point. ``streamlit run app.py``"""

import streamlit as st

from tx_explorer import ui

st.set_page_config(page_title="Transformer Explorer", page_icon=":material/hub:", layout="wide")

PAGES = [
    ("pages/home.py", "page_home", ":material/home:"),
    ("pages/operator.py", "page_operator", ":material/functions:"),
    ("pages/self_attention.py", "page_self_attention", ":material/swap_horiz:"),
    ("pages/masks.py", "page_masks", ":material/grid_on:"),
]

ui.sidebar()
nav = st.navigation([st.Page(path, title=ui.nav_title(key), icon=icon, default=(i == 0)) for i, (path, key, icon) in enumerate(PAGES)])
nav.run()
