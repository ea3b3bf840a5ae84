"""Mixture of Experts (lecture §8.4): routing to k of E expert MLPs, its balance, and its cost."""

import math

import numpy as np
import pandas as pd
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import routing
from tx_explorer.modules.moe_lm import MoEConfig
from tx_explorer.moe_bundle import RETRAIN
from tx_explorer.viz import moe as vm

T = ui.texts("moe")
W = {key: T(f"fig_{key}") for key in vm.WORDS}  # the figures' words in the chosen language
NAME = "tiny-moe"
FACTORS = [round(0.25 + 0.125 * i, 3) for i in range(23)]  # 0.25 … 3.0


@st.cache_resource(show_spinner=False, max_entries=2)
def heldout_routing(name: str) -> tuple[list[routing.RoutingTable], list[list[float]]]:
    """The bundle's held-out windows routed (dropless), and each layer's drop rate at every factor in FACTORS."""
    b = ui.cached_model(name)
    tables = routing.collect_routing(b.text.model, b.heldout)
    curves = [routing.drop_curve(t.flat()[0], t.top_k, FACTORS, b.group_size) for t in tables]
    return tables, curves


def load_bundle():
    """The trained model, or None with a message saying how to build it."""
    if NAME not in models.available_models():
        st.info(T("no_model", command=RETRAIN))
        return None
    try:
        return ui.cached_model(NAME)
    except models.BundleError as exc:
        st.warning(T("bundle_problem", reason=str(exc)))
        return None


st.title(T("title"))
st.markdown(T("intro"))
st.latex(
    r"p(x)=\operatorname{softmax}(W_r x),\qquad \mathcal{T}=\operatorname{top}_k\,p(x),\qquad "
    r"y=\sum_{i\in\mathcal{T}} \frac{p_i(x)}{\sum_{j\in\mathcal{T}}p_j(x)}\;\mathrm{FFN}_i(x)"
)
st.markdown(T("capacity_intro"))
st.latex(r"\text{capacity}=\left\lceil \frac{k\cdot\text{tokens}}{E}\times\text{factor}\right\rceil")
st.latex(
    r"\mathcal{L}_{\text{bal}}=E\sum_{i=1}^{E} f_i P_i\;(=1\text{ uniform}),\qquad "
    r"\mathcal{L}_z=\frac{1}{N}\sum_{n}\Big(\log\sum_{i} e^{\ell_{n,i}}\Big)^2"
)
bundle = load_bundle()

# 1. Cost: parameters ×E, compute ×k ---------------------------------------------------------------------------
st.header(T("cost_header"))
st.markdown(T("cost_intro"))
base = bundle.config if bundle is not None else MoEConfig()
c = st.columns(2)
n_experts = c[0].slider(T("experts"), 1, 64, base.num_experts)
top_k = c[1].slider(T("top_k"), 1, 16, base.top_k, help=T("top_k_help"))
with ui.friendly_errors():
    cfg = base.replace(num_experts=n_experts, top_k=top_k)  # k > E is refused with a message
    counts, flops = routing.moe_params(cfg), routing.moe_flops_per_token(cfg)
    dense = routing.dense_flops_per_token(cfg.dense_counterpart())["total"]
    m = st.columns(4)
    m[0].metric(T("total_params"), f"{counts['total'] / 1e6:.2f} M")
    m[1].metric(T("active_params"), f"{counts['active'] / 1e6:.2f} M")
    m[2].metric(T("flops_token"), f"{flops['total'] / 1e6:.2f} M")
    m[3].metric(T("ratio"), f"{counts['total'] / counts['active']:.2f}×")
    grid = list(range(top_k, max(n_experts, 16) + 1))
    sweep = routing.cost_sweep(cfg, grid)
    fig = vm.cost_chart(
        grid, sweep["total"], sweep["active"], sweep["flops"], chosen=n_experts, title=T("cost_title", k=top_k), words=W
    )
    ui.show_figure(
        fig, "moe_cost", np.array([grid, sweep["total"], sweep["active"], sweep["flops"]]).T
    )  # E, total, active, FLOPs
    st.caption(
        T(
            "cost_caption",
            dense=f"{dense / 1e6:.2f}",
            router=f"{flops['router'] / 1e3:.1f}",
            context=cfg.transformer.max_len,
        )
    )

if bundle is not None:
    # 2. Dense vs MoE training curves ------------------------------------------------------------------------------
    st.header(T("loss_header"))
    s = bundle.summary
    st.markdown(
        T(
            "loss_intro",
            steps=s["steps"],
            tokens=f"{s['tokens_seen']:,}",
            moe=f"{s['final_val_loss']['moe']:.3f}",
            dense=f"{s['final_val_loss']['dense']:.3f}",
            moe_s=s["seconds"]["moe"],
            dense_s=s["seconds"]["dense"],
        )
    )
    axis = st.radio(T("loss_x"), ["step", "flops", "seconds"], format_func=lambda a: T(f"x_{a}"), horizontal=True)
    with ui.friendly_errors():
        labels = {"moe": T("label_moe", e=base.num_experts, k=base.top_k), "dense": T("label_dense")}
        fig = vm.loss_curves(bundle.curves, axis, labels=labels, x_title=T(f"x_{axis}"), title=T("loss_title"), words=W)
        ui.show_figure(fig, "moe_loss", {n: np.array([c["step"], c["train_loss"]]) for n, c in bundle.curves.items()})

    # 3. Typed text: each token's experts and gates per layer ------------------------------------------------------
    st.header(T("typed_header"))
    st.markdown(T("typed_intro"))
    text = st.text_input(T("sentence"), T("sentence_default"), max_chars=2000)
    with ui.friendly_errors():
        enc = bundle.text.encode(text)
        if enc.truncated:
            st.warning(T("truncated", n=enc.num_tokens, max=bundle.text.max_len))
        _, trace = bundle.text.attention(enc)
        typed = {key: v.numpy() for key, v in routing.per_layer(routing.routing_tables(trace)).items()}  # [L, T, (E)]
        fig = vm.coloured_tokens(enc.tokens, typed["first"], base.num_experts, title=T("tokens_title"), words=W)
        ui.show_figure(fig, "moe_tokens", typed["first"])
        fig = vm.gate_heatmaps(
            typed["gates"], typed["probs"], enc.tokens, title=T("gates_title", k=base.top_k), words=W
        )
        ui.show_figure(fig, "moe_gates", {"gates": typed["gates"], "probs": typed["probs"]})
        st.caption(T("gates_caption"))

    # 4. Held-out statistics per layer ---------------------------------------------------------------------------
    st.header(T("heldout_header"))
    st.markdown(T("heldout_intro", tokens=f"{bundle.heldout.numel():,}", group=bundle.group_size))
    factor = st.slider(T("factor"), 0.25, 3.0, float(base.capacity_factor or 1.25), 0.05, help=T("factor_help"))
    with ui.friendly_errors():
        tables, drop_table = heldout_routing(NAME)
        stats = [routing.layer_statistics(t, factor, bundle.group_size) for t in tables]
        frame = pd.DataFrame(stats).rename(columns=lambda key: T(f"stat_{key}"))
        frame.index = [T("layer", i=i) for i in range(len(stats))]
        st.dataframe(frame.style.format("{:.3f}"))
        base_first, base_any = routing.repetition_baseline(base.num_experts, base.top_k)
        st.caption(
            T(
                "stats_caption",
                ln_e=f"{math.log(base.num_experts):.3f}",
                first=f"{base_first:.3f}",
                any=f"{base_any:.3f}",
            )
        )
        c = st.columns(2)
        with c[0]:
            loads = routing.load_matrix(tables).double()  # (L, E) assignments
            relative = (loads / loads.mean(dim=1, keepdim=True)).numpy()
            ui.show_figure(vm.load_heatmap(relative, title=T("load_title"), words=W), "moe_load", loads.numpy())
        with c[1]:
            fig = vm.drop_curves(FACTORS, np.array(drop_table), current=factor, title=T("drop_title"), words=W)
            ui.show_figure(fig, "moe_drop", np.array(drop_table))
        fig = vm.entropy_bars(
            [x["token_entropy"] for x in stats],
            [x["marginal_entropy"] for x in stats],
            math.log(base.num_experts),
            title=T("entropy_title"),
            words=W,
        )
        ui.show_figure(fig, "moe_entropy")
        st.markdown(T("entropy_caption"))

        layer = st.selectbox(T("layer_select"), list(range(len(tables))), format_func=lambda i: T("layer", i=i))
        table = tables[layer]
        c = st.columns(2)
        with c[0]:
            if table.top_k >= 2:
                co = routing.cooccurrence(table.chosen, table.num_experts).numpy()
                ui.show_figure(vm.cooccurrence_heatmap(co, title=T("cooc_title"), words=W), "moe_cooc", co)
                st.caption(T("cooc_caption"))
        with c[1]:
            spec = routing.specialisation(
                table.chosen[..., 0].reshape(-1), bundle.heldout.reshape(-1), table.num_experts, top=6
            )
            rows = [
                {
                    T("col_expert"): e,
                    T("col_tokens"): ", ".join(
                        f"{bundle.text.labels([t])[0]} ({share:.0%}, {n})" for t, n, share in toks
                    )
                    or T("spec_none"),
                }
                for e, toks in enumerate(spec)
            ]
            st.markdown(f"**{T('spec_title')}**")
            st.dataframe(pd.DataFrame(rows), hide_index=True)
            st.caption(T("spec_caption"))
