"""Review `headfix`: the logit lens's KL on a log scale, heatmap hovers that name each cell once, and the
multi-head page's query following "write my text twice"."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import assert_clean, open_page
from tx_explorer.viz import heatmap as hm

torch.set_num_threads(1)


def _query_box(at):
    return next(s for s in at.selectbox if s.key == "mh_query")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_repeat_moves_the_query_to_the_second_copy_and_keeps_a_later_pick(lang) -> None:
    at = open_page("multihead", mh_model="tiny-gpt", mh_view="search", lang=lang)
    assert_clean(at)
    box = _query_box(at)
    n = len(box.options)
    assert box.value == n - 1  # the typed text's last token
    at.session_state["lang"] = lang
    at.toggle(key="mh_repeat").set_value(True).run()
    assert_clean(at)
    box = _query_box(at)
    twice = len(box.options)
    assert twice > 2 * n - 2
    assert box.value == twice - 1, (box.value, twice)  # the second copy's last token, not the first copy's
    picked = n // 2  # a pick after the repeat stays
    at.session_state["lang"] = lang
    box.set_value(picked).run()
    at.session_state["lang"] = lang
    at.run()
    assert _query_box(at).value == picked
    # switched back: the first copy's token of the second copy's, here the pick itself (already in the first copy)
    at.session_state["lang"] = lang
    at.toggle(key="mh_repeat").set_value(False).run()
    assert_clean(at)
    assert _query_box(at).value == picked


def test_query_on_repeat_maps_each_token_to_its_copy() -> None:
    from tx_explorer import models
    from tx_explorer.analysis import head_science as hs
    from tx_explorer.views import multihead as view

    tm = hs.text_model(models.load_model("tiny-gpt"))
    text = "The cat sat on the mat."
    once, twice = len(tm.encode(text).tokens), len(tm.encode(view.repeated(text)).tokens)
    tokens = tm.encode(view.repeated(text)).tokens
    for q in range(once):
        moved = view.query_on_repeat(tm, text, q, repeat=True)
        assert moved >= twice - once and tokens[moved] == tokens[q]  # the same token, on the second copy
        assert view.query_on_repeat(tm, text, moved, repeat=False) == q


def test_heatmap_hover_names_each_cell_once() -> None:
    # labels that are numbers or names of their own: the hover writes them alone ("layer L17", not "layer 17: L17")
    for rows, cols in (
        ([f"L{i}" for i in range(3)], [f"H{h}" for h in range(2)]),
        (["300", "301", "302"], ["8–15", "16–23"]),
        (["500: a", "501: b", "502: a"], ["g0·0", "g0·1"]),
    ):
        t = hm.heatmap(np.zeros((3, 2)), rows, cols, x_title="x", y_title="y").data[0]
        assert t.hovertemplate.startswith("y %{customdata[0]}<br>x %{customdata[1]}<br>"), t.hovertemplate
    # a text's tokens (they repeat): the position first
    t = hm.heatmap(np.zeros((3, 3)), ["a", "b", "a"], ["a", "b", "a"], x_title="x", y_title="y").data[0]
    assert t.hovertemplate.startswith("y %{y}: %{customdata[0]}<br>x %{x}: %{customdata[1]}<br>")
    # positions beside one sink column (the masks page): still named alone
    assert hm.names_cells(["0", "5", "10", "sink"]) and not hm.names_cells(["the", "cat", "sat"])
    # labels that open with the axis's title: written once ("query head 5", not "query head query head 5")
    t = hm.heatmap(np.eye(2), ["query head 0", "query head 1"], ["KV head 0", "KV head 1"], y_title="query head")
    assert t.data[0].hovertemplate.startswith("%{customdata[0]}<br>")
    # explicit
    t = hm.heatmap(np.zeros((2, 2)), ["0", "1"], ["a", "b"], hover_index=(True, False)).data[0]
    assert "%{y}: %{customdata[0]}" in t.hovertemplate and "%{x}" not in t.hovertemplate


def _kl_figure(name: str):
    from tx_explorer import models
    from tx_explorer.analysis import head_science as hs
    from tx_explorer.views import head_science as view
    from tx_explorer.views import texts

    tm = hs.text_model(models.load_model(name))
    m = view.lens_numbers(tm, texts("head_science", "en")("text_default"))
    return m, {lang: view.lens_words(tm, m, "kl", lang=lang) for lang in ("en", "zh")}


def test_logit_lens_kl_colours_every_row_not_only_layer_0() -> None:
    m, results = _kl_figure("tiny-gpt")
    kl = m.r.kl_to_final
    trace = results["en"].panels[0].figure.data[0]
    colour = np.asarray(trace.z, dtype=float)
    span = trace.zmax - trace.zmin
    # the read-outs after layer 0: their row medians spread over at least a third of the colours (linear: 4 %)
    medians = np.median(colour[2:], axis=1)
    assert (medians.max() - medians.min()) / span > 1 / 3
    # the hover keeps each cell's own KL, and the colour bar writes KL values
    assert f"{kl[0, 0]:.3f}" in trace.text[0][0]
    assert trace.colorbar.ticktext[0].startswith("≤ ") and "1" in trace.colorbar.ticktext
    for lang, r in results.items():
        said = " ".join(r.notes)
        assert f"{kl.max():.3g}" in said and ("log scale" in said or "对数刻度" in said), lang
    assert "（" in results["zh"].notes[-2] and "，" in results["zh"].notes[-2]


def test_the_kv_cache_groups_hover_names_a_kv_head_once():
    """The groups map's columns are "KV head 1" under the axis "KV head": its hover reads "KV head 1", not
    "key/value head KV head 1"."""
    from tx_explorer import models
    from tx_explorer.views import kv_cache as kv_view

    tm = models.load_model("tiny-llama")
    for lang, head in (("en", "KV head"), ("zh", "KV 头")):
        d = kv_view.decoding(tm, "the cat sat", 2)
        cv = kv_view.cache_view(tm, d.ids, tm.labels(d.ids), d.steps[-1].position, 0, lang=lang, decoding=d)
        template = cv.groups.figure.data[0].hovertemplate
        assert template.count(head) == 0 and "key/value" not in template, template  # the label alone carries it
