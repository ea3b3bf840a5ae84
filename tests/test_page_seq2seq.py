"""AppTest of the Seq2Seq page: first load, bad input, examples, the step slider and the evaluation re-run."""

from __future__ import annotations

import pytest
from conftest import assert_clean, open_page, plotly_specs, plotly_titles

from tx_explorer.analysis import seq2seq_eval

SECTIONS = ("s2s_open_mosaic", "s2s_open_step", "s2s_open_bottleneck")  # open on demand (lazy expanders)


def open_all(page):
    for key in SECTIONS:
        page.session_state[key] = True
    return page.run()


@pytest.fixture(scope="module")
def at():
    """The page with every section open."""
    return open_all(open_page("seq2seq"))


def test_first_visit_draws_the_two_alignments_only():
    page = open_page("seq2seq")
    assert_clean(page)
    titles = [s["layout"].get("title", {}).get("text", "") for s in plotly_specs(page)]
    assert len(titles) == 2 and "Bahdanau" in titles[0]  # mosaic, decoder step and bottleneck open on demand


def test_first_load_shows_translations_and_charts(at):
    assert_clean(at)
    assert not at.warning
    assert len(at.code) == 3 and at.code[1].value == "vediamo il cielo"  # fixed, attention, transformer
    specs = plotly_specs(at)
    assert len(specs) >= 8
    titles = [s["layout"].get("title", {}).get("text", "") for s in specs]
    assert any("Bahdanau" in t for t in titles) and any("Token accuracy" in t for t in titles)
    # §1.2's "with attention it does not fall" is measured on the curves drawn, not typed beside them
    assert any(m.value.startswith("**Measured here** (50 held-out sentences per bucket)") for m in at.markdown)


@pytest.mark.parametrize(
    "text, expect",
    [("we see the skyy", "`skyy` (`sky`)"), ("", "Type an English sentence"), ("we see the sky " * 11, "44 words")],
)
def test_bad_input_gives_a_message_not_an_error(at, text, expect):
    at.text_input(key="s2s_text").set_value(text).run()
    assert_clean(at)
    assert any(expect in w.value for w in at.warning), [w.value for w in at.warning]
    assert plotly_specs(at), "the length curves still show"


def test_sentence_outside_the_grammar_still_translates(at):
    at.text_input(key="s2s_text").set_value("we sees the sky").run()
    assert_clean(at)
    assert any("outside the toy grammar" in i.value for i in at.info)
    assert len(at.code) == 3


def test_long_example_and_step_slider(at):
    picker = at.selectbox(key="s2s_example")
    picker.set_value(picker.options[-1]).run()
    assert_clean(at)
    assert at.text_input(key="s2s_text").value.startswith("the cat that sees")
    at.slider[1].set_value(5).run()
    assert_clean(at)
    assert any("Step 5" in s["layout"].get("title", {}).get("text", "") for s in plotly_specs(at))


def test_rerun_evaluation_with_progress(at, monkeypatch):
    real = seq2seq_eval.eval_set
    monkeypatch.setattr(
        seq2seq_eval, "eval_set", lambda per_bucket=1, seed=seq2seq_eval.EVAL_SEED: [b[:1] for b in real(1, seed)]
    )
    at.text_input(key="s2s_text").set_value("we see the sky").run()
    next(b for b in at.button if "Re-run" in b.label).click().run()
    assert_clean(at)
    assert any("Re-computed" in c.value for c in at.caption)


def test_locale_has_both_languages_with_the_same_placeholders():
    import re
    import string
    from pathlib import Path

    from tx_explorer import locales

    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    table = locales.table("seq2seq")
    for key, entry in table.items():
        assert entry.get("en", "").strip() and entry.get("zh", "").strip(), key
        assert fields(entry["en"]) == fields(entry["zh"]), key
    source = (Path(__file__).resolve().parent.parent / "pages" / "seq2seq.py").read_text(encoding="utf-8")
    assert set(re.findall(r'\bT\("([a-z0-9_]+)"', source)) <= set(table)


def test_chinese_page_loads_clean():
    at = open_all(open_page("seq2seq"))
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    specs = plotly_specs(at)
    assert len(specs) >= 8
    heat = [s for s in specs if any(t.get("type") == "heatmap" for t in s["data"])]
    assert heat and all(s["layout"]["xaxis"]["title"]["text"] and s["layout"]["yaxis"]["title"]["text"] for s in heat)
    assert any("源词" in s["layout"]["xaxis"]["title"]["text"] for s in heat)
    assert any(m.value.startswith("**本页实测**") for m in at.markdown)


def test_bos_eos_and_the_true_fixed_context_are_shown(at):
    at.text_input(key="s2s_text").set_value("we see the sky").run()
    assert_clean(at)
    heat = [s for s in plotly_specs(at) if any(t.get("type") == "heatmap" for t in s["data"])]
    rows = [s["layout"]["yaxis"]["ticktext"] for s in heat[:2]]  # Bahdanau and the cross-attention
    for r in rows:  # one row per decoder step, <bos> read first and <eos> written last (escaped for Plotly)
        assert r[0] == "&lt;bos&gt; → vediamo" and r[-1] == "cielo → &lt;eos&gt;" and len(r) == 4
    assert any(r"$c = [\overrightarrow{h}_T; \overleftarrow{h}_1]$" in c.value for c in at.caption)  # KaTeX
    assert any(r"\overleftarrow{h}_1" in x.value and "s_0" in x.value for x in at.latex)
    at.slider[1].set_value(4).run()  # the step that writes <eos>
    assert_clean(at)
    assert any("writes “&lt;eos&gt;”" in t for t in plotly_titles(at))


def test_the_decodes_end_with_eos_and_the_lengths_section_measures_once_opened():
    page = open_page("seq2seq")
    page.session_state["s2s_open_ends"] = True
    page.run()
    assert_clean(page)
    # one per translator, the bare count (a sentence in a third of the page is cut); the intro says what it counts
    ended = [m.value for m in page.metric if m.value.endswith(" / 120")]
    assert len(ended) == 3 and all(v.split(" / ")[0].isdigit() for v in ended)
    assert any("decodes that ended with <eos>" in m.value for m in page.markdown)
    assert any("$T \\neq T'$ in" in m.value for m in page.markdown)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decoder_step_titles_fit_on_one_line_with_the_formulas_above(lang):
    """The formulas sit above the two charts in KaTeX: in a half-width title they wrapped to three lines and covered
    the one-row heatmap, itself too low for its colour bar's ticks."""
    page = open_page("seq2seq", s2s_open_step=True, lang=lang)
    assert_clean(page)
    titles = ("Step 1's query", "Step 1: e", "第 1 步的 query", "第 1 步：softmax")  # the query s₀, the scores
    step = [s for s in plotly_specs(page) if s["layout"]["title"]["text"].startswith(titles)]
    assert len(step) == 2
    for spec in step:
        assert "<br>" not in spec["layout"]["title"]["text"] and "tanh" not in spec["layout"]["title"]["text"]
        assert spec["layout"]["height"] >= 300
    shown = [m.value for m in page.markdown]
    assert r"$s_0 = \tanh\!\big(W_s\,[\overrightarrow{h}_T;\ \overleftarrow{h}_1]\big)$" in shown
    assert r"$e_{1,i} = v^\top \tanh(W s_{0} + U h_i)$" in shown
