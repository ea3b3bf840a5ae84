"""Mixture of Experts (lecture §8.4): routing to k of E expert MLPs, its balance, and its cost."""

import pandas as pd
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import routing
from tx_explorer.views import moe as view

T = ui.texts("moe")
LANG = ui.lang()


def load_bundle():
    """The trained model, or None with a message saying how to build it."""
    names = models.available_models("moe")
    if not names:
        st.info(T("no_model", command=view.RETRAIN))
        return None
    return ui.optional(lambda: ui.cached_model(names[0]), models.BundleError, lambda e: T("bundle_problem", reason=e))


st.title(ui.page_title("moe"))
st.markdown(T("intro"))
st.latex(view.LATEX[0])
st.markdown(T("capacity_intro"))
st.latex(view.LATEX[1])
st.latex(view.LATEX[2])
bundle = load_bundle()
if bundle is not None:
    st.markdown(view.about(bundle, lang=LANG))

# Each section is a fragment: its widgets rerun only that section. The held-out statistics (every held-out window
# routed) open on demand.


@st.fragment
def cost_section(base: view.MoEConfig) -> None:
    """1. Cost: parameters ×E, compute ×k."""
    ui.section(T, "cost")
    sizes = routing.moe_params(base)  # only the expert MLPs scale with E: the whole model grows far less than E-fold
    ratio = f"{sizes['total'] / sizes['active']:.2f}"
    st.markdown(T("size_note", e=base.num_experts, k=base.top_k, ratio=ratio, expert_ratio=f"{base.expert_ratio:g}"))
    c = st.columns(2)
    n_experts = c[0].slider(T("experts"), 1, 64, base.num_experts)
    top_k = c[1].slider(T("top_k"), 1, 16, base.top_k, help=T("top_k_help"))
    with ui.friendly_errors():
        cost = view.cost(base, n_experts, top_k, lang=LANG)  # k > E is refused with a message
        ui.metrics(cost.metrics)
        ui.show(cost.sweep)
        st.caption(cost.caption)


@ui.below_fold("moe_loss", height=770)
def loss_section(bundle: view.MoEBundle) -> None:
    """2. Dense vs MoE training curves."""
    st.header(T("loss_header"))
    st.markdown(view.loss_intro(bundle, lang=LANG))
    axis = st.radio(T("loss_x"), ["step", "flops", "seconds"], format_func=lambda a: T(f"x_{a}"), horizontal=True)
    with ui.friendly_errors():
        ui.show(view.losses(bundle, axis, lang=LANG))


@ui.below_fold("moe_typed", height=1260)
def typed_section(bundle: view.MoEBundle) -> None:
    """3. Typed text: each token's experts and gates per layer."""
    ui.section(T, "typed")
    text = st.text_input(T("sentence"), T("sentence_default"), max_chars=2000)
    with ui.friendly_errors():
        typed = view.typed(bundle, text, lang=LANG)
        if typed.truncated:
            st.warning(typed.truncated)
        ui.show(typed.tokens, typed.gates)
        st.caption(T("gates_caption"))


@st.fragment
def heldout_section(bundle: view.MoEBundle) -> None:
    """4. Held-out statistics per layer, computed when opened."""
    box = ui.lazy_section(T, "heldout", key="moe_open_heldout", intro=False)
    if box is None:
        return
    with box:
        st.markdown(T("heldout_intro", tokens=f"{bundle.heldout.numel():,}", group=bundle.group_size))
        default = float(bundle.config.capacity_factor or 1.25)
        factor = st.slider(T("factor"), 0.25, 3.0, default, 0.05, help=T("factor_help"))
        with ui.friendly_errors():
            routed = ui.once_per_server(  # the held-out windows routed, drops at every factor: seconds, once per server
                lambda report: view.heldout_routing(bundle),
                label=T("heldout_working"),
                key=("moe_heldout", bundle.text.name),
            )
            held = view.heldout(bundle, routed, factor, lang=LANG)
            st.dataframe(pd.DataFrame(held.stats, index=held.layers).style.format("{:.3f}"))
            st.caption(held.caption)
            ui.row(held.load, held.drops)
            ui.show(held.entropy)
            st.markdown(T("entropy_caption"))

            layer = st.selectbox(T("layer_select"), range(len(held.layers)), format_func=held.layers.__getitem__)
            cooc, experts = view.layer(bundle, routed[0][layer], lang=LANG)
            c = st.columns(2)
            with c[0]:
                if cooc is not None:
                    ui.show(cooc)
                    st.caption(T("cooc_caption"))
            with c[1]:
                st.markdown(f"**{T('spec_title')}**")
                st.dataframe(pd.DataFrame(experts), hide_index=True)
                st.caption(T("spec_caption"))


cost_section(bundle.config if bundle is not None else view.MoEConfig())
if bundle is not None:
    loss_section(bundle)
    typed_section(bundle)
    heldout_section(bundle)
