"""Vision Transformer (lecture §7): patches, positions and per-head attention on generated or uploaded images.
Sections are fragments (own widgets rerun them alone); patches, positions and shuffle open on demand."""

import numpy as np
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.views import vision_transformer as view

T, LANG = ui.texts("vision_transformer"), ui.lang()


@st.cache_data(max_entries=16, show_spinner=False)
def classified(name: str, pixels: np.ndarray):
    """The model's prediction and trace, once per image: a rerun that changes nothing recomputes nothing."""
    return ui.cached_model(name).classify(pixels)


@st.fragment  # 2. Patchify: one patch at the lecture's 224/16 and in the model
def patch_section(clf, picture, row: int, col: int, name: str) -> None:
    if box := ui.lazy_section(T, "patch", view.LATEX["patch"], key="vit_open_patch"):
        with box, ui.friendly_errors():
            for side_box, side in zip(st.columns(2), view.patches(clf, picture, row, col, name, lang=LANG)):
                with side_box:
                    st.subheader(side.title)
                    st.markdown(side.numbers)
                    ui.show(side.grid, side.values, side.projection)
                    st.caption(side.conv_linear)


@st.fragment
def attention_section(clf, name: str, pixels, mask, row: int, col: int) -> None:
    """3. Attention of one query, per head, every layer × head, and rollout."""
    ui.section(T, "attn")
    with ui.friendly_errors():
        result = classified(name, pixels)
        c = st.columns([2, 1])
        last, label = clf.model.cfg.num_layers - 1, lambda q: T(f"query_{q}", row=row, col=col)
        # keyed per model: their queries ([CLS] or not) and depths differ
        query = c[0].radio(T("query"), view.queries(clf), horizontal=True, format_func=label, key=f"vit_query_{name}")
        layer = c[1].slider(T("layer"), 0, last, last, key=f"vit_layer_{name}")
        att = view.attention(clf, result, pixels, query, row * clf.model.cfg.grid + col, layer, mask, lang=LANG)
        ui.show(att.overlays, width_px=ui.PAGE_PX)  # the page's width: its title wrapped at half of it
        c = st.columns([3, 2])
        with c[0]:
            ui.show(att.mosaic, width_px=ui.PAGE_PX * 3 / 5)
        with c[1]:
            ui.show(att.prediction, width_px=ui.PAGE_PX * 2 / 5)
        ui.section(T, "rollout", view.LATEX["rollout"], level="subheader")
        ui.show(att.rollout)
        if att.shares:
            ui.metrics(att.shares)
        if report := view.measured(name, lang=LANG):
            st.markdown(report)


@st.fragment  # 5. The model's position table against 2-D sin-cos
def positions_section(clf) -> None:
    if box := ui.lazy_section(T, "pos", key="vit_open_pos"):
        with box, ui.friendly_errors():
            own, sincos = view.positions(clf, lang=LANG)
            ui.row(own, sincos)
            st.markdown(view.position_reading(clf, lang=LANG))  # what the table learned, or that it has none


@st.fragment  # 6. The same patches in another order, with and without positions
def shuffle_section(clf, name: str, pixels) -> None:
    if box := ui.lazy_section(T, "shuffle", key="vit_open_shuffle"):
        with box:
            shuffle_seed = st.number_input(T("shuffle_seed"), 0, 1_000_000, 0, key="vit_shuffle_seed")
            with ui.friendly_errors():
                # held-out shapes shuffled and under a causal mask (§7.1, §7.2): seconds, once per server
                held = ui.once_per_server(lambda _: view.held_out(clf), label=T("causal_working"), key=("vit_ho", name))
                shuf = view.shuffle(clf, pixels, classified(name, pixels), shuffle_seed, held.shuffle, lang=LANG)
                c = st.columns([1, 3])
                c[0].image(shuf.image, caption=T("shuffled_caption"), width=200)
                with c[1]:
                    ui.show(shuf.chart, width_px=ui.PAGE_PX * 3 / 4)
                ui.metrics(shuf.changes)
                st.markdown(shuf.reading)
                st.markdown(view.causal_text(held.causal, clf, lang=LANG))


st.title(ui.page_title("vision_transformer"))
st.markdown(T("intro"))

names = models.available_models("image")
if not names:
    st.error(T("no_model"))
    st.stop()
name = st.selectbox(T("model"), names, format_func=ui.model_description, key="vit_model")
if (clf := ui.optional(lambda: ui.cached_model(name), models.BundleError, str)) is None:
    st.stop()
cfg = clf.model.cfg
st.caption(view.facts(clf, lang=LANG))
if known := view.knows(clf, lang=LANG):  # before any answer: the six shapes are all it can name
    st.info(known)

st.header(T("input_header"))
sources = {s: T(f"source_{s}") for s in ("sample", "upload")}
source = st.radio(T("source"), list(sources), format_func=sources.get, horizontal=True, key="vit_source")
label, seed = 0, 7  # the sample shown until a file is uploaded
if source == "sample":
    c = st.columns(2)
    kind = c[0].selectbox(T("sample_class"), view.CLASSES, format_func=lambda k: T(f"class_{k}"), key="vit_class")
    label = view.CLASSES.index(kind)
    seed = c[1].number_input(ui.texts("common")("seed"), 0, 1_000_000, seed, key="vit_seed")
picture, mask = view.sample(clf, label, seed)
notes = ()
if source == "upload":
    upload = ui.file_uploader(
        T("upload"), types=view.UPLOAD_TYPES, key="vit_up", help=T("upload_help", **view.UPLOAD_LIMITS)
    )
    if upload is None:
        st.info(T("upload_hint"))
    else:
        picture = None
        with ui.friendly_errors():
            loaded = view.load_image(upload.getvalue())
            picture, notes, mask = loaded.image, view.image_notes(loaded, lang=LANG), None
            st.caption(view.loaded_caption(loaded, lang=LANG))
        if picture is None:
            st.stop()
picture, pixels = view.model_input(clf, picture)
c = st.columns([1, 1, 2])
c[0].image(*view.preview(clf, picture, lang=LANG), width=view.PREVIEW_PX)  # the caption says its size
c[1].image(*view.received(clf, pixels, lang=LANG), width=view.PREVIEW_PX)  # the caption says its scale
with c[2]:
    st.markdown(view.preprocessing(clf, lang=LANG))
    st.latex(view.normalisation(clf))
    for note in notes:
        st.markdown(f"- {note}")
if source == "upload":  # an upload measured against held-out shapes before its answer is read
    ref = ui.once_per_server(lambda _: view.reference(clf), label=T("reference_working"), key=("vit_reference", name))
    if verdict := view.familiar(clf, ref, pixels, lang=LANG):  # None for a model of other classes
        (st.warning if verdict.warn else st.info)(verdict.text)
c = st.columns(2)  # the patch shown in section 2 and queried in section 3
row = c[0].slider(T("patch_row"), 0, cfg.grid - 1, cfg.grid // 2, key=f"vit_row_{name}")
col = c[1].slider(T("patch_col"), 0, cfg.grid - 1, cfg.grid // 2, key=f"vit_col_{name}")

patch_section(clf, picture, row, col, name)
attention_section(clf, name, pixels, mask, row, col)
ui.section(T, "pool", view.LATEX["pool"])  # 4. Pooling: N×D → 1×D → C
with ui.friendly_errors():
    pooled = view.pooling(clf, pixels, lang=LANG)
    st.latex(pooled.formula)
    st.markdown(pooled.reading)
positions_section(clf)
shuffle_section(clf, name, pixels)
