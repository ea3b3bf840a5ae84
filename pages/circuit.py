"""Watch a circuit form (lecture §4.1): induction heads in a two-layer attention-only model, trained live."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.views import circuit as view

T, LANG = ui.texts("circuit"), ui.lang()


@st.fragment
def formation_section(bundle) -> None:
    ui.section(T, "formation")
    with ui.friendly_errors():
        f = view.formation(bundle, lang=LANG)
        ui.show(f.curves)
        st.success(f.verdict)
        st.caption(f.settings)


@st.fragment
def maps_section(bundle) -> None:
    ui.section(T, "maps")
    step = st.select_slider(T("step"), bundle.steps, value=bundle.steps[-1], key="circuit_step")
    with ui.friendly_errors():
        m = view.step_maps(bundle, step, lang=LANG)
        st.caption(m.caption)
        ui.show(m.maps)


@ui.below_fold("circuit_k", height=520)
def composition_section(bundle) -> None:
    ui.section(T, "k")
    with ui.friendly_errors():
        k = view.k_composition(bundle, lang=LANG)
        st.table(k.table)
        st.success(k.verdict)


@st.cache_data(max_entries=2, show_spinner=False)
def scored(names: tuple[str, ...]) -> view.Scores:
    """The pretrained LLMs' heads scored once per server, for both languages (worded on each run): every rerun of
    the page (opening the live run, switching language) would otherwise score SmolLM2's 270 heads and Gemma 3's 72
    again."""
    return view.score_heads(ui.cached_model(view.BUNDLE), *map(ui.cached_model, names))


@ui.below_fold("circuit_compare", height=640)
def compare_section() -> None:
    ui.section(T, "compare")
    names = tuple(view.pretrained())
    if not names:
        st.info(T("compare_absent", model=", ".join(view.pretrained(installed=False))))
        return
    with ui.friendly_errors():
        c = view.comparison(scored(names), lang=LANG)
        ui.show(c.scatter)
        for caption in c.captions:
            st.caption(caption)


def live_section(bundle) -> None:  # no fragment: a click in one waits for its run, Stop must not
    if not (box := ui.lazy_section(T, "live", key="circuit_open_live", intro=False)):
        return
    with box:
        st.markdown(view.live_intro(bundle, lang=LANG))
        c = st.columns([1, 1, 1])
        seed = c[0].number_input(T("seed"), 0, view.MAX_SEED, 0, help=T("seed_help"), key="circuit_seed")
        ui.live_training(
            c[1:],
            lambda: view.LiveRun(bundle, seed=seed, lang=LANG),
            lambda live: view.live_curves(live, lang=LANG),
            key="circuit_live",
            T=T,
        )


st.title(ui.page_title("circuit"))
st.markdown(T("intro"))
bundle = ui.bundled(view.BUNDLE, T)
if bundle is not None:
    formation_section(bundle)
    maps_section(bundle)
    composition_section(bundle)
    compare_section()
    live_section(bundle)
