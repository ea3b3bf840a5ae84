"""Review (enc): section 3's readings of a position table are measured on the table shown, not written once for all.

The page said "nearby positions are no more alike than distant ones" of every untrained table and "bands along the
diagonal mean the model learned that nearby positions belong together" of every trained one, whatever the map
showed: four of the five bundled trained tables have no such band at 64 positions (tiny-moe, the block variants,
the position lab's model), and the sinusoidal table at width 2 has none either."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.analysis import self_attention as sa
from tx_explorer.views import self_attention as view
from tx_explorer.views import signed

pytestmark = pytest.mark.usefixtures("one_thread")
TABLES, _ = sa.bundled_position_tables()


def _near_far(sim: np.ndarray) -> tuple[float, float, int]:
    """Independently: the mean similarity of pairs 1–2 apart and of pairs at least max(3, ⌈n/2⌉) apart."""
    n = sim.shape[0]
    far_from = max(3, -(-n // 2))
    near = [sim[i, j] for i in range(n) for j in range(n) if 1 <= abs(i - j) <= 2]
    far = [sim[i, j] for i in range(n) for j in range(n) if abs(i - j) >= far_from]
    return float(np.mean(near)), float(np.mean(far)), far_from


def test_distance_profile_tells_a_band_from_none_and_from_its_reverse():
    sinus = sa.distance_profile(sa.position_similarity(sa.position_table("sinusoidal", 64, 64)))
    assert sinus.band == "band" and sinus.near > 0.9 and 0.5 < sinus.far < 0.55 and sinus.far_from == 32
    assert sinus.diagonal_spread < sa.TOEPLITZ_TOL  # a function of i − j alone
    i = torch.arange(8.0)
    apart = (i[:, None] - i[None, :]).abs()
    assert sa.distance_profile(torch.exp(-apart)).band == "band"
    assert sa.distance_profile(1 - torch.exp(-apart)).band == "inverse"  # distant pairs alike, near ones not
    flat = torch.full((8, 8), 0.3).fill_diagonal_(1.0)
    assert sa.distance_profile(flat).band == "none" and sa.distance_profile(flat).diagonal_spread == 0.0
    assert sa.distance_profile(torch.eye(3)).band == "short"  # no pair 3 or more apart


SOURCES = [("sinusoidal", 64, 64), ("sinusoidal", 64, 2), ("learned", 64, 64), ("learned", 8, 64)]
SOURCES += [(name, 64, 0) for name in sorted(TABLES)]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(("source", "n", "dim"), SOURCES)
def test_the_reading_says_what_the_map_shown_measures(source, n, dim, lang):
    T = lambda key, **kw: locales.text("self_attention", key, lang, **kw)  # noqa: E731
    table, sim, _ = view.encodings(source, n, dim, 0, TABLES, lang=lang)
    reading = view.encoding_reading(source, table.data, sim.data, trained=source in TABLES, lang=lang)
    near, far, far_from = _near_far(sim.data)
    assert signed(f"{near:.3f}") in reading and signed(f"{far:.3f}") in reading and str(far_from) in reading, reading
    band = T("enc_band_band", diff=f"{near - far:.3f}", margin=0.1)
    assert (band in reading) == (near - far >= 0.1), reading
    assert (T("enc_band_none", diff=signed(f"{near - far:+.3f}"), margin=0.1) in reading) == (abs(near - far) < 0.1)
    for old in ("bands along the diagonal mean", "沿对角线的条带说明", "has no structure beyond the diagonal"):
        assert old not in reading


def test_a_chance_band_in_an_untrained_table_is_said_to_be_chance():
    table, sim, _ = view.encodings("learned", 8, 64, 0)  # seed 0: nearby pairs 0.11 more alike, by chance
    reading = view.encoding_reading("learned", table.data, sim.data)
    near, far, _ = _near_far(sim.data)
    assert near - far >= 0.1 and "a band along the diagonal" in reading
    assert "independent random draws, so that difference is chance" in reading and "±0.12" in reading


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_reads_a_trained_table_without_a_band_as_none(lang):
    if "tiny-moe" not in TABLES:
        pytest.skip("tiny-moe's bundle is not here")
    at = open_page("self_attention", lang=lang, sa_open_enc=True, enc_source="tiny-moe")
    assert_clean(at)
    text = "\n".join(m.value for m in at.markdown)
    near, far, _ = _near_far(sa.position_similarity(TABLES["tiny-moe"][:64]).numpy())
    none = locales.text("self_attention", "enc_band_none", lang, diff=f"{near - far:+.3f}", margin=0.1)
    assert none in text and f"{near:.3f}" in text, text[-800:]
    assert "bands along the diagonal mean" not in text and "沿对角线的条带说明" not in text


def test_the_table_s_dimension_axis_writes_a_few_round_labels_upright() -> None:
    """The table's x axis wrote every 5th of 128 dimensions (0, 5, … 125), turned on its side and crowded."""
    table, _, _ = view.encodings("sinusoidal", 16, 128, 0)
    x = table.figure.layout.xaxis
    assert list(x.ticktext) == ["0", "20", "40", "60", "80", "100", "120"] and x.tickangle == 0
