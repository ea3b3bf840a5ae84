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
    f = view.fused(r, lang="en")  # medians only: no spread, so every size is within noise and no range is quoted
    assert "No size lies outside the noise band: the ratios of the median times run from 1.00× to 3.00×" in f.note
    assert f.chart.figure.data[0].name == "D = 64"
    np.testing.assert_allclose(f.chart.figure.data[0].y, [3.0, 1.0])
    assert locales.text("mixers", "fused_title", "zh") in view.fused(r, lang="zh").chart.figure.layout.title.text


# Faster at N = 16 (3 ÷ 1 = 2.0), calls spread wide at N = 128 (ratio of the medians 0.5, within noise), faster at
# N = 1024 (1.5): the noisy 0.5 is the smallest ratio, but it is no end of the range the note quotes.
NOISY_MIDDLE = (
    [[1.0, 1.1, 0.9], [0.5, 1.0, 5.0], [2.0, 2.1, 1.9]],
    [[2.0, 2.1, 1.9], [0.5, 0.55, 0.45], [3.0, 3.1, 2.9]],
)


def _grid(ds, fused_calls, three_calls):
    f, t = np.array([fused_calls] * len(ds), dtype=float), np.array([three_calls] * len(ds), dtype=float)
    return cost.FusedTiming((16, 128, 1024), ds, np.median(f, -1), np.median(t, -1), 0.0, f, t)


def test_the_range_is_read_only_at_sizes_outside_the_noise_band():
    timing = _grid((64,), *NOISY_MIDDLE)
    assert [c.state for c in mixers.fused_verdicts(timing)[0]] == ["holds", "noise", "holds"]
    en, zh = view.fused(timing, lang="en").note, view.fused(timing, lang="zh").note
    assert "At the 2 of 3 sizes outside the noise band, three separate products take 1.50× to 2.00×" in en
    assert "most at N = 16, D = 64, least at N = 1024, D = 64" in en and "0.50" not in en
    assert "1.50 到 2.00 倍" in zh and "最少在 N = 1024、D = 64" in zh and "0.50" not in zh
    same = [2.0, 2.1, 1.9]  # N = 1024 now takes the same time both ways: only N = 16 is outside the noise band
    one = _grid((64,), [*NOISY_MIDDLE[0][:2], same], [*NOISY_MIDDLE[1][:2], same])
    assert "Only one of 3 sizes lies outside the noise band: at N = 16, D = 64" in view.fused(one, lang="en").note


def test_the_slowest_fused_time_is_named_a_median_at_its_size():
    timing = _grid((64, 256), *NOISY_MIDDLE)  # medians 1.0, 1.0, 2.0 s: the slowest size is N = 1024
    for lang, words in (
        ("en", "slowest size takes 2000.00 ms (the median of its calls there, at N = 1024, D = 64)"),
        ("zh", "最慢的尺寸耗时 2000.00 ms（该尺寸各次调用的中位数，N = 1024、D = 64）"),
    ):
        note = view.fused(timing, lang=lang).note
        assert words in note and "call:" not in note and "调用：" not in note


def test_every_series_and_the_equal_time_label_stay_in_view():
    """Series at the same N sit apart along x (one's bar no longer hides another's) and hover the true N; the line
    at 1 is named in the legend, not by a label on the chart that sat on a marker."""
    timing = _grid((64, 256, 512), *NOISY_MIDDLE)
    fig = view.fused(timing, lang="zh").chart.figure
    series = [t for t in fig.data if (t.name or "").startswith("D = ")]  # a bar's cut-end markers: unnamed
    xs = np.array([t.x for t in series])  # [series, N]
    assert len(series) == 3 and (np.diff(xs, axis=0) > 0).all()  # each N: three distinct x, in the legend's order
    np.testing.assert_allclose(np.log10(xs).mean(axis=0), np.log10(timing.ns))  # centred on the true N
    assert all(list(t.customdata) == list(timing.ns) and "customdata" in t.hovertemplate for t in series)
    (line,) = [t for t in fig.data if t.name == locales.text("mixers", "fused_same", "zh")]
    assert list(line.y) == [1.0, 1.0] and not fig.layout.annotations
    np.testing.assert_allclose(10 ** np.array(fig.layout.xaxis.range), line.x)  # the line runs across the axis
    assert line.x[0] < xs.min() and xs.max() < line.x[1]  # which spans every point


def test_the_sweep_keeps_every_call_and_its_medians():
    r = cost.fused_qkv_sweep(ns=(4,), ds=(8, 12), repeats=3)
    assert r.fused_calls.shape == r.separate_calls.shape == (2, 1, 3)
    np.testing.assert_array_equal(r.fused, np.median(r.fused_calls, axis=-1))
    np.testing.assert_array_equal(r.separate, np.median(r.separate_calls, axis=-1))


def _timing(fused_calls, three_calls):
    f, t = np.array(fused_calls, dtype=float), np.array(three_calls, dtype=float)  # (D, N, calls)
    return cost.FusedTiming((16, 128), (64,), np.median(f, -1), np.median(t, -1), 0.0, f, t)


def test_fused_is_judged_size_by_size_against_the_spread_of_its_calls():
    """Faster at N = 16 (beyond both spreads), slower at N = 128: read against numpy's medians and quartiles."""
    f = [[[1.0, 1.1, 0.9], [3.0, 3.2, 2.8]]]
    t = [[[2.0, 2.1, 1.9], [2.0, 2.05, 1.95]]]
    (fast, slow) = mixers.fused_verdicts(_timing(f, t))[0]
    assert fast.state == "holds" and slow.state == "not_holds"
    gap = np.median(t[0][1]) - np.median(f[0][1])
    half_iqr = lambda x: np.subtract(*np.percentile(x, [75, 25])) / 2  # noqa: E731
    assert slow.gap == pytest.approx(gap) and slow.spread == pytest.approx(half_iqr(f[0][1]) + half_iqr(t[0][1]))
    words = view.fused_verdict(_timing(f, t), lang="en")
    assert "faster than three at 1 of 2 sizes, slower at 1, and within noise at 0" in words
    assert f"slower at N = 128, D = 64 ({-gap * 1e3:.3f} ms slower" in words
    noisy = mixers.fused_verdicts(_timing([[[1.0, 3.0, 2.0], [1.0, 1.0, 1.0]]], [[[2.5, 1.5, 2.0], [1.0, 1.0, 1.0]]]))
    assert [c.state for c in noisy[0]] == ["noise", "noise"]  # a gap inside the calls' spread; no gap at all
    faster = _timing([[[1.0, 1.1], [1.0, 1.1]]], [[[2.0, 2.1], [2.0, 2.1]]])
    assert "was slower" not in view.fused_verdict(faster, lang="en")  # nothing slower: no such sentence
    medians_only = cost.FusedTiming((16, 128), (64,), np.array([[1e-4, 2e-4]]), np.array([[3e-4, 2e-4]]), 0.0)
    assert [c.state for c in mixers.fused_verdicts(medians_only)[0]] == ["noise", "noise"]  # one number a side


def test_one_slow_call_in_five_leaves_a_clear_size_clear():
    """A call slowed by another job (a class on one server) made the fused product's standard deviation as large as
    its mean, so a size three times faster read "within noise", its bar running off the chart: the median and the
    quartiles of five calls do not move for it."""
    steady = [1.0, 1.05, 0.95, 1.02, 0.98]
    three = [[[3.0, 3.1, 2.9, 3.05, 2.95]]]
    for slowed in (steady, [1.0, 1.05, 0.95, 1.02, 9.0]):
        timing = cost.FusedTiming((16,), (64,), np.median([[slowed]], -1), np.median(three, -1), 0.0,
                                  np.array([[slowed]]), np.array(three))  # fmt: skip
        assert [c.state for c in mixers.fused_verdicts(timing)[0]] == ["holds"]
        ratio, low, high = mixers.fused_ratio_band(timing)
        assert 2.9 < ratio[0, 0] <= 3.0 and 2.5 < low[0, 0] < ratio[0, 0] < high[0, 0] < 3.5


def test_the_chart_draws_the_band_the_verdict_reads():
    """A point far from 1 whose calls spread across 1 is within noise, and the chart shows it: each point is the
    ratio of the median times with a bar over the spread, which crosses the equal-time line exactly at noise."""
    f = [[[1.0, 1.1, 0.9], [0.5, 1.0, 5.0], [3.0, 3.2, 2.8]]]  # faster; fused calls spread wide; slower
    t = [[[2.0, 2.1, 1.9], [0.5, 0.55, 0.45], [2.0, 2.05, 1.95]]]
    timing = cost.FusedTiming((16, 128, 1024), (64,), np.median(f, -1), np.median(t, -1), 0.0, np.array(f), np.array(t))
    states = [c.state for c in mixers.fused_verdicts(timing)[0]]
    assert states == ["holds", "noise", "not_holds"]
    trace = view.fused(timing, lang="en").chart.figure.data[0]
    y = np.array(trace.y)
    np.testing.assert_allclose(y, np.median(t, -1)[0] / np.median(f, -1)[0])  # 0.5 at N = 128: three look 2× faster
    low, high = y - np.array(trace.error_y.arrayminus), y + np.array(trace.error_y.array)
    crosses = (low <= 1) & (high >= 1)
    assert list(crosses) == [s == "noise" for s in states] and y[1] < 0.6  # far from 1, yet its bar reaches 1
    axis = view.fused(timing, lang="en").chart.figure.layout.yaxis  # a log axis showing every point and 1
    assert axis.type == "log" and 10 ** axis.range[0] < min(*y, 1) and 10 ** axis.range[1] > max(*y, 1)
    for lang in ("en", "zh"):
        words = view.fused(timing, lang=lang).note
        assert locales.text("mixers", "fused_same", lang) in words  # the verdict names the line it reads bars against
