"""The operator page's figures and words for odd typed matrices: entries near 0 or near the bound, a single query."""

import numpy as np
import pytest
import torch

from tx_explorer.analysis import norm_lab
from tx_explorer.analysis import operator_lab as op
from tx_explorer.views import operator as view
from tx_explorer.viz import charts, heatmap, style

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread

K = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
V = torch.tensor([[1.0], [2.0]])
THIRD = style.PAGE_PX / 3  # Q, K, V and E, A, Y are drawn three across


def plot_width(fig) -> float:
    style.tidy(fig, THIRD)
    return THIRD - fig.layout.margin.l - fig.layout.margin.r


@pytest.mark.parametrize("tiny", [1e-6, 1e-20, 1e-30])
def test_tiny_entries_keep_the_plot_as_wide_as_zeros_do(tiny):
    """Q = 1e-30 0 0: the colour bar's "−0.5×10⁻³⁰" took the figure's width (a 19 px plot at 1e-20); its ticks are
    now as short as the cells' numbers, which say 1e-30 where ".2f" said 0.00."""
    zeros = plot_width(view.inputs(torch.zeros(1, 3), K, V)[0].figure)
    q = view.inputs(torch.tensor([[tiny, 0.0, 0.0]]), K, V)[0].figure
    e = view.steps(torch.tensor([[tiny, 0.0, 0.0]]), K, V).scores.figure
    for fig in (q, e):
        assert plot_width(fig) >= zeros - 15, fig.layout.margin
        assert max(len(t) for t in fig.data[0].colorbar.ticktext) <= 6, fig.data[0].colorbar.ticktext
    assert q.data[0].text[0][0] == heatmap.number(tiny) and q.data[0].text[0][1] == "0"


def test_huge_scores_are_written_by_their_size_in_the_cells_and_the_summary():
    """Q = 1000 1000 1000 against ±1000 keys: E's cells read "1732050.75" past their edges, the summary "2449489.75"."""
    q, k = torch.full((1, 3), 1000.0), torch.tensor([[1000.0] * 3, [-1000.0] * 3])
    steps = view.steps(q, k, V)
    assert steps.scores.figure.data[0].text.tolist() == [["1.73e6", "−1.73e6"]]
    assert "**2.45e6**" in steps.numbers and "2449489" not in steps.numbers
    assert steps.scores.figure.data[0].colorbar.ticktext == ("−1e6", "0", "1e6")
    assert "**0.00**" in view.steps(torch.zeros(1, 3), K, V).numbers  # ordinary sizes: two decimals, as before


@pytest.mark.parametrize(
    ("v", "scale", "text"),
    [
        (0.5, None, "0.50"),
        (1000.0, None, "1000.00"),
        (12345.6, None, "1.23e4"),
        (0.0, 1e-30, "0"),
        (0.0, 0.0, "0.00"),
        (-0.47, None, "−0.47"),  # a true minus, as the prose writes it
        (-0.001, 1.0, "0.00"),  # not "-0.00" beside 0.00
        (-5e-31, None, "−5e−31"),
    ],
)
def test_a_number_is_written_by_the_size_of_its_neighbours(v, scale, text):
    assert heatmap.number(v, scale) == text


def test_ordinary_colour_bars_keep_plotlys_ticks():
    """Within PLAIN Plotly's labels are short and as many as the bar holds (a short bar of the head inspector)."""
    assert charts.signed_heatmap(np.array([[-2.0, 1.0]])).data[0].colorbar.ticktext is None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_query_over_one_context_vector_reads_right(lang):
    """N_Q = N_X = 1 said "1 outputs, one per query" and "Run with the 1 queries"."""
    _, words = view.cross(nq=1, nx=1, lang=lang)
    for odd in ("1 outputs", "1 queries"):
        assert odd not in words
    if lang == "en":
        assert "one output per query (1 in all)" in words


@pytest.mark.parametrize("minus", ["\u2212", "\uff0d", "\u2013", "-"])
def test_a_typed_matrix_takes_the_minus_the_axes_print(minus):
    """The app's axes print "−1" (U+2212); typed back, it was "not a number". A Chinese keyboard types "－"."""
    assert op.parse_matrix(f"{minus}1 2\n3 {minus}4.5").tolist() == [[-1.0, 2.0], [3.0, -4.5]]
    assert norm_lab.parse_vector(f"{minus}1, 2").tolist() == [-1.0, 2.0]  # the norms page reads numbers alike
