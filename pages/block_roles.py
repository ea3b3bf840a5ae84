"""Inside a block (lecture §5.1–5.3, §9.5): only attention mixes tokens; LayerNorm needs no batch statistics."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.views import block_roles as view

T = ui.texts("block_roles")
LANG = ui.lang()

st.title(ui.page_title("block_roles"))
st.markdown(T("intro"))

# 1. The token-mixing probe (a fragment: its inputs rerun only this section) ---------------------------------


@st.fragment
def probe_section() -> None:
    ui.section(T, "probe", intro=False)  # its intro describes the model picked below
    name = ui.text_model_picker(T("model"), "probe_model", kind="causal")  # SmolLM2 first, where installed
    if name is None:
        return
    with ui.friendly_errors():
        tm = ui.cached_model(name)
        if (why := view.refused(tm, lang=LANG)) is not None:  # an encoder typed as a folder: no causal probe
            st.info(why)
            return
        st.markdown(view.intro(tm, lang=LANG))
        c = st.columns([4, 1, 1])
        text = c[0].text_input(T("text"), T("text_default"), max_chars=500, key="probe_text")
        first = view.whole_word(tm, text)
        token = c[1].number_input(T("token"), 0, view.MAX_TOKENS - 1, first, help=T("token_help"), key="probe_token")
        layer = c[2].number_input(T("layer"), 0, tm.config.num_layers - 1, 0, key="probe_layer")
        probe = view.probe(tm, text, token, layer, lang=LANG)
        st.success(probe.verdict)
        st.table(probe.table)
        ui.show(probe.bars, width_px=ui.PAGE_PX)  # the whole page wide: its title on one line


probe_section()

# 2. LayerNorm vs BatchNorm -----------------------------------------------------------------------------------
ui.section(T, "bn")
with ui.friendly_errors():
    rows, verdict = view.batch_norms(lang=LANG)
    st.table(rows)
    st.success(verdict)
