"""Claims over seeds, and timed calls: a verdict holds only when its gap exceeds the spread, else it is noise."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from tx_explorer.analysis import spread


def test_stat_is_the_mean_and_sample_deviation_over_seeds():
    x = spread.stat([4.0, 4.2, 4.7])
    assert x.values == (4.0, 4.2, 4.7)
    assert x.mean == pytest.approx(statistics.fmean([4.0, 4.2, 4.7]))
    assert x.std == pytest.approx(math.sqrt(((4 - x.mean) ** 2 + (4.2 - x.mean) ** 2 + (4.7 - x.mean) ** 2) / 2))
    assert spread.stat(0.25) == spread.Stat((0.25,), 0.25, 0.0)  # an exact number: no spread
    assert math.isnan(spread.stat([3.0]).std)  # one seed: the spread was not measured
    assert spread.stat([3.0, None]).mean == math.inf  # a diverged seed: infinitely bad
    with pytest.raises(ValueError):
        spread.stat([])


@pytest.mark.parametrize(
    ("left", "right", "state"),
    [
        ([4.0, 4.1, 4.2], [4.5, 4.6, 4.7], "holds"),  # gap 0.5 > spread 0.2
        ([4.5, 4.6, 4.7], [4.0, 4.1, 4.2], "not_holds"),  # the same gap the other way
        ([4.0, 4.3, 4.6], [4.2, 4.4, 4.6], "noise"),  # gap 0.1 < spread 0.5: the right direction is not enough
        ([4.0, 4.1, 4.2], 4.15, "noise"),  # against a threshold: gap 0.05 < the left side's spread 0.1
        ([1e-7, 2e-7, 3e-7], 1e-4, "holds"),  # rounding-sized against a threshold
        ([4.0], [5.0], "noise"),  # one seed each: no spread to beat
        ([4.0, 4.1, 4.2], [5.0, None, 5.1], "holds"),  # a diverged seed on the right: infinitely worse
        ([4.0, None, 4.2], [5.0, 5.0, 5.1], "not_holds"),
        ([None, 4.0, 4.1], [None, 5.0, 5.1], "noise"),  # both diverged somewhere: no gap to read
    ],
)
def test_less_holds_only_when_the_gap_exceeds_the_spread(left, right, state):
    c = spread.less(left, right)
    assert c.state == state
    a, b = spread.stat(left), spread.stat(right)
    if math.isfinite(a.mean) and math.isfinite(b.mean):
        assert c.gap == pytest.approx(b.mean - a.mean)
        assert c.spread == pytest.approx(a.std + b.std, nan_ok=True)


def test_a_gap_equal_to_the_spread_is_still_noise():
    c = spread.less([1.0, 3.0], [4.0, 4.0])  # gap 2, spread √2 + 0
    assert c.state == "holds"
    c = spread.less([0.0, 2.0], [1.0 + math.sqrt(2), 1.0 + math.sqrt(2)])  # gap = spread exactly
    assert c.gap == pytest.approx(c.spread) and c.state == "noise"


def test_a_claim_of_several_comparisons():
    assert spread.overall(["holds", "holds"]) == "holds"
    assert spread.overall(["holds", "noise"]) == "noise"
    assert spread.overall(["noise", "not_holds"]) == "not_holds"


def test_plus_minus_shows_the_spread_when_there_is_one():
    assert spread.stat([4.0, 4.2]).plus_minus() == "4.100 ± 0.141"
    assert spread.stat([4.0]).plus_minus(2) == "4.00"


def test_timed_calls_are_read_as_numpy_reads_their_median_and_quartiles():
    values = [0.9, 1.3, 1.0, 7.5, 1.1]  # one call slowed by another job
    c = spread.calls(values)
    q1, median, q3 = np.percentile(values, [25, 50, 75])  # numpy's default (linear) quartiles
    assert (c.median, c.half_iqr) == (pytest.approx(median), pytest.approx((q3 - q1) / 2))
    assert math.isnan(spread.calls([2.0]).half_iqr)  # one call: its spread was not measured
    with pytest.raises(ValueError):
        spread.calls([])


def test_faster_judges_medians_against_half_ranges_as_less_judges_means_against_deviations():
    fast, slow = [1.0, 1.1, 0.9, 1.0, 9.0], [2.0, 2.1, 1.9, 2.0, 2.05]
    c = spread.faster(fast, slow)
    assert c.state == "holds" and c.gap == pytest.approx(1.0)
    assert c.spread == pytest.approx(spread.calls(fast).half_iqr + spread.calls(slow).half_iqr)
    assert spread.less(fast, slow).state == "noise"  # the mean and deviation of the same calls: the slow one decides
    assert spread.faster(slow, fast).state == "not_holds"
    assert spread.faster([1.0], [2.0]).state == "noise"  # one call a side: no spread, no verdict
