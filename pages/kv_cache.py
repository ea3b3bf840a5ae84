"""KV cache stepper (lecture §4.3, §6.3, §8.4): decode token by token with our cache; K and V grow a row per
step; cached = uncached; cache bytes from the formula beside the tensors, and for published models; on Gemma 3, a
run past its local layers' window."""

import streamlit as st

from tx_explorer import models, ui
from tx_explorer.views import kv_cache as view

T = ui.texts("kv_cache")
LANG = ui.lang()

st.title(ui.page_title("kv_cache"))
st.markdown(T("intro"))

# Each section is a fragment, rerun alone by its inputs; the model choice is outside them, so it reruns every one.


@st.cache_data(max_entries=32, show_spinner=False)  # four or five random models of the chosen one's size: seconds
def sharing(name: str, tokens: int, window: int) -> list[view.kv.SharingRow]:  # no language: 中文 reuses it
    return view.sharing(ui.cached_model(name), tokens, window)


@st.cache_resource(show_spinner=False)
def _last() -> dict:
    """The last decoding per model, shared by every session: a server's prefix cache for the next prompt."""
    return {}


@st.cache_data(max_entries=64, show_spinner=False)  # numbers only (figures would cost more to unpickle than make)
def decoding(name: str, prompt: str, new_tokens: int) -> view.kv.Decoding:
    found = view.decoding(ui.cached_model(name), prompt, new_tokens, reuse=_last().get(name))
    _last()[name] = found
    return found


@st.cache_data(max_entries=8, show_spinner=False)  # fewer: each keeps two caches of about 19 MB (Gemma 3)
def past_decoding(name: str, prompt: str, new_tokens: int, _report) -> view.kv.Decoding:  # _: not in the key
    return view.decoding(ui.cached_model(name), prompt, new_tokens, past=True, report=_report)


@st.fragment
def decode_section(name: str, tm: view.TextModel) -> None:
    """1. Decode a prompt (past the window, if asked): cached = uncached, then the cache after one step."""
    values = ui.inputs(view.DECODE, T, columns=(3, 1))
    past = False
    if view.past_window(tm) is not None:  # Gemma 3: its local layers' window lies beyond the stepper's tokens
        switch, help_ = view.past_label(tm, lang=LANG)
        past = st.toggle(switch, key="kv_past", help=help_)
    with ui.friendly_errors():
        args = (name, values["prompt"], values["new"])  # with and without the cache: seconds with SmolLM2, so a bar
        if past:  # two passes over 500 tokens of Gemma 3 and a pass per token stepped: the bar moves at each pass
            run, label = (lambda report: past_decoding(*args, report)), T("past_working")
        else:
            run, label = (lambda report: decoding(*args)), T("decoding_working")
        found = ui.remembered_job(run, label=label, key=("kv_decode", *args, past))
        decoded = view.DECODE.compute(tm, **values, numbers=found, lang=LANG)
        if decoded.prompt_note:
            st.caption(decoded.prompt_note)
        new = len(decoded.decoding.ids) > decoded.decoding.prompt_len  # else "New tokens" 0: the prompt alone
        st.markdown(T("continuation", text=ui.escape_markdown(decoded.text)) if new else T("continuation_none"))
        (st.success if decoded.ok else st.error)(decoded.check)
        ui.section(T, "same", intro=False)  # the verdict's evidence, step by step, beside it
        st.markdown(decoded.same)
        ui.show(decoded.diff)
        grow_section(tm, decoded)


@st.fragment
def grow_section(tm: view.TextModel, decoded: view.Decoded) -> None:
    """2. The cache after one step."""
    intro, formula = view.bytes_formula(tm, lang=LANG)
    ui.section(T, "grow", intro=False)
    st.markdown(intro)
    st.latex(formula)
    d = decoded.decoding  # its last step's cache is the default view's: no replay
    first, last = d.steps[0].position, d.steps[-1].position  # after a prefill, the steps start at its last token
    c = st.columns(2)
    step = c[0].slider(T("step"), first, last, last, key="kv_step") if last > first else last
    names = view.layer_names(tm, lang=LANG)
    layer = c[1].radio(T("layer"), range(len(names)), format_func=names.__getitem__, horizontal=True, key="kv_layer")
    cache_charts(tm, decoded, step, layer)


@ui.below_fold("kv_cache_tensors", height=1330)
def cache_charts(tm: view.TextModel, decoded: view.Decoded, step: int, layer: int) -> None:
    """The cache's tensors after ``step`` at ``layer``, its heads' groups and its growth: below the first screen
    (the decoding, its check, the step and the layer), so drawn once scrolled near."""
    with ui.friendly_errors():
        d = decoded.decoding
        cv = view.cache_view(tm, d.ids, decoded.labels, step, layer, lang=LANG, decoding=d)
        st.markdown(cv.numbers)
        if cv.layers is not None:
            ui.show(cv.layers)
        ui.row(cv.keys, cv.values)
        c = st.columns([1, 2])
        with c[0]:
            ui.show(cv.groups, width_px=ui.PAGE_PX / 3)
        with c[1]:
            ui.show(decoded.growth, width_px=ui.PAGE_PX * 2 / 3)  # its column's width: titles and margins fit it


@st.fragment
def sharing_section(name: str, tm: view.TextModel) -> None:
    """3. MHA, GQA, MQA, a window (and a model's own layout): models built and run, so computed when opened."""
    if not (box := ui.lazy_section(T, "sharing", key="kv_open_sharing", intro=False)):
        return
    with box:
        st.markdown(view.sharing_intro(tm, lang=LANG))
        c = st.columns(2)
        most = view.limit(tm.config)  # the stepper's tokens: the model's context, or fewer
        tokens = c[0].number_input(T("tokens"), 1, most, min(32, most), key="kv_tokens")
        window = c[1].number_input(
            T("window"), 1, most, min(8, most), help=view.window_help(tm, lang=LANG), key="kv_window"
        )
        with ui.friendly_errors():
            args = (name, int(tokens), int(window))  # behind a bar: SmolLM2-sized models take seconds to build
            table = ui.remembered_job(lambda report: sharing(*args), label=T("sharing_working"), key=("kv", *args))
            st.table(view.sharing_rows(tm, table, *args[1:], lang=LANG))
        st.markdown(T("sharing_note"))


@ui.below_fold("kv_cache_published", height=900)
def published_section() -> None:  # 4. Published configurations, out to 128k tokens
    ui.section(T, "published")
    panel, rows = view.published(lang=LANG)
    ui.show(panel)
    st.table(rows)
    st.markdown(view.published_note(lang=LANG))


ui.section(T, "decode")
default = view.first_shared(models.shipped("text", kind="causal"), ui.cached_model)  # K/V heads shared: SmolLM2
if default is not None:
    st.session_state.setdefault("kv_model", default)
c = st.columns([2, 4])
name = ui.text_model_picker(T("model"), "kv_model", kind="causal", where=c[0])
tm = None
if name is not None:
    with ui.friendly_errors():
        loaded = ui.cached_model(name)
        c[1].caption(ui.architecture_caption(loaded))
        if note := view.window_note(loaded, lang=LANG):
            st.info(note)
        view.model_of(loaded)  # one of our causal LMs (it has a KV cache), else a message here instead of sections
        tm = loaded
if tm is not None:
    decode_section(name, tm)
    sharing_section(name, tm)
published_section()
