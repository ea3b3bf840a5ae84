"""The Vision Transformer page: loads clean, shows the lecture's numbers, follows its controls, speaks Chinese.

Uploads (a real one, and every kind of bad or unusual file) are rows of the table in tests/test_bad_input.py."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer import models
from tx_explorer.views import vision_transformer as view

SECTIONS = ("vit_open_patch", "vit_open_pos", "vit_open_shuffle")  # open on demand (lazy expanders)


@pytest.fixture(scope="module")
def at():
    """The page with every section open."""
    page = open_page("vision_transformer")
    assert_clean(page)
    for key in SECTIONS:
        page.session_state[key] = True
    page.run()
    assert_clean(page)
    return page


def test_first_visit_computes_and_sends_the_attention_section_only():
    page = open_page("vision_transformer")
    assert_clean(page)
    titles = [s["layout"].get("title", {}).get("text", "") for s in plotly_specs(page)]
    assert len(titles) == 4 and "Layer" in titles[0]  # per-head overlays, layers × heads, prediction, rollout
    assert len(page.get("expander")) == 3 and not any(e.children for e in page.get("expander"))


def test_first_load_shows_charts_and_the_lecture_numbers(at):
    specs = plotly_specs(at)
    assert len(specs) >= 8
    text = " ".join(m.value for m in at.markdown)
    assert "196 tokens" in text and "768 values" in text
    # the per-head overlays: an image under a heatmap for every head, plus one for the mean of the heads
    overlay = next(s for s in specs if "Layer" in str(s["layout"].get("title", {}).get("text", "")))
    kinds = [t["type"] for t in overlay["data"]]
    assert kinds.count("heatmap") == kinds.count("image") >= 3


def test_choosing_a_patch_query_and_a_layer(at):
    query = next(r for r in at.radio if "chosen patch" in " ".join(map(str, r.options)))
    query.set_value("patch").run()
    assert_clean(at)
    at.slider[0].set_value(1).run()  # patch row
    assert_clean(at)


def test_chinese_text():
    at = open_page("vision_transformer")
    at.session_state["lang"] = "zh"  # what the sidebar switch writes (AppTest drops sidebar widgets after switch_page)
    at.run()
    assert_clean(at)
    assert any("图像被转换成 token 序列" in m.value for m in at.markdown)


def test_pooling_shows_n_by_d_to_one_by_d_to_c_for_the_chosen_model():
    """§7.3 live: [CLS] keeps row 0 of 65×96; the mean-pooling bundle averages its 64×96 patch rows."""
    at = open_page("vision_transformer")
    assert any(r"\mathbb{R}^{65\times 96}" in f.value and r"\mathbb{R}^{1\times 6}" in f.value for f in at.latex)
    assert any("only row 0 is kept → 1×96 → 6 scores" in m.value for m in at.markdown)
    picker = next(s for s in at.selectbox if s.label == "Model")  # the picker has no key: found by its label
    picker.set_value("vit-shapes-avg").run()
    assert_clean(at)
    assert any(r"\frac{1}{64}\sum_{i=1}^{64} H_i" in f.value for f in at.latex)
    assert any("the 64×96 patch outputs are averaged → 1×96 → 6 scores" in m.value for m in at.markdown)


@pytest.mark.parametrize("seed", [0, 3])
def test_the_shuffle_reading_says_what_its_chart_shows(seed):
    """The sentence under the jigsaw chart is computed from its bars: 'still a circle' only when the shuffled image's
    top class (with positions) is the original's, with both probabilities as drawn."""
    clf = models.load_model("vit-shapes")
    _, pixels = view.model_input(clf, view.sample(clf, 0, seed)[0])
    shuf = view.shuffle(clf, pixels, clf.classify(pixels), lang="en")
    before, after = shuf.chart.data[0], shuf.chart.data[1]  # original and shuffled, with positions
    first = int(before.argmax())
    kept = int(after.argmax()) == first
    assert ("is still a" in shuf.reading) == kept and ("no longer a" in shuf.reading) == (not kept)
    assert f"{before[first]:.2f}" in shuf.reading and f"{after[first]:.2f}" in shuf.reading
