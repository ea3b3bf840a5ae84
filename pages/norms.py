"""Norms and blocks (lecture §5.2–5.3, §8.1–8.3): Post-Norm vs Pre-Norm, LayerNorm vs RMSNorm, MLP vs SwiGLU."""

import numpy as np
import streamlit as st

from tx_explorer import ui
from tx_explorer.analysis import norms
from tx_explorer.config import TransformerConfig
from tx_explorer.models import BundleError
from tx_explorer.train import variants
from tx_explorer.viz import charts
from tx_explorer.viz import norms as vn

T = ui.texts("norms")
AX = ui.axes()
METRICS = ("train_loss", "val_loss", "grad_norm", "lr")


@st.cache_resource(show_spinner=False)
def results() -> variants.Results:
    return variants.load_results()


@st.cache_resource(show_spinner=False, max_entries=6)
def trained(name: str):
    return results().text_model(name)


def curve_series(res: variants.Results, names: list[str], metric: str, smoothing: float) -> dict:
    """``{label: (steps, values)}`` of one recorded metric (training metrics smoothed, validation raw)."""
    out = {}
    for n in names:
        h = res.history[n]
        if metric == "val_loss":
            out[res.label(n)] = (h["val_step"], h["val_loss"])
        else:
            out[res.label(n)] = (h["step"], norms.ema(h[metric], smoothing if metric != "lr" else 0.0))
    return out


st.title(T("title"))
st.markdown(T("intro"))

res = None
try:
    res = results()
except BundleError as exc:
    st.warning(T("no_bundle", message=str(exc)))

# 1. The shipped experiment -----------------------------------------------------------------------------------
st.header(T("runs_header"))
if res is not None:
    st.markdown(T("runs_intro"))
    s0 = res.summary["variants"][res.names[0]]["settings"]
    st.caption(
        T(
            "runs_caption",
            steps=s0["steps"],
            batch=s0["batch_size"],
            seq=s0["seq_len"],
            lr=s0["lr"],
            seed=s0["seed"],
            minutes=res.summary["minutes"],
            threads=res.summary["threads"],
        )
    )
    shallow = [n for n in res.names if not n.startswith("deep-")]
    c = st.columns([3, 2, 2])
    chosen = c[0].multiselect(T("variants"), res.names, default=shallow, format_func=res.label, key="runs_variants")
    metric = c[1].radio(
        T("metric"), METRICS, format_func=lambda m: T(f"metric_{m}"), horizontal=True, key="runs_metric"
    )
    smoothing = c[2].slider(T("smoothing"), 0.0, 0.95, 0.8, 0.05, help=T("smoothing_help"), key="runs_smoothing")
    with ui.friendly_errors():
        series = curve_series(res, chosen, metric, smoothing)
        fig = vn.curves(series, y_title=T(f"metric_{metric}"), log_y=metric == "grad_norm")
        ui.show_figure(fig, "norms_curves", norms.pad_rows([y for _, y in series.values()]))

    st.subheader(T("claims_header"))
    st.markdown(T("claims_intro"))
    rows = []
    for cl in variants.claims(res.summary):
        numbers = [
            T(
                "claim_numbers",
                name=res.label(n),
                loss=T("diverged") if cl["losses"][n] is None else f"{cl['losses'][n]:.3f}",
                params=f"{cl['params'][n]:,}",
            )
            for n in cl["variants"]
        ]
        rows.append(
            {
                T("claim"): T(f"claim_{cl['key']}"),
                T("verdict"): T("holds") if cl["holds"] else T("not_holds"),
                T("numbers"): " · ".join(numbers),
            }
        )
    st.table(rows)
    st.markdown(T("claims_note"))

# 2. Depth profiles -------------------------------------------------------------------------------------------
st.header(T("depth_header"))
st.markdown(T("depth_intro"))
if res is not None:
    deep = [n for n in res.names if n.startswith("deep-")] or res.names[:2]
    c = st.columns([3, 2])
    picked = c[0].multiselect(T("variants"), res.names, default=deep, format_func=res.label, key="depth_variants")
    quantity = c[1].radio(
        T("quantity"),
        ("grad_norm", "residual_rms"),
        format_func=lambda q: T(f"quantity_{q}"),
        horizontal=True,
        key="depth_quantity",
    )
    with ui.friendly_errors():
        panels = {
            T(f"panel_{when}"): {res.label(n): res.profiles[n][when][quantity] for n in picked}
            for when in ("init", "final")
        }
        fig = vn.depth_profiles(panels, x_title=T(f"x_{quantity}"), y_title=T(f"quantity_{quantity}"))
        ui.show_figure(
            fig,
            "norms_depth",
            norms.pad_rows([res.profiles[n][w][quantity] for n in picked for w in ("init", "final")]),
        )
    st.caption(
        T(
            "depth_numbers",
            values=" · ".join(
                f"{res.label(n)}: {res.profiles[n]['final']['grad_norm'][0]:.2g} → {res.profiles[n]['final']['grad_norm'][-1]:.2g}"
                for n in picked
            ),
        )
    )
    st.markdown(T("depth_note"))
    one = st.selectbox(T("layer_step_variant"), res.names, index=res.names.index(deep[0]), format_func=res.label)
    with ui.friendly_errors():
        h = res.history[one]
        field = "layer_grad_norm" if quantity == "grad_norm" else "residual_rms"
        grid = np.asarray(h[field], dtype=float).T  # (L, steps)
        fig = vn.layer_by_step(grid, h["step"], title=res.label(one), z_title=T(f"quantity_{quantity}"))
        ui.show_figure(fig, "norms_layer_step", grid)

# 3. LayerNorm vs RMSNorm -------------------------------------------------------------------------------------
st.header(T("ln_header"))
st.markdown(T("ln_intro"))
st.latex(
    r"\mathrm{LN}(x)=\gamma\odot\frac{x-\mu}{\sqrt{\sigma^2+\epsilon}}+\beta,\quad \mu=\tfrac1D\sum_i x_i,\ \sigma^2=\tfrac1D\sum_i(x_i-\mu)^2"
)
st.latex(
    r"\mathrm{RMSNorm}(x)=\gamma\odot\frac{x}{\mathrm{RMS}(x)},\quad \mathrm{RMS}(x)=\sqrt{\epsilon+\tfrac1D\sum_i x_i^2}"
)
c = st.columns([3, 2, 2, 1])
x_text = c[0].text_input(T("vector"), "4, 6, 5, 9, 3, 7", help=T("vector_help"))
g_text = c[1].text_input(T("gamma"), "", placeholder="1, 1, …", help=T("gamma_help"))
b_text = c[2].text_input(T("beta"), "", placeholder="0, 0, …", help=T("beta_help"))
eps = c[3].number_input("ε", 0.0, 1.0, 1e-5, format="%.0e")
with ui.friendly_errors():
    x = norms.parse_vector(x_text, "x")
    gamma = norms.parse_vector(g_text, "γ") if g_text.strip() else None
    beta = norms.parse_vector(b_text, "β") if b_text.strip() else None
    ns = norms.norm_steps(x, gamma, beta, eps=eps)
    m = st.columns(3)
    m[0].metric("μ", f"{ns.mean:.4g}")
    m[1].metric("√(σ² + ε)", f"{ns.std:.4g}")
    m[2].metric("RMS(x)", f"{ns.rms:.4g}")
    dims = [f"x{i}" for i in range(len(ns.x))]
    c = st.columns(2)
    with c[0]:
        st.markdown("**LayerNorm**")
        ln = {"x": ns.x, "x − μ": ns.centred, "(x − μ)/σ": ns.ln_hat, "γ ⊙ x̂ + β": ns.ln_out}
        ui.show_figure(charts.bars(dims, ln, y_title=T("value")), "norms_ln", norms.pad_rows(list(ln.values())))
    with c[1]:
        st.markdown("**RMSNorm**")
        rms = {"x": ns.x, "x / RMS(x)": ns.rms_hat, "γ ⊙ x̂": ns.rms_out}
        ui.show_figure(charts.bars(dims, rms, y_title=T("value")), "norms_rms", norms.pad_rows(list(rms.values())))
    st.markdown(T("ln_note", mean=f"{ns.mean:.3g}"))

# 4. The identity argument ------------------------------------------------------------------------------------
st.header(T("id_header"))
st.markdown(T("id_intro"))
st.latex(r"\text{Pre-Norm: } x_{l+1}=x_l+F(\mathrm{Norm}(x_l))\ \xrightarrow{F\,\equiv\,0}\ x_l")
st.latex(r"\text{Post-Norm: } x_{l+1}=\mathrm{Norm}(x_l+F(x_l))\ \xrightarrow{F\,\equiv\,0}\ \mathrm{Norm}(x_l)")
c = st.columns(4)
id_norm = c[0].radio(T("norm"), ("layernorm", "rmsnorm"), format_func=lambda n: T(f"norm_{n}"), horizontal=True)
id_n = c[1].slider(T("tokens"), 2, 12, 6)
id_scale = c[2].slider(T("scale"), 0.1, 10.0, 3.0, 0.1, help=T("scale_help"))
id_offset = c[3].slider(T("offset"), -5.0, 5.0, 1.0, 0.5, help=T("offset_help"))
with ui.friendly_errors():
    cfg = TransformerConfig(vocab_size=8, max_len=16, dim=16, num_heads=2, norm=id_norm)
    demo = norms.identity_demo(cfg, norms.sample_residual(id_n, cfg.dim, scale=id_scale, offset=id_offset, seed=0))
    m = st.columns(3)
    m[0].metric(T("pre_error"), f"{demo.pre_error:.3g}")
    m[1].metric(T("post_change"), f"{demo.post_change:.3g}")
    m[2].metric(T("post_vs_norm"), f"{demo.post_vs_norm:.3g}")
    maps = {"x": demo.x.numpy(), T("pre_out"): demo.pre.numpy(), T("post_out"): demo.post.numpy()}
    fig = vn.side_by_side(
        maps,
        row_labels=[f"t{i}" for i in range(id_n)],
        col_labels=[f"d{j}" for j in range(cfg.dim)],
        diverging=list(maps),
        x_title=T("axis_dims"),
        y_title=T("axis_tokens"),
        height=320,
    )
    ui.show_figure(fig, "norms_identity", np.stack(list(maps.values())))
    st.markdown(T("id_note"))

# 5. Same sentence, two variants ------------------------------------------------------------------------------
st.header(T("pair_header"))
if res is not None:
    st.markdown(T("pair_intro"))
    sentence = st.text_input(T("sentence"), T("sentence_default"), max_chars=2000)
    c = st.columns(4)
    name_a = c[0].selectbox(
        T("variant_a"),
        res.names,
        index=res.names.index("pre-ln") if "pre-ln" in res.names else 0,
        format_func=res.label,
    )
    name_b = c[1].selectbox(
        T("variant_b"),
        res.names,
        index=res.names.index("post-ln") if "post-ln" in res.names else 0,
        format_func=res.label,
    )
    with ui.friendly_errors():
        tm_a, tm_b = trained(name_a), trained(name_b)
        layers = min(tm_a.config.num_layers, tm_b.config.num_layers)
        heads = min(tm_a.config.num_heads, tm_b.config.num_heads)
        layer = c[2].slider(T("layer"), 0, layers - 1, 0) if layers > 1 else 0
        head = c[3].slider(T("head"), 0, heads - 1, 0) if heads > 1 else 0
        pair = norms.attention_pair(tm_a, tm_b, sentence, layer=layer, head=head)
        if pair.truncated:
            st.info(T("truncated", n=tm_a.max_len))
        maps = {
            res.label(name_a): pair.a.numpy(),
            res.label(name_b): pair.b.numpy(),
            T("difference"): pair.diff.numpy(),
        }
        fig = vn.side_by_side(maps, row_labels=pair.tokens, col_labels=pair.tokens, diverging=[T("difference")], **AX)
        ui.show_figure(fig, "norms_pair", np.stack(list(maps.values())))

# 6. Live mini-run --------------------------------------------------------------------------------------------
st.header(T("live_header"))
st.markdown(T("live_intro"))
if res is not None:
    c = st.columns([3, 1, 1, 1])
    live_names = c[0].multiselect(
        T("variants"),
        res.names,
        default=["post-ln", "pre-ln"] if {"post-ln", "pre-ln"} <= set(res.names) else res.names[:2],
        max_selections=3,
        format_func=res.label,
        key="live_variants",
    )
    live_steps = c[1].slider(T("steps"), 10, 400, 200, 10)
    live_lr = c[2].select_slider(T("lr"), [3e-4, 1e-3, 2e-3, 5e-3, 1e-2], 2e-3)
    budget = c[3].slider(T("budget"), 5, 30, 30)
    b = st.columns(2)
    start = b[0].button(T("train"), type="primary", icon=":material/play_arrow:")
    b[1].button(T("stop"), icon=":material/stop:", help=T("stop_help"))
    if start:
        with ui.friendly_errors():
            settings = variants.Settings(steps=live_steps, batch_size=8, seq_len=32, lr=live_lr, warmup=0)
            tokens = res.tokens("train")
            records: dict[str, list] = {n: [] for n in live_names}
            st.session_state["norms_live"] = records  # filled in place, so a stop keeps what was trained
            bar = st.progress(0.0, text=T("training"))
            chart = st.empty()
            total = live_steps * len(live_names)
            for i, (name, rec) in enumerate(
                variants.live_run(live_names, tokens, settings, time_budget=budget), start=1
            ):
                records[name].append((rec.step, rec.train_loss))
                bar.progress(
                    min(1.0, i / total), text=T("progress", name=res.label(name), step=rec.step, loss=rec.train_loss)
                )
                if i % (4 * len(live_names)) == 0:
                    live = {res.label(n): ([s for s, _ in r], [v for _, v in r]) for n, r in records.items()}
                    chart.plotly_chart(
                        vn.curves(live, y_title=T("metric_train_loss")), key=f"norms_live_{i}", theme=None
                    )
            chart.empty()
    live = st.session_state.get("norms_live")
    if live:
        series = {res.label(n): ([s for s, _ in r], [v for _, v in r]) for n, r in live.items() if n in res.names}
        done = {res.label(n): len(r) for n, r in live.items() if n in res.names}
        st.caption(T("live_done", steps=", ".join(f"{k}: {v}" for k, v in done.items())))
        ui.show_figure(
            vn.curves(series, y_title=T("metric_train_loss")),
            "norms_live",
            norms.pad_rows([y for _, y in series.values()]),
        )

# 7. MLP vs SwiGLU --------------------------------------------------------------------------------------------
st.header(T("mlp_header"))
st.markdown(T("mlp_intro"))
st.latex(r"\text{MLP: } W_2\,\sigma(W_1x),\ W_1\in\mathbb{R}^{D\times 4D}\Rightarrow 2\cdot D\cdot 4D=8D^2")
st.latex(r"\text{SwiGLU: } W_3\,(\mathrm{SiLU}(W_1x)\odot W_2x),\ H=\tfrac{8D}{3}\Rightarrow 3\cdot D\cdot H=8D^2")
c = st.columns(3)
mlp_d = c[0].number_input("D", 1, 65536, 64)
mlp_ratio = c[1].number_input(T("ratio"), 0.5, 16.0, 4.0, 0.5)
mlp_bias = c[2].toggle(T("mlp_bias"), value=True, help=T("mlp_bias_help"))
with ui.friendly_errors():
    counts = norms.mlp_param_counts(int(mlp_d), float(mlp_ratio), bias=mlp_bias)
    st.markdown(
        T(
            "mlp_counts",
            h=counts["mlp_hidden"],
            hs=counts["swiglu_hidden"],
            m=f"{counts['mlp_formula']:,}",
            s=f"{counts['swiglu_formula']:,}",
            mc=f"{counts['mlp_counted']:,}",
            sc=f"{counts['swiglu_counted']:,}",
        )
    )
    fig = charts.bars(
        ["MLP", "SwiGLU"],
        {
            T("formula"): [counts["mlp_formula"], counts["swiglu_formula"]],
            T("counted"): [counts["mlp_counted"], counts["swiglu_counted"]],
        },
        y_title=T("params_per_block"),
        height=300,
    )
    ui.show_figure(
        fig,
        "norms_mlp_counts",
        np.array(
            [[counts["mlp_formula"], counts["swiglu_formula"]], [counts["mlp_counted"], counts["swiglu_counted"]]]
        ),
    )
if res is not None and {"pre-rms", "pre-rms-swiglu"} <= set(res.names):
    with ui.friendly_errors():
        pair_names = ["pre-rms", "pre-rms-swiglu"]
        fig = vn.curves(
            curve_series(res, pair_names, "train_loss", 0.8),
            y_title=T("metric_train_loss"),
            dashed=curve_series(res, pair_names, "val_loss", 0.0),
            dashed_suffix=T("metric_val_loss"),
        )
        ui.show_figure(fig, "norms_mlp_curves")
