"""Multi-head attention (lecture §4.1–4.3, §9.2): every layer and head of a real model, compared and inspected."""

import numpy as np
import streamlit as st

from tx_explorer import textmodel, ui
from tx_explorer.analysis import heads
from tx_explorer.viz import charts
from tx_explorer.viz import heads as vh

T = ui.texts("multihead")
AX = ui.axes()
SMALL = {**AX, "max_side": 256}  # maps shown side by side: half the detail view's resolution
EXAMPLES = ("example_code", "example_prose", "example_long")
VIEWS = ("grid", "head", "compare", "qk")


# Maps are L·H·N² floats (75 MB for MiniLM at 512 tokens): cache_resource shares them without the copy that
# cache_data makes on every hit, so they are frozen read-only.
@st.cache_resource(max_entries=6, show_spinner=False)
def analysed(name: str, text: str) -> heads.TextAttention:
    data = heads.analyse(ui.cached_model(name), text)
    data.maps.flags.writeable = False
    return data


@st.cache_resource(max_entries=6, show_spinner=False)
def lenses(name: str, text: str) -> tuple[np.ndarray, np.ndarray]:
    maps = analysed(name, text).maps
    out = heads.norm_weighted_maps(ui.cached_model(name), text, maps), heads.rollout_maps(maps)
    for arr in out:
        arr.flags.writeable = False
    return out


@st.cache_data(max_entries=8, show_spinner=False)
def metrics(name: str, text: str) -> dict[str, np.ndarray]:
    return heads.head_metrics(analysed(name, text).maps)


@st.cache_data(max_entries=8, show_spinner=False)
def similarity(name: str, text: str) -> np.ndarray:
    return heads.head_similarity(analysed(name, text).maps)


st.title(T("title"))
st.markdown(T("intro"))
st.latex(
    r"\mathrm{MultiHead}(X)=\mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_H)\,W_O,\quad "
    r"\mathrm{head}_h=\mathrm{softmax}\!\left(\frac{XW_Q^h\,(XW_K^h)^\top}{\sqrt{D_H}}\right)XW_V^h"
)

names = textmodel.available_text_models()
if not names:
    st.error(T("no_models"))
    st.stop()
c = st.columns([2, 2, 1])
name = c[0].selectbox(T("model"), names, key="mh_model", help=T("model_help"))
example = c[1].selectbox(T("example"), EXAMPLES, format_func=T, key="mh_example")
hide_special = c[2].toggle(T("hide_special"), value=False, key="mh_hide", help=T("hide_special_help"))
text = st.text_area(T("text"), T(f"{example}_text"), max_chars=20_000, key=f"mh_text_{example}", height=90)

if not text.strip():
    st.warning(T("empty"))
    st.stop()

with ui.friendly_errors():
    tm = ui.cached_model(name)
    st.caption(
        T(
            "model_caption",
            kind=T(f"kind_{tm.kind}"),
            layers=len(tm.model.blocks),
            heads=tm.config.num_heads,
            dim=tm.config.dim,
            context=tm.max_len,
        )
    )
    data = analysed(name, text)
    if data.truncated:
        st.warning(T("truncated", n=data.num_tokens, limit=len(data.tokens)))
    st.markdown(T("tokens", n=len(data.tokens)))
    st.code(" | ".join(data.tokens), language=None, wrap_lines=True)
    keep = [not s for s in data.special] if hide_special and any(data.special) else [True] * len(data.tokens)
    if hide_special and not any(data.special):
        st.caption(T("no_special"))
    shown = heads.keep_tokens(data.maps, keep)
    labels = [t for t, k in zip(data.tokens, keep) if k]
    num_layers, num_heads = data.maps.shape[:2]
    head_names = heads.head_labels(num_layers, num_heads)

    # One view at a time: tabs would build (and send) every view's figures on each rerun.
    view = st.segmented_control(
        T("view"), VIEWS, default="grid", required=True, format_func=lambda v: T(f"tab_{v}"), key="mh_view"
    )

    if view == "grid":
        st.markdown(T("grid_intro"))
        fig = vh.head_grid(shown, title=T("grid_title", layers=num_layers, heads=num_heads))
        ui.show_figure(fig, "mh_grid", shown)

    elif view == "head":
        c = st.columns(3)
        layer = c[0].selectbox(T("layer"), range(num_layers), index=num_layers - 1, key="mh_layer")
        head = c[1].selectbox(T("head"), range(num_heads), key="mh_head")
        lens = c[2].radio(
            T("lens"), ("raw", "norm", "rollout"), format_func=lambda k: T(f"lens_{k}"), key="mh_lens", horizontal=True
        )
        st.markdown(T(f"lens_{lens}_help"))
        if lens == "raw":
            view = shown[layer, head]
        else:
            norm_maps, roll = lenses(name, text)
            view = heads.keep_tokens(norm_maps[layer, head] if lens == "norm" else roll[layer], keep)
        title = T(f"lens_{lens}_title", layer=layer, head=head)
        ui.show_figure(vh.attention_map(view, labels, labels, title=title, **AX), "mh_detail", view)
        focus = st.selectbox(
            T("focus"),
            [None, *range(len(labels))],
            key="mh_focus",
            format_func=lambda i: T("focus_all") if i is None else f"{i}: {labels[i]}",
        )
        st.markdown(T("lines_intro"))
        fig = vh.attention_lines(view, labels, title=T("lines_title"), focus=focus)
        ui.show_figure(fig, "mh_lines", view)

    elif view == "compare":
        st.subheader(T("metrics_header"))
        st.markdown(T("metrics_intro"))
        per_head = metrics(name, text)
        metric = st.radio(
            T("metric"), heads.METRICS, format_func=lambda m: T(f"metric_{m}"), horizontal=True, key="mh_metric"
        )
        fig = vh.metric_bars(
            per_head[metric], title=T(f"metric_{metric}"), x_title=T("head"), y_title=T(f"metric_{metric}_unit")
        )
        ui.show_figure(fig, "mh_metric", per_head[metric])

        st.subheader(T("similarity_header"))
        st.markdown(T("similarity_intro"))
        dist = similarity(name, text)
        ui.show_figure(vh.similarity_matrix(dist, head_names, title=T("similarity_title")), "mh_similarity", dist)

        st.subheader(T("pair_header"))
        c = st.columns(2)
        a = c[0].selectbox(T("head_a"), range(len(head_names)), format_func=head_names.__getitem__, key="mh_a")
        b = c[1].selectbox(
            T("head_b"),
            range(len(head_names)),
            index=min(1, len(head_names) - 1),
            format_func=head_names.__getitem__,
            key="mh_b",
        )
        flat = shown.reshape(-1, *shown.shape[-2:])
        c = st.columns(3)
        with c[0]:
            ui.show_figure(
                vh.attention_map(flat[a], labels, labels, title=head_names[a], **SMALL), "mh_pair_a", flat[a]
            )
        with c[1]:
            ui.show_figure(
                vh.attention_map(flat[b], labels, labels, title=head_names[b], **SMALL), "mh_pair_b", flat[b]
            )
        with c[2]:
            diff = flat[a] - flat[b]
            title = T("difference", a=head_names[a], b=head_names[b])
            fig = vh.attention_map(diff, labels, labels, title=title, signed=True, **SMALL)
            ui.show_figure(fig, "mh_pair_diff", diff)

        st.subheader(T("two_sentences_header"))
        st.markdown(T("two_sentences_intro"))
        other = st.text_input(T("other_text"), T("other_default"), max_chars=20_000, key="mh_other")
        c = st.columns(2)
        pick = c[0].selectbox(T("same_head"), range(len(head_names)), format_func=head_names.__getitem__, key="mh_same")
        if other.strip():
            second = analysed(name, other)
            if second.truncated:
                st.warning(T("truncated", n=second.num_tokens, limit=len(second.tokens)))
            keep2 = [not s for s in second.special] if hide_special else [True] * len(second.tokens)
            labels2 = [t for t, k in zip(second.tokens, keep2) if k]
            map2 = heads.keep_tokens(second.maps, keep2).reshape(-1, len(labels2), len(labels2))[pick]
            c = st.columns(2)
            with c[0]:
                fig = vh.attention_map(flat[pick], labels, labels, title=T("sentence_1"), **SMALL)
                ui.show_figure(fig, "mh_same_1", flat[pick])
            with c[1]:
                fig = vh.attention_map(map2, labels2, labels2, title=T("sentence_2"), **SMALL)
                ui.show_figure(fig, "mh_same_2", map2)
        else:
            st.info(T("other_empty"))

    else:  # the query/key inspector
        st.markdown(T("qk_intro"))
        st.latex(
            r"e_{ij}=\frac{q_i\cdot k_j}{\sqrt{D_H}},\qquad \alpha_{ij}=\frac{e^{e_{ij}}}{\sum_{j'}e^{e_{ij'}}},"
            r"\qquad y_i=\sum_j \alpha_{ij}\,v_j"
        )
        c = st.columns(3)
        q_layer = c[0].selectbox(T("layer"), range(num_layers), key="qk_layer")
        q_head = c[1].selectbox(T("head"), range(num_heads), key="qk_head")
        query = c[2].selectbox(
            T("query"),
            range(len(data.tokens)),
            index=len(data.tokens) - 1,
            key="qk_query",
            format_func=lambda i: f"{i}: {data.tokens[i]}",
        )
        qk = heads.inspect_text(tm, text, q_layer, q_head, query)
        st.table({T("step"): [s for s, _ in qk.shapes], T("shape"): [d for _, d in qk.shapes]})
        keys = [f"{j}: {t}" for j, t in enumerate(data.tokens)]
        safe_keys = vh.safe_labels(keys)
        dims = [f"d{i}" for i in range(len(qk.q))]
        scores = np.where(np.isfinite(qk.scores), qk.scores, np.nan)
        c = st.columns(2)
        with c[0]:
            title = T("scores_title", token=vh.safe_labels(data.tokens)[query])
            fig = vh.labelled_bars(keys, {T("scores"): scores}, title=title, x_title=T("key"))
            ui.show_figure(fig, "qk_scores", qk.scores)
        with c[1]:
            fig = vh.labelled_bars(keys, {T("weights"): qk.weights}, title=T("weights_title"), x_title=T("key"))
            ui.show_figure(fig, "qk_weights", qk.weights)
        c = st.columns(2)
        with c[0]:
            fig = charts.signed_heatmap(
                np.vstack([qk.q, qk.out]),
                [T("q_row"), T("y_row")],
                dims,
                title=T("q_title"),
                x_title=T("dims"),
                y_title="",
                height=260,
            )
            ui.show_figure(fig, "qk_q", np.vstack([qk.q, qk.out]))
            fig = charts.signed_heatmap(qk.k, safe_keys, dims, title=T("k_title"), x_title=T("dims"), y_title=T("key"))
            ui.show_figure(fig, "qk_k", qk.k)
        with c[1]:
            fig = charts.signed_heatmap(qk.v, safe_keys, dims, title=T("v_title"), x_title=T("dims"), y_title=T("key"))
            ui.show_figure(fig, "qk_v", qk.v)
            fig = charts.signed_heatmap(
                qk.weighted, safe_keys, dims, title=T("weighted_title"), x_title=T("dims"), y_title=T("key")
            )
            ui.show_figure(fig, "qk_weighted", qk.weighted)
