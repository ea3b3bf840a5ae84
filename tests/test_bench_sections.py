"""BENCHMARKS.md is shared: each benchmark rewrites only its own keyed section."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import fused_qkv, write_section
from benchmarks.attention import table
from tx_explorer.analysis import cost
from tx_explorer.analysis.cost import Measurement


def test_sections_are_replaced_in_place_and_others_kept(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    write_section("attention-cpu", "first", path)
    write_section("other", "theirs", path)
    write_section("attention-cpu", "second", path)
    text = path.read_text()
    assert "first" not in text and text.count("second") == 1 and "theirs" in text
    assert text.index("attention-cpu:start") < text.index("second") < text.index("other:start")
    with pytest.raises(ValueError):
        write_section("Bad Key", "x", path)


def test_table_puts_ratios_side_by_side():
    runs = [
        Measurement("naive", 512, 0.3, 1000, 3),
        Measurement("flash", 512, 0.1, 10, 3),
        Measurement("sdpa", 512, 0.05, 5, 3),
    ]
    row = table(runs, [512, 1024]).splitlines()
    assert row[2].split("|")[5:7] == [" 3.00× ", " 2.00× "] and "100.00×" in row[2]
    assert row[3].count("—") == 10  # N = 1024 not measured: dashes, not errors


def test_the_benchmark_section_is_formatted_from_the_sweep():
    r = cost.FusedTiming((16, 128), (64,), np.array([[1e-4, 2e-4]]), np.array([[3e-4, 2e-4]]), 0.0)
    text = fused_qkv.section(r, repeats=9, threads=1)
    assert "| 64 | 16 | 0.100 | 0.300 | 3.00 |" in text and "| 64 | 128 | 0.200 | 0.200 | 1.00 |" in text
    assert "Median of 9 calls" in text
