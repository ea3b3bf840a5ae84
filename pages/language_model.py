"""Language modelling and generation (lecture §6): embeddings, the causal mask, next-token prediction, sampling."""

import numpy as np
import streamlit as st

from tx_explorer import masks, textmodel, ui
from tx_explorer.analysis import lm
from tx_explorer.viz import charts
from tx_explorer.viz import heads as vh
from tx_explorer.viz.heatmap import heatmap

T = ui.texts("language_model")
AX = ui.axes()
METHODS = ("greedy", "temperature", "top_k")


@st.cache_data(max_entries=8, show_spinner=False)
def reading(name: str, text: str, k: int) -> lm.Reading:
    return lm.read(ui.cached_model(name), text, k)


@st.cache_data(max_entries=16, show_spinner=False)
def generation(
    name: str, prompt: str, new: int, method: str, temperature: float, top_k: int, seed: int
) -> lm.Generation:
    tm = ui.cached_model(name)
    ids = tm.encode(prompt, lm.MAX_TOKENS).ids
    return lm.generate(
        tm,
        ids,
        new,
        greedy=method == "greedy",
        temperature=temperature,
        top_k=top_k if method == "top_k" else None,
        seed=seed,
    )


st.title(T("title"))
st.markdown(T("intro"))
st.latex(
    r"p(x_{t+1}\mid x_1,\dots,x_t)=\mathrm{softmax}(h_t W_{\text{head}}),"
    r"\quad W_{\text{head}}\in\mathbb{R}^{D\times V},"
    r"\qquad \mathcal{L}=-\frac{1}{N-1}\sum_{t}\ln p(x_{t+1}\mid x_{\le t})"
)

names = textmodel.available_text_models(kind="causal")
if not names:
    st.error(T("no_models"))
    st.stop()
name = st.selectbox(T("model"), names, key="lm_model")
text = st.text_area(T("text"), T("default_text"), max_chars=20_000, key="lm_text", height=80)
if not text.strip():
    st.warning(T("empty"))
    st.stop()

with ui.friendly_errors():
    tm = ui.cached_model(name)
    if tm.info:
        st.caption(T("trained", loss=f"{tm.info['val_loss']:.2f}", bigram=f"{tm.info['bigram']['val_loss']:.2f}"))
    r = reading(name, text, 15)
    n = len(r.tokens)
    if r.truncated:
        st.warning(T("truncated", n=r.num_tokens, limit=n))
    st.code(" | ".join(r.tokens), language=None, wrap_lines=True)
    toks = vh.safe_labels(r.tokens)  # as Plotly text: a token such as <b> must not become markup
    labels = [f"{i}: {t}" for i, t in enumerate(r.tokens)]

    st.header(T("embed_header"))
    st.markdown(T("embed_intro", vocab=tm.config.vocab_size, dim=tm.config.dim))
    rows = [f"{t} (id {i})" for t, i in zip(toks, r.ids)]
    dims = [str(d) for d in range(r.embeddings.shape[1])]
    fig = charts.signed_heatmap(
        r.embeddings,
        rows,
        dims,
        title=T("embed_title", n=n, dim=tm.config.dim),
        x_title=T("dims"),
        y_title=T("tokens_axis"),
    )
    ui.show_figure(fig, "lm_embed", r.embeddings)

    st.header(T("mask_header"))
    st.markdown(T("mask_intro"))
    c = st.columns(2)
    with c[0]:
        mask = masks.causal(n).float().numpy()
        ui.show_figure(heatmap(mask, toks, toks, title=T("mask_title"), **AX), "lm_mask", mask)
    with c[1]:
        layer = st.selectbox(T("layer"), range(r.maps.shape[0]), key="lm_mask_layer")
        head = st.selectbox(T("head"), range(r.maps.shape[1]), key="lm_mask_head")
        fig = heatmap(r.maps[layer, head], toks, toks, title=T("weights_title", layer=layer, head=head), **AX)
        ui.show_figure(fig, "lm_weights", r.maps[layer, head])
    leak = lm.above_diagonal_max(r.maps)
    st.success(T("mask_check", value=f"{leak:.1e}", layers=r.maps.shape[0], heads=r.maps.shape[1]))

    st.header(T("next_header"))
    st.markdown(T("next_intro"))
    pos = st.slider(T("position"), 0, n - 1, n - 1, key="lm_pos") if n > 1 else 0
    actual = r.ids[pos + 1] if pos + 1 < n else None
    hit = [i for i, t in enumerate(r.top_ids[pos]) if t == actual]
    fig = vh.topk_bars(
        r.top_labels[pos],
        r.top_probs[pos],
        title=T("next_title", token=toks[pos], pos=pos),
        highlight=hit[0] if hit else None,
    )
    ui.show_figure(fig, "lm_next", r.top_probs[pos])
    if actual is not None:
        loss = r.losses[pos]
        st.caption(
            T("next_actual", token=ui.escape_markdown(r.tokens[pos + 1]), loss=f"{loss:.2f}", p=f"{np.exp(-loss):.3f}")
        )

    st.header(T("loss_header"))
    st.markdown(T("loss_intro"))
    if n > 1:
        mean = float(r.losses.mean())
        c = st.columns(2)
        c[0].metric(T("mean_loss"), f"{mean:.3f}")
        c[1].metric(T("perplexity"), f"{np.exp(mean):.1f}")
        fig = vh.labelled_bars(
            labels[1:], {T("loss"): r.losses}, title=T("loss_title"), x_title=T("predicted"), y_title=T("nats")
        )
        ui.show_figure(fig, "lm_loss", r.losses)
    else:
        st.info(T("loss_one_token"))

st.header(T("gen_header"))
st.markdown(T("gen_intro"))
c = st.columns(5)
method = c[0].radio(T("method"), METHODS, format_func=lambda m: T(f"method_{m}"), key="lm_method")
temperature = c[1].slider(T("temperature"), 0.1, 2.0, 0.8, 0.1, key="lm_temp", disabled=method == "greedy")
top_k = c[2].number_input(T("top_k"), 1, 200, 20, key="lm_topk", disabled=method != "top_k")
seed = c[3].number_input(ui.texts("common")("seed"), 0, 1_000_000, 0, key="lm_seed")
new = c[4].slider(T("new_tokens"), 1, 64, 24, key="lm_new")
with ui.friendly_errors():
    g = generation(name, text, new, method, float(temperature), int(top_k), int(seed))
    if g.prompt_cut:
        st.warning(T("prompt_cut", kept=g.prompt_len, limit=tm.max_len, new=new))
    st.markdown(T("gen_result"))
    shown = tm.decode(g.ids[: g.prompt_len]) + " ⟶ " + tm.decode(g.ids[g.prompt_len :])
    st.code(shown, language=None, wrap_lines=True)
    c = st.columns(3)
    step = c[0].slider(T("gen_step"), 1, new, 1, key="lm_step") if new > 1 else 1
    g_layer = c[1].selectbox(T("layer"), range(g.maps.shape[0]), key="lm_gen_layer")
    g_head = c[2].selectbox(
        T("head"),
        [None, *range(g.maps.shape[1])],
        key="lm_gen_head",
        format_func=lambda h: T("mean_heads") if h is None else str(h),
    )
    maps = g.maps[g_layer].mean(axis=0) if g_head is None else g.maps[g_layer, g_head]
    row = g.prompt_len + step - 2  # the position whose prediction produced generated token `step`
    gen_toks = vh.safe_labels(g.tokens)
    produced = gen_toks[row + 1]
    ctx = [f"{i}: {t}" for i, t in enumerate(g.tokens[: row + 1])]
    fig = vh.labelled_bars(
        ctx,
        {T("weight"): maps[row, : row + 1]},
        x_title=T("context"),
        y_title=T("weight"),
        title=T("gen_step_title", token=produced, step=step),
    )
    ui.show_figure(fig, "lm_gen_step", maps[row, : row + 1])
    rows_new = maps[g.prompt_len - 1 : -1]
    fig = heatmap(
        rows_new,
        [f"→ {t}" for t in gen_toks[g.prompt_len :]],
        gen_toks,
        title=T("gen_map_title"),
        x_title=T("context"),
        y_title=T("generated"),
    )
    ui.show_figure(fig, "lm_gen_map", rows_new)
