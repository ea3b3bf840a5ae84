"""Review of four pages read least (model sizes, cost of attention, attention operator, Vision Transformer), each
test holding what a visitor met before its fix:

* operator, "Replace the keys K" with one key ($N_K$ = 1, or typed queries of zeros): the page said "the
  similarities change, so the weights change, and the output with them" under two metrics reading 0. The sentence
  is read from the measured differences now: with the numbers, and where A did not move, why (one key takes all the
  weight; rows uniform before and after).
* Vision Transformer, position embeddings: "this small model learns mainly that neighbours are alike" was written
  once for every model offered (the ImageNet ViT too, when cached). The chosen model's own table is measured: its
  mean cosine similarity to neighbours, to the rest of the row or column and to the others, and the verdict follows
  those numbers; a model without a table says so in the same place.
* Vision Transformer, pooling: "reproduces the model's logits (max difference 0.0e+00)". An exact 0 reads "0".
"""

from __future__ import annotations

import re

import pytest
import torch

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.views import operator as op_view
from tx_explorer.views import vision_transformer as vit_view


def T(page: str, key: str, lang: str = "en", **fmt: object) -> str:
    return locales.text(page, key, lang, **fmt)


def verdict(key: str, lang: str) -> str:
    """A position verdict's words before its numbers (its first bracket)."""
    return re.split(r"[（(]", T("vision_transformer", key, lang, margin="0.1", near_gap="", line_gap=""))[0]


# ---- operator: replacing K ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_new_keys_over_one_key_are_not_said_to_change_the_weights(lang):
    q, k, v = op_view.random_qkv(4, 1, 8, 4, 0)
    r = op_view.replace(q, k, v, "K", lang=lang)
    assert r.weights_diff == 0 and r.out_diff == 0
    assert r.reading.startswith(T("operator", "replace_result_K_same", lang, why="", a="0", y="0")[:12])
    assert T("operator", "replace_why_one_key", lang) in r.reading
    assert r.reading != T("operator", "replace_result_K", lang, a="0", y="0")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_new_keys_for_zero_queries_leave_uniform_rows_and_say_so(lang):
    q, k, v = op_view.random_qkv(3, 5, 8, 4, 0)
    r = op_view.replace(torch.zeros_like(q), k, v, "K", lang=lang)
    assert r.weights_diff < op_view.SAME_WEIGHTS
    assert T("operator", "replace_why_uniform", lang, nk=5, share="1/5") in r.reading


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_replacing_says_how_much_moved(lang):
    """The sentences carry the measured differences, as the metrics above them: 0.525 and 0.981 for new keys."""
    q, k, v = op_view.random_qkv(4, 6, 8, 4, 0)
    keys, values = op_view.replace(q, k, v, "K", lang=lang), op_view.replace(q, k, v, "V", lang=lang)
    assert keys.reading == T(
        "operator", "replace_result_K", lang, a=op_view.plain(keys.weights_diff), y=op_view.plain(keys.out_diff)
    )
    assert op_view.plain(keys.weights_diff) in keys.reading and keys.weights_diff > 0.1
    assert values.reading == T("operator", "replace_result_V", lang, a="0", y=op_view.plain(values.out_diff))


def test_the_page_shows_the_verdict_for_one_key():
    at = open_page("operator", op_nk=1, op_open_qkv=True, replace="K")
    assert_clean(at)
    shown = " ".join(m.value for m in at.markdown)
    assert T("operator", "replace_why_one_key") in shown
    assert T("operator", "replace_result_K", a="0", y="0").split(":")[1][:30] not in shown


# ---- Vision Transformer ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vit():
    from tx_explorer.models import load_model

    return load_model("vit-shapes")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_position_verdict_is_measured_on_the_chosen_table(vit, lang, monkeypatch):
    """The bundled model learned neighbours (0.22 against −0.02); a table of row and column codes (Fig. 7's grid: a
    neighbour shares its row or column) reads as both, random vectors as no structure: other tables, other
    verdicts."""
    assert verdict("pos_alike_near", lang) in vit_view.position_reading(vit, lang=lang)
    assert "neighbours are alike" not in T("vision_transformer", "pos_intro", "en")
    g = vit.model.cfg.grid
    row, col = torch.arange(g).repeat_interleave(g), torch.arange(g).repeat(g)
    lines = torch.cat([torch.nn.functional.one_hot(row, g), torch.nn.functional.one_hot(col, g)], dim=1).float()
    monkeypatch.setattr(vit_view.vit_lab, "patch_positions", lambda clf: lines)
    assert verdict("pos_alike_both", lang) in vit_view.position_reading(vit, lang=lang)
    noise = torch.randn(g * g, 4096, generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(vit_view.vit_lab, "patch_positions", lambda clf: noise)
    assert verdict("pos_alike_none", lang) in (vit_view.position_reading(vit, lang=lang))
    monkeypatch.setattr(vit_view.vit_lab, "patch_positions", lambda clf: None)
    assert vit_view.position_reading(vit, lang=lang) == T("vision_transformer", "pos_none", lang)


def test_an_exact_pooling_difference_reads_zero(vit, monkeypatch):
    """The hand-made logits equal the model's bit for bit: "max difference 0", not "0.0e+00"."""
    import dataclasses

    exact = vit_view.vit_lab.pooling
    monkeypatch.setattr(
        vit_view.vit_lab, "pooling", lambda clf, px: dataclasses.replace(exact(clf, px), max_difference=0.0)
    )
    pixels = vit_view.model_input(vit, vit_view.sample(vit)[0])[1]
    for lang in ("en", "zh"):
        reading = vit_view.pooling(vit, pixels, lang=lang).reading
        assert "e+00" not in reading and reading.endswith(("0).", "0）。"))
