"""Model sizes (lecture §5.4): where the parameters are, counted two ways, next to the published figures."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.views import model_sizes as view

T = ui.texts("model_sizes")
LANG = ui.lang()


@st.cache_data(max_entries=32, show_spinner=False)
def counted(cfg: dict, kind: str, decoder_layers: int | None = None) -> view.Counts:
    """(formula, sum(p.numel()) on the meta device) for one config."""
    return view.counted(cfg, kind, decoder_layers)


st.title(ui.page_title("model_sizes"))
st.markdown(T("intro"))
st.latex(view.latex(LANG))

ui.section(T, "table")
with ui.friendly_errors():
    rows, compare = view.lecture_table(counted, lang=LANG)
    st.table(rows, hide_index=True)  # wraps its long cells: a grid cut the configuration and hid our count
    st.markdown(T("table_notes") + "\n\n" + T("not_measured"))
    ui.show(compare)
    st.markdown(view.vocabulary_share(counted, lang=LANG))

# The two sections with inputs are fragments: a change reruns only its own section; each is drawn when scrolled to.


@ui.below_fold("model_sizes_breakdown", height=730)
def breakdown_section() -> None:
    ui.section(T, "breakdown", intro=False)
    share = st.toggle(T("share"), value=True, key="sizes_share")
    with ui.friendly_errors():
        st.markdown(view.breakdown_words(counted, lang=LANG))  # the chart read in words, from its own counts
        ui.show(view.breakdown(share, counted, lang=LANG))


@ui.below_fold("model_sizes_custom", height=950)
def custom_section() -> None:
    st.header(T("custom_header"))
    st.markdown(T("custom_intro"))
    values = ui.inputs(view.OWN_MODEL, T)  # four a row: H and H_kv side by side
    with ui.friendly_errors():
        mine = view.OWN_MODEL.compute(**values, count=counted, lang=LANG)
        c = st.columns(3)
        c[0].metric(T("total"), view.fmt(mine.total), help=f"{mine.total:,}")
        c[1].metric(T("rule"), view.fmt(mine.rule), help=T("rule_help"))
        c[2].metric(T("head_dim"), mine.head_dim)
        st.markdown(mine.heads)
        (st.success if mine.ok else st.error)(mine.check)
        ui.show(mine.parts)


@ui.below_fold("model_sizes_stack", height=900)
def stack_section() -> None:
    """A stack of identical blocks in a real model, and one formula from 2017 to 2024 (no inputs)."""
    ui.section(T, "stack")
    with ui.friendly_errors():
        table, words = view.stack(lang=LANG)
        st.dataframe(table, hide_index=True)
        st.markdown(words)
        ui.section(T, "since")
        table, words = view.since_2017(lang=LANG)
        st.dataframe(table, hide_index=True)
        st.markdown(words)


breakdown_section()
stack_section()
custom_section()
