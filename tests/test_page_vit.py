"""The Vision Transformer page: loads clean, shows the lecture's numbers, follows its controls, speaks Chinese.

Uploads (a real one, and every kind of bad or unusual file) are rows of the table in tests/test_bad_input.py."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer import locales, models
from tx_explorer.analysis import vit_lab
from tx_explorer.bundle import WEIGHTS_DIR
from tx_explorer.views import vision_transformer as view

SECTIONS = ("vit_open_patch", "vit_open_pos", "vit_open_shuffle")  # open on demand (lazy expanders)
SECTION_ORDER = ("input", "patch", "attn", "pool", "pos", "shuffle")  # as pages/vision_transformer.py draws them


@pytest.fixture(scope="module")
def at():
    """The page with every section open."""
    page = open_page("vision_transformer")
    assert_clean(page)
    for key in SECTIONS:
        page.session_state[key] = True
    page.run()
    assert_clean(page)
    return page


def test_first_visit_computes_and_sends_the_attention_section_only():
    page = open_page("vision_transformer")
    assert_clean(page)
    titles = [s["layout"].get("title", {}).get("text", "") for s in plotly_specs(page)]
    assert len(titles) == 4 and "Layer" in titles[0]  # per-head overlays, layers × heads, prediction, rollout
    assert "<br>" not in titles[0]  # the overlays span the page: their title wrapped at half its width
    assert len(page.get("expander")) == 3 and not any(e.children for e in page.get("expander"))


def test_first_load_shows_charts_and_the_lecture_numbers(at):
    specs = plotly_specs(at)
    assert len(specs) >= 8
    text = " ".join(m.value for m in at.markdown)
    assert "196 tokens" in text and "768 values" in text
    # the per-head overlays: an image under a heatmap for every head, plus one for the mean of the heads
    overlay = next(s for s in specs if "Layer" in str(s["layout"].get("title", {}).get("text", "")))
    kinds = [t["type"] for t in overlay["data"]]
    assert kinds.count("heatmap") == kinds.count("image") >= 3


def test_choosing_a_patch_query_and_a_layer(at):
    query = next(r for r in at.radio if "chosen patch" in " ".join(map(str, r.options)))
    query.set_value("patch").run()
    assert_clean(at)
    at.slider[0].set_value(1).run()  # patch row
    assert_clean(at)


def test_chinese_text():
    at = open_page("vision_transformer")
    at.session_state["lang"] = "zh"  # what the sidebar switch writes (AppTest drops sidebar widgets after switch_page)
    at.run()
    assert_clean(at)
    assert any("图像被转换成 token 序列" in m.value for m in at.markdown)
    assert any(r.label == "查询（query）" for r in at.radio), [r.label for r in at.radio]  # not "Query"


def test_chinese_page_names_the_patch_in_words_and_says_what_the_model_receives():
    """The patch query reads 第 4 行第 4 列, not "r4c4"; the input panel is captioned with the contrast and its scale
    (it showed the framed picture while the text said the model sees a contrast image where the paper is 0)."""
    at = open_page("vision_transformer", lang="zh")
    assert_clean(at)
    options = [o for r in at.radio for o in r.options]
    assert "选中的 patch（第 4 行第 4 列）" in options and not any("r4c4" in o for o in options)
    captions = [i.proto.imgs[0].caption for i in at.get("image")]
    assert "模型接收的输入，64×64：与纸面的对比度，各通道 x̃ 从 0（黑：纸面）到 2（亮：最强对比）" in captions
    assert any(r"\frac{x - \mu}{\sigma}" in f.value for f in at.latex)  # the contrast is already in [0, 1]


def test_the_input_panel_and_the_patch_grid_draw_what_the_model_receives():
    """Both draw x̃ (the contrast, paper black) on the scale their caption states, so the chosen patch's values
    (about 0.05–0.15 on the paper) match what is drawn; before, both drew the cream framed picture."""
    clf = models.load_model("vit-shapes")
    picture = view.sample(clf, 0, 7)[0]
    _, pixels = view.model_input(clf, picture)
    shown, caption = view.received(clf, pixels)
    x = clf.to_tensor(pixels, framed=True)[0].cpu().numpy().transpose(1, 2, 0)  # what the model receives
    np.testing.assert_allclose(shown, x * np.array(clf.std) + np.array(clf.mean), atol=1e-6)
    assert np.median(shown[:2]) < 0.1 < 0.5 < np.median(pixels[:2]) / 255  # the paper: black here, cream before
    assert "from 0 (black: the paper) to 2 (bright: the strongest contrast)" in caption
    source = view.patches(clf, picture, 4, 4)[1].grid.figure.data[0].source
    drawn = np.asarray(Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))).convert("RGB"))
    np.testing.assert_array_equal(drawn, (shown * 255).round().astype(np.uint8))


def test_pooling_shows_n_by_d_to_one_by_d_to_c_for_the_chosen_model():
    """§7.3 live: [CLS] keeps row 0 of 65×96; the mean-pooling bundle averages its 64×96 patch rows."""
    at = open_page("vision_transformer")
    assert any(r"\mathbb{R}^{65\times 96}" in f.value and r"\mathbb{R}^{1\times 6}" in f.value for f in at.latex)
    assert any("only row 0 is kept → 1×96 → 6 scores" in m.value for m in at.markdown)
    picker = next(s for s in at.selectbox if s.label == "Model")  # the picker has no key: found by its label
    picker.set_value("vit-shapes-avg").run()
    assert_clean(at)
    assert any(r"\frac{1}{64}\sum_{i=1}^{64} H_i" in f.value for f in at.latex)
    assert any("the 64×96 patch outputs are averaged → 1×96 → 6 scores" in m.value for m in at.markdown)


@pytest.mark.parametrize("seed", [0, 3])
def test_the_shuffle_reading_says_what_its_chart_shows(seed):
    """The sentence under the jigsaw chart is computed from its bars: 'still a circle' only when the shuffled image's
    top class (with positions) is the original's, with both probabilities as drawn."""
    clf = models.load_model("vit-shapes")
    _, pixels = view.model_input(clf, view.sample(clf, 0, seed)[0])
    shuf = view.shuffle(clf, pixels, clf.classify(pixels), lang="en")
    before, after = shuf.chart.data[0], shuf.chart.data[1]  # original and shuffled, with positions
    first = int(before.argmax())
    kept = int(after.argmax()) == first
    assert ("is still a" in shuf.reading) == kept and ("no longer a" in shuf.reading) == (not kept)
    assert f"{before[first]:.2f}" in shuf.reading and f"{after[first]:.2f}" in shuf.reading


def test_the_page_says_what_its_models_know_before_any_answer_and_no_developer_command():
    at = open_page("vision_transformer")
    info = [i.value for i in at.info]
    assert any("six kinds of synthetic shape" in v and "circle, square, triangle, star, cross, ring" in v for v in info)
    shown = " ".join([*(m.value for m in at.markdown), *(c.value for c in at.caption), *info])
    assert "snapshot_download" not in shown  # the command to fetch a pretrained ViT is in the README


@pytest.fixture(scope="module")
def shapes_model():
    clf = models.load_model("vit-shapes")
    return clf, vit_lab.reference(clf, n=120, batch=60)


def _photo_like(size: int) -> np.ndarray:
    """A smooth colour texture: no paper, no ink, every pixel a half-tone (as in a photograph of a circuit board)."""
    low = np.random.default_rng(0).random((8, 8, 3))
    return np.asarray(Image.fromarray((np.kron(low, np.ones((8, 8, 1))) * 255).astype(np.uint8)).resize((size, size)))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_upload_far_from_the_shapes_is_flagged_and_a_shape_is_not(shapes_model, lang):
    clf, ref = shapes_model
    _, photo = view.model_input(clf, _photo_like(64))
    far = view.familiar(clf, ref, photo, lang=lang)
    assert far.warn and f"{vit_lab.familiarity(clf, ref, photo).half_tones:.0%}" in far.text
    _, shape = view.model_input(clf, view.sample(clf, 3, 7)[0])
    near = view.familiar(clf, ref, shape, lang=lang)
    assert not near.warn and str(ref.images) in near.text
    assert view.familiar(clf, None, photo) is None  # a model of other classes has no shapes to compare with


def test_the_shuffle_verdict_is_computed_from_held_out_shapes_with_its_spread(shapes_model):
    """Issue 40: 'positions help only a little' was said whenever the top class survived, its probability halving
    beside it. Now the image's ratio is given, and the verdict comes from held-out accuracy against its error."""
    clf, _ = shapes_model
    held = vit_lab.shuffle_held_out(clf, n=60, batch=30)
    _, pixels = view.model_input(clf, view.sample(clf, 3, 7)[0])
    reading = view.shuffle(clf, pixels, clf.classify(pixels), 0, held, lang="en").reading
    (a0, a1), se = held.accuracy, held.accuracy_se
    assert f"{a0:.1%} → {a1:.1%}" in reading and f"{se:.1%}" in reading
    assert ("Positions matter" in reading) == (a0 - a1 > 2 * se) != ("changes little" in reading)
    assert "only a little" not in reading


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_accuracy_names_its_sample_and_its_standard_error(shapes_model, lang):
    """The training record's 1,200 held-out images, the drawings, the causal-mask and the shuffle samples of 300 give
    different accuracies of one model: each sentence says which images, how many, and the standard error that
    explains why they differ; the drawings are said to be the easier task they are."""
    clf, _ = shapes_model
    record = json.loads((WEIGHTS_DIR / "vit-shapes" / "results.json").read_text())
    acc, n = record["held_out_accuracy"], record["held_out_images"]
    assert vit_lab.accuracy_se(acc, n) == pytest.approx((acc * (1 - acc) / n) ** 0.5)
    measured = view.measured("vit-shapes", lang=lang)
    se = {"en": "standard error", "zh": "标准误"}[lang]
    shown = f"{acc:.1%}（{se} " if lang == "zh" else f"{acc:.1%} ({se} "
    assert f"{n:,}" in measured and f"{shown}{vit_lab.accuracy_se(acc, n):.1%}" in measured, measured
    drawn, count = record["drawings_accuracy"], record["drawings_images"]
    assert f"{vit_lab.accuracy_se(drawn, count):.1%}" in measured and f"{count}" in measured
    assert drawn > acc and {"en": "an easier task", "zh": "更容易"}[lang] in measured
    held = vit_lab.shuffle_held_out(clf, n=60, batch=30)
    _, pixels = view.model_input(clf, view.sample(clf, 3, 7)[0])
    reading = view.shuffle(clf, pixels, clf.classify(pixels), 0, held, lang=lang).reading
    assert f"{vit_lab.accuracy_se(held.accuracy[0], 60):.1%}" in reading and "60" in reading
    causal = vit_lab.causal_mask(clf, n=60, batch=30)
    text = view.causal_text(causal, clf, lang=lang)
    assert f"{vit_lab.accuracy_se(causal.accuracy[0], 60):.1%}" in text and se in text


def test_a_picture_of_any_shape_is_previewed_in_one_square_and_a_tiny_centre_is_said():
    """A student's review: a 1 × 1000 upload, drawn 220 px wide, was 220,000 px tall and pushed every section away;
    its centre square, one pixel, reached the model as one colour without a word."""
    clf = models.load_model("vit-shapes")
    strip = Image.new("RGB", (1, 1000), (200, 30, 30))
    shown, caption = view.preview(clf, strip)
    assert shown.size == (view.PREVIEW_PX, view.PREVIEW_PX)
    middle = np.asarray(shown)[view.PREVIEW_PX // 2]  # the middle row: the strip's one column, and the box's fill
    assert {tuple(p) for p in middle} == {(200, 30, 30), (240, 240, 240)}
    size = clf.model.cfg.image_size
    assert caption.startswith("original, 1×1000") and f"1×1 pixels, is enlarged {size}× to the model's" in caption
    big, big_caption = view.preview(clf, Image.new("RGB", (400, 300)))
    assert big.size == (view.PREVIEW_PX, view.PREVIEW_PX) and big_caption == "original, 400×300"
    assert "放大" in view.preview(clf, strip, lang="zh")[1]


def test_what_the_loader_did_is_said_in_the_pages_language():
    """The upload's notes ("transparency composited over white") were English on the Chinese page too."""
    buffer = io.BytesIO()
    Image.new("RGBA", (40, 30), (10, 20, 30, 100)).save(buffer, format="PNG")
    loaded = view.load_image(buffer.getvalue())
    assert view.image_notes(loaded) == ["transparency composited over white"]
    assert view.image_notes(loaded, lang="zh") == ["透明部分已合成到白色背景上"]


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _around(value: float, below: int, n: int = 100) -> np.ndarray:
    """``n`` made-up held-out values, ``below`` of them just under ``value`` and the rest just over."""
    return np.concatenate([np.full(below, value - 0.01), np.full(n - below, value + 0.01)])


def _reference(f: vit_lab.Familiarity, top_below: int = 50) -> vit_lab.Reference:
    """Held-out shapes made up around a picture's measures (none classified): the verdict's bounds known."""
    return vit_lab.Reference(100, _around(f.top, top_below), _around(f.entropy, 50), _around(f.half_tones, 50))


@pytest.fixture(scope="module")
def avg_model():
    return models.load_model("vit-shapes-avg")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_picture_without_contrast_is_said_to_show_nothing(avg_model, lang):
    """A student's review: a solid red upload reached vit-shapes-avg as an all-black input, 26 % top probability and
    1.71 nats (max ln 6 = 1.79), and was called "within what these models know"."""
    _, pixels = view.model_input(avg_model, view.load_image(_png(Image.new("RGB", (3, 2), (255, 0, 0)))).image)
    f = vit_lab.familiarity(avg_model, _reference_of_one(), pixels)
    assert f.blank and f.contrast == 0.0 and f.half_tones == 0.0
    verdict = view.familiar(avg_model, _reference(f), pixels, lang=lang)  # its confidence that of a shape here
    assert verdict.warn and {"en": "**Nothing to see.**", "zh": "**没有可看的内容**"}[lang] in verdict.text
    assert {"en": "Within what", "zh": "范围之内"}[lang] not in verdict.text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_confidence_in_the_outer_tail_is_unusual_and_the_bounds_are_stated(avg_model, lang):
    """A picture less confident than 97 % of the held-out shapes is not called familiar: it is unusual (beyond their
    95 %, within their 99 %), and each measure's bounds are in the text with their numbers."""
    _, pixels = view.model_input(avg_model, view.sample(avg_model, 3, 7)[0])
    f = vit_lab.familiarity(avg_model, _reference_of_one(), pixels)
    ref = _reference(f, top_below=3)
    g = vit_lab.familiarity(avg_model, ref, pixels)
    assert g.below["top"] == 0.03 and g.beyond(vit_lab.USUAL) == ["top"] and not g.beyond(vit_lab.FAR)
    verdict = view.familiar(avg_model, ref, pixels, lang=lang)
    assert (
        verdict.warn and {"en": "**Unusual for these models**", "zh": "**对这些模型来说不寻常**"}[lang] in verdict.text
    )
    assert {"en": "shapes in top probability.", "zh": "：最高概率超出了 95% 的"}[lang] in verdict.text
    assert (
        f"{np.quantile(ref.top, 0.05):.0%}" in verdict.text and f"{np.quantile(ref.entropy, 0.99):.2f}" in verdict.text
    )
    assert not view.familiar(avg_model, _reference(f), pixels, lang=lang).warn  # in the middle of the shapes' range


def _reference_of_one() -> vit_lab.Reference:
    return vit_lab.Reference(1, np.ones(1), np.zeros(1), np.zeros(1))


@pytest.mark.parametrize("name", ["vit-shapes", "vit-shapes-avg"])
def test_the_causal_mask_sentence_orders_the_tokens_of_the_chosen_model(name):
    """vit-shapes-avg has no [CLS]: its sentence said "[CLS] first, then the patches row by row"."""
    clf = models.load_model(name)
    result = vit_lab.CausalMask(images=300, chance=1 / 6, accuracy=(0.9, 0.5), agree=0.6)
    has_cls = bool(clf.model.num_prefix)
    for lang, cls_first, rows in (("en", "[CLS] first", "row by row"), ("zh", "[CLS] 在前", "逐行排列")):
        text = view.causal_text(result, clf, lang=lang)
        assert (cls_first in text) == has_cls and rows in text
    assert "the model it never trained with" not in view.causal_text(result, clf)


MODE_WORDS = {  # PIL's code → what the page says, in English and Chinese
    "L": ("greyscale", "灰度"),
    "LA": ("greyscale with transparency", "带透明度的灰度"),
    "RGBA": ("RGB with transparency", "带透明度的 RGB 彩色"),
    "P": ("palette (a table of up to 256 colours)", "调色板（最多 256 种颜色的色表）"),
    "1": ("black and white (1 bit per pixel)", "黑白二值（每像素 1 位）"),
}


@pytest.mark.parametrize("mode", sorted(MODE_WORDS))
def test_colour_modes_are_named_in_words(mode):
    """PIL's codes ("mode L", "- L converted to RGB") meant nothing to a student."""
    loaded = view.load_image(_png(Image.new(mode, (8, 8))))
    en, zh = MODE_WORDS[mode]
    assert view.loaded_caption(loaded) == f"Read a PNG file: 8×8 pixels, mode {en}."
    assert view.loaded_caption(loaded, lang="zh") == f"读取到 PNG 文件：8×8 像素；颜色模式：{zh}。"
    if mode in ("L", "1"):  # converted without a note of its own
        assert view.image_notes(loaded) == [f"{en} converted to RGB"]
        assert view.image_notes(loaded, lang="zh") == [f"{zh}已转换为 RGB"]
    assert view.loaded_caption(view.load_image(_png(Image.new("I;16", (8, 8))))).endswith("mode 16-bit greyscale.")


def test_the_sections_are_numbered_in_page_order_in_both_languages():
    """Pooling sat unnumbered between 3 and "4 · Position embeddings"."""
    for lang in ("en", "zh"):
        headers = [locales.text("vision_transformer", f"{s}_header", lang) for s in SECTION_ORDER]
        assert [h.split(" · ")[0] for h in headers] == [str(i) for i in range(1, len(headers) + 1)], headers
