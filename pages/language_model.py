"""Language modelling and generation (lecture §6): embeddings, the causal mask, next-token prediction, sampling.

The model and the text serve every section; each section is a fragment (its own widgets rerun it alone), and the
embeddings, the loss and generation open on demand, so a new text computes and redraws the visible ones only."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.ui.chat import chat_section
from tx_explorer.views import language_model as view
from tx_explorer.views import model_facts, split_bytes_note

T = ui.texts("language_model")
LANG = ui.lang()


@st.cache_data(max_entries=16, show_spinner=False)  # [N, D]: a text edited at its end opens the same way again
def alone(name: str, ids: tuple[int, ...]):
    return view.alone_states(ui.cached_model(name), ids)


@st.cache_data(max_entries=8, show_spinner=False)
def reading(name: str, text: str, k: int):
    """A long text on the job pool, its bar saying what runs (Gemma 3 reads 512 tokens in seconds); a short one now."""
    tm = ui.cached_model(name)
    work = lambda report=None: view.read(tm, text, k, lambda ids: alone(name, tuple(ids)))  # noqa: E731
    return ui.run_job(work, label=T("read_working")) if view.heavy(tm, text) else work()


@st.cache_data(max_entries=16, show_spinner=False)
def generation(name: str, prompt: str, new: int, method: str, temperature: float, top_k: int, seed: int):
    return view.generate(ui.cached_model(name), prompt, new, method, temperature, top_k, seed)


@st.fragment
def embeddings(r, dim: int, intro: str) -> None:
    if box := ui.lazy_section(T, "embed", key="lm_open_embed", intro=False):
        with box, ui.friendly_errors():
            st.markdown(intro)
            ui.show(view.embeddings(r, dim, lang=LANG))


@st.fragment
def causal_mask(r, tm) -> None:
    ui.section(T, "mask")
    with ui.friendly_errors():
        c = st.columns(2)
        names = model_facts.layer_names(tm, LANG)  # Gemma 3's global layers named as such
        layer = c[1].selectbox(T("layer"), range(r.maps.shape[0]), format_func=names.__getitem__, key="lm_mask_layer")
        head = c[1].selectbox(T("head"), range(r.maps.shape[1]), key="lm_mask_head")
        mask = view.causal(r, layer, head, window=view.layer_window(tm, layer), lang=LANG)
        with c[0]:
            ui.show(mask.mask, width_px=ui.PAGE_PX / 2)
        with c[1]:
            ui.show(mask.weights, width_px=ui.PAGE_PX / 2)
        box = st.success if mask.checked else st.info  # one token: nothing was checked
        box(mask.check)
        box(mask.prefix)


@ui.below_fold("language_model_next", height=770)
def next_token(r) -> None:
    ui.section(T, "next")
    with ui.friendly_errors():
        n = len(r.tokens)
        pos = st.slider(T("position"), 0, n - 1, n - 1, key="lm_pos") if n > 1 else 0
        nxt = view.next_token(r, pos, lang=LANG)
        ui.show(nxt.candidates)
        if nxt.actual is not None:
            token, p = ui.escape_markdown(nxt.actual), f"{nxt.probability:.3f}"
            st.caption(T("next_actual", token=token, loss=f"{nxt.loss:.2f}", p=p))


@st.fragment
def loss(r) -> None:
    if box := ui.lazy_section(T, "loss", key="lm_open_loss"):
        with box, ui.friendly_errors():
            if shown := view.losses(r, lang=LANG):
                ui.metrics(shown[0])
                ui.show(shown[1])
            else:
                st.info(T("loss_one_token"))


@st.fragment
def generate(name: str, text: str, tm) -> None:
    if not (box := ui.lazy_section(T, "gen", key="lm_open_gen")):
        return
    with box, ui.friendly_errors():
        c = st.columns(5)
        method = c[0].radio(T("method"), view.METHODS, format_func=lambda m: T(f"method_{m}"), key="lm_method")
        greedy = method == "greedy"  # nothing drawn: no temperature to set, no seed
        temperature = c[1].slider(T("temperature"), 0.1, 2.0, 0.8, 0.1, key="lm_temp", disabled=greedy)
        top_k = c[2].number_input(T("top_k"), 1, 200, 20, key="lm_topk", disabled=method != "top_k")
        seed = c[3].number_input(ui.texts("common")("seed"), 0, 1_000_000, 0, key="lm_seed", disabled=greedy)
        top, usual = view.new_tokens(tm, *view.GEN_NEW)  # a short context leaves the prompt room
        new = c[4].slider(T("new_tokens"), 1, top, usual, key="lm_new") if top > 1 else top
        args = (name, text, new, method, float(temperature), int(top_k), int(seed))  # seconds with a larger model
        g = ui.remembered_job(lambda report: generation(*args), label=T("gen_working"), key=("lm_gen", *args))
        if g.prompt_cut:
            st.warning(T("prompt_cut", kept=g.prompt_len, limit=g.limit, new=new))
        st.markdown(T("gen_result"))
        st.code(view.continuation(tm, g), language=None, wrap_lines=True)
        if loop := view.loop_check(g, lang=LANG, escape=ui.escape_markdown):
            st.markdown(loop)
        c = st.columns(3)
        ui.keep_within("lm_step", 1, new)  # the slider has no default of its own: 1, or the value kept here
        step = c[0].slider(T("gen_step"), 1, new, key="lm_step") if new > 1 else 1
        names = model_facts.layer_names(tm, LANG)
        g_layer = c[1].selectbox(T("layer"), range(g.maps.shape[0]), format_func=names.__getitem__, key="lm_gen_layer")
        g_head = ui.select_or_none(c[2], T("head"), g.maps.shape[1], T("mean_heads"), key="lm_gen_head")
        ui.show(*view.generation(g, step, g_layer, g_head, lang=LANG))


st.title(ui.page_title("language_model"))
st.markdown(T("intro"))
st.latex(view.LATEX)

ui.keep_open("lm_open_embed", "lm_open_loss", "lm_open_gen", "lm_open_chat")  # through a blank text too
name = ui.text_model_picker(T("model"), "lm_model", kind="causal")
text = st.text_area(T("text"), T("default_text"), max_chars=20_000, key="lm_text", height=80)
ui.stop_unless(name, text, T("empty", model=name))

r = tm = None
with ui.friendly_errors():
    tm = ui.cached_model(name)
    st.caption(ui.architecture_caption(tm))
    if refused := view.refusal(tm, lang=LANG):  # an encoder typed as a folder: one message, no section below
        st.info(refused)
        st.stop()
    st.markdown(model_facts.say("language_model", "model_intro", tm, LANG))
    if "val_loss" in tm.info:  # a bundled model's training summary (a checkpoint folder has none)
        st.caption(T("trained", loss=f"{tm.info['val_loss']:.2f}", bigram=f"{tm.info['bigram']['val_loss']:.2f}"))
    r = reading(name, text, view.TOP)
    if r.truncated:
        st.warning(model_facts.say("language_model", "truncated", tm, LANG, n=r.num_tokens))
    st.code(view.token_strip(r.tokens), language=None, wrap_lines=True)
    if note := split_bytes_note(r.tokens, LANG):
        st.caption(note)
if r is not None:
    embeddings(r, tm.config.dim, view.embed_intro(tm, lang=LANG))
    causal_mask(r, tm)
    next_token(r)
    loss(r)
if tm is not None:
    generate(name, text, tm)
    chat_section(name, tm)
