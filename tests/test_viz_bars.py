"""Bar charts of tokens and models (tx_explorer.viz.bars): the numbers drawn are the numbers given."""

from __future__ import annotations

import numpy as np

from tx_explorer.viz import bars, charts


def test_topk_bars_draw_the_probabilities_most_likely_on_top_and_mark_one():
    fig = bars.topk_bars(["a", "b", "c"], [0.7, 0.2, 0.1], highlight=1)
    (bar,) = fig.data
    assert list(bar.x) == [0.7, 0.2, 0.1] and list(bar.customdata) == ["a", "b", "c"]
    assert list(bar.marker.color) == [0, 1, 0] and fig.layout.yaxis.autorange == "reversed"


def test_stacked_parts_are_shares_that_sum_to_one_and_keep_the_counts_for_hovers():
    fig = bars.stacked_parts(["m1", "m2"], {"x": [1, 2], "y": [3, 6]})
    shares = np.array([list(t.x) for t in fig.data])
    np.testing.assert_allclose(shares.sum(axis=0), [1.0, 1.0])
    assert list(fig.data[1].customdata) == [3, 6] and fig.layout.barmode == "stack"
    assert list(fig.layout.xaxis.range) == [0, 1]  # shares end at 100 % (autorange drew a blank band to 105 %)
    raw = bars.stacked_parts(["m"], {"x": [1], "y": [3]}, share=False)
    assert [list(t.x) for t in raw.data] == [[1.0], [3.0]]
    assert raw.layout.xaxis.tickformat is None and raw.layout.xaxis.exponentformat == "B"  # 1.5B, as the page writes
    assert raw.layout.xaxis.range is None


def test_log_bars_use_a_log_axis_and_labelled_bars_keep_every_series():
    fig = bars.log_bars(["m"], {"x": [1e9]})
    assert fig.layout.yaxis.type == "log" and list(fig.data[0].y) == [1e9]
    grouped = charts.bars(["t1", "t2"], {"p": [0.1, 0.2], "q": [0.3, 0.4]})
    assert [t.name for t in grouped.data] == ["p", "q"]
