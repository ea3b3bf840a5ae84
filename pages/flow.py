"""Information flow: the routes that carry one token's prediction, found from one forward pass, and
three views of every edge (attention weight, write norm, causal effect)."""

import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import flow
from tx_explorer.analysis import head_science as hs
from tx_explorer.views import flow as view

T = ui.texts("flow")
LANG = ui.lang()
SHARE = (  # the proximity rule of Information Flow Routes (Ferrando & Voita 2024)
    r"\mathrm{prox}(z_k, y) = \max\bigl(0,\ \lVert y \rVert_1 - \lVert y - z_k \rVert_1\bigr), \qquad "
    r"\mathrm{share}(z_k) = \frac{\mathrm{prox}(z_k, y)}{\sum_m \mathrm{prox}(z_m, y)}"
)


@st.cache_resource(show_spinner=False)
def _analyses() -> dict:
    """Decompositions shared by every session, the last two used only (SmolLM2 at 128 tokens holds about 170 MB)."""
    return {}


def analysis(name: str, tm, text: str) -> view.Analysis:
    store = _analyses()
    key = (name, text)
    with st.empty():  # run_job's place, also when remembered: the fragment's later elements keep their places
        # Used again, it goes back in as the newest: the text on screen is the last dropped and the one an edit of
        # it starts from (not another session's newer text).
        an = store.pop(key, None)
        if an is None:
            # The newest of this model's: a text edited at its end reruns from the edit (its start is shared).
            earlier = next((kept for (model, _), kept in reversed(store.items()) if model == name), None)
            if len(store) >= 2:
                store.pop(next(iter(store)), None)  # the least recently used
            job = lambda report: view.analyse(tm, text, earlier)  # noqa: E731
            an = ui.run_job(job, label=T("analysing"), key=("flow", *key))
        store[key] = an
    return an


def remember(picked: list | None, context: tuple) -> None:
    """A new click on the graph opens that edge or node below (until the text, model or position change)."""
    if picked and picked != st.session_state.get("flow_picked"):
        st.session_state["flow_picked"] = picked
        st.session_state["flow_edge" if picked[0] == "edge" else "flow_node"] = (context, tuple(picked[1:]))


def chosen(key: str, context: tuple, default: tuple | None) -> tuple | None:
    saved = st.session_state.get(key)
    return saved[1] if saved and saved[0] == context else default


@st.fragment
def routes(name: str) -> None:
    """Inputs, the graph and the edge and node it opens: a click or a slider reruns only this."""
    with ui.friendly_errors():
        tm = hs.text_model(ui.cached_model(name))
        st.caption(ui.architecture_caption(tm))
        if not flow.decomposable(tm):
            shipped = [*models.shipped("text", kind="causal"), *models.shipped("moe")]
            st.info(view.undecomposable(tm, tm.name, shipped, ui.cached_model, lang=LANG))
            return
        if flow.frozen_norms(tm):  # sandwich norms: a linearisation of this run, said before the routes
            st.info(view.frozen_norms(tm, tm.name, lang=LANG))
        text = st.text_area(T("text"), T("text_default"), max_chars=20_000, key="flow_text", height=80)
        if not text.strip():
            st.warning(T("empty"))
            return
        c = st.columns(2)
        target = c[0].number_input(
            T("target"), -view.LIMIT, view.LIMIT - 1, -1, key="flow_target", help=T("target_help")
        )
        threshold = c[1].slider(
            T("threshold"), 0.01, 0.10, flow.THRESHOLD, 0.01, key="flow_threshold", help=T("threshold_help")
        )
        an = analysis(name, tm, text)
        if tm.kind != "causal":
            st.info(T("encoder_note", model=tm.name))
        ui.section(T, "graph", intro=False, level="subheader")
        st.caption(T("click_hint"))
        result = view.route(tm, an, int(target), threshold, lang=LANG)
        context = (name, text, flow.position(int(target), len(an.ids)))
        remember(ui.show_result(result, clickable=True, width_px=ui.PAGE_PX), context)  # the page's width: its title

        edge_section(tm, an, context, int(target), result.edge)
        if tm.kind == "causal":
            node_section(tm, an, context)


# Below the graph (SmolLM2's 30 layers make it taller than a screen): each a fragment inside ``routes``, so a click
# on the graph reruns them too, computed once scrolled near (the edge reruns the model from its layer per head).
@ui.below_fold("flow_edge", height=1110)
def edge_section(tm, an: view.Analysis, context: tuple, target: int, default: tuple | None) -> None:
    ui.section(T, "edge", intro=False, level="subheader")
    st.markdown(view.edge_intro(tm, lang=LANG))  # the write norm as this model's figure measures it
    with ui.friendly_errors():
        if (picked := chosen("flow_edge", context, default)) is not None:
            ui.show_result(view.edge(tm, an, *map(int, picked), target, lang=LANG), side_by_side=True)


@ui.below_fold("flow_node", height=1020)
def node_section(tm, an: view.Analysis, context: tuple) -> None:
    ui.section(T, "node", level="subheader")
    with ui.friendly_errors():
        kind, layer, pos = chosen("flow_node", context, ("x", an.dec.num_layers, context[2]))
        ui.show_result(view.node(tm, an, str(kind), int(layer), int(pos), lang=LANG))


st.title(ui.page_title("flow"))
st.markdown(T("intro"))
st.latex(SHARE)
st.markdown(T("intro_after"))
if (preferred := view.default_model()) is not None:
    st.session_state.setdefault("flow_model", preferred)
name = ui.text_model_picker(T("model"), "flow_model", extra=models.available_models("moe"))
if name is None:
    st.stop()
routes(name)
