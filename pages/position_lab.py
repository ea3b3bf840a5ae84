"""Position lab (lecture §3.3, §9.3): none, sinusoidal, learned, rotary and ALiBi trained alike, in and beyond
their context; the usual claims checked; rotary's rotation and relative property, live."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.views import position_lab as view

T = ui.texts("position_lab")
LANG = ui.lang()


def results() -> view.Results:
    return ui.cached_model(view.BUNDLE)  # the registry's loader, once per server process


# Each section is a fragment: its inputs rerun only that section. Those below the first screen are drawn when the
# visitor scrolls near them.


@st.fragment
def loss_section(res: view.Results) -> None:
    """1. Loss by position, inside and beyond the training context."""
    ui.section(T, "loss")
    c = st.columns([3, 2])
    picked = schemes(c[0], res, "loss")
    width = c[1].slider(T("smoothing"), 1, 32, 8, help=T("smoothing_help"), key="loss_smoothing")
    with ui.friendly_errors():
        ui.show(view.loss_by_position(res, picked, width, lang=LANG))
    st.table(view.loss_table(res, lang=LANG))  # every scheme's numbers, whichever the chart shows
    st.markdown(view.loss_note(res, lang=LANG))
    st.markdown(view.sinusoidal_scale(res, lang=LANG))


@ui.below_fold("position_lab_attention", height=900)
def attention_section(res: view.Results) -> None:
    """2. Attention against distance."""
    ui.section(T, "attn", *view.LATEX["alibi"])
    c = st.columns([3, 2])
    chosen = schemes(c[0], res, "attn")
    layers = view.layers(res)
    layer = c[1].radio(T("layer"), range(layers), horizontal=True, key="attn_layer")
    with ui.friendly_errors():
        ui.show(view.attention_by_distance(res, chosen, layer, lang=LANG))
    st.markdown(T("attn_note"))


@ui.below_fold("position_lab_verdicts", height=500)
def verdicts_section(res: view.Results) -> None:
    """3. The claims, checked (no inputs)."""
    ui.section(T, "verdicts")
    st.table(view.verdict_rows(res, lang=LANG))
    st.markdown(view.findings(res, lang=LANG))
    st.markdown(T("verdicts_note"))


@ui.below_fold("position_lab_rotary", height=1500)
def rotary_section(res: view.Results | None) -> None:
    """4. Rotary made visible (needs no bundle; what the trained runs show, where they are here)."""
    ui.section(T, "rotary", *view.LATEX["rotary"])
    values = ui.inputs(view.ROTARY, T, columns=3)  # two rows: six boxes to a row wrap their labels at 1100 px
    with ui.friendly_errors():
        demo = view.ROTARY.compute(**values, lang=LANG)
        ui.show(demo.rotation, width_px=ui.PAGE_PX)  # the page wide: its title on one line, over its ◆ line
        ui.row(demo.scores, demo.by_distance)
        st.success(demo.check)
    st.markdown(view.rotary_note(res, lang=LANG))


def fmt(scheme: str) -> str:
    return view.label(scheme, LANG)


def schemes(box, res: view.Results, section: str) -> list[str]:
    """A section's scheme picker, every scheme at first (:func:`ui.multiselect`: in the page's language)."""
    return ui.multiselect(
        box,
        T("schemes"),
        res.schemes,
        res.schemes,
        key=f"{section}_schemes",
        format_func=fmt,
        placeholder=T("schemes_placeholder"),
    )


st.title(ui.page_title("position_lab"))
st.markdown(T("intro"))
st.caption(T("notation"))  # one meaning per symbol, for every formula and chart below

res = ui.optional(results, view.BundleError, lambda exc: T("no_bundle", message=str(exc)))
if res is not None:
    st.caption(view.setup(res, lang=LANG))
    loss_section(res)
    attention_section(res)
    verdicts_section(res)
rotary_section(res)
