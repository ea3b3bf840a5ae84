"""Review of the KV cache, Norms and Mixture of Experts pages (tag kvnm): what a student saw, fixed at its source."""

from __future__ import annotations

import dataclasses

import torch

from tx_explorer import models
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import kv_cache as kv_view
from tx_explorer.views import moe as moe_view
from tx_explorer.views import norms as norms_view


def _one_kv_head() -> kv_view.TextModel:
    """tiny-llama's tokenizer over a random model of its shape with one KV head shared by all (MQA, as Gemma 3)."""
    tm = models.load_model("tiny-llama")
    torch.manual_seed(0)
    model = CausalLM(tm.config.replace(num_kv_heads=1)).eval()
    return dataclasses.replace(tm, name="tiny-mqa", model=model)


def _groups(tm: kv_view.TextModel, lang: str):
    d = kv_view.decoding(tm, "a b", 0)
    return kv_view.cache_view(tm, d.ids, tm.labels(d.ids), 1, 0, lang=lang, decoding=d).groups.figure


def test_one_kv_head_is_not_written_as_kv_heads():
    """Gemma 3 270M (one KV head): the map's title read "(1 KV heads)"."""
    title = _groups(_one_kv_head(), "en").layout.title.text.replace("<br>", " ")
    assert "1 KV heads" not in title and "single KV head" in title, title


def test_the_query_to_kv_map_says_who_reads_what():
    """The map's cells read "1.00"/"0.00" on a 0–1 colour bar, its hover a bare "1.0000": now a ✓ where a query head
    reads a KV head, and the hover says whether it does, in the page's language."""
    tm = models.load_model("tiny-llama")  # 4 query heads, 2 KV heads
    for lang, yes, no in (("en", "reads it", "does not read it"), ("zh", "读取它", "不读取它")):
        trace = _groups(tm, lang).data[0]
        assert sorted(set(trace.text.ravel())) == ["", "✓"] and trace.showscale is False
        assert "%{z" not in trace.hovertemplate
        words = {c[2] for row in trace.customdata for c in row}
        assert words == {yes, no}
        assert ("：" in trace.hovertemplate) == (lang == "zh")


def test_no_half_width_space_between_chinese_sentences():
    """中文: the published note ran "…上下文上限。 Gemma 2…", the MoE model's note "…k = 2 个。 `tiny-moe`…"."""
    note = kv_view.published_note(lang="zh")
    assert "。 " not in note and "Gemma 2" in note
    assert " Gemma 2" in kv_view.published_note(lang="en")
    bundle = models.load_model(models.available_models("moe")[0])
    assert "。 " not in moe_view.about(bundle, lang="zh")
    assert ". `tiny-moe`" in moe_view.about(bundle, lang="en")


def test_the_norm_bars_name_their_x_axis():
    """LayerNorm and RMSNorm step bars (x0 … x5 under them) had no x-axis title."""
    for lang, word in (("en", "element i of x"), ("zh", "x 的第 i 个分量")):
        nv = norms_view.normalise("4, 6, 5, 9, 3, 7", lang=lang)
        for panel in (nv.layernorm, nv.rmsnorm):
            assert panel.figure.layout.xaxis.title.text == word


def test_depth_intro_has_no_space_before_chinese():
    from tx_explorer import locales

    assert "） 的" not in locales.text("norms", "depth_intro", "zh")


def test_the_published_table_and_note_write_gemma_3s_cache_alike():
    """Gemma-3-270M's cache at 128k tokens: the table read 0.4 GiB beside the note's 0.38 GiB; both write one
    number now, and the log axis writes powers of ten, not SI's "100μ" GiB."""
    panel, rows = kv_view.published(lang="en")
    cell = next(r for r in rows if r["model"] == "Gemma-3-270M")["at 131,072 tokens"]
    assert cell.removesuffix(" GiB") in kv_view.published_note(lang="en"), (cell, kv_view.published_note(lang="en"))
    assert panel.figure.layout.yaxis.exponentformat == "power"
