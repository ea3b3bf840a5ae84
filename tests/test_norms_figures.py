"""The norms page's maps side by side: each colour bar beside the maps it colours, the titles over their maps."""

from __future__ import annotations

import numpy as np
import pytest

from tx_explorer.viz import norm_figures as vn

WEIGHTS = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]  # causal attention: rows sum to 1


def _layout(maps, diverging=()):
    fig = vn.side_by_side(maps, diverging=diverging)
    domains = [fig.layout[f"xaxis{c or ''}"].domain for c in ["", *range(2, len(maps) + 1)]]
    return fig.layout, domains


def test_the_attention_bar_stands_between_its_maps_and_the_difference_map():
    """The pair's 0–1 bar stood right of the difference map, beside the ±0.05 bar, and read as its scale."""
    layout, (a, b, diff) = _layout({"A": WEIGHTS, "B": WEIGHTS.T, "A − B": WEIGHTS - WEIGHTS.T}, ["A − B"])
    weights_x, diff_x = layout.coloraxis.colorbar.x, layout.coloraxis2.colorbar.x
    assert a[1] < b[0] and b[1] <= weights_x < diff[0]  # right of both attention maps, left of the difference
    assert diff[0] - b[1] > 0.1  # room for the bar and its tick labels between the maps
    assert diff_x >= diff[1]
    assert [t.x for t in layout.annotations] == pytest.approx([np.mean(d) for d in (a, b, diff)])  # titles over maps
    assert np.allclose([a[1] - a[0], b[1] - b[0]], diff[1] - diff[0])  # equally sized maps


def test_one_colour_scale_keeps_its_bar_at_the_right_and_the_maps_evenly_spaced():
    """Maps of one scale (the circuit page's two heads, the identity argument's signed maps): one bar at the right."""
    layout, (a, b) = _layout({"prev": WEIGHTS, "induction": WEIGHTS})
    assert layout.coloraxis.colorbar.x == pytest.approx(1.0) and b[0] - a[1] == pytest.approx(0.06) and a[0] == 0
    layout, domains = _layout({"x": WEIGHTS, "pre": WEIGHTS, "post": -WEIGHTS}, ["x", "pre", "post"])
    assert layout.coloraxis2.colorbar.x == pytest.approx(1.0) and layout.coloraxis.colorbar.x is None
    assert domains[1][0] - domains[0][1] == pytest.approx(domains[2][0] - domains[1][1])
