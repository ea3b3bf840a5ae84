"""Review of the Seq2seq, Vision Transformer and Self-attention pages, as a student with the lecture in hand.

What a visitor met before each fix:

* Seq2seq, cross-attention mosaic, a one-word sentence ("hello", "yes"), in English and 中文: "the sharpest of the 8
  heads, L0 H0, gives it 1.00, the most spread, L0 H0, 1.00: on this sentence the heads are about equally sharp" —
  one head both the sharpest and the most spread, and a verdict on sharpness where every weight is 1 by construction.
* Seq2seq, one decoder step, the same sentences: "max|Δa| = 0.0e+00, max|Δc| = 0.0e+00" where every other page
  writes an exact 0 as "0".
* Seq2seq, the bottleneck (English): the chart is titled "Token accuracy (%)" and the intro defines token accuracy,
  but the verdict under it read "word accuracy 94.1% → 18.9% … word accuracy drops by 4.6": two names for one curve.
* Vision Transformer, a blank upload (white, black, one pixel, a flat grey with transparency), both languages:
  "max |Conv2d − Linear| = 0.0e+00" under the patch, the metric "max |Δ logit| after shuffling, without positions
  0.0e+00", and under the jigsaw chart "Comparing the first two bars shows how much this model relies on knowing
  where each patch is … the shuffled image is still a circle; with positions its probability stays at 0.31": the
  shuffle had swapped identical patches only, so the input was unchanged and its bars could say nothing about
  positions, yet the reading invited the conclusion that the model ignores them.
* Vision Transformer, the attention overlays and the rollout: hovering a patch said "patch row 3.5, column 11.5",
  the pixel centre of the patch read as its row and column; the picture with its patch grid said "x 37, y 12" in
  pixels, in English on a 中文 page too, where the rest of the page counts patches.
* Seq2seq, 中文: the gold alignment's hover read "标准对齐: …", an ASCII colon among hovers that write "：".
* Self-attention, section 3, a trained table of 64 rows (the seq2seq Transformer's, the position lab's, the block
  variants'): the "Positions" slider still ran to 128 and stood at 128 while the map and the reading had 64.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tests.conftest import assert_clean, open_page
from tx_explorer import locales, models
from tx_explorer.analysis import self_attention as sa
from tx_explorer.analysis import vit_lab
from tx_explorer.views import self_attention as sa_view
from tx_explorer.views import seq2seq as s2s_view
from tx_explorer.views import vision_transformer as vit_view
from tx_explorer.viz import seq2seq as vs


def T(page: str, key: str, lang: str, **fields) -> str:
    return locales.text(page, key, lang, **fields)


# ---- seq2seq: a one-word source ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def translators():
    loaded, problem = s2s_view.load_translators(models.load_model)
    assert loaded is not None, problem
    return loaded


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_one_word_source_names_no_sharpest_and_most_spread_head(translators, lang):
    out = s2s_view.translate(translators, "hello")
    assert out["transformer"].cross.shape[-1] == 1
    intro = s2s_view.mosaic_intro(out, lang=lang)
    heads = int(np.prod(out["transformer"].cross.shape[:2]))
    assert intro == T("seq2seq", "mosaic_intro_one", lang, heads=heads)
    assert T("seq2seq", "mosaic_alike", lang) not in intro and T("seq2seq", "mosaic_differ", lang) not in intro


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_longer_sources_still_get_the_measured_sharpness_verdict(translators, lang):
    intro = s2s_view.mosaic_intro(s2s_view.translate(translators, "we see the sky"), lang=lang)
    assert T("seq2seq", "mosaic_differ", lang) in intro or T("seq2seq", "mosaic_alike", lang) in intro


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decoder_step_writes_an_exact_zero_as_0(translators, lang):
    o = s2s_view.translate(translators, "hello")["attention"]
    text = s2s_view.step_query(translators["attention"], o, 0, lang=lang).text
    assert "e+00" not in text and "0.0e" not in text, text
    assert "|\\Delta a|$ = 0" in text


def test_the_bottleneck_verdict_names_the_charts_measure(translators):
    shipped = {k: t.results for k, t in translators.items() if t.results}
    verdict = s2s_view.bottleneck_verdict(shipped, lang="en")
    title = T("seq2seq", "token_accuracy", "en").removesuffix(" (%)").lower()  # "token accuracy"
    assert title in verdict and "word accuracy" not in verdict


# ---- vision transformer: a blank picture ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vit():
    return models.load_model("vit-shapes")


def _blank(clf, colour="white"):
    _, pixels = vit_view.model_input(clf, Image.new("RGB", (200, 200), colour))
    return pixels


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_blank_picture_shuffle_is_said_to_change_nothing(vit, lang):
    pixels = _blank(vit)
    shuf = vit_view.shuffle(vit, pixels, vit.classify(pixels), lang=lang)
    assert vit_lab.shuffle_experiment(vit, pixels, 0).moved == 0
    assert shuf.reading.startswith(T("vision_transformer", "shuffle_nothing_moved", lang, n=64, diff="0"))
    assert T("vision_transformer", "shuffle_reading", lang, diff="0") not in shuf.reading  # "Comparing the bars…"
    assert all("e+00" not in v for v in shuf.changes.values()), shuf.changes


def test_a_picture_with_something_on_it_keeps_its_shuffle_reading(vit):
    _, pixels = vit_view.model_input(vit, vit_view.sample(vit, 3, 7)[0])
    shuf = vit_view.shuffle(vit, pixels, vit.classify(pixels), lang="en")
    assert vit_lab.shuffle_experiment(vit, pixels, 0).moved > 0
    assert "changed nothing the model receives" not in shuf.reading
    assert shuf.reading.startswith("Without positions the two bars of each class are equal")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_blank_patch_conv_linear_difference_reads_0(vit, lang):
    picture = Image.new("RGB", (200, 200), "white")
    for side in vit_view.patches(vit, picture, 4, 4, "vit-shapes", lang=lang):
        assert "e+00" not in side.conv_linear, side.conv_linear


def test_a_blank_upload_on_the_page():
    """The whole page, as a visitor uploads a white picture: no 0.0e+00, the shuffle said to change nothing (the
    Chinese words are checked on the view above: AppTest keeps a language only for one run, and the model picker's
    labels change with it)."""
    import io

    buf = io.BytesIO()
    Image.new("RGB", (120, 90), "white").save(buf, "PNG")
    at = open_page("vision_transformer", vit_open_shuffle=True, vit_open_patch=True)
    at.radio(key="vit_source").set_value("upload").run()
    at.get("file_uploader")[0].set_value(("white.png", buf.getvalue(), "image/png")).run()
    assert_clean(at)
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [m.value for m in at.metric]
    assert not [s for s in shown if "0.0e+00" in s]
    assert any(s.startswith("**This shuffle changed nothing the model receives**") for s in shown)
    assert any("Nothing to see" in w.value for w in at.warning)  # the upload's own verdict, as before


# ---- self-attention: a trained table's rows bound the positions slider ---------------------------------------------
def test_position_range_is_a_trained_tables_rows():
    tables, _ = sa.bundled_position_tables()
    short = {k: t for k, t in tables.items() if t.shape[0] < sa_view.MAX_POSITIONS}
    assert short, "a bundled table shorter than the slider (seq2seq-transformer: 64 rows)"
    for name, table in short.items():
        assert sa_view.position_range(name, tables) == table.shape[0]
    assert sa_view.position_range("sinusoidal", tables) == sa_view.MAX_POSITIONS


def test_the_positions_slider_stops_at_a_trained_tables_rows():
    at = open_page("self_attention", sa_open_enc=True)
    at.slider(key="sa_enc_positions").set_value(128).run()
    at.radio(key="enc_source").set_value("seq2seq-transformer").run()
    assert_clean(at)
    slider = at.slider(key="sa_enc_positions")
    assert slider.max == 64 and slider.value == 64
    assert any("(64 positions)" in m.value for m in at.markdown)
    at.radio(key="enc_source").set_value("sinusoidal").run()  # back to a table of any length: the whole range again
    assert_clean(at)
    assert at.slider(key="sa_enc_positions").max == sa_view.MAX_POSITIONS


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_hovered_patch_is_named_by_its_row_and_column(vit, lang):
    _, pixels = vit_view.model_input(vit, vit_view.sample(vit, 3, 7)[0])
    att = vit_view.attention(vit, vit.classify(pixels), pixels, lang=lang)
    side = vit_view.patches(vit, vit_view.sample(vit, 3, 7)[0], 2, 5, "vit-shapes", lang=lang)[-1]
    hover = T("vision_transformer", "fig_patch_hover", lang)
    g = vit.model.cfg.grid
    for fig in (att.overlays.figure, att.rollout.figure, side.grid.figure):
        maps = [t for t in fig.data if t.type == "heatmap"]
        assert maps and all(t.hovertemplate.startswith(hover) and "%{x}" not in t.hovertemplate for t in maps)
        cells = np.asarray(maps[0].customdata)  # what the hover reads: (row, column) of every patch
        assert cells.shape == (g, g, 2) and (cells[2, 5] == (2, 5)).all()
        assert all(t.hoverinfo == "skip" for t in fig.data if t.type == "image")  # no pixel coordinates
    assert ("第" in hover) == (lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_gold_links_hover_with_the_pages_colon(lang):
    """The gold alignment's hover read "标准对齐: …" with an ASCII colon where the other hovers write "：" in 中文."""
    gold = T("seq2seq", "gold", lang)
    fig = vs.alignment_figure(np.eye(2), ["a", "b"], ["x", "y"], gold=[(0, 0), (1, 1)], gold_label=gold)
    (links,) = [t for t in fig.data if t.name == gold]
    assert links.hovertemplate.startswith(gold + ("：" if lang == "zh" else ": "))
