"""Seq2Seq and attention (lecture §1, §2.5): the fixed-context bottleneck, Bahdanau alignments and the
Transformer's cross-attention, on a generated English → Italian language with gold alignments."""

import streamlit as st

from tx_explorer import ui
from tx_explorer.views import seq2seq as view

T = ui.texts("seq2seq")
LANG = ui.lang()


@st.cache_data(max_entries=32, show_spinner=False)
def translations(text: str, beam: int) -> dict:
    """Every model's translation of ``text``, once per input: a rerun that changes nothing recomputes nothing."""
    return view.translate(view.load_translators(ui.cached_model)[0], text, beam)


# 2. Alignment matrices: Bahdanau beside the Transformer's cross-attention ------------------------------------------
@st.fragment
def alignments(translators: dict, out: dict, gold) -> None:
    ui.section(T, "align", intro=False)
    with ui.friendly_errors():
        st.markdown(view.align_intro(out, gold, lang=LANG))  # where this sentence's articles look, measured
        tfm, cross = translators["transformer"], out["transformer"].cross  # (L, H, T_out, T_in)
        c = st.columns(2)
        layer = c[0].selectbox(T("layer"), range(cross.shape[0]), index=tfm.align_layer or 0, key="s2s_layer")
        head = ui.select_or_none(c[1], T("head"), cross.shape[1], T("head_mean"), key="s2s_head")
        al = view.alignments(out, gold, layer, head, lang=LANG, mosaic=False)  # mosaic: below
        for col, panel, off in zip(st.columns(2), (al.bahdanau, al.transformer), al.off_gold):
            with col:
                ui.show(panel, width_px=ui.PAGE_PX / 2)
                if off:
                    st.caption(T("gold_note"))
        st.caption(T("align_layer_note", layer=tfm.align_layer or 0))
        box = st.expander(T("mosaic_title"), key="s2s_open_mosaic", on_change="rerun")  # every layer × head
        if box.open:
            with box:
                st.markdown(view.mosaic_intro(out, lang=LANG))
                ui.show(view.cross_mosaic(out, lang=LANG))


# 3. One decoder step ------------------------------------------------------------------------------------------------
@st.fragment
def decoder_step(translator, o) -> None:
    if (box := ui.lazy_section(T, "step", view.RECURRENCE, key="s2s_open_step")) and not o.tokens:
        box.info(T("no_output"))
    elif box:
        with box, ui.friendly_errors():
            t = st.slider(T("step"), 1, len(o.tokens) + 1, 1, key="s2s_step") - 1  # the last step writes <eos>
            query = view.step_query(translator, o, t, lang=LANG)
            ui.row(query.state, query.scores, headings=query.formulas)
            ui.show(view.decoder_step(o, t, lang=LANG))
            st.markdown(query.text)


# 4. from <bos> to <eos> and T, T′, s₀ from the encoder (§1.1); heads that link a verb to its subject (§4.1) -------
@st.fragment
def claim_section(translators: dict, name: str, key: str) -> None:
    if box := ui.lazy_section(T, name, key=key):
        with box, ui.friendly_errors():
            result = ui.once_per_server(  # a claim measured on held-out sentences: seconds, once per server
                lambda report: view.CLAIMS[name](translators), label=T("claim_working"), key=("s2s_claim", name)
            )
            shown = view.claim_view(name, result, lang=LANG)
            ui.metrics(shown.metrics)
            ui.show(shown.panel)
            st.markdown(shown.text)


# 4. The bottleneck: quality by length (the same for every sentence) -----------------------------------------------
@st.fragment
def bottleneck(translators: dict) -> None:
    if not (box := ui.lazy_section(T, "bottleneck", key="s2s_open_bottleneck")):
        return
    with box:
        shipped = {k: t.results for k, t in translators.items() if t.results}
        per_bucket = st.slider(T("rerun_size"), 2, 50, 10, help=T("rerun_help"), key="s2s_rerun_size")
        if st.button(T("rerun")):
            with ui.friendly_errors():
                bar = st.progress(0.0)
                st.session_state["s2s_eval"] = view.evaluate(translators, per_bucket, progress=bar.progress, lang=LANG)
                bar.empty()
        results = st.session_state.get("s2s_eval") or shipped
        if not results:
            st.info(T("no_results"))
            return
        n = next(iter(results.values()))["n"][0]
        st.caption(T("rerun_done", n=n) if "s2s_eval" in st.session_state else T("shipped", n=n))
        st.markdown(view.bottleneck_verdict(results, lang=LANG))  # the lecture's claim, measured on these curves
        panels = view.by_length(results, lang=LANG)
        for pair in (panels[:2], panels[2:]):
            ui.row(*pair)


st.title(ui.page_title("seq2seq"))
st.markdown(T("intro"))
st.latex(view.LATEX)
st.caption(T("formula_caption"))
ui.keep_open("s2s_open_mosaic", "s2s_open_step")  # a sentence without a translation does not draw them
translators, problem = view.load_translators(ui.cached_model, lang=LANG)  # None and why, when not built
if translators is None:
    st.info(problem)
    st.stop()

# 1. Input and the three translations ------------------------------------------------------------------------------
st.header(T("input_header"))
st.session_state.setdefault("s2s_text", view.LECTURE_EXAMPLE[0])
st.selectbox(
    T("examples"),
    view.DEMO_SENTENCES,
    key="s2s_example",
    on_change=lambda: st.session_state.update(s2s_text=st.session_state["s2s_example"]),
)
c = st.columns([3, 1])
text = c[0].text_input(T("sentence"), key="s2s_text", max_chars=400)
beam = c[1].slider(T("beam"), 1, 5, 1, help=T("beam_help"), key="s2s_beam")
with st.expander(T("vocabulary", n=len(translators["attention"].src_vocab.words)), key="s2s_vocab", on_change="rerun"):
    st.markdown(T("grammar_hint"))
    st.text(" · ".join(translators["attention"].src_vocab.words))

check = translators["attention"].check(text)
out = gold = None
if not check.ok:
    st.warning(view.input_problem(check, lang=LANG))
else:
    with ui.friendly_errors():
        gold = view.gold(check)
        if gold is None:
            st.info(T("no_gold"))
        else:
            st.markdown(T("reference", text=gold.italian))
        out = translations(text, beam)
        for col, o in zip(st.columns(3), view.outputs(translators, out, gold, lang=LANG)):
            col.markdown(f"**{o.label}**")
            col.code(o.text, language=None)
            if o.verdict:
                col.caption(o.verdict)
            if o.aer is not None:
                col.metric(T("aer"), f"{o.aer:.2f}", help=T("aer_help"))

if out is not None:
    alignments(translators, out, gold)
    decoder_step(translators["attention"], out["attention"])
claim_section(translators, "ends", key="s2s_open_ends")
claim_section(translators, "s0", key="s2s_open_s0")
claim_section(translators, "sv", key="s2s_open_sv")
bottleneck(translators)
