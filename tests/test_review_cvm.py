"""A student's review of the norms, MoE and ViT pages: block numbers that agree between a chart and
its note, a true minus in every number of the prose, Chinese spacing and wording, and the MoE curves' last points
beside the final losses they differ from."""

from __future__ import annotations

import re

import pytest

from tx_explorer import locales, models
from tx_explorer.views import moe as moe_view
from tx_explorer.views import norms as norms_view
from tx_explorer.views import vision_transformer as vit_view

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread

HYPHEN_EXPONENT = re.compile(r"\de-\d")  # 8.0e-07: a hyphen where the prose writes a minus (−)


@pytest.fixture(scope="module")
def res():
    return norms_view.load_results()


@pytest.fixture(scope="module")
def vit():
    return models.load_model("vit-shapes")


def test_the_gradient_norm_charts_count_blocks_from_one_as_their_note_does(res):
    """The note says "block 1's is 17× their median" and "blocks 2–16": the charts drew the blocks as 0…15, while
    the residual chart's 1 is after the first block."""
    deep = norms_view.defaults(res)["depth"]
    panel, _ = norms_view.depth(res, deep, "grad_norm")
    assert list(panel.figure.data[0].x) == list(range(1, 17))
    assert "blocks 2–16" in norms_view.depth_note(res) and "第 2–16 个 block" in norms_view.depth_note(res, lang="zh")
    residual, _ = norms_view.depth(res, deep, "residual_rms")
    assert residual.figure.data[0].x[0] == 0  # 0 = after the embeddings
    heat = norms_view.layer_steps(res, deep[0], "grad_norm").figure.data[0]
    assert list(heat.y) == list(range(1, 17))
    assert norms_view.layer_steps(res, deep[0], "residual_rms").figure.data[0].y[0] == 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_small_numbers_in_the_norms_depth_caption_have_a_true_minus(res, lang):
    _, caption = norms_view.depth(res, norms_view.defaults(res)["depth"], lang=lang)
    assert "e−0" in caption and not HYPHEN_EXPONENT.search(caption)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_moe_stacked_experts_check_has_a_true_minus(lang):
    note = moe_view.stacked_experts(moe_view.shipped(), lang=lang)
    assert "e−0" in note and not HYPHEN_EXPONENT.search(note)


def test_the_vit_checks_have_a_true_minus(vit):
    _, pixels = vit_view.model_input(vit, vit_view.sample(vit, 0, 7)[0])
    shown = [
        vit_view.pooling(vit, pixels).reading,
        *vit_view.shuffle(vit, pixels, vit.classify(pixels)).changes.values(),
    ]
    assert any("e−" in s for s in shown) and not any(HYPHEN_EXPONENT.search(s) for s in shown)


def test_no_space_between_a_bold_chinese_phrase_and_the_next_chinese_character():
    assert "**不使用预热**训练" in locales.text("norms", "runs_intro", "zh")


@pytest.mark.parametrize(
    ("lang", "words"), [("en", "last points read MoE 5.642 and dense 5.714"), ("zh", "MoE 5.642、稠密 5.714")]
)
def test_the_moe_loss_intro_gives_the_curves_last_points_beside_the_final_losses(lang, words):
    """The intro said "final validation loss (seed 0, whose curves are drawn below): MoE 5.680", while the curve
    drawn below ends at 5.642: the final losses use 16,384 held-out tokens, the curve's points a smaller sample."""
    intro = moe_view.loss_intro(moe_view.shipped(), lang=lang)
    assert words in intro and "16,384" in intro
