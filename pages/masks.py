"""Masks (lecture §3.4, §9.4): −∞ before the softmax, exactly 0 after it."""

import pandas as pd
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.views import masks as view

T = ui.texts("masks")
LANG = ui.lang()
# Each tab's own widgets (a key ending in "_" stands for every key it begins): kept while another tab is open.
# Keys carry the sentence's length where their bounds depend on it, so a kept value never exceeds a new bound.
INPUTS = {
    "causal": "",
    "padding": "padding_length_ padding_causal",
    "sliding_window": "window_",
    "prefix_lm": "prefix_",
    "block_diagonal": "sizes_ blocks_causal",
    "custom": "custom_",
}


def show(kind: str, mask, toks: list[str], seed: int) -> None:
    """Scores with −∞ where hidden, the weights after the softmax, and the check that hidden weights are 0."""
    m = view.masked(kind, mask, toks, seed, lang=LANG)
    ui.row(m.scores, m.weights)
    (st.success if m.ok else st.error)(m.check)
    if m.empty_rows:
        st.warning(m.empty_rows)
    st.markdown(m.why)


def options(kind: str, toks: list[str]) -> dict:
    """The open tab's own widgets: what :func:`mask_gallery.build_mask` takes for ``kind``."""
    n = len(toks)
    if kind == "padding":
        c = st.columns(2)
        length = c[0].number_input(
            T("padding_length"), 1, n, max(1, n - 3), help=T("padding_help"), key=f"padding_length_{n}"
        )
        return dict(length=length, causal=c[1].checkbox(T("with_causal"), key="padding_causal"))
    if kind == "sliding_window":
        return dict(window=st.number_input(T("window"), 1, n, min(3, n), help=T("window_help"), key=f"window_{n}"))
    if kind == "prefix_lm":
        return dict(prefix=st.number_input(T("prefix"), 0, n, n // 2, help=T("prefix_help"), key=f"prefix_{n}"))
    if kind == "block_diagonal":
        c = st.columns(2)
        default = ", ".join(str(s) for s in mg.even_split(n))
        text = c[0].text_input(T("sizes"), default, key=f"sizes_{n}", help=T("sizes_help"))
        causal = c[1].checkbox(T("with_causal"), key="blocks_causal")  # drawn before the sizes can be refused
        return dict(sizes=mg.parse_sizes(text, n), causal=causal)
    if kind == "custom":
        st.markdown(T("custom_intro"))
        start = st.selectbox(
            T("custom_start"), mg.GRID_STARTS, format_func=lambda s: T(f"start_{s}"), key="custom_start"
        )
        names = [f"{j + 1} {tok}" for j, tok in enumerate(toks)]  # unique even when words repeat
        grid = pd.DataFrame(mg.start_grid(start, n), index=names, columns=names)
        return dict(grid=st.data_editor(grid, key=f"custom_{start}_{n}").to_numpy())
    return {}


@st.fragment
def gallery() -> None:
    """The sentence, the mask kinds (only the open tab computes and draws) and the lecture's example.

    A fragment: typing a sentence or switching tabs reruns and redraws this part only, not the page's text."""
    c = st.columns([4, 1])
    sentence = c[0].text_input(
        T("sentence"), T("sentence_default"), max_chars=500, help=T("sentence_help", n=mg.MAX_TOKENS), key="sentence"
    )
    seed = c[1].number_input(ui.texts("common")("seed"), 0, 10_000, 0, key="mask_seed")
    toks = None
    with ui.friendly_errors():
        toks = mg.tokens(sentence)
    if toks is not None:
        if isinstance(chosen := st.session_state.get("mask_kind"), str):  # the open tab, named in this language
            st.session_state["mask_kind"] = view.kind_tab(chosen, LANG)
        tabs = st.tabs([T(f"kind_{k}") for k in mg.MASK_KINDS], key="mask_kind", on_change="rerun")
        for tab, kind in zip(tabs, mg.MASK_KINDS):
            if tab.open:  # the other kinds compute nothing and send nothing until their tab is chosen
                ui.keep_inputs(INPUTS, kind)  # what was set in another tab is still there when it comes back
                with tab, ui.friendly_errors():
                    show(kind, mg.build_mask(kind, len(toks), **options(kind, toks)), toks, seed)
    example(seed)


@ui.below_fold("masks_example", height=700)
def example(seed: int) -> None:
    """The lecture's example, with the gallery's seed (below the first screen: drawn when scrolled to)."""
    st.header(T("example_header"))
    st.markdown(T("example_intro"))
    with ui.friendly_errors():
        panel, table = view.example(seed, lang=LANG)
        c = st.columns(2)
        with c[0]:
            ui.show(panel, width_px=ui.PAGE_PX / 2)
        c[1].table(table)
        st.markdown(T("example_reading"))


@st.cache_data(max_entries=16, show_spinner=False)  # numbers only: one reading serves both languages
def layer_masks(name: str, n: int) -> mg.ModelMasks:
    return view.read_layers(ui.cached_model(name), n)


@ui.below_fold("masks_model", height=1100)
def model_section() -> None:
    """A real model's own mask for each layer (Gemma 3's local and global layers side by side), checked live."""
    st.header(T("model_header"))
    st.markdown(T("model_intro"))
    c = st.columns([2, 1])
    if "masks_model" not in st.session_state:  # the default loads models until one has local and global layers
        default = view.first_windowed(models.available_models("text", kind="causal"), ui.cached_model)  # Gemma 3
        if default is not None:
            st.session_state["masks_model"] = default
    name = ui.text_model_picker(T("model"), "masks_model", kind="causal", where=c[0])
    limit = mg.MAX_MODEL_TOKENS
    n = c[1].number_input(  # from 2: one token hides no key, and there would be nothing to check
        T("model_tokens"), 2, limit, mg.MODEL_TOKENS, key="masks_tokens", help=T("model_tokens_help", limit=limit)
    )
    if name is None:
        return
    with ui.friendly_errors():
        tm = ui.cached_model(name)
        if refused := view.refusal(tm, lang=LANG):  # an encoder typed as a folder: no causal mask to check
            st.info(refused)
            return
        args = (name, view.model_tokens(tm, n))
        found = ui.remembered_job(lambda report: layer_masks(*args), label=T("model_working"), key=("masks", *args))
        m = view.model_masks(tm, found, int(n), lang=LANG)
        if m.cut:
            st.info(m.cut)
        (st.success if m.ok else st.error)(m.check)
        if m.short:
            st.info(m.short)
        if m.sinks:
            st.info(m.sinks)
        ui.row(*m.panels)
        st.table(m.table)


st.title(ui.page_title("masks"))
st.markdown(T("intro"))
st.latex(view.LATEX)
gallery()
st.markdown(T("compare_table"))
model_section()
