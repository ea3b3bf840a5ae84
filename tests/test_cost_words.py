"""The cost page's FLOP sentences are read from the four products of the table, in both languages."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

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
    assert f"{zh}。" in view.matmuls(n, 512, 8, lang="zh").summary.split("在 $N = 2D$")[0]


def test_at_n_equal_2d_the_page_says_equal_and_larger_beyond():
    at_2d = cost.four_matmuls(1024, 512, 8)
    assert sum(m.flops for m in at_2d if m.quadratic) == sum(m.flops for m in at_2d if not m.quadratic)  # 50/50
    en, zh = view.matmuls(16, 512, 8).summary, view.matmuls(16, 512, 8, lang="zh").summary
    assert "At $N = 2D$ = 1,024 they take as many FLOPs as the projections (50%)." in en
    assert "At $N = 4D$ = 2,048 they take more FLOPs than the projections (67%)." in en
    assert "在 $N = 2D$ = 1,024 时其 FLOPs 与投影相等（50%）。在 $N = 4D$ = 2,048 时其 FLOPs 多于投影（67%）。" in zh
    for key in ("matmul_intro", "crossover_label"):  # no word of the page says N² wins at N = 2D itself
        words = {lang: locales.text("cost_of_attention", key, lang) for lang in ("en", "zh")}
        assert "overtake" not in words["en"] and "超过" not in words["zh"], words


@pytest.mark.parametrize(
    ("n", "relation", "zh"), [(1024, "as many FLOPs as", "与投影相等"), (2048, "more FLOPs than", "多于投影")]
)
def test_the_summary_says_each_fact_once(n, relation, zh):
    """At the default N = 2D = 1,024 the summary said "they take as many FLOPs as the projections" of N itself and
    again of N = 2D; N = 4D likewise."""
    en, cn = view.matmuls(n, 512, 8).summary, view.matmuls(n, 512, 8, lang="zh").summary
    assert en.count(relation) == 1 and cn.count(zh) == 1, (en, cn)
    assert en.count(f"$N$ = {n:,}") == 1 and cn.count(f"$N$ = {n:,}") == 1


def test_a_small_share_is_not_rounded_to_zero_nor_a_large_one_to_all():
    """N = 1, D = 512, H = 8: the N² products are 2,048 of 2,099,200 FLOPs (0.098%), said as "0%"; the table's
    0.049% rows as "0.0%"."""
    mm = view.matmuls(1, 512, 8)
    assert "**under 1%** of it" in mm.summary and "**0%**" not in mm.summary
    assert mm.rows["share"][1:3] == ["under 0.1%", "under 0.1%"] and "0.0%" not in mm.rows["share"]
    assert "**不到 1%**" in view.matmuls(1, 512, 8, lang="zh").summary
    assert "**over 99%** of it" in view.matmuls(10_000_000, 2, 1).summary  # N / (N + 2D): 99.99996%, not 100%


@pytest.mark.parametrize(
    ("n", "d", "h", "total"),
    [(10_000_000, 65_536, 1024, "2.66 × 10¹⁹"), (1024, 512, 8, "4.29 × 10⁹"), (10, 8, 1, "8,320")],
)
def test_the_total_is_written_in_numbers_students_read(n, d, h, total):
    """ "Total 26.6 E FLOPs": a count in scientific notation, or with separators below a million."""
    flops = sum(mm.flops for mm in cost.four_matmuls(n, d, h))
    read = total.replace(",", "").replace(" × 10", "e").translate(str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789"))
    assert float(read) == pytest.approx(flops, rel=5e-3)
    assert f"Total **{total}** FLOPs" in view.matmuls(n, d, h).summary


def test_the_guard_answers_its_question_in_a_sentence_of_its_own():
    """The check runs nothing: "… so it would not run." (a sentence), not the refusal "naive attention … so it was
    not run" of a real run (errors.json's naive_too_big, still said by a refused measurement)."""
    cpu = torch.device("cpu")
    fits, en = view.guard(10_000_000, 1024, 64, "float32", cpu)
    zh = view.guard(10_000_000, 1024, 64, "float32", cpu, lang="zh")[1]
    assert (
        not fits
        and en.startswith("Naive attention at $N$ = 10,000,000, $H$ = 1024 needs ")
        and en.endswith(", so it would not run.")
    )
    assert "was not run" not in en and "50% of that" in en
    assert zh.endswith("因此不会运行。") and "没有运行" not in zh
    assert view.guard(1, 1, 64, "float32", cpu) == (True, view.guard(1, 1, 64, "float32", cpu)[1])
    assert view.guard(1, 1, 64, "float32", cpu)[1].endswith("so it would run.")


def test_the_time_chart_labels_one_unit_on_log_axes_that_span_the_points():
    """H = 1, D_H = 1, N = 128 and 256: ticks "100μ" beside "0.001", 5 ms flash points above the last label, and
    linear-looking N ticks 130 … 260 on the "log–log" chart."""
    from tx_explorer.viz import cost as vcost

    ns = np.array([128, 256])
    secs = {"naive": [1.5e-4, 1.9e-4], "flash": [5.95e-3, 4.93e-3], "sdpa": [5e-5, 6e-5]}
    fig = vcost.time_curves({m: (ns, np.array(v)) for m, v in secs.items()})
    y, x = fig.layout.yaxis, fig.layout.xaxis
    assert all(re.fullmatch(r"\d+[µm]?s", t) for t in y.ticktext), y.ticktext
    assert {"100µs", "1ms", "5ms"} <= set(y.ticktext)
    values = np.concatenate([np.asarray(t.y, dtype=float) for t in fig.data])
    assert min(y.tickvals) <= values.min() and max(y.tickvals) >= values.max()  # labels on both sides of the points
    assert 10 ** y.range[0] <= min(y.tickvals) and 10 ** y.range[1] >= max(y.tickvals)  # and shown
    assert x.type == y.type == "log" and list(x.tickvals) == [128, 256] and list(x.ticktext) == ["128", "256"]


def test_a_grid_of_many_tiles_labels_some_and_counts_with_separators():
    """N = 64, tile 1: 64 overlapping labels per side and "Tiles: 2080 of 4096 computed"."""
    grid = view.tiles(64, 1).grid.figure
    assert grid.layout.title.text == "Tiles: 2,080 of 4,096 computed"
    for axis in (grid.layout.xaxis, grid.layout.yaxis):
        assert 8 <= len(axis.tickvals) <= 16 and axis.tickvals[0] == 0, axis.tickvals
    assert list(view.tiles(12, 4).grid.figure.layout.xaxis.tickvals) == [0, 1, 2]  # a few tiles: every one
