"""The cost page's FLOP sentences are read from the four products of the table, in both languages."""

from __future__ import annotations

import pytest

from tx_explorer import locales
from tx_explorer.analysis import cost
from tx_explorer.views import cost_of_attention as view


@pytest.mark.parametrize(
    ("n", "en", "zh"),
    [
        (100, "take fewer FLOPs than the projections", "少于投影"),
        (1024, "take as many FLOPs as the projections", "与投影相等"),
        (4096, "take more FLOPs than the projections", "多于投影"),
    ],
)
def test_the_summary_compares_the_tables_two_halves(n, en, zh):
    """D = 512: N = 2D = 1024 is where the two N² rows equal the two projection rows of the table, not beyond."""
    products = cost.four_matmuls(n, 512, 8)
    quad = sum(mm.flops for mm in products if mm.quadratic)
    share = f"**{100 * quad / sum(mm.flops for mm in products):.0f}%** of it: they {en}."
    assert share in view.matmuls(n, 512, 8).summary
    assert f"{zh}。" in view.matmuls(n, 512, 8, lang="zh").summary.split("在 N = 2D")[0]


def test_at_n_equal_2d_the_page_says_equal_and_larger_beyond():
    at_2d = cost.four_matmuls(1024, 512, 8)
    assert sum(m.flops for m in at_2d if m.quadratic) == sum(m.flops for m in at_2d if not m.quadratic)  # 50/50
    en, zh = view.matmuls(16, 512, 8).summary, view.matmuls(16, 512, 8, lang="zh").summary
    assert "At N = 2D = 1,024 they take as many FLOPs as the projections (50%)" in en
    assert "at N = 4D = 2,048 they take more FLOPs than the projections (67%)" in en
    assert "在 N = 2D = 1,024 时其 FLOPs 与投影相等（50%），在 N = 4D = 2,048 时多于投影（67%）" in zh
    for key in ("matmul_intro", "crossover_label"):  # no word of the page says N² wins at N = 2D itself
        words = {lang: locales.text("cost_of_attention", key, lang) for lang in ("en", "zh")}
        assert "overtake" not in words["en"] and "超过" not in words["zh"], words
