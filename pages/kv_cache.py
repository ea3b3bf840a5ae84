"""KV cache stepper (lecture §4.3, §6.3, §8.4): decode token by token with our cache; K and V grow a row per
step; cached = uncached; cache bytes from the formula beside the tensors, and for published models."""

import streamlit as st

from tx_explorer import models, ui
from tx_explorer.views import kv_cache as view

T = ui.texts("kv_cache")
LANG = ui.lang()

st.title(ui.page_title("kv_cache"))
st.markdown(T("intro"))

# 1. Decode a prompt ------------------------------------------------------------------------------------------------
ui.section(T, "decode")
bundled = [n for n in models.available_models("text", kind="causal") if models.REGISTRY[n].bundled]
default = view.first_shared(bundled, ui.cached_model)  # a bundled model whose query heads share K/V heads
if default is not None:
    st.session_state.setdefault("kv_model", default)
c = st.columns([2, 3, 1])
name = ui.text_model_picker(T("model"), "kv_model", kind="causal", where=c[0])
prompt = c[1].text_input(T("prompt"), T("prompt_default"), max_chars=2000, key="kv_prompt")
new_tokens = c[2].number_input(T("new_tokens"), 0, view.MAX_NEW_TOKENS, 8, key="kv_new")
decoded = tm = None
if name is not None:
    with ui.friendly_errors():
        tm = ui.cached_model(name)
        st.caption(ui.architecture_caption(tm.config))
        decoded = view.decode(tm, prompt, int(new_tokens), lang=LANG)
        st.markdown(T("continuation", text=ui.escape_markdown(decoded.text)))
        (st.success if decoded.ok else st.error)(decoded.check)

# 2. The cache after one step ---------------------------------------------------------------------------------------
if decoded is not None:
    ui.section(T, "grow", view.LATEX["bytes"])
    steps = len(decoded.decoding.steps)
    c = st.columns(2)
    step = c[0].slider(T("step"), 0, steps - 1, steps - 1, key="kv_step") if steps > 1 else 0
    layer = c[1].radio(
        T("layer"), range(tm.config.num_layers), format_func=lambda i: str(i + 1), horizontal=True, key="kv_layer"
    )
    with ui.friendly_errors():
        cv = view.cache_view(tm, decoded.decoding.ids, decoded.labels, step, layer, lang=LANG)
        st.markdown(cv.numbers)
        ui.row(cv.keys, cv.values)
        c = st.columns([1, 2])
        with c[0]:
            ui.show(cv.groups)
        with c[1]:
            ui.show(decoded.growth)
    ui.section(T, "same")
    ui.show(decoded.diff)

# 3. MHA, GQA, MQA and a sliding window -----------------------------------------------------------------------------
if tm is not None:
    ui.section(T, "sharing")
    c = st.columns(2)
    tokens = c[0].number_input(T("tokens"), 1, tm.config.max_len, min(32, tm.config.max_len), key="kv_tokens")
    window = c[1].number_input(
        T("window"), 1, 1_000_000, min(8, tm.config.max_len), help=T("window_help"), key="kv_window"
    )
    with ui.friendly_errors():
        st.table(view.sharing_rows(tm, int(tokens), int(window), lang=LANG))
    st.markdown(T("sharing_note"))

# 4. Published configurations, out to 128k tokens -------------------------------------------------------------------
ui.section(T, "published")
panel, rows = view.published(lang=LANG)
ui.show(panel)
st.table(rows)
st.markdown(T("published_note"))
