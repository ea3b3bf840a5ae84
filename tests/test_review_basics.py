"""Review of the basic pages on real models (operator, masks, seq2seq): sentences that must follow their numbers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tx_explorer import models
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.analysis import qk_norm as qk
from tx_explorer.views import masks as masks_view
from tx_explorer.views import operator as op_view
from tx_explorer.views import seq2seq as s2s_view

torch.set_num_threads(1)


# ---- Masks: a real model read on two tokens reaches one position back ------------------------------------------
def _two_token_masks(window: int | None) -> mg.ModelMasks:
    """Two layers read on 2 tokens (each query reaches at most 1 key back), the first local when ``window``."""
    layers = [
        mg.LayerMask(
            i, window if i == 0 else None, 10_000.0, reach=1, max_hidden=0.0, hidden=1, row_mean=1.0, row_min=1.0
        )
        for i in range(2)
    ]
    shown = {i: np.array([[1.0, 0.0], [0.5, 0.5]]) for i in range(2)}
    return mg.ModelMasks(n=2, heads=4, layers=layers, shown=shown, pool=1, sinks=False)


@pytest.mark.parametrize("window", [None, 512])
def test_masks_one_position_back_is_singular(window):
    """Gemma 3 or SmolLM2 on 2 tokens said "the farthest key … lies 1 positions back", maps "blocks of 1 positions"."""
    tm = SimpleNamespace(name="gemma3-270m", max_len=32768)
    m = masks_view.model_masks(tm, _two_token_masks(window), 2)
    assert "1 position back" in m.check and "positions back" not in m.check, m.check
    titles = [p.figure.layout.title.text for p in m.panels]
    assert all("1 positions" not in t and "one cell per position" in t for t in titles), titles
    zh = masks_view.model_masks(tm, _two_token_masks(window), 2, lang="zh")
    assert "1 个位置之前" in zh.check and all("每格一个位置" in p.figure.layout.title.text for p in zh.panels)


def test_masks_many_positions_back_stay_plural():
    r = mg.ModelMasks(
        n=640,
        heads=4,
        layers=[mg.LayerMask(0, None, None, 639, 0.0, 10, 1.0, 1.0)],
        shown={0: np.zeros((128, 128))},
        pool=5,
        sinks=False,
    )
    m = masks_view.model_masks(SimpleNamespace(name="m", max_len=8192), r, 640)
    assert "639 positions back" in m.check and "blocks of 5 positions" in m.panels[0].figure.layout.title.text


# ---- Operator: QK-norm's reading follows the measured entropies ----------------------------------------------------
def _layer(i: int, normed_entropy: float, raw_entropy: float) -> qk.QKNormLayer:
    return qk.QKNormLayer(i, qk.Side(3.0, 30.0, normed_entropy), qk.Side(50.0, 900.0, raw_entropy))


def test_qk_reading_says_one_key_only_when_measured():
    """The reading said "falls … nearly all weight on one key" whatever the numbers (true of Gemma 3 only)."""
    tm = SimpleNamespace(name="some-qk-model", max_len=4096)
    _, gemma_like = op_view.qk_norm(tm, [_layer(0, 2.99, 0.004), _layer(1, 1.6, 0.9)])
    assert "falls from 2.99 to 0.004 nats, nearly all weight on one key" in gemma_like
    _, sharper_not_peaked = op_view.qk_norm(tm, [_layer(0, 2.5, 1.2), _layer(1, 2.0, 1.5)])
    assert "falls from 2.50 to 1.200 nats" in sharper_not_peaked and "one key" not in sharper_not_peaked
    _, flatter = op_view.qk_norm(tm, [_layer(0, 0.5, 1.2), _layer(1, 0.4, 1.5)])  # no layer sharper without it
    assert "falls" not in flatter and "one key" not in flatter and "0 of 2 layers" in flatter, flatter
    _, zh = op_view.qk_norm(tm, [_layer(0, 0.5, 1.2), _layer(1, 0.4, 1.5)], lang="zh")
    assert "降到" not in zh and "一个 key" not in zh, zh


# ---- Seq2Seq: a one-word sentence's recurrence check -----------------------------------------------------------------
def test_seq2seq_one_source_word_is_singular():
    """Translating "hello" said the GRU was rerun "over the 1 source words"."""
    translators, problem = s2s_view.load_translators(models.load_model)
    assert translators is not None, problem
    out = s2s_view.translate(translators, "hello", 1)["attention"]
    assert list(out.source) == ["hello"]
    en = s2s_view.step_query(translators["attention"], out, 0).text
    assert "1 source words" not in en and "the one source word" in en, en
    zh = s2s_view.step_query(translators["attention"], out, 0, lang="zh").text
    assert "对 1 个源词逐词" in zh, zh


def test_home_names_gemma3_among_the_real_models():
    """The home page listed the real pretrained models as "SmolLM2, MiniLM", leaving out Gemma 3 270M, which the
    masks, operator, multi-head, atlas and KV-cache pages open by name."""
    from tx_explorer.views import texts

    for lang in ("en", "zh"):
        assert "Gemma 3" in texts("home", lang)("intro")
