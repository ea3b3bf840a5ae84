"""§3.1 "one fused [Q K V] projection uses the hardware better": timed, never asserted; the numbers are checked."""

from __future__ import annotations

import numpy as np
import pytest

from tx_explorer import locales
from tx_explorer.analysis import cost
from tx_explorer.views import mixers as view

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_sweep_times_the_same_products_over_n_and_d():
    r = cost.fused_qkv_sweep(ns=(4, 16), ds=(8, 12), repeats=2)
    assert r.ns == (4, 16) and r.ds == (8, 12)
    assert r.fused.shape == r.separate.shape == (2, 2) and (r.fused > 0).all() and (r.separate > 0).all()
    assert r.max_diff < 1e-5  # one Linear(D, 3D) and three Linear(D, D) with its rows compute the same numbers
    with pytest.raises(ValueError):
        cost.fused_qkv_sweep(ns=(4,), ds=(8,), repeats=0)


def test_the_note_reads_the_measured_ratios():
    r = cost.FusedTiming((16, 128), (64,), np.array([[1e-4, 2e-4]]), np.array([[3e-4, 2e-4]]), 0.0)
    f = view.fused(r, lang="en")
    assert "3.00" in f.note and "1.00" in f.note and "N = 16, D = 64" in f.note  # most at the smallest N here
    assert [t.name for t in f.chart.figure.data] == ["D = 64"]
    np.testing.assert_allclose(f.chart.figure.data[0].y, [3.0, 1.0])
    assert locales.text("mixers", "fused_title", "zh") in view.fused(r, lang="zh").chart.figure.layout.title.text
