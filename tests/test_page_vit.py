"""The Vision Transformer page: loads clean, takes a real upload, and turns a corrupt upload into a message."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer.data import shapes


@pytest.fixture(scope="module")
def at():
    page = open_page("vision_transformer")
    assert_clean(page)
    return page


def _png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "PNG")
    return buf.getvalue()


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


def _switch_to_upload(at):
    source = next(r for r in at.radio if "Upload your own" in r.options)
    source.set_value("upload").run()
    assert_clean(at)
    return at.file_uploader[0]


def test_an_actual_upload_is_classified():
    at = open_page("vision_transformer")
    uploader = _switch_to_upload(at)
    star = shapes.sample(99, label=shapes.CLASSES.index("star"), size=96)
    uploader.set_value(("star.png", _png(star.image), "image/png")).run()
    assert_clean(at)
    assert any("Read a PNG file: 96×96" in c.value for c in at.caption)
    assert len(plotly_specs(at)) >= 8


def test_a_corrupt_upload_gives_a_message_not_a_traceback():
    at = open_page("vision_transformer")
    uploader = _switch_to_upload(at)
    uploader.set_value(("photo.png", b"this is not a png at all", "image/png")).run()
    assert not at.exception
    assert at.error and "not an image" in at.error[0].value
    truncated = _png(shapes.sample(1).image)[:200]
    at.file_uploader[0].set_value(("cut.png", truncated, "image/png")).run()  # re-read: the tree was rebuilt
    assert not at.exception
    assert at.error and "truncated" in at.error[0].value


def test_chinese_text():
    at = open_page("vision_transformer")
    at.session_state["lang"] = "zh"  # what the sidebar switch writes (AppTest drops sidebar widgets after switch_page)
    at.run()
    assert_clean(at)
    assert any("图像被转换成 token 序列" in m.value for m in at.markdown)
