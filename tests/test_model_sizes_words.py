"""The model sizes page names what it counted: Gemma 3's blocks apart from its final norm, models by their names."""

from __future__ import annotations

import pytest

from tx_explorer import locales
from tx_explorer.analysis import params
from tx_explorer.config import PRESETS
from tx_explorer.views import model_sizes as view


def test_gemma3_blocks_are_counted_without_the_final_norm():
    model = params.build_on_meta(view.GEMMA3)  # counted apart, module by module
    blocks = sum(p.numel() for p in model.blocks.parameters())
    final = sum(p.numel() for p in model.norm.parameters())
    assert (blocks, final) == (18 * 5_573_632, 640)
    en, zh = view.vocabulary_share(lang="en"), view.vocabulary_share(lang="zh")
    assert f"the 18 blocks hold only {blocks:,} (18 × {blocks // 18:,}) and the final norm {final:,}." in en
    assert f"18 个 block 一共只有 {blocks:,} 个（18 × {blocks // 18:,}），最后的归一化层 {final:,} 个。" in zh


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_breakdown_names_each_model_not_its_preset_key(lang):
    names = list(view.breakdown(lang=lang).figure.data[0].y)
    assert names == [locales.text("model_sizes", f"preset_{k}", lang) for k in PRESETS]
    assert {"tiny-gpt", "GPT-2 Small", "GPT-3", "BERT-base"} <= set(names) and not {"gpt3", "bert-base"} & set(names)


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (29, "29"),  # L = D = H = V = T = 1: was 0.0M
        (124_439, "124,439"),
        (999_960_000, "1.00B"),  # rounds up into the next unit, not 1000.0M
        (124_439_808, "124.4M"),
        (1_557_611_200, "1.56B"),
        (13_325_430_000_000, "13.33T"),  # L 256, D 65,536: was 13325.43B
        (174_591_744_000, "174.6B"),  # GPT-3 by the rule: 4 significant digits, as 124.4M beside it (was 174.59B)
    ],
)
def test_a_count_reads_well_at_every_scale(n, shown):
    assert view.fmt(n) == shown


def test_the_smallest_and_largest_own_models_metrics_read_as_their_counts():
    small = view.own_model(layers=1, dim=1, heads=1, vocab=1, context=1)
    assert (small.total, view.fmt(small.total)) == (29, "29")
    big = view.own_model(layers=256, dim=65_536, heads=256, vocab=1_000_000, context=1_000_000)
    assert view.fmt(big.total).endswith("T") and view.fmt(big.rule) == "13.19T"


def test_the_chinese_change_list_and_published_cells_are_chinese():
    _, words = view.since_2017(lang="zh")
    assert "归一化位置：后归一化（post-norm） → 前归一化（pre-norm）" in words, words
    rows, _ = view.lecture_table(lang="zh")
    assert rows[0]["论文公布"] == "213.0M（Vaswani 等 2017，表 3（big））"
    rows, _ = view.lecture_table(lang="en")
    assert rows[0]["Published"] == "213.0M (Vaswani et al. 2017, Table 3 (big))"
    _, words = view.since_2017(lang="en")
    assert "norm placement post-norm → pre-norm" in words
