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
    assert f"18 个块一共只有 {blocks:,} 个（18 × {blocks // 18:,}），最后的归一化层 {final:,} 个。" in zh


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_breakdown_names_each_model_not_its_preset_key(lang):
    names = list(view.breakdown(lang=lang).figure.data[0].y)
    assert names == [locales.text("model_sizes", f"preset_{k}", lang) for k in PRESETS]
    assert {"tiny-gpt", "GPT-2 small", "GPT-3", "BERT-base"} <= set(names) and not {"gpt3", "bert-base"} & set(names)
