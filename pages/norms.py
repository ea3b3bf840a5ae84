"""Norms and blocks (lecture §5.2–5.3, §8.1–8.3): Post-Norm vs Pre-Norm, LayerNorm vs RMSNorm, MLP vs SwiGLU."""

from functools import partial

import streamlit as st

from tx_explorer import ui
from tx_explorer.views import norms as view
from tx_explorer.views import sentences

T, LANG = ui.texts("norms"), ui.lang()


@st.cache_resource(show_spinner=False, max_entries=6)
def trained_variant(name: str):  # a name of its own: cached functions with the same source share a cache
    return ui.cached_model(view.BUNDLE).text_model(name)  # the registry's loader, once per server process


def variant(where, label: str, res: view.Results, default: str, key: str) -> str:
    """One of the bundle's variants, named in the page's language."""
    labels = partial(res.label, lang=LANG)
    return where.selectbox(T(label), res.names, index=view.index_of(res, default), format_func=labels, key=key)


@st.fragment
def runs_section(res: view.Results) -> None:
    ui.section(T, "runs")
    c, shallow = st.columns([3, 2, 2]), view.defaults(res)["runs"]
    chosen = ui.multiselect(
        c[0], T("variants"), res.names, shallow, format_func=partial(res.label, lang=LANG), key="runs_variants"
    )
    metric = c[1].radio(
        T("metric"), view.METRICS, format_func=lambda m: T(f"metric_{m}"), horizontal=True, key="runs_metric"
    )
    smoothing = c[2].slider(T("smoothing"), 0.0, 0.95, 0.8, 0.05, help=T("smoothing_help"), key="runs_smoothing")
    with ui.friendly_errors():
        runs = view.runs(res, chosen, metric, smoothing, lang=LANG)
        st.caption(sentences([view.corpus(res, lang=LANG), runs.caption], LANG))  # the text learnt from, the recipe
        ui.show(runs.curves)
        if runs.empty:
            st.info(runs.empty)
        ui.section(T, "claims", level="subheader")
        st.table(runs.claims)
    st.markdown(T("claims_note"))


@ui.below_fold("norms_depth", height=1440)
def depth_section(res: view.Results) -> None:
    ui.section(T, "depth")
    c, deep = st.columns([3, 2]), view.defaults(res)["depth"]
    picked = ui.multiselect(
        c[0], T("variants"), res.names, deep, format_func=partial(res.label, lang=LANG), key="depth_variants"
    )
    quantity = c[1].radio(
        T("quantity"), view.QUANTITIES, format_func=lambda q: T(f"quantity_{q}"), horizontal=True, key="depth_quantity"
    )
    with ui.friendly_errors():
        profiles, numbers = view.depth(res, picked, quantity, lang=LANG)
        ui.show(profiles)
        (st.caption if profiles else st.info)(numbers)  # no profiles: what to pick instead
    st.markdown(view.depth_note(res, lang=LANG))
    one = variant(st, "layer_step_variant", res, deep[0], "norms_depth_variant")
    with ui.friendly_errors():
        ui.show(view.layer_steps(res, one, quantity, lang=LANG))


@ui.below_fold("norms_norm", height=1050)
def norm_section() -> None:
    ui.section(T, "ln", *view.LATEX["norms"])
    values = ui.inputs(view.NORM, T, columns=(3, 2, 2, 1))
    with ui.friendly_errors():
        nv = view.NORM.compute(**values, lang=LANG)
        ui.metrics({"μ": f"{nv.steps.mean:.4g}", "√(σ² + ε)": f"{nv.steps.std:.4g}", "RMS(x)": f"{nv.steps.rms:.4g}"})
        ui.row(nv.layernorm, nv.rmsnorm, headings=("**LayerNorm**", "**RMSNorm**"))
        st.markdown(nv.note)


@ui.below_fold("norms_identity", height=920)
def identity_section() -> None:
    ui.section(T, "id", *view.LATEX["identity"])
    values = ui.inputs(view.IDENTITY, T)
    with ui.friendly_errors():
        demo, panel = view.IDENTITY.compute(**values, lang=LANG)
        ui.metrics({T(k): f"{getattr(demo, k):.3g}" for k in ("pre_error", "post_change", "post_vs_norm")})
        ui.show(panel)
        st.markdown(T("id_note"))


@st.fragment
def pair_section(res: view.Results) -> None:
    if not (box := ui.lazy_section(T, "pair", key="norms_open_pair")):
        return
    with box:
        sentence = st.text_input(T("sentence"), T("sentence_default"), max_chars=2000, key="norms_pair_text")
        c = st.columns(4)
        name_a = variant(c[0], "variant_a", res, "pre-ln", "norms_pair_a")
        name_b = variant(c[1], "variant_b", res, "post-ln", "norms_pair_b")
        with ui.friendly_errors():
            tm_a, tm_b = trained_variant(name_a), trained_variant(name_b)
            layers, heads = view.shared_shape(tm_a, tm_b)
            layer = c[2].slider(T("layer"), 0, layers - 1, 0, key="norms_pair_layer") if layers > 1 else 0
            head = c[3].slider(T("head"), 0, heads - 1, 0, key="norms_pair_head") if heads > 1 else 0
            panel, notes = view.pair(res, tm_a, tm_b, sentence, layer, head, lang=LANG)
            if notes.truncated:
                st.info(notes.truncated)
            ui.show(panel)
            if notes.split:
                st.caption(notes.split)


def live_section(res: view.Results) -> None:  # no fragment: a click in one waits for its run, Stop must not
    if not (box := ui.lazy_section(T, "live", key="norms_open_live")):
        return
    with box:
        c, pick = st.columns([3, 1, 1, 1]), dict(max_selections=3, format_func=partial(res.label, lang=LANG))
        names = ui.multiselect(c[0], T("variants"), res.names, view.defaults(res)["live"], key="live_variants", **pick)
        steps = c[1].slider(T("steps"), 10, 400, 200, 10, key="norms_live_steps")
        lr = c[2].select_slider(T("lr"), [3e-4, 1e-3, 2e-3, 5e-3, 1e-2], 2e-3, key="norms_live_lr")
        budget = c[3].slider(T("budget"), 5, 30, 30, key="norms_live_budget")
        if empty := view.live_pick(names, lang=LANG):
            st.info(empty)
            return
        run = partial(view.LiveRun, res, names, steps=steps, lr=lr, budget=budget, lang=LANG)
        ui.live_training(st.columns(2), run, partial(view.live_curves, res, lang=LANG), key="norms_live", T=T)


@ui.below_fold("norms_mlp", height=1340)
def mlp_section(res: view.Results | None) -> None:
    ui.section(T, "mlp", *view.LATEX["mlp"])
    values = ui.inputs(view.MLP, T, columns=3)
    with ui.friendly_errors():
        panel, words = view.MLP.compute(**values, lang=LANG)
        st.markdown(words)
        ui.show(panel, view.mlp_curves(res, lang=LANG) if res is not None else None)


st.title(ui.page_title("norms"))
st.markdown(T("intro"))
res = ui.bundled(view.BUNDLE, T)
if res is not None:
    runs_section(res)
    depth_section(res)
norm_section()
identity_section()
if res is not None:
    pair_section(res)
    live_section(res)
mlp_section(res)
