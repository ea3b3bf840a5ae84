"""Transformer Explorer: the entry point. ``streamlit run app.py``"""

from pathlib import Path

import streamlit as st

from tx_explorer import ui

st.set_page_config(page_title="Transformer Explorer", page_icon=":material/hub:", layout="wide")

# (page file, icon, sidebar section) in the lecture's order. The section is a key ``nav_<section>`` of common.json
# ("" = no heading); a new page is one line here, in its section.
PAGES = [
    ("pages/home.py", ":material/home:", ""),
    ("pages/seq2seq.py", ":material/translate:", "attention"),
    ("pages/operator.py", ":material/functions:", "attention"),
    ("pages/self_attention.py", ":material/swap_horiz:", "attention"),
    ("pages/position_lab.py", ":material/straighten:", "attention"),
    ("pages/masks.py", ":material/grid_on:", "attention"),
    ("pages/multihead.py", ":material/view_module:", "transformers"),
    ("pages/norms.py", ":material/tune:", "transformers"),
    ("pages/model_sizes.py", ":material/bar_chart:", "transformers"),
    ("pages/language_model.py", ":material/edit_note:", "transformers"),
    ("pages/head_science.py", ":material/science:", "inside"),
    ("pages/block_roles.py", ":material/hub:", "inside"),
    ("pages/flow.py", ":material/account_tree:", "inside"),
    ("pages/atlas.py", ":material/travel_explore:", "inside"),
    ("pages/circuit.py", ":material/timeline:", "inside"),
    ("pages/vision_transformer.py", ":material/image:", "beyond"),
    ("pages/moe.py", ":material/call_split:", "beyond"),
    ("pages/cost_of_attention.py", ":material/speed:", "cost"),
    ("pages/kv_cache.py", ":material/memory:", "cost"),
]


def sections() -> dict[str, list[st.Page]]:
    """Section heading → its pages, headings in the order they first appear in PAGES."""
    nav: dict[str, list[st.Page]] = {}
    for i, (path, icon, section) in enumerate(PAGES):
        heading = ui.texts("common")(f"nav_{section}") if section else ""
        page = st.Page(path, title=ui.page_title(Path(path).stem), icon=icon, default=(i == 0))
        nav.setdefault(heading, []).append(page)
    return nav


ui.sidebar()
# expanded=True: Streamlit otherwise folds a menu of more than twelve pages after ten ("View N more")
nav = st.navigation(sections(), expanded=True)
ui.leave_live_runs(nav.url_path)  # a live training run goes on through its page's reruns, and stops when left
# a class arriving at once: first pages in order of arrival, each visitor told their place; the page's main choices
# restored from the URL before its widgets are built and written back after (a reload or a shared link keeps them)
with ui.first_visit(), ui.kept_in_url(nav.url_path):
    nav.run()
