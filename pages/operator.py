"""Attention operator (lecture §2, §9.1–9.2): E = QKᵀ/√D, A = softmax(E), Y = AV, step by step."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import operator as op
from tx_explorer.viz import charts
from tx_explorer.viz.heatmap import heatmap

T = ui.texts("operator")
AX = ui.axes()
DIMS = [2**i for i in range(11)]  # D = 1 … 1024 for the saturation curve


@st.cache_data(max_entries=64, show_spinner=False)
def saturation(n_keys: int, seed: int, scaled: bool) -> op.SaturationCurve:
    return op.softmax_saturation(DIMS, n_keys=n_keys, trials=64, seed=seed, scaled=scaled)


def labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(n)]


def matrix(name: str, m, rows: str, key: str) -> None:
    """One input matrix (rows = vectors, columns = dimensions)."""
    fig = charts.signed_heatmap(
        m.numpy(),
        labels(rows, m.shape[0]),
        labels("d", m.shape[1]),
        title=f"{name} [{m.shape[0]} × {m.shape[1]}]",
        x_title=T("axis_dims"),
        y_title=T(f"axis_{rows}"),
    )
    ui.show_figure(fig, key, m.numpy())


st.title(T("title"))
st.markdown(T("intro"))
st.latex(
    r"E=\frac{QK^\top}{\sqrt{D}}\in\mathbb{R}^{N_Q\times N_K},\quad A=\operatorname{softmax}(E),"
    r"\quad Y=AV\in\mathbb{R}^{N_Q\times D_V}"
)

# 1. Q, K, V and the three steps --------------------------------------------------------------------------------
st.header(T("steps_header"))
source = st.radio(
    T("source"), ["random", "edit"], format_func=lambda s: T(f"source_{s}"), horizontal=True, key="source"
)
qkv = None
with ui.friendly_errors():
    if source == "random":
        c = st.columns(5)
        nq = c[0].slider("N_Q", 1, 12, 4, help=T("help_nq"))
        nk = c[1].slider("N_K", 1, 12, 6, help=T("help_nk"))
        d = c[2].slider("D", 1, 64, 8, help=T("help_d"), key="d")
        dv = c[3].slider("D_V", 1, 12, 4, help=T("help_dv"))
        seed = c[4].number_input(ui.texts("common")("seed"), 0, 10_000, 0, key="seed")
        qkv = op.random_qkv(nq, nk, d, dv, seed)
    else:
        st.caption(T("edit_hint"))
        c = st.columns(3)
        texts = {
            n: c[i].text_area(n, op.format_matrix(op.EXAMPLE[n], 0), height=150, key=f"text_{n}")
            for i, n in enumerate("QKV")
        }
        seed = 0  # the replacement drawn in section 2
        qkv = tuple(op.parse_matrix(texts[n], n) for n in "QKV")

steps = None
if qkv is not None:
    q, k, v = qkv
    c = st.columns(3)
    with c[0]:
        matrix("Q", q, "q", "q")
    with c[1]:
        matrix("K", k, "k", "k")
    with c[2]:
        matrix("V", v, "k", "v")
    scaled = st.toggle(T("scale_toggle"), value=True, help=T("scale_help"), key="scaled")
    with ui.friendly_errors():
        steps = op.operator_steps(q, k, v, scaled)  # checks that the shapes fit together

if steps is not None:
    nq, nk, dv = q.shape[0], k.shape[0], v.shape[1]
    rows, cols = labels("q", nq), labels("k", nk)
    e_name = "E = QKᵀ/√D" if scaled else "E = QKᵀ"
    c = st.columns(3)
    with c[0]:
        fig = charts.signed_heatmap(steps.scores.numpy(), rows, cols, title=f"{e_name} [{nq} × {nk}]", **AX)
        ui.show_figure(fig, "scores", steps.scores.numpy())
    with c[1]:
        fig = heatmap(steps.weights.numpy(), rows, cols, title=f"A = softmax(E) [{nq} × {nk}]", **AX)
        ui.show_figure(fig, "weights", steps.weights.numpy())
    with c[2]:
        fig = charts.signed_heatmap(
            steps.out.numpy(),
            rows,
            labels("d", dv),
            title=f"Y = AV [{nq} × {dv}]",
            x_title=T("axis_dims"),
            y_title=T("axis_q"),
        )
        ui.show_figure(fig, "output", steps.out.numpy())
    summary = op.summarize(steps, q.shape[1], scaled)
    st.markdown(
        T(
            "steps_numbers",
            scale=f"{summary.scale:.3f}",
            std=f"{summary.score_std:.2f}",
            peak=f"{summary.mean_peak:.2f}",
            rowsum=f"{summary.max_row_error:.1e}",
        )
    )

    # 2. Similarity from Q and K, content from V ----------------------------------------------------------------
    st.header(T("qkv_header"))
    st.markdown(T("qkv_intro"))
    st.markdown(T("qkv_table"))
    which = st.radio(T("replace"), ["V", "K"], format_func=lambda s: T(f"replace_{s}"), horizontal=True, key="replace")
    r = op.replace_input(q, k, v, which, seed=seed + 1, scaled=scaled)
    c = st.columns(2)
    c[0].metric(T("weights_diff"), f"{r.weights_diff:.3g}")
    c[1].metric(T("out_diff"), f"{r.out_diff:.3g}")
    st.markdown(T(f"replace_result_{which}"))
    c = st.columns(2)
    with c[0]:
        fig = heatmap(r.after.weights.numpy(), rows, cols, title=T("weights_after", which=which), **AX)
        ui.show_figure(fig, "weights_after", r.after.weights.numpy())
    with c[1]:
        fig = charts.signed_heatmap(
            r.after.out.numpy(),
            rows,
            labels("d", dv),
            title=T("out_after", which=which),
            x_title=T("axis_dims"),
            y_title=T("axis_q"),
        )
        ui.show_figure(fig, "out_after", r.after.out.numpy())

# 3. Why divide by √D -------------------------------------------------------------------------------------------
st.header(T("sqrt_header"))
st.markdown(T("sqrt_intro"))
st.latex(
    r"q_i,k_i\sim\mathcal{N}(0,1)\;\Rightarrow\;\operatorname{Var}(q\cdot k)=D,"
    r"\qquad \operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt{D}}\right)=1"
)
n_keys = st.slider(T("n_keys"), 4, 64, 16, help=T("n_keys_help"))
with ui.friendly_errors():
    curves = {s: saturation(n_keys, 0, s) for s in (True, False)}
    names = {True: T("with_scaling"), False: T("without_scaling")}
    refs = {
        "entropy": {T("ref_uniform"): curves[True].uniform_entropy},
        "max_weight": {T("ref_uniform"): curves[True].uniform_max_weight, T("ref_one_hot"): 1.0},
        "grad_norm": {},
    }
    for col, stat in zip(st.columns(3), refs):
        with col:
            fig = charts.lines(
                DIMS,
                {names[s]: getattr(curves[s], stat) for s in curves},
                title=T(f"curve_{stat}"),
                x_title="D",
                y_title=T(f"axis_{stat}"),
                log_x=True,
                references=refs[stat],
            )
            data = {"scaled" if s else "unscaled": getattr(curves[s], stat) for s in curves}
            ui.show_figure(fig, f"curve_{stat}", data)
    st.markdown(
        T(
            "sqrt_numbers",
            d=DIMS[-1],
            h_scaled=f"{curves[True].entropy[-1]:.2f}",
            h_unscaled=f"{curves[False].entropy[-1]:.2f}",
            h_max=f"{curves[True].uniform_entropy:.2f}",
            m_scaled=f"{curves[True].max_weight[-1]:.2f}",
            m_unscaled=f"{curves[False].max_weight[-1]:.2f}",
            g_scaled=f"{curves[True].grad_norm[-1]:.3f}",
            g_unscaled=f"{curves[False].grad_norm[-1]:.3f}",
        )
    )

# 4. Cross-attention --------------------------------------------------------------------------------------------
st.header(T("cross_header"))
st.markdown(T("cross_intro"))
c = st.columns(5)
cq = c[0].number_input("N_Q", 1, 16, 3, key="cross_nq", help=T("help_cross_nq"))
cx = c[1].number_input("N_X", 1, 16, 7, key="cross_nx", help=T("help_cross_nx"))
cd = c[2].number_input(T("width"), 1, 256, 16, key="cross_dim")
ch = c[3].number_input(T("heads"), 1, 16, 4, key="cross_heads")
cs = c[4].number_input(ui.texts("common")("seed"), 0, 10_000, 0, key="cross_seed")
with ui.friendly_errors():
    ca = op.cross_attention(cq, cx, cd, ch, cs)
    head = st.selectbox(T("head"), range(ca.weights.shape[0]), format_func=lambda h: f"{h + 1}")
    fig = heatmap(
        ca.weights[head].numpy(),
        labels("q", cq),
        labels("x", cx),
        title=T("cross_title", head=head + 1, nq=cq, nx=cx),
        x_title=T("axis_x"),
        y_title=AX["y_title"],
    )
    ui.show_figure(fig, "cross_weights", ca.weights.numpy())
    st.markdown(
        T(
            "cross_shapes",
            q=list(ca.queries.shape),
            x=list(ca.context.shape),
            a=list(ca.weights.shape),
            y=list(ca.out.shape),
            nq=cq,
        )
    )
