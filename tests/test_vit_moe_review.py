"""What an English-first review of the Vision Transformer and MoE pages found (its widgets that the language
switch reset: tests/test_widget_keys.py): comparisons read as "more than in 0 %", a confident answer that was not one,
"1 tokens routed", and English words in the Chinese page's formulas. Function-level: no page run, no browser."""

import numpy as np
import pytest

from tx_explorer import models
from tx_explorer.analysis import vit_lab
from tx_explorer.views import moe as moe_view
from tx_explorer.views import vision_transformer as vit_view


@pytest.fixture(scope="module")
def avg_model():
    return models.load_model("vit-shapes-avg")


def _reference(top: float, entropy: float, half: float, top_below: int) -> vit_lab.Reference:
    """100 made-up held-out shapes: ``top_below`` with a top probability just under ``top``; every one with more
    half-tone than ``half``; entropies around ``entropy``."""
    tops = np.concatenate([np.full(top_below, top - 0.01), np.full(100 - top_below, top + 0.01)])
    return vit_lab.Reference(100, tops, np.full(100, entropy) + np.linspace(-0.1, 0.1, 100), np.full(100, half + 0.05))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_measure_below_every_held_out_shape_is_not_called_more_than_in_0_percent(avg_model, lang):
    """A blank upload has 0 % half-tone, less than every held-out shape: "more than in 0 % of them" said nothing."""
    pixels = np.full((64, 64, 3), 255, np.uint8)
    f = vit_lab.familiarity(avg_model, vit_lab.reference(avg_model, n=20, batch=20), pixels)
    verdict = vit_view.familiar(avg_model, _reference(f.top, f.entropy, f.half_tones, 50), pixels, lang=lang)
    T = vit_view.texts(vit_view.PAGE, lang)
    assert T("familiar_rank_none") in verdict.text
    assert T("familiar_rank", pct="0%") not in verdict.text and "0% of them" not in verdict.text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_picture_flagged_by_its_pixels_alone_is_not_said_to_get_a_confident_answer_when_it_does_not(avg_model, lang):
    """Noise: unusual by its half-tones alone. Its top probability below the median held-out shape's is no
    "confident answer"; above it, it is."""
    rng = np.random.default_rng(0)
    pixels = (rng.random((64, 64, 3)) * 255).astype(np.uint8)
    f = vit_lab.familiarity(avg_model, vit_lab.reference(avg_model, n=20, batch=20), pixels)
    T = vit_view.texts(vit_view.PAGE, lang)
    for top_below, key in ((30, "familiar_quiet_unsure"), (70, "familiar_quiet")):  # 30 %: it is above only 30 %
        ref = _reference(f.top, f.entropy, f.half_tones - 0.5, top_below)  # its half-tones beyond every shape's
        assert vit_lab.familiarity(avg_model, ref, pixels).beyond(vit_lab.USUAL) == ["half_tones"]
        assert T(key) in vit_view.familiar(avg_model, ref, pixels, lang=lang).text


@pytest.fixture(scope="module")
def moe_bundle():
    return moe_view.shipped()


def test_a_one_token_checkpoint_text_says_token_in_the_singular_and_that_its_load_is_not_the_routers(moe_bundle):
    about = moe_view.checkpoint(moe_bundle, "a").about  # one token, k = 2 of E = 8: six experts idle
    assert "1 token routed" in about and "1 tokens" not in about and "2 assignments" in about
    assert "at least 6 experts get none" in about
    longer = moe_view.checkpoint(moe_bundle, "").about  # the corpus's 128 tokens: no caveat
    assert "128 tokens routed" in longer and "get none" not in longer


def test_the_formulas_name_their_quantities_in_the_page_language():
    zh = " ".join(moe_view.formulas(lang="zh"))
    assert not any(w in zh for w in ("capacity", "tokens", "factor", "uniform"))
    assert "\\text{容量}" in zh
    assert moe_view.formulas(lang="en")[1].startswith(r"\text{capacity}=\left\lceil")
