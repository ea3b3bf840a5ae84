"""Attention operator (lecture §2, §9.1–9.2): E = QKᵀ/√D, A = softmax(E), Y = AV, step by step.

Each section is a fragment: its widgets rerun and redraw that section only. Sections past the first open on
demand, so a first visit computes and sends the three steps alone."""

import streamlit as st

from tx_explorer import models, ui
from tx_explorer.views import operator as view

T = ui.texts("operator")
LANG = ui.lang()
SEED = ui.texts("common")("seed")


@st.cache_data(max_entries=64, show_spinner=False)
def saturation(n_keys: int, seed: int, scaled: bool) -> view.SaturationCurve:
    return view.saturation(n_keys, seed, scaled)


@st.fragment
def steps_section() -> None:
    """1. Q, K, V and the three steps, then 2. what Q/K and V each decide (on demand)."""
    st.header(T("steps_header"))
    source = st.radio(
        T("source"), ["random", "edit"], format_func=lambda s: T(f"source_{s}"), horizontal=True, key="source"
    )
    qkv = steps = None
    with ui.friendly_errors():
        if source == "random":
            c = st.columns(5)
            nq = c[0].slider("$N_Q$", 1, 12, 4, help=T("help_nq"), key="op_nq")
            nk = c[1].slider("$N_K$", 1, 12, 6, help=T("help_nk"), key="op_nk")
            d = c[2].slider("$D$", 1, 64, 8, help=T("help_d"), key="d")
            dv = c[3].slider("$D_V$", 1, 12, 4, help=T("help_dv"), key="op_dv")
            seed = c[4].number_input(SEED, 0, 10_000, 0, key="seed")
            qkv = view.random_qkv(nq, nk, d, dv, seed)
        else:
            st.caption(T("edit_hint"))
            c = st.columns(3)
            example = {n: view.format_matrix(view.EXAMPLE[n], 0) for n in "QKV"}
            texts = {n: c[i].text_area(n, example[n], height=150, key=f"text_{n}") for i, n in enumerate("QKV")}
            seed = 0  # the replacement drawn in section 2
            qkv = tuple(view.parse_matrix(texts[n], n) for n in "QKV")
    if qkv is not None:
        ui.row(*view.inputs(*qkv, lang=LANG))
        scaled = st.toggle(T("scale_toggle"), value=True, help=T("scale_help"), key="scaled")
        with ui.friendly_errors():
            steps = view.steps(*qkv, scaled, lang=LANG)  # checks that the shapes fit together
    if steps is not None:
        ui.row(steps.scores, steps.weights, steps.out)
        st.markdown(steps.numbers)
        replace_section(qkv, seed, scaled)


@st.fragment
def replace_section(qkv: tuple, seed: int, scaled: bool) -> None:
    """2. Similarity from Q and K, content from V: a new V keeps the weights, a new K changes them."""
    if box := ui.lazy_section(T, "qkv", key="op_open_qkv"):
        with box:
            st.markdown(T("qkv_table"))
            which = st.radio(
                T("replace"), ["V", "K"], format_func=lambda s: T(f"replace_{s}"), horizontal=True, key="replace"
            )
            r = view.replace(*qkv, which, seed=seed + 1, scaled=scaled, lang=LANG)
            ui.metrics({T("weights_diff"): view.plain(r.weights_diff), T("out_diff"): view.plain(r.out_diff)})
            st.markdown(r.reading)
            ui.row(r.weights, r.out)


@st.fragment
def sqrt_section() -> None:
    """3. Why divide by √D."""
    if box := ui.lazy_section(T, "sqrt", view.LATEX["sqrt"], key="op_open_sqrt"):
        with box:
            values = ui.inputs(view.SQRT, T, columns=1)
            with ui.friendly_errors():
                panels, numbers = view.SQRT.compute(**values, curve=saturation, lang=LANG)
                ui.row(*panels)
                st.markdown(numbers)


@st.fragment
def cross_section() -> None:
    """4. Cross-attention: queries from one sequence, keys and values from another."""
    if box := ui.lazy_section(T, "cross", key="op_open_cross"):
        with box:
            values = ui.inputs(view.CROSS, T, columns=5)
            with ui.friendly_errors():
                head = st.selectbox(T("head"), range(values["heads"]), key="op_cross_head")
                panel, shapes = view.CROSS.compute(**values, head=head, lang=LANG)
                ui.show(panel)
                st.markdown(shapes)


@st.cache_data(max_entries=8, show_spinner=False)  # numbers only: one measurement serves both languages
def qk_numbers(name: str) -> list:
    return view.qk_norm_numbers(ui.cached_model(name))


@st.fragment
def qk_norm_section() -> None:
    """5. QK-norm measured with a real model's own weights (Gemma 3)."""
    if box := ui.lazy_section(T, "qknorm", view.LATEX["qk_norm"], key="op_open_qknorm", intro=False):
        with box:  # the intro names the model picked: drawn below the picker
            default = view.first_qk_normed(models.available_models("text", kind="causal"), ui.cached_model)
            if default is not None:
                st.session_state.setdefault("op_qk_model", default)
            name = ui.text_model_picker(T("qk_model"), "op_qk_model", kind="causal")
            if name is None:
                return
            with ui.friendly_errors():
                tm = ui.cached_model(name)
                if not tm.config.qk_norm:
                    st.info(view.qk_absent(name, default, lang=LANG))
                    return
                st.markdown(view.qk_intro(tm, lang=LANG))
                found = ui.remembered_job(lambda report: qk_numbers(name), label=T("qk_working"), key=("qk", name))
                panels, words = view.qk_norm(tm, found, lang=LANG)
                ui.row(*panels)
                st.markdown(words)


@st.fragment
def sinks_section() -> None:
    """6. Rows of A that sum to less than 1: a model's learned attention sinks (gpt-oss), measured."""
    if box := ui.lazy_section(T, "sinks", view.LATEX["sinks"], key="op_open_sinks"):
        with box, ui.friendly_errors():
            if (name := ui.text_model_picker(T("sinks_model"), "op_sink_model", kind="causal")) is None:
                return
            tm = ui.cached_model(name)
            found = ui.remembered_job(
                lambda report: view.sink_numbers(tm), label=T("sinks_working"), key=("op_sinks", name)
            )
            words, table = view.sinks(tm, found, lang=LANG)
            st.markdown(words)
            if table is not None:
                st.table(table)


st.title(ui.page_title("operator"))
st.markdown(T("intro"))
st.latex(view.LATEX["operator"])
steps_section()
sqrt_section()
cross_section()
qk_norm_section()
sinks_section()
