"""Vision Transformer (lecture §7): patches, positions and per-head attention on generated or uploaded images."""

import numpy as np
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.views import vision_transformer as view

T = ui.texts("vision_transformer")
LANG = ui.lang()


@st.cache_data(max_entries=16, show_spinner=False)
def classified(name: str, pixels: np.ndarray):
    """The model's prediction and trace, once per image: a rerun that changes nothing recomputes nothing."""
    return ui.cached_model(name).classify(pixels)


st.title(ui.page_title("vision_transformer"))
st.markdown(T("intro"))

# 0. Model ----------------------------------------------------------------------------------------------------
names = models.available_models("image")
if not names:
    st.error(T("no_model"))
    st.stop()
name = st.selectbox(T("model"), names, format_func=ui.model_description)
if all(models.REGISTRY[n].bundled for n in names):  # no pretrained classifier in the local cache
    st.caption(T("timm_missing", download=view.TIMM_DOWNLOAD))
try:
    clf = ui.cached_model(name)
except models.BundleError as exc:
    st.error(str(exc))
    st.stop()
cfg = clf.model.cfg
st.caption(view.facts(clf, lang=LANG))

# 1. Input and preprocessing ----------------------------------------------------------------------------------
st.header(T("input_header"))
source = st.radio(T("source"), ["sample", "upload"], format_func=lambda s: T(f"source_{s}"), horizontal=True)
label, seed = 0, 7  # the sample shown until a file is uploaded
if source == "sample":
    c = st.columns(2)
    label = c[0].selectbox(
        T("sample_class"), range(len(view.CLASSES)), format_func=lambda i: T(f"class_{view.CLASSES[i]}")
    )
    seed = c[1].number_input(ui.texts("common")("seed"), 0, 1_000_000, seed)
picture, mask = view.sample(clf, label, seed)
notes = ()
if source == "upload":
    upload = st.file_uploader(T("upload"), type=view.UPLOAD_TYPES, help=T("upload_help"))
    if upload is None:
        st.info(T("upload_hint"))
    else:
        picture = None
        with ui.friendly_errors():
            loaded = view.load_image(upload.getvalue())
            picture, notes, mask = loaded.image, loaded.notes, None
            w, h = loaded.original_size
            st.caption(T("loaded", format=loaded.format, mode=loaded.original_mode, w=w, h=h))
        if picture is None:
            st.stop()
picture, pixels = view.model_input(clf, picture)
c = st.columns([1, 1, 2])
c[0].image(picture, caption=T("original", w=picture.width, h=picture.height), width=220)
c[1].image(pixels, caption=T("model_input", size=cfg.image_size), width=220)
with c[2]:
    st.markdown(T("preprocess"))
    st.latex(rf"\tilde{{x}} = \frac{{x/255 - \mu}}{{\sigma}},\quad \mu={list(clf.mean)},\ \sigma={list(clf.std)}")
    for note in notes:
        st.markdown(f"- {note}")

# 2. Patchify ---------------------------------------------------------------------------------------------------
ui.section(T, "patch", view.LATEX["patch"])
g = cfg.grid
c = st.columns(2)
row = c[0].slider(T("patch_row"), 0, g - 1, g // 2)
col = c[1].slider(T("patch_col"), 0, g - 1, g // 2)
with ui.friendly_errors():
    for box, side in zip(st.columns(2), view.patches(clf, picture, row, col, name, lang=LANG)):
        with box:
            st.subheader(side.title)
            st.markdown(side.numbers)
            ui.show(side.grid, side.values, side.projection)
            st.caption(side.conv_linear)

# 3. Attention --------------------------------------------------------------------------------------------------
ui.section(T, "attn")
with ui.friendly_errors():
    result = classified(name, pixels)
    c = st.columns([2, 1])
    query = c[0].radio(
        T("query"), view.queries(clf), horizontal=True, format_func=lambda q: T(f"query_{q}", patch=f"r{row}c{col}")
    )
    layer = c[1].slider(T("layer"), 1, cfg.num_layers, cfg.num_layers)
    att = view.attention(clf, result, pixels, query, row * g + col, layer, mask, lang=LANG)
    ui.show(att.overlays)
    c = st.columns([3, 2])
    with c[0]:
        ui.show(att.mosaic)
    with c[1]:
        ui.show(att.prediction)
    ui.section(T, "rollout", view.LATEX["rollout"], level="subheader")
    ui.show(att.rollout)
    if att.shares:
        ui.metrics(att.shares)
    if report := view.measured(name, lang=LANG):
        st.markdown(report)

# 4. Pooling: N×D → 1×D → C -------------------------------------------------------------------------------------
ui.section(T, "pool", view.LATEX["pool"])
with ui.friendly_errors():
    pooled = view.pooling(clf, pixels, lang=LANG)
    st.latex(pooled.formula)
    st.markdown(pooled.reading)

# 5. Positions --------------------------------------------------------------------------------------------------
ui.section(T, "pos")
with ui.friendly_errors():
    own, sincos = view.positions(clf, lang=LANG)
    c = st.columns(2)
    with c[0]:
        if own is None:
            st.info(T("pos_none"))
        ui.show(own)
    with c[1]:
        ui.show(sincos)

# 6. Shuffling patches ------------------------------------------------------------------------------------------
ui.section(T, "shuffle")
shuffle_seed = st.number_input(T("shuffle_seed"), 0, 1_000_000, 0)
with ui.friendly_errors():
    shuf = view.shuffle(clf, pixels, result, shuffle_seed, lang=LANG)
    c = st.columns([1, 3])
    c[0].image(shuf.image, caption=T("shuffled_caption"), width=200)
    with c[1]:
        ui.show(shuf.chart)
    ui.metrics(shuf.changes)
    st.markdown(T("shuffle_reading"))
