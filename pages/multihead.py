"""Multi-head attention (lecture §4.1–4.3, §9.2): every layer and head of a real model, compared and inspected."""

import numpy as np
import streamlit as st

from tx_explorer import ui
from tx_explorer.views import model_facts, token_strip
from tx_explorer.views import multihead as view

T = ui.texts("multihead")
LANG = ui.lang()


def pooled(name: str, text: str, compute):
    """``compute()`` now, or for a long text on the shared job pool (queued with progress, cancelled when the
    visitor leaves): a class's 512-token analyses take turns instead of piling onto the cores."""
    if not view.heavy(ui.cached_model(name), text):
        return compute()
    return ui.run_job(lambda report: compute(), label=T("working"))


# Maps are L·H·N² floats (75 MB for MiniLM at 512 tokens): cache_resource shares them without the copy that
# cache_data makes on every hit, so they are frozen read-only.
@st.cache_resource(max_entries=6, show_spinner=False)
def analysed(name: str, text: str):
    data = pooled(name, text, lambda: view.analyse(ui.cached_model(name), text))
    data.maps.flags.writeable = False
    return data


@st.cache_resource(max_entries=6, show_spinner=False)
def lenses(name: str, text: str) -> tuple[np.ndarray, np.ndarray]:
    data = analysed(name, text)
    out = pooled(name, text, lambda: view.lens_maps(ui.cached_model(name), text, data))
    for arr in out:
        arr.flags.writeable = False
    return out


@st.cache_data(max_entries=8, show_spinner=False)
def metrics(name: str, text: str) -> dict[str, np.ndarray]:
    data = analysed(name, text)
    return pooled(name, text, lambda: view.head_metrics(data.maps, data.ids))


@st.cache_data(max_entries=8, show_spinner=False)
def similarity(name: str, text: str) -> np.ndarray:
    maps = analysed(name, text).maps
    return pooled(name, text, lambda: view.head_similarity(maps))


@st.fragment
def views(name: str, text: str, shown: view.Shown, hide_special: bool, single: str | None, tab: str) -> None:
    """View ``tab`` (one at a time: tabs would build every view's figures); its inputs rerun only this fragment.
    ``single``: the typed text when ``text`` is it written twice."""
    tm, data = ui.cached_model(name), analysed(name, text)
    num_layers, num_heads = data.maps.shape[:2]
    with ui.friendly_errors():
        if tab == "grid":
            st.markdown(T("grid_intro"))
            ui.heads.open_head(ui.show_clickable(view.grid(shown, view.kv_groups(tm), lang=LANG)), "grid")
        elif tab == "search":
            ui.heads.head_search(T, LANG, tm, shown, single)
        elif tab == "head":
            c = st.columns(3)
            layer = c[0].selectbox(T("layer"), range(num_layers), index=num_layers - 1, key="mh_layer")
            head = c[1].selectbox(T("head"), range(num_heads), key="mh_head")
            lens = c[2].radio(
                T("lens"), view.LENSES, format_func=lambda k: T(f"lens_{k}"), key="mh_lens", horizontal=True
            )
            st.markdown(view.lens_help(tm, lens, lang=LANG))
            both = lenses(name, text) if lens != "raw" else None
            ui.show(view.detail(shown, layer, head, lens, both, lang=LANG))
            focus = ui.select_or_none(
                st,
                T("focus"),
                len(shown.labels),
                T("focus_all"),
                key="mh_focus",
                format_func=lambda i: f"{i}: {shown.labels[i]}",
            )
            st.markdown(T("lines_intro"))
            ui.show(view.lines(shown, layer, head, lens, both, focus, lang=LANG))
        elif tab == "compare":
            ui.section(T, "metrics", level="subheader")
            metric = st.radio(
                T("metric"), view.METRICS, format_func=lambda m: T(f"metric_{m}"), horizontal=True, key="mh_metric"
            )
            st.caption(T("click_hint"))
            per_head = metrics(name, text)
            if note := view.metric_note(per_head, metric, shown, lang=LANG):
                st.info(note)  # no query of this text has what the metric needs: an empty heatmap, said why
            panel = view.metric(per_head, metric, view.kv_groups(tm), global_layers=shown.global_layers, lang=LANG)
            ui.heads.open_head(ui.show_clickable(panel), "metric")
            ui.heads.similar(T, lambda: view.similarity(similarity(name, text), shown, lang=LANG))
            ui.heads.pair(T, LANG, shown)
            ui.heads.same_head(T, LANG, tm, shown, hide_special, lambda other: analysed(name, other))
        else:  # the query/key inspector
            ui.heads.query_key(T, LANG, tm, text, data.tokens)


st.title(ui.page_title("multihead"))
st.markdown(T("intro"))
st.latex(view.LATEX["multihead"])

c = [*st.columns(2), *st.columns(2)]  # the toggles a row of their own: a narrow third column cut their names
example = c[1].selectbox(T("example"), view.EXAMPLES, format_func=T, key="mh_example")
hide_special = c[2].toggle(T("hide_special"), value=False, key="mh_hide", help=T("hide_special_help"))
repeat = c[3].toggle(
    T("repeat"),
    value=False,
    key="mh_repeat",
    help=view.repeat_help(lang=LANG),
    on_change=lambda: st.session_state.update(mh_requery=True),  # the query follows the text: below
)
name = ui.text_model_picker(T("model"), "mh_model", help=ui.heads.model_help(T), where=c[0])
text = st.text_area(T("text"), T(f"{example}_text"), max_chars=20_000, key=f"mh_text_{example}", height=90)
ui.stop_unless(name, text, T("empty"))
single, text = (text, view.repeated(text)) if repeat else (None, text)  # the typed text, then the one analysed

with ui.friendly_errors():
    tm = ui.cached_model(name)
    facts = model_facts.say("multihead", "model_caption", tm, LANG, kind=T(f"kind_{tm.kind}"), dim=tm.config.dim)
    arch = ui.architecture_caption(tm)
    st.caption(facts + " · " + arch + "  \n" + model_facts.facts(tm, LANG).qkv)
    data = analysed(name, text)
    if data.truncated:
        st.warning(model_facts.say("multihead", "truncated", tm, LANG, n=data.num_tokens))
    st.markdown(T("tokens", n=len(data.tokens)))
    st.code(token_strip(data.tokens), language=None, wrap_lines=True)
    if (sinks := view.learned_sinks(tm, data, view.kv_groups(tm), lang=LANG)) is not None:
        st.info(sinks.note)
        ui.show(sinks.panel)
    shown = view.shown_for(tm, data, hide_special)
    if st.session_state.pop("mh_requery", False) and "mh_query" in st.session_state:
        # the text was just written twice (or once again): the query picked moves to the same token of the other
        # copy, so that induction is looked for on the second copy; a query picked after the switch is left alone
        typed, asked = single if repeat else text, st.session_state["mh_query"]
        st.session_state["mh_query"] = view.query_on_repeat(tm, typed, asked, repeat=repeat, hide_special=hide_special)
    if shown.no_special:
        st.caption(T("no_special"))
    ui.heads.apply_asked()  # a click on a head's cell (grid, heatmaps) opens it: view, layer and head
    # Outside the views' fragment: another view is a full run, the one that drops the sections (nested fragments) of
    # the view shown before, so a section's report still in flight cannot draw it into this one.
    tab = st.segmented_control(
        T("view"), view.VIEWS, default="grid", required=True, format_func=lambda v: T(f"tab_{v}"), key="mh_view"
    )
    ui.fold_again(*ui.heads.FOLDED, shown=tab)  # a view shown again draws what is near, the rest once scrolled near
    views(name, text, shown, hide_special, single, tab)
