"""Self-attention and position (lecture §3.1–3.3, §9.3): a set until positions are added."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import position
from tx_explorer.viz import charts
from tx_explorer.viz.heatmap import heatmap

T = ui.texts("self_attention")
AX = ui.axes()


@st.cache_data(max_entries=4, show_spinner=False)
def trained_tables():
    return position.bundled_position_tables()


st.title(T("title"))
st.markdown(T("intro"))
st.latex(r"Q=XW_Q,\quad K=XW_K,\quad V=XW_V,\qquad [Q\;K\;V]=X\,[W_Q\;W_K\;W_V]")

# 1. Permutation equivariance -----------------------------------------------------------------------------------
st.header(T("perm_header"))
st.latex(r"F(\sigma(X))=\sigma(F(X))")
st.markdown(T("perm_intro"))
c = st.columns(5)
n = c[0].slider(T("tokens"), 2, 16, 6)
dim = c[1].number_input(T("width"), 1, 256, 16, help=T("width_help"), key="dim")
heads = c[2].number_input(T("heads"), 1, 16, 4, help=T("heads_help"), key="heads")
seed = c[3].number_input(ui.texts("common")("seed"), 0, 10_000, 0)
kind = c[4].selectbox(T("positions"), position.POSITION_KINDS, format_func=lambda k: T(f"pos_{k}"), key="positions")
st.session_state.setdefault("perm_seed", 1)
if st.button(T("shuffle"), icon=":material/shuffle:", key="shuffle"):
    st.session_state.perm_seed += 1
check = None
with ui.friendly_errors():
    check = position.permutation_check(n, dim, heads, seed, st.session_state.perm_seed, kind)
    names = [f"x{i + 1}" for i in range(n)]
    shuffled = [names[i] for i in check.perm.tolist()]
    st.markdown(T("perm_order", order=", ".join(shuffled)))
    dims = [f"d{i + 1}" for i in range(dim)]
    c = st.columns(2)
    with c[0]:
        fig = charts.signed_heatmap(
            check.out.numpy(), names, dims, title=T("out_title"), x_title=T("axis_dims"), y_title=T("axis_tokens")
        )
        ui.show_figure(fig, "perm_out", check.out.numpy())
        fig = heatmap(check.weights[0].numpy(), names, names, title=T("weights_title"), **AX)
        ui.show_figure(fig, "perm_weights", check.weights.numpy())
    with c[1]:
        fig = charts.signed_heatmap(
            check.out_shuffled.numpy(),
            shuffled,
            dims,
            title=T("out_shuffled_title"),
            x_title=T("axis_dims"),
            y_title=T("axis_tokens"),
        )
        ui.show_figure(fig, "perm_out_shuffled", check.out_shuffled.numpy())
        fig = heatmap(check.weights_shuffled[0].numpy(), shuffled, shuffled, title=T("weights_shuffled_title"), **AX)
        ui.show_figure(fig, "perm_weights_shuffled", check.weights_shuffled.numpy())
    st.metric(T("max_diff"), f"{check.max_diff:.2e}")
    if check.max_diff < position.EQUIVARIANCE_TOL:
        st.success(T("perm_equal", diff=f"{check.max_diff:.1e}"))
    else:
        st.info(T("perm_broken", diff=f"{check.max_diff:.2f}", kind=T(f"pos_{kind}")))

# 2. Dog bites man ----------------------------------------------------------------------------------------------
st.header(T("order_header"))
st.markdown(T("order_intro"))
c = st.columns(2)
sentence_a = c[0].text_input(T("sentence_a"), "dog bites man", max_chars=200, key="sentence_a")
sentence_b = c[1].text_input(T("sentence_b"), "man bites dog", max_chars=200, key="sentence_b")
if check is None:
    st.info(T("order_needs_layer"))
else:
    with ui.friendly_errors():
        results = {k: position.word_order(sentence_a, sentence_b, dim, heads, k, seed) for k in position.POSITION_KINDS}
        words = results["none"].words_a
        fig = charts.bars(
            words,
            {T(f"pos_{k}"): r.word_diff.numpy() for k, r in results.items()},
            title=T("order_chart"),
            x_title=T("order_x"),
            y_title=T("order_y"),
        )
        ui.show_figure(fig, "word_order", {k: r.word_diff.numpy() for k, r in results.items()})
        for col, (k, r) in zip(st.columns(3), results.items()):
            col.metric(T("order_metric", kind=T(f"pos_{k}")), f"{r.max_diff:.2e}")
            col.caption(T("order_pooled", diff=f"{r.pooled_diff:.2e}"))
        same = results["none"].max_diff < position.EQUIVARIANCE_TOL
        st.markdown(T("order_conclusion" if same else "order_unexpected"))

# 3. Positional encodings ---------------------------------------------------------------------------------------
st.header(T("enc_header"))
st.latex(
    r"\tilde{x}_i=x_i+p_i,\qquad p_{i,2j}=\sin\!\left(\frac{i}{10000^{2j/D}}\right),"
    r"\quad p_{i,2j+1}=\cos\!\left(\frac{i}{10000^{2j/D}}\right)"
)
st.markdown(T("enc_intro"))
tables, problems = trained_tables()
for name, reason in problems.items():
    st.warning(T("bundle_problem", name=name, reason=reason))
sources = ["sinusoidal", "learned", *tables]
source = st.radio(
    T("enc_source"),
    sources,
    horizontal=True,
    key="enc_source",
    format_func=lambda s: T(f"enc_{s}") if s in ("sinusoidal", "learned") else T("enc_trained", name=s),
)
c = st.columns(2)
n_pos = c[0].slider(T("enc_positions"), 2, 128, 64)
enc_dim = c[1].slider(T("enc_dim"), 2, 256, 64, step=2, disabled=source in tables)
with ui.friendly_errors():
    if source in tables:
        table = tables[source][:n_pos]
        st.caption(T("enc_trained_note", rows=tables[source].shape[0], dim=table.shape[1]))
    else:
        table = position.position_table(source, n_pos, enc_dim, seed=seed)
    sim = position.position_similarity(table)
    pos_names = [str(i) for i in range(table.shape[0])]
    c = st.columns(2)
    with c[0]:
        fig = charts.signed_heatmap(
            table.numpy(),
            pos_names,
            [str(j) for j in range(table.shape[1])],
            title=T("enc_matrix"),
            x_title=T("axis_dims"),
            y_title=T("axis_positions"),
        )
        ui.show_figure(fig, "pos_table", table.numpy())
    with c[1]:
        fig = charts.signed_heatmap(
            sim.numpy(),
            pos_names,
            pos_names,
            title=T("enc_similarity"),
            x_title=T("axis_positions_cols"),
            y_title=T("axis_positions"),
        )
        ui.show_figure(fig, "pos_similarity", sim.numpy())
    st.markdown(T(f"enc_reading_{'trained' if source in tables else source}"))
