"""§3.1 "one fused [Q K V] projection uses the hardware better": timed, never asserted; the numbers are checked."""

from __future__ import annotations

import numpy as np
import pytest

from tx_explorer import locales
from tx_explorer.analysis import cost, mixers
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


def test_the_sweep_keeps_every_call_and_its_medians():
    r = cost.fused_qkv_sweep(ns=(4,), ds=(8, 12), repeats=3)
    assert r.fused_calls.shape == r.separate_calls.shape == (2, 1, 3)
    np.testing.assert_array_equal(r.fused, np.median(r.fused_calls, axis=-1))
    np.testing.assert_array_equal(r.separate, np.median(r.separate_calls, axis=-1))


def _timing(fused_calls, three_calls):
    f, t = np.array(fused_calls, dtype=float), np.array(three_calls, dtype=float)  # (D, N, calls)
    return cost.FusedTiming((16, 128), (64,), np.median(f, -1), np.median(t, -1), 0.0, f, t)


def test_fused_is_judged_size_by_size_against_the_spread_of_its_calls():
    """Faster at N = 16 (beyond both spreads), slower at N = 128: read against numpy's mean and sample std."""
    f = [[[1.0, 1.1, 0.9], [3.0, 3.2, 2.8]]]
    t = [[[2.0, 2.1, 1.9], [2.0, 2.05, 1.95]]]
    (fast, slow) = mixers.fused_verdicts(_timing(f, t))[0]
    assert fast.state == "holds" and slow.state == "not_holds"
    gap = np.mean(t[0][1]) - np.mean(f[0][1])
    assert slow.gap == pytest.approx(gap) and slow.spread == pytest.approx(
        np.std(f[0][1], ddof=1) + np.std(t[0][1], ddof=1)
    )
    words = view.fused_verdict(_timing(f, t), lang="en")
    assert "faster than three at 1 of 2 sizes, slower at 1, and within noise at 0" in words
    assert f"slower at N = 128, D = 64 ({-gap * 1e3:.3f} ms slower" in words
    noisy = mixers.fused_verdicts(_timing([[[1.0, 3.0, 2.0], [1.0, 1.0, 1.0]]], [[[2.5, 1.5, 2.0], [1.0, 1.0, 1.0]]]))
    assert [c.state for c in noisy[0]] == ["noise", "noise"]  # a gap inside the calls' spread; no gap at all
    faster = _timing([[[1.0, 1.1], [1.0, 1.1]]], [[[2.0, 2.1], [2.0, 2.1]]])
    assert "was slower" not in view.fused_verdict(faster, lang="en")  # nothing slower: no such sentence
    medians_only = cost.FusedTiming((16, 128), (64,), np.array([[1e-4, 2e-4]]), np.array([[3e-4, 2e-4]]), 0.0)
    assert [c.state for c in mixers.fused_verdicts(medians_only)[0]] == ["noise", "noise"]  # one number a side


def test_the_chart_draws_the_band_the_verdict_reads():
    """A point far from 1 whose calls spread across 1 is within noise, and the chart shows it: each point is the
    ratio of the mean times with a bar over the spread, which crosses the equal-time line exactly at noise."""
    f = [[[1.0, 1.1, 0.9], [1.0, 1.0, 4.0], [3.0, 3.2, 2.8]]]  # faster; one slow fused call; slower
    t = [[[2.0, 2.1, 1.9], [1.0, 1.1, 0.9], [2.0, 2.05, 1.95]]]
    timing = cost.FusedTiming((16, 128, 1024), (64,), np.median(f, -1), np.median(t, -1), 0.0, np.array(f), np.array(t))
    states = [c.state for c in mixers.fused_verdicts(timing)[0]]
    assert states == ["holds", "noise", "not_holds"]
    trace = view.fused(timing, lang="en").chart.figure.data[0]
    y = np.array(trace.y)
    np.testing.assert_allclose(y, np.mean(t, -1)[0] / np.mean(f, -1)[0])  # 0.5 at N = 128: three look 2× faster
    low, high = y - np.array(trace.error_y.arrayminus), y + np.array(trace.error_y.array)
    crosses = (low <= 1) & (high >= 1)
    assert list(crosses) == [s == "noise" for s in states] and y[1] < 0.6  # far from 1, yet its bar reaches 1
    axis = view.fused(timing, lang="en").chart.figure.layout.yaxis  # a log axis showing every point and 1
    assert axis.type == "log" and 10 ** axis.range[0] < min(*y, 1) and 10 ** axis.range[1] > max(*y, 1)
    for lang in ("en", "zh"):
        words = view.fused(timing, lang=lang).note
        assert locales.text("mixers", "fused_same", lang) in words  # the verdict names the line it reads bars against
