"""The position lab, the KV cache stepper and the cost page's IO section through AppTest: first
load in both languages, the live checks shown with their numbers, one interaction each."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean, open_page, plotly_titles
from tx_explorer import locales

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


def _titles(at) -> list[str]:
    return plotly_titles(at)  # as written: a title wraps to the narrowest window's width


def _in_chinese(at):
    """Rerun the page with the interface in Chinese; it must still run clean."""
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    return at


@pytest.mark.parametrize("page", ["position_lab", "kv_cache"])
def test_every_string_is_bilingual_with_the_same_placeholders(page):
    import string

    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    for name in (page, "flash_io"):
        for key, entry in locales.table(name).items():
            assert entry.get("en", "").strip() and entry.get("zh", "").strip(), key
            assert fields(entry["en"]) == fields(entry["zh"]), key


def test_position_lab_shows_runs_verdicts_and_the_live_rotary_check():
    at = open_page("position_lab")
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]  # the shipped bundle verified and loaded
    titles = _titles(at)
    assert any("at each position" in t for t in titles) and any("by distance" in t for t in titles)
    # losses by scheme and the bigram; claims: order and loss inside for each of 4 schemes, bigram, ALiBi, rotary
    assert len(at.table) == 2 and len(at.table[0].value) == 6 and len(at.table[1].value) == 11
    assert all(" ± " in cell for cell in at.table[0].value.iloc[:5, 1])  # mean ± std over the seeds
    assert " ± " not in at.table[0].value.iloc[5, 1]  # the bigram is counted: no seeds
    findings = next(m.value for m in at.markdown if m.value.startswith("**What these runs show.**"))
    assert f"bigram model's {float(at.table[0].value.iloc[5, 1]):.2f}" in findings  # the table's bigram, in words
    verdicts = at.table[1].value.iloc[:, 1]  # each states its gap, its spread and the seeds
    assert all("gap" in v and "spread" in v and "seeds 0, 1, 2" in v for v in verdicts), list(verdicts)
    assert any("seeds (0, 1, 2)" in c.value for c in at.caption)
    check = at.success[0].value
    assert "largest deviation" in check
    dev = float(check.split("**")[1])
    assert dev < 1e-12  # float64 by default
    next(t for t in at.toggle if t.label == "float64").set_value(False).run()
    assert_clean(at)
    assert 1e-12 < float(at.success[0].value.split("**")[1]) < 1e-3  # float32 rounding, still tiny
    assert "最大偏差" in _in_chinese(at).success[0].value


def test_kv_cache_page_decodes_and_shows_the_cache_growing():
    at = open_page("kv_cache")
    assert_clean(at)
    ok = at.success[0].value
    assert "agree at every step" in ok and "equal the formula at every step: yes" in ok
    titles = _titles(at)
    assert any(t.startswith("Cached keys") for t in titles) and any("Which KV head" in t for t in titles)
    assert any("128k" in t or "context length" in t for t in titles)
    assert len(at.table) == 1  # the published models; the four-way sharing table computes when opened
    at.session_state["kv_open_sharing"] = True
    at.run()
    assert_clean(at)
    sharing, published = at.table[0].value, at.table[1].value
    assert list(sharing.iloc[:, -1]) == ["✓"] * 4  # formula = tensors for MHA, GQA, MQA, window
    assert len(published) == 8  # Llama 2/3, Mistral, Qwen2, Gemma 2, Gemma 3 (two) and gpt-oss
    window = at.number_input(key="kv_window")  # tops at the tokens the table runs, and says so (not 1,000,000)
    assert window.max == 128 and "at most 128, " in window.proto.help
    slider = next(s for s in at.slider if s.label == "Step")
    slider.set_value(2).run()
    assert_clean(at)
    assert any("After step 2: 3 rows per layer" in m.value for m in at.markdown)
    # a prompt that opens as the last one decoded: those steps come from its cache (a prefix cache), said so
    at.text_input(key="kv_prompt").set_value("Zebras graze on the open plain at dawn").run()
    assert not any("were not run again" in c.value for c in at.caption)
    at.text_input(key="kv_prompt").set_value("Zebras graze on the open plain at dusk").run()
    assert_clean(at)
    note = next(c.value for c in at.caption if "were not run again" in c.value)
    assert "opens with the same" in note and "agree at every step" in at.success[0].value
    assert "一致" in _in_chinese(at).success[0].value


def test_cost_page_counts_io_beside_measured_peaks():
    at = open_page("cost_of_attention")
    assert_clean(at)
    assert not any("Bytes moved between slow and fast memory" in t for t in _titles(at))  # opens on demand
    at.session_state["cost_open_io"] = True
    at.run()
    assert_clean(at)
    assert any("Bytes moved between slow and fast memory" in t for t in _titles(at))
    text = "\n".join(m.value for m in at.markdown)
    assert "fewer bytes than the naive one" in text and "slower than the naive one at moderate N" in text
    assert not any("peak, tiled (measured)" in df.value.columns for df in at.dataframe)  # measured when asked
    at.button(key="io_measure").click().run()
    assert_clean(at)
    frames = [df.value for df in at.dataframe]
    io = next(f for f in frames if "peak, tiled (measured)" in f.columns)
    assert list(io["N"]) == ["128", "256", "512", "1,024"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_position_lab_writes_the_distance_as_m_minus_n_throughout(lang):
    """The rotary section names positions m (query) and n (key): its distance axis says m − n as its title does,
    and so does every other text of the page (no i − j beside them)."""
    from tx_explorer.views import position_lab as view

    demo = view.rotary_demo(16, 10_000.0, 8, 2, 0, True, lang=lang)
    layout = demo.by_distance.figure.layout
    assert "m − n" in layout.title.text and "m − n" in layout.xaxis.title.text, layout.xaxis.title.text
    assert not [k for k, entry in locales.table("position_lab").items() if "i − j" in entry[lang]]
