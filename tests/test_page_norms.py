"""The "Norms and blocks" page: charts on first load, edits that recompute, bad input as messages, the mini-run."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import assert_clean, open_page, plotly_specs


@pytest.fixture(scope="module")
def at():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # the mini-run's tiny models only spin-wait on more threads of a shared CPU
    page = open_page("norms")
    yield page
    torch.set_num_threads(n)


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_first_load_shows_charts_and_no_error(at):
    assert_clean(at)
    specs = plotly_specs(at)
    assert len(specs) >= 7, len(specs)
    assert not at.warning, [w.value for w in at.warning]  # the shipped bundle verified and loaded
    names = {t.get("name") for s in specs for t in s["data"]}
    assert {"x − μ", "x / RMS(x)", "Pre-LN", "Deep Post-LN (16 × 32)"} <= names  # norm steps, curves, depth profiles
    assert len(at.table) == 1 and len(at.table[0].value) == 6  # six claims, each with a computed verdict
    assert any("Deep Pre-LN (16 × 32) falls" in m.value for m in at.markdown)  # the depth note's measured spread
    swiglu = next(m.value for m in at.markdown if "SwiGLU's formula, checked" in m.value)
    assert float(swiglu.split("at most **")[1].split("**")[0].replace("−", "-")) < 1e-5  # by hand = the module


def test_pre_norm_identity_is_exact_on_the_page(at):
    assert _metric(at, "max |Pre-Norm(x) − x|") == "0"
    assert float(_metric(at, "max |Post-Norm(x) − x|")) > 1
    next(r for r in at.radio if r.label == "Norm").set_value("rmsnorm").run()
    assert_clean(at)
    assert _metric(at, "max |Pre-Norm(x) − x|") == "0"
    assert _metric(at, "max |Post-Norm(x) − Norm(x)|") == "0"


def test_editing_the_vector_recomputes_and_bad_input_is_a_message(at):
    box = next(t for t in at.text_input if t.label.startswith("$x$ ("))
    box.set_value("1 2 3 6").run()
    assert_clean(at)
    assert _metric(at, "μ") == "3"
    box.set_value("1, two, 3").run()
    assert not at.exception
    assert any("two" in e.value and "not a number" in e.value for e in at.error)
    box.set_value("4, 6, 5, 9, 3, 7").run()
    assert_clean(at)


def test_the_pair_and_the_mini_run_are_built_only_once_opened(at):
    assert not [t for t in at.text_input if t.label == "Sentence"] and not [b for b in at.button if b.label == "Train"]
    before = len(plotly_specs(at))
    at.session_state["norms_open_pair"] = True
    at.session_state["norms_open_live"] = True
    at.run()
    assert_clean(at)
    assert len(plotly_specs(at)) == before + 1  # the pair's maps; the mini-run draws nothing before Train


def test_sentence_with_html_is_handled_and_variants_compare(at):
    box = next(t for t in at.text_input if t.label == "Sentence")
    box.set_value("<script>alert(1)</script> the list").run()
    assert_clean(at)
    box.set_value("   ").run()
    assert not at.exception and any("empty" in e.value for e in at.error)
    box.set_value("The function returns a new list.").run()
    assert_clean(at)


def test_live_mini_run_draws_its_curves(at):
    before = len(plotly_specs(at))
    next(s for s in at.slider if s.label == "Time budget (s)").set_value(5)
    next(s for s in at.slider if s.label == "Steps").set_value(10)
    next(b for b in at.button if b.label == "Train").click().run(timeout=180)
    assert_clean(at)
    assert any("Last mini-run" in c.value for c in at.caption)
    assert len(plotly_specs(at)) == before + 1  # the finished run's curves stay on the page
    live = [s for s in plotly_specs(at) if [t.get("name") for t in s["data"]] == ["Post-LN", "Pre-LN"]]
    assert live and any(len(t.get("x", [])) >= 1 for t in live[0]["data"])  # at least one step within 5 s


def test_an_empty_live_pick_says_what_to_pick_and_offers_no_train(at):
    """Train with the picker cleared answered "choose at least one variant to train" in English, over empty axes."""
    picker = at.multiselect(key="live_variants")
    before = picker.value
    picker.set_value([]).run()
    assert_clean(at)
    assert any(i.value.startswith("Pick one to three variants") for i in at.info)
    assert not [b for b in at.button if b.label == "Train"]
    at.multiselect(key="live_variants").set_value(before).run()
    assert [b for b in at.button if b.label == "Train"]


def test_chinese_page_renders_cleanly(at):
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert any(h.value.startswith("1 · 各变体") for h in at.header)


def test_chinese_page_names_its_variants_slider_and_corpus_in_chinese(at):
    """The pickers' variant names, the pair's block slider and the training text's description are Chinese."""
    at.session_state["lang"] = "zh"
    at.session_state["norms_open_pair"] = True
    at.run()
    assert_clean(at)
    options = [o for w in (*at.selectbox, *at.multiselect) for o in w.options]
    assert "深层 Post-LN（16 × 32）" in options and not [o for o in options if o.startswith("Deep")], options
    assert any(s.label == "层（block）" for s in at.slider), [s.label for s in at.slider]
    captions = " ".join(c.value for c in at.caption)
    assert "Python 标准库的文档字符串" in captions and "docstrings" not in captions


def test_an_empty_pick_of_variants_says_what_to_pick_instead_of_empty_axes():
    at = open_page("norms")  # its own page: the module's is shared by tests that run in order
    picker = at.multiselect(key="runs_variants")
    before, charts = picker.value, len(plotly_specs(at))
    picker.set_value([]).run()
    assert_clean(at)
    assert any(i.value.startswith("Pick at least one variant") for i in at.info)
    assert len(plotly_specs(at)) == charts - 1  # the curves, not drawn as empty axes
    at.multiselect(key="runs_variants").set_value(before).run()
    assert not at.info and len(plotly_specs(at)) == charts
