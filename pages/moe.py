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
routing_tex, capacity_tex, losses_tex = view.formulas(lang=LANG)
st.latex(routing_tex)
st.markdown(T("capacity_intro"))
st.latex(capacity_tex)
st.latex(losses_tex)
bundle = load_bundle()
if bundle is not None:
    st.markdown(view.about(bundle, lang=LANG))

# Each section is a fragment: its widgets rerun only it. The held-out statistics (every window routed): on demand.


@st.fragment
def cost_section(base: view.MoEConfig, bundle: view.MoEBundle | None) -> None:
    """1. Cost: parameters ×E, compute ×k; the bundled model's experts stacked as §8.4 writes them."""
    ui.section(T, "cost")
    sizes = routing.moe_params(base)  # only the expert MLPs scale with E: the whole model grows far less than E-fold
    ratio = f"{sizes['total'] / sizes['active']:.2f}"
    st.markdown(T("size_note", e=base.num_experts, k=base.top_k, ratio=ratio, expert_ratio=f"{base.expert_ratio:g}"))
    if bundle is not None:
        st.markdown(view.stacked_experts(bundle, lang=LANG))
    values = ui.inputs(view.COST, T, columns=2)
    with ui.friendly_errors():
        cost = view.COST.compute(base, **values, lang=LANG)  # k > E is refused with a message
        ui.metrics(cost.metrics)
        ui.show(cost.sweep)
        st.caption(cost.caption)


@ui.below_fold("moe_loss", height=770)
def loss_section(bundle: view.MoEBundle) -> None:
    """2. Dense vs MoE training curves."""
    st.header(T("loss_header"))
    st.markdown(view.loss_intro(bundle, lang=LANG))
    values = ui.inputs(view.LOSS, T, columns=1)
    with ui.friendly_errors():
        ui.show(view.LOSS.compute(bundle, **values, lang=LANG))


@ui.below_fold("moe_typed", height=1260)
def typed_section(bundle: view.MoEBundle) -> None:
    """3. Typed text: each token's experts and gates per layer."""
    ui.section(T, "typed")
    values = ui.inputs(view.TYPED, T, columns=1)
    with ui.friendly_errors():
        typed = view.TYPED.compute(bundle, **values, lang=LANG)
        if typed.truncated:
            st.warning(typed.truncated)
        ui.show(typed.tokens, typed.gates)
        st.caption(typed.caption)


def show_statistics(stats: view.Statistics, *beside: view.Panel) -> None:
    """A routing statistics table per layer, its caption, the load map (``beside`` it: more panels), the entropies."""
    st.table(pd.DataFrame(stats.stats, index=stats.layers).style.format("{:.3f}"))  # a grid hid its last columns
    st.caption(stats.caption)
    ui.row(stats.load, *beside)
    ui.show(stats.entropy)
    st.markdown(T("entropy_caption"))


@st.fragment
def heldout_section(bundle: view.MoEBundle) -> None:
    """4. Held-out statistics per layer, computed when opened."""
    if not (box := ui.lazy_section(T, "heldout", key="moe_open_heldout", intro=False)):
        return
    with box:
        st.markdown(T("heldout_intro", tokens=f"{bundle.heldout.numel():,}", group=bundle.group_size))
        values = ui.inputs(view.HELDOUT, T, columns=1)
        with ui.friendly_errors():
            routed = ui.once_per_server(  # the held-out windows routed, drops at every factor: seconds, once per server
                lambda report: view.heldout_routing(bundle),
                label=T("heldout_working"),
                key=("moe_heldout", bundle.text.name),
            )
            held = view.HELDOUT.compute(bundle, routed, **values, lang=LANG)
            show_statistics(held.statistics, held.drops)
            layers = held.statistics.layers
            layer = st.selectbox(T("layer_select"), range(len(layers)), format_func=layers.__getitem__, key="moe_layer")
            cooc, experts = view.layer(bundle, routed[0][layer], lang=LANG)
            c = st.columns(2)
            with c[0]:
                if cooc is not None:
                    ui.show(cooc, width_px=ui.PAGE_PX / 2)
                    st.caption(T("cooc_caption"))
            with c[1]:
                st.markdown(f"**{T('spec_title')}**")
                ui.literal_table(experts)  # a table wraps the long token lists a grid would cut off
                st.caption(T("spec_caption"))


@st.fragment
def checkpoint_section() -> None:
    """5. A model with routed experts (tiny-moe, gpt-oss): the held-out section's statistics on one text."""
    if not (box := ui.lazy_section(T, "ckpt", key="moe_open_ckpt", intro=False)):
        return
    with box, ui.friendly_errors():
        st.markdown(T("ckpt_intro", tokens=view.CHECKPOINT_TOKENS))
        if not (routed := view.routed_checkpoints()) and st.session_state.get("moe_ckpt_model") != ui.FOLDER:
            st.info(T("ckpt_none"))  # "type its folder's path below": not once a folder is typed
        bundled = models.available_models("moe")  # tiny-moe: routed experts at no download, the first choice
        st.session_state.setdefault("moe_ckpt_model", next(iter([*bundled, *routed]), ui.FOLDER))
        if (name := ui.text_model_picker(T("ckpt_model"), "moe_ckpt_model", kind="causal", extra=bundled)) is None:
            return
        if not view.has_experts(model := ui.cached_model(name)):
            st.info(T("ckpt_dense"))
            return
        text = st.text_area(T("ckpt_text", tokens=view.CHECKPOINT_TOKENS), key="moe_ckpt_text", max_chars=20_000)
        job = lambda report: view.route_text(model, text)  # noqa: E731
        found = ui.remembered_job(job, label=T("ckpt_working"), key=("moe_ckpt", name, text))  # numbers: kept
        shown = view.routed_statistics(found, lang=LANG)  # worded on every run: a language switch keeps them
        st.markdown(shown.about)
        show_statistics(shown.statistics)
        layers = shown.statistics.layers
        layer = st.selectbox(T("ckpt_layer"), range(len(layers)), key="moe_ckpt_layer", format_func=layers.__getitem__)
        if (cooc := view.cooccurrence(shown.tables[layer], view.CHECKPOINT_KEY, lang=LANG)) is not None:
            ui.show(cooc)
            st.caption(T("cooc_caption"))


cost_section(bundle.config if bundle is not None else view.MoEConfig(), bundle)
if bundle is not None:
    loss_section(bundle)
    typed_section(bundle)
    heldout_section(bundle)
checkpoint_section()
