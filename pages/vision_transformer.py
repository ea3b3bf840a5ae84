"""Vision Transformer (lecture §7): patches, positions and per-head attention on generated or uploaded images."""

import numpy as np
import streamlit as st

from tx_explorer import models, ui
from tx_explorer.analysis import vit_views
from tx_explorer.data import images, shapes
from tx_explorer.interop import timm_vit
from tx_explorer.modules.vit import sincos_2d_table
from tx_explorer.viz import vit as vitviz

T = ui.texts("vision_transformer")
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]


@st.cache_data(max_entries=16, show_spinner=False)
def classified(name: str, pixels: np.ndarray):
    """The model's prediction and trace, once per image: a rerun that changes nothing recomputes nothing."""
    return ui.cached_model(name).classify(pixels)


st.title(T("title"))
st.markdown(T("intro"))

# 0. Model ----------------------------------------------------------------------------------------------------
names = [n for n in ("vit-shapes", "vit-timm") if n in models.available_models()]
if not names:
    st.error(T("no_model"))
    st.stop()
name = st.selectbox(T("model"), names, format_func=lambda n: models.REGISTRY[n].description)
if "vit-timm" not in names:
    st.caption(T("timm_missing", download=timm_vit.DOWNLOAD))
try:
    clf = ui.cached_model(name)
except models.BundleError as exc:
    st.error(str(exc))
    st.stop()
cfg = clf.model.cfg
st.caption(
    T(
        "model_facts",
        size=cfg.image_size,
        patch=cfg.patch_size,
        n=cfg.num_patches,
        dim=cfg.dim,
        layers=cfg.num_layers,
        heads=cfg.num_heads,
        pool=T(f"pool_{cfg.pool}"),
        positions=cfg.positions,
    )
)

# 1. Input and preprocessing ----------------------------------------------------------------------------------
st.header(T("input_header"))
source = st.radio(T("source"), ["sample", "upload"], format_func=lambda s: T(f"source_{s}"), horizontal=True)
label, seed = 0, 7  # the sample shown until a file is uploaded
if source == "sample":
    c = st.columns(2)
    label = c[0].selectbox(T("sample_class"), range(len(shapes.CLASSES)), format_func=lambda i: shapes.CLASSES[i])
    seed = c[1].number_input(ui.texts("common")("seed"), 0, 1_000_000, seed)
sample = shapes.sample(int(seed), size=cfg.image_size, label=label)
picture, notes, mask = images.to_image(sample.image), (), sample.mask
if source == "upload":
    upload = st.file_uploader(T("upload"), type=UPLOAD_TYPES, help=T("upload_help"))
    if upload is None:
        st.info(T("upload_hint"))
    else:
        picture = None
        with ui.friendly_errors():
            loaded = images.load_image(upload.getvalue())
            picture, notes, mask = loaded.image, loaded.notes, None
            st.caption(
                T(
                    "loaded",
                    format=loaded.format,
                    mode=loaded.original_mode,
                    w=loaded.original_size[0],
                    h=loaded.original_size[1],
                )
            )
        if picture is None:
            st.stop()
pixels = images.to_array(images.center_square(picture, cfg.image_size))
c = st.columns([1, 1, 2])
c[0].image(images.to_array(picture), caption=T("original", w=picture.width, h=picture.height), width=220)
c[1].image(pixels, caption=T("model_input", size=cfg.image_size), width=220)
with c[2]:
    st.markdown(T("preprocess"))
    st.latex(r"\tilde{x} = \frac{x/255 - \mu}{\sigma},\quad \mu=%s,\ \sigma=%s" % (list(clf.mean), list(clf.std)))
    for note in notes:
        st.markdown(f"- {note}")

# 2. Patchify ---------------------------------------------------------------------------------------------------
st.header(T("patch_header"))
st.markdown(T("patch_intro"))
st.latex(
    r"x_p\in\mathbb{R}^{P\cdot P\cdot 3},\qquad z_p = W\,x_p + b = \mathrm{Conv2d}_{k=s=P}(x)_p,"
    r"\qquad W\in\mathbb{R}^{D\times P^2\cdot 3}"
)
g = cfg.grid
c = st.columns(2)
row = c[0].slider(T("patch_row"), 0, g - 1, g // 2)
col = c[1].slider(T("patch_col"), 0, g - 1, g // 2)
index = row * g + col
lecture_grid = vit_views.LECTURE_SIZE // vit_views.LECTURE_PATCH  # 14
lecture_index = (row * lecture_grid // g) * lecture_grid + col * lecture_grid // g  # the same place in the 14×14 grid
with ui.friendly_errors():
    big = images.to_array(images.center_square(picture, vit_views.LECTURE_SIZE))
    lecture = vit_views.patch_view(big, vit_views.lecture_embed(), lecture_index)
    own = vit_views.patch_view(pixels, clf.model.patch_embed, index, normalise=clf)
    left, right = st.columns(2)
    for box, view, image, patch, key, title, weights in (
        (left, lecture, big, vit_views.LECTURE_PATCH, "lecture", T("lecture_title"), T("random_weights")),
        (right, own, pixels, cfg.patch_size, "model", T("own_title", name=name), T("trained_weights")),
    ):
        with box:
            st.subheader(title)
            n_tok, width = view.patches.shape
            st.markdown(
                T(
                    "patch_numbers",
                    size=image.shape[0],
                    patch=patch,
                    grid=image.shape[0] // patch,
                    n=n_tok,
                    width=width,
                    dim=view.conv.size,
                )
            )
            pick = lecture_index if key == "lecture" else index
            ui.show_figure(vitviz.image_with_grid(image, patch, highlight=pick, height=340), f"vit_grid_{key}")
            ui.show_figure(
                vitviz.patch_values(view.values, title=T("values_title", n=width)), f"vit_values_{key}", view.values
            )
            ui.show_figure(
                vitviz.vector_bars(view.conv, title=T("projection_title", dim=view.conv.size, weights=weights)),
                f"vit_proj_{key}",
                view.conv,
            )
            st.caption(T("conv_linear", diff=f"{view.max_difference:.1e}"))

# 3. Attention --------------------------------------------------------------------------------------------------
st.header(T("attn_header"))
st.markdown(T("attn_intro"))
with ui.friendly_errors():
    result = classified(name, pixels)
    prefix = clf.model.num_prefix
    queries = (["cls"] if prefix else []) + ["mean", "patch"]
    c = st.columns([2, 1])
    query_kind = c[0].radio(
        T("query"), queries, horizontal=True, format_func=lambda q: T(f"query_{q}", patch=f"r{row}c{col}")
    )
    layer = c[1].slider(T("layer"), 1, cfg.num_layers, cfg.num_layers)
    query = {"cls": 0, "mean": "mean", "patch": prefix + index}[query_kind]
    maps = vit_views.query_maps(result.trace, query, num_prefix=prefix, grid=g)  # (L, H, g, g)
    shown = np.concatenate([maps[layer - 1], maps[layer - 1].mean(axis=0, keepdims=True)])
    panel_names = [T("head", h=h + 1) for h in range(cfg.num_heads)] + [T("head_mean")]
    hl = index if query_kind == "patch" else None
    fig = vitviz.attention_overlays(pixels, shown, panel_names, title=T("overlay_title", layer=layer), highlight=hl)
    ui.show_figure(fig, "vit_overlays", shown)
    c = st.columns([3, 2])
    with c[0]:
        fig = vitviz.layer_head_maps(
            maps,
            [T("layer_n", l=i + 1) for i in range(cfg.num_layers)],
            [T("head", h=h + 1) for h in range(cfg.num_heads)],
            title=T("mosaic_title"),
        )
        ui.show_figure(fig, "vit_mosaic", maps)
    with c[1]:
        fig = vitviz.prediction_bars(result.labels, result.probs, title=T("prediction_title"))
        ui.show_figure(fig, "vit_prediction", result.probs)

    st.subheader(T("rollout_header"))
    st.markdown(T("rollout_intro"))
    st.latex(
        r"\tilde A = A_L\cdots A_1,\qquad A_l = \mathrm{rownorm}\!\left(\tfrac12\,\overline{W}_l + \tfrac12\,I\right)"
    )
    rolled = vit_views.rollout_map(result.trace, query, num_prefix=prefix, grid=g)
    pair = np.stack([maps[-1].mean(axis=0), rolled])
    fig = vitviz.attention_overlays(
        pixels, pair, [T("last_layer_mean"), T("rollout")], title=T("rollout_title"), highlight=hl
    )
    ui.show_figure(fig, "vit_rollout", pair)
    if mask is not None and query_kind == "cls":
        area, shares = vit_views.object_shares(pair, mask, cfg.patch_size)
        c = st.columns(3)
        c[0].metric(T("area_share"), f"{area:.1%}")
        c[1].metric(T("cls_share"), f"{shares[0]:.1%}")
        c[2].metric(T("rollout_share"), f"{shares[1]:.1%}")
    report = vit_views.bundle_results(name)
    if report:
        st.markdown(T("measured", **report))

# 4. Positions --------------------------------------------------------------------------------------------------
st.header(T("pos_header"))
st.markdown(T("pos_intro"))
with ui.friendly_errors():
    pos = vit_views.patch_positions(clf)
    c = st.columns(2)
    with c[0]:
        if pos is None:
            st.info(T("pos_none"))
        else:
            sim = vit_views.position_similarity(pos, g)
            fig = vitviz.similarity_maps(sim, title=T("pos_own", kind=cfg.positions))
            ui.show_figure(fig, "vit_pos_own", sim.reshape(g * g, -1))
    with c[1]:
        ref = vit_views.position_similarity(sincos_2d_table(g, 4 * max(1, cfg.dim // 4)), g)
        ui.show_figure(vitviz.similarity_maps(ref, title=T("pos_sincos")), "vit_pos_sincos", ref.reshape(g * g, -1))

# 5. Shuffling patches ------------------------------------------------------------------------------------------
st.header(T("shuffle_header"))
st.markdown(T("shuffle_intro"))
shuffle_seed = st.number_input(T("shuffle_seed"), 0, 1_000_000, 0)
with ui.friendly_errors():
    shuf = vit_views.shuffle_experiment(clf, pixels, int(shuffle_seed))
    c = st.columns([1, 3])
    c[0].image(shuf.shuffled, caption=T("shuffled_caption"), width=200)
    top = np.argsort(-result.probs)[:8]
    series = {T(f"cond_{i}"): p[top] for i, p in enumerate(shuf.probs.values())}
    with c[1]:
        fig = vitviz.condition_bars(
            [result.labels[i] for i in top], series, title=T("shuffle_title"), y_title=T("probability")
        )
        ui.show_figure(fig, "vit_shuffle", np.stack(list(shuf.probs.values())))
    c = st.columns(2)
    c[0].metric(T("change_with"), f"{shuf.logit_change['with']:.3g}")
    c[1].metric(T("change_without"), f"{shuf.logit_change['without']:.1e}")
    st.markdown(T("shuffle_reading"))
