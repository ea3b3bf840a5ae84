"""Self-attention and position (lecture §3.1–3.3, §9.3): a set until positions are added.

Shuffle reruns and redraws its own section only (a fragment); word order and the encodings open on demand."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import self_attention
from tx_explorer.views import self_attention as view

T = ui.texts("self_attention")
LANG = ui.lang()


@st.cache_data(max_entries=4, show_spinner=False)
def trained_tables():
    return self_attention.bundled_position_tables()


@st.fragment
def shuffled(layer: dict) -> bool:
    """1. The layer on a sequence and on a shuffled copy; True when the layer could be built."""
    st.session_state.setdefault("perm_seed", 1)
    if st.button(T("shuffle"), icon=":material/shuffle:", key="shuffle"):
        st.session_state.perm_seed += 1
    with ui.friendly_errors():
        perm = view.LAYER.compute(**layer, perm_seed=st.session_state.perm_seed, lang=LANG)
        st.markdown(perm.order)
        c = st.columns(2)
        with c[0]:
            ui.show(perm.out, perm.weights, width_px=ui.PAGE_PX / 2)
        with c[1]:
            ui.show(perm.out_shuffled, perm.weights_shuffled, width_px=ui.PAGE_PX / 2)
        st.metric(T("max_diff"), view.difference(perm.check.max_diff))
        (st.success if perm.equal else st.info)(perm.verdict)
        return True
    return False


@st.fragment
def word_order(layer: dict, layer_ok: bool) -> None:
    """2. Dog bites man: the same words in another order, with each kind of position."""
    if not (box := ui.lazy_section(T, "order", key="sa_open_order")):
        return
    with box:
        sentences = ui.inputs(view.ORDER, T, columns=2)
        if not layer_ok:
            st.info(T("order_needs_layer"))
            return
        with ui.friendly_errors():
            order = view.ORDER.compute(**sentences, **view.handed_on(layer), lang=LANG)  # section 1's layer
            ui.show(order.chart)
            for col, k in zip(st.columns(3), self_attention.POSITION_KINDS):
                col.metric(T("order_metric", kind=T(f"pos_{k}")), view.difference(order.max_diff[k]))
                col.caption(T("order_pooled", diff=view.difference(order.pooled_diff[k])))
            st.markdown(order.conclusion)


@st.fragment
def encodings(seed: int) -> None:
    """3. Positional encodings: sinusoidal, learned before training, and the bundled models' trained tables."""
    if not (box := ui.lazy_section(T, "enc", view.LATEX["enc"], key="sa_open_enc")):
        return
    with box:
        tables, problems = trained_tables()
        for name, reason in problems.items():
            st.warning(T("bundle_problem", name=name, reason=reason))
        source = st.radio(
            T("enc_source"),
            ["sinusoidal", "learned", *tables],
            horizontal=True,
            key="enc_source",
            format_func=lambda s: view.source_label(s, lang=LANG),
        )
        c, top = st.columns(2), view.position_range(source, tables)  # a trained table has only so many rows
        ui.keep_within("sa_enc_positions", 2, top)
        n_pos = c[0].slider(T("enc_positions"), 2, top, min(64, top), key="sa_enc_positions")
        enc_dim = c[1].slider(T("enc_dim"), 2, 256, 64, step=2, disabled=source in tables, key="sa_enc_dim")
        with ui.friendly_errors():
            table, similarity, note = view.encodings(source, n_pos, enc_dim, seed, tables, lang=LANG)
            if note:
                st.caption(note)
            ui.row(table, similarity)
            st.markdown(view.encoding_reading(source, table.data, similarity.data, trained=source in tables, lang=LANG))


st.title(ui.page_title("self_attention"))
st.markdown(T("intro"))
st.latex(view.LATEX["qkv"])

# 1. Permutation equivariance: the layer's settings here serve every section ---------------------------------
st.header(T("perm_header"))
st.latex(view.LATEX["perm"])
st.markdown(T("perm_intro"))
layer = ui.inputs(view.LAYER, T, columns=5)
layer_ok = shuffled(layer)
word_order(layer, layer_ok)
encodings(layer["seed"])
