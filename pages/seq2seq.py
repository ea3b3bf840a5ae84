"""Seq2Seq and attention (lecture §1, §2.5): the fixed-context bottleneck, Bahdanau alignments and the
Transformer's cross-attention, on a generated English → Italian language with gold alignments."""

import numpy as np
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.data import translation as tr
from tx_explorer.modules.translator import MAX_WORDS
from tx_explorer.viz import seq2seq as vs

T = ui.texts("seq2seq")
NAMES = {"fixed": "seq2seq-fixed", "attention": "seq2seq-attention", "transformer": "seq2seq-transformer"}
LABELS = {k: T(f"model_{k}") for k in NAMES}
AXES = {"x_title": T("axis_source"), "y_title": T("axis_output"), "gold_label": T("gold")}


def load_translators() -> dict | None:
    """The three bundled models, or None with a message saying how to build them."""
    missing = [n for n in NAMES.values() if n not in models.available_models()]
    if missing:
        st.info(T("no_models", names=", ".join(missing), command="python -m tx_explorer.train seq2seq --model all"))
        return None
    try:
        return {k: ui.cached_model(n) for k, n in NAMES.items()}
    except models.BundleError as exc:
        st.warning(T("bundle_problem", reason=str(exc)))
        return None


@st.cache_data(max_entries=32, show_spinner=False)
def translations(text: str, beam: int) -> dict:
    """Every model's translation of ``text``, once per input: a rerun that changes nothing recomputes nothing."""
    return {k: t.translate(text, beam=beam) for k, t in load_translators().items()}


def input_problem(check: tr.SourceCheck) -> str:
    if check.problem == "empty":
        return T("empty")
    if check.problem == "too_long":
        return T("too_long", n=len(check.tokens), max=MAX_WORDS)
    words = [f"`{w}` ({', '.join(f'`{s}`' for s in sug) or T('no_suggestion')})" for w, sug in check.unknown.items()]
    return T("unknown", words="; ".join(words))


st.title(T("title"))
st.markdown(T("intro"))
st.latex(
    r"e_{t,i} = v^\top \tanh(W s_{t-1} + U h_i),\qquad a_{t,i} = \frac{\exp e_{t,i}}{\sum_j \exp e_{t,j}},"
    r"\qquad c_t = \sum_i a_{t,i}\, h_i,\qquad s_t = \mathrm{GRU}([y_{t-1}; c_t],\, s_{t-1})"
)
st.caption(T("formula_caption"))
translators = load_translators()
if translators is None:
    st.stop()

# 1. Input and the three translations ------------------------------------------------------------------------------
st.header(T("input_header"))
st.session_state.setdefault("s2s_text", tr.LECTURE_EXAMPLE[0])
st.selectbox(
    T("examples"),
    tr.DEMO_SENTENCES,
    key="s2s_example",
    on_change=lambda: st.session_state.update(s2s_text=st.session_state["s2s_example"]),
)
c = st.columns([3, 1])
text = c[0].text_input(T("sentence"), key="s2s_text", max_chars=400)
beam = c[1].slider(T("beam"), 1, 5, 1, help=T("beam_help"))
with st.expander(T("vocabulary", n=len(translators["attention"].src_vocab.words))):
    st.markdown(T("grammar_hint"))
    st.text(" · ".join(translators["attention"].src_vocab.words))

check = translators["attention"].check(text)
out = gold = None
if not check.ok:
    st.warning(input_problem(check))
else:
    with ui.friendly_errors():
        try:
            gold = tr.parse(check.tokens)
            st.markdown(T("reference", text=gold.italian))
        except tr.ParseError:
            st.info(T("no_gold"))
        out = translations(text, beam)
        for col, (k, o) in zip(st.columns(3), out.items()):
            col.markdown(f"**{LABELS[k]}**")
            col.code(o.text or "∅", language=None)
            if gold is not None:
                col.caption(T("correct") if o.tokens == gold.target else T("differs"))
                if translators[k].has_alignment:
                    col.metric(T("aer"), f"{ev.sentence_aer(translators[k], gold):.2f}", help=T("aer_help"))

# 2. Alignment matrices: Bahdanau beside the Transformer's cross-attention ------------------------------------------
if out is not None:
    st.header(T("align_header"))
    st.markdown(T("align_intro"))
    with ui.friendly_errors():
        tfm = translators["transformer"]
        cross = out["transformer"].cross  # (L, H, T_out, T_in)
        c = st.columns(2)
        layer = c[0].selectbox(
            T("layer"), range(cross.shape[0]), index=tfm.align_layer or 0, format_func=lambda i: str(i + 1)
        )
        heads = [T("head_mean")] + [str(h + 1) for h in range(cross.shape[1])]
        head = c[1].selectbox(T("head"), range(len(heads)), format_func=heads.__getitem__)
        tfm_map = cross[layer].mean(axis=0) if head == 0 else cross[layer, head - 1]
        left, right = st.columns(2)
        for col, key, weights, title in (
            (left, "attention", out["attention"].alignment, T("bahdanau_title")),
            (right, "transformer", tfm_map, T("cross_title", layer=layer + 1, head=heads[head])),
        ):
            o = out[key]
            matches = gold is not None and o.tokens == gold.target
            fig = vs.alignment_figure(
                weights, o.source, o.tokens, gold=gold.alignment if matches else None, title=title, **AXES
            )
            with col:
                ui.show_figure(fig, f"s2s_align_{key}", weights)
                if gold is not None and not matches:
                    st.caption(T("gold_note"))
        st.caption(T("align_layer_note", layer=(tfm.align_layer or 0) + 1))
        st.subheader(T("mosaic_title"))
        st.markdown(T("mosaic_intro"))
        fig = vs.cross_mosaic(
            cross, layer_name=T("layer"), head_name=T("head"), x_title=T("mosaic_x"), y_title=T("mosaic_y")
        )
        ui.show_figure(fig, "s2s_cross_mosaic", cross)

    # 3. One decoder step ----------------------------------------------------------------------------------------
    st.header(T("step_header"))
    st.markdown(T("step_intro"))
    o = out["attention"]
    if not o.tokens:
        st.info(T("no_output"))
    else:
        with ui.friendly_errors():
            t = st.slider(T("step"), 1, len(o.tokens), 1) - 1 if len(o.tokens) > 1 else 0
            terms, context = ev.context_terms(o.alignment[t], o.annotations)
            fig = vs.context_figure(
                o.alignment[t],
                terms,
                context,
                o.source,
                title=T("step_title", t=t + 1, word=o.tokens[t]),
                weight_title=T("axis_weight"),
                dim_title=T("axis_dim"),
                source_title=T("axis_source"),
            )
            ui.show_figure(fig, "s2s_step", {"weights": o.alignment[t], "terms": terms, "context": context})

# 4. The bottleneck: quality by length -----------------------------------------------------------------------------
st.header(T("bottleneck_header"))
st.markdown(T("bottleneck_intro"))
shipped = {k: t.results for k, t in translators.items() if t.results}
per_bucket = st.slider(T("rerun_size"), 2, 50, 10, help=T("rerun_help"))
if st.button(T("rerun")):
    with ui.friendly_errors():
        bar = st.progress(0.0)
        buckets, scores = ev.eval_set(per_bucket), {}
        for i, (k, t) in enumerate(translators.items()):
            bar.progress(i / len(translators), text=T("running", model=LABELS[k]))
            scores[k] = ev.evaluate(
                t,
                buckets,
                progress=lambda f, i=i, k=k: bar.progress(
                    (i + f) / len(translators), text=T("running", model=LABELS[k])
                ),
            )
        bar.empty()
        st.session_state["s2s_eval"] = scores
results = st.session_state.get("s2s_eval") or shipped
if not results:
    st.info(T("no_results"))
else:
    n = next(iter(results.values()))["n"][0]
    st.caption(T("rerun_done", n=n) if "s2s_eval" in st.session_state else T("shipped", n=n))
    cols = st.columns(2)
    for i, (metric, key, percent) in enumerate(
        (
            ("token_accuracy", "token_accuracy", True),
            ("exact_match", "exact_match", True),
            ("bleu", "bleu", False),
            ("aer", "aer_curve", True),
        )
    ):
        fig = vs.bucket_curves(
            results,
            metric,
            labels=LABELS,
            title=T(key),
            percent=percent,
            floor_label=T("aer_floor"),
            x_title=T("axis_length"),
        )
        with cols[i % 2]:
            data = {k: np.array(r[metric], dtype=float) for k, r in results.items() if r.get(metric) is not None}
            ui.show_figure(fig, f"s2s_{metric}", data)
