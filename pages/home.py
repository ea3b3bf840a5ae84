"""Home: the map of the lecture — each section, the page that shows it, and why."""

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from tx_explorer import ui
from tx_explorer.views import home as view

T = ui.texts("home")

# Lecture section → the pages that show it (pages/<key>.py; linked once app.py registers the page).
LECTURE = [
    ("s1", ["seq2seq"]),
    ("s2", ["operator", "seq2seq"]),
    ("s3", ["self_attention", "masks", "position_lab"]),
    ("s4", ["multihead", "head_science", "circuit", "atlas", "cost_of_attention"]),
    ("s5", ["block_roles", "norms", "model_sizes", "multihead"]),
    ("s6", ["language_model", "kv_cache"]),
    ("s7", ["vision_transformer"]),
    ("s8", ["norms", "moe", "position_lab", "kv_cache"]),
    ("s9", ["operator", "self_attention", "masks", "block_roles", "flow", "cost_of_attention"]),
]


def page_link(key: str) -> None:
    """A link to ``pages/<key>.py`` once the app registers it (titled as in the sidebar), else its planned name."""
    try:
        st.page_link(f"pages/{key}.py", icon=":material/arrow_forward:")
    except StreamlitPageNotFoundError:
        st.markdown(T("planned", name=ui.page_title(key)))


st.title(T("title"))
st.markdown(T("intro"))

left, right = st.columns([3, 2])
with right, ui.friendly_errors():
    ui.show(view.example(lang=ui.lang()), width_px=ui.PAGE_PX * 2 / 5)
    st.caption(T("example_caption"))
with left:
    st.markdown(T("how_to"))

st.header(T("map_header"))
for section, pages in LECTURE:
    with st.container(border=True):
        c = st.columns([2, 2, 3])
        c[0].markdown(T(f"{section}_title"))
        with c[1]:
            for key in pages:
                page_link(key)
        c[2].markdown(T(f"{section}_why"))
