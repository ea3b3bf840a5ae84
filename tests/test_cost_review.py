"""A student's review of the cost page's measure buttons: the IO section's and the mixers' (function level, fake
measurements: nothing here is timed)."""

from __future__ import annotations

import re

import pytest

from tx_explorer.analysis import cost, mixers
from tx_explorer.views import flash_io as io_view
from tx_explorer.views import mixers as mix_view

HAN = re.compile(r"[\u4e00-\u9fff]")


def fake_measure(method, n, **kw):
    """Naive: quadratic peak, faster below N = 512; tiled: linear peak."""
    if method == "naive":
        return cost.Measurement(method, n, 1e-8 * n * n, 4 * n * n, kw["repeats"])
    return cost.Measurement(method, n, 4e-6 * n, 1000 * n, kw["repeats"])


def test_io_peaks_are_numbers_that_relabel_when_the_language_switches():
    """The rows were words in the language of the press (the page kept them under that language), so switching
    language after measuring made the table vanish: the measurement is now numbers, worded when drawn."""
    peaks = io_view.measure_peaks(64, 128, measure=fake_measure, lang="zh")
    en, zh = io_view.measured_rows(peaks, lang="en"), io_view.measured_rows(peaks, lang="zh")
    assert [r["N"] for r in en] == [r["N"] for r in zh] == ["128", "256", "512", "1,024"]
    assert "peak, naive (measured)" in en[0] and "峰值，朴素（实测）" in zh[0]
    assert list(en[0].values())[1:] == list(zh[0].values())[1:]  # the same numbers under either language's headers


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_io_measurement_says_where_and_reads_its_verdict_from_the_numbers(lang):
    """The table had no words of its own: no machine or threads, and the intro's "quadratic / linear" and the note's
    "the tiled kernel can be slower" were never read from what was measured."""
    peaks = io_view.measure_peaks(64, 128, measure=fake_measure)
    note = io_view.measured_note(peaks, lang=lang)
    assert str(peaks.threads) in note and "CPU" in note
    assert "64" in note and "8" in note  # N² and N over 128 … 1,024 (8× longer)
    assert "64.0" in note and "8.0" in note  # the fake peaks grew exactly as N² and N
    faster = {"en": "faster one at 2 of 4 lengths (N = 512, N = 1,024)", "zh": "有 2 个更快（N = 512、N = 1,024）"}
    assert faster[lang] in note
    slow = io_view.measure_peaks(64, 128, measure=lambda m, n, **kw: fake_measure(m, 16, **kw))  # naive faster
    none = {"en": "slower than the naive one at all 4 lengths", "zh": "在全部 4 个长度上，分块内核都比朴素内核慢"}
    assert none[lang] in io_view.measured_note(slow, lang=lang) and none[lang] not in note


def test_io_formulas_name_their_algorithms_in_the_page_language():
    """The formulas read "naive:" and "tiled:" on the 中文 page."""
    en, zh = io_view.latex("en"), io_view.latex("zh")
    assert "naive" in en[0] and "tiled" in en[1]
    assert all(HAN.search(f) and not re.search(r"naive|tiled", f) for f in zh)
    assert [f.split(r"\ ", 1)[1] for f in en] == [f.split(r"\ ", 1)[1] for f in zh] == list(io_view.LATEX)


def fake_mixer(kind, n, **kw):
    return mixers.MixerRun(kind, n, 1e-3 * n, 100 * n * (n if kind == "attention" else 1), 1)


def share(fraction: float) -> mixers.MatmulShare:
    return mixers.MatmulShare(1000 * fraction, 1000 * (1 - fraction), [("aten::addmm", 500.0)])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mixer_note_says_where_it_was_timed_and_reads_the_width_trend_from_two_profiles(lang, monkeypatch):
    """The note asserted "the element-wise share shrinks as D grows" from one profile at one width, and did not say
    where or on how many threads the mixers were timed."""
    for grew, (small, large) in ((True, (0.4, 0.7)), (False, (0.7, 0.4))):
        shares = iter([share(small), share(large)])
        monkeypatch.setattr(mixers, "matmul_share", lambda n, shares=shares, **kw: next(shares))
        found = mix_view.measure_all(256, dim=32, measure=fake_mixer)
        assert found.device == "cpu" and found.threads >= 1
        note = mix_view.compare(found, max_n=256, dim=32, lang=lang).note
        assert "cpu" in note and str(found.threads) in note
        assert f"{100 * small:.0f}%" in note and f"{100 * large:.0f}%" in note
        words = {"en": ("it grew with the width", "did not grow"), "zh": ("占比随宽度增大", "没有随宽度增大")}[lang]
        assert (words[0] in note) == grew and (words[1] in note) == (not grew)


def test_the_profiles_largest_operators_are_listed_in_the_page_language(monkeypatch):
    """The 中文 note listed "addmm 7.6 ms, var 0.87 ms" with English commas."""
    top = [("aten::addmm", 7600.0), ("aten::var", 870.0)]
    monkeypatch.setattr(mixers, "matmul_share", lambda n, **kw: mixers.MatmulShare(7600.0, 870.0, top))
    found = mix_view.measure_all(256, dim=32, measure=fake_mixer)
    assert "addmm 7.6 ms、var 0.87 ms" in mix_view.compare(found, max_n=256, dim=32, lang="zh").note
    assert "addmm 7.6 ms, var 0.87 ms" in mix_view.compare(found, max_n=256, dim=32, lang="en").note


def test_measured_axes_read_in_their_units_at_the_lengths_drawn():
    """The mixer grid's measured panels had one N label ("1000") for 128 … 1,024, a time axis of "0.01 / 0.001" with
    no unit, a memory axis of "1M" and hovers of "1.31e+06"; the IO charts mixed "1000" with "10k" on N and wrote
    "2 3 4 … 9 100" on the tile axis."""
    found = mix_view.measure_all(1024, measure=fake_mixer)
    fig = mix_view.compare(found, max_n=1024, dim=64, lang="en").grid.figure
    layout = fig.layout
    assert list(layout.xaxis.ticktext) == ["128", "256", "512", "1,024"]  # time, measured at four lengths
    assert all(t.endswith("s") for t in layout.yaxis.ticktext) and "100ms" in layout.yaxis.ticktext
    assert all(t.endswith("B") for t in layout.yaxis2.ticktext)
    assert set(layout.yaxis3.ticktext) <= {"1", "10", "100", "1k", "10k"}  # a count: "10k" not beside "1000"
    hovers = {t.customdata[-1] for t in fig.data if t.xaxis == "x2"}  # the memory panel's largest N
    assert all(h.endswith("B") and "e+" not in h for h in hovers)
    io = io_view.io(64, 128, 4096, measure=None)
    assert list(io.by_n.figure.layout.xaxis.ticktext) == ["128", "512", "2,048", "8,192", "32,768"]
    assert list(io.by_tile.figure.layout.xaxis.ticktext) == ["16", "32", "64", "128", "256", "512"]
    assert io.by_n.figure.data[0].customdata[0].endswith("B")
