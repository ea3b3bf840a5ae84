"""Review of the layers × heads figures on Gemma 3 (five local layers of a 512-token window to one global layer):
every figure that lays out heads by layer (the multi-head page's grid of thumbnails, its metric and head-search
heatmaps, the atlas's grid, the head-science maps) named its rows "layer 5" or "L5" alike, so a student looking for
what the global layers do differently could not tell which rows they were. The global layers' rows now say so,
in both languages, as do the language-model page's layer pickers and the head taxonomy's per-layer sink bars; a
model whose layers are alike (SmolLM2) keeps its plain names.

The head search, switched from a query and a key (ranked: "Through the heads" on "the 3 best-ranked, averaged") to a
pattern the text has nothing for (induction, on a text without a repeat), kept "the 3 best-ranked, averaged" on the
box above the picture of one head, titled "mean of L29 H0". The box now shows that head, and a picture of one head
is not called a mean."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import open_page, plotly_specs

from tx_explorer.models import load_model
from tx_explorer.views import atlas as atlas_view
from tx_explorer.views import head_science as hs_view
from tx_explorer.views import model_facts
from tx_explorer.views import multihead as view
from tx_explorer.viz import head_science as vhs

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "The cat sat on the mat because the mat was warm."
GLOBAL = {"en": "global", "zh": "全局"}


@pytest.fixture(scope="module")
def gemma3():
    return load_model("gemma3-270m")


def _rows(fig) -> list[str]:
    """The row names a layers × heads figure shows: the mosaic's and the heatmap's y tick texts."""
    y = fig.layout.yaxis
    return [str(t) for t in (y.ticktext if y.ticktext is not None else fig.data[0].y)]


def _marked(rows: list[str], word: str) -> list[int]:
    return [i for i, row in enumerate(rows) if row.endswith(f" · {word}")]


def test_the_config_names_gemma3s_global_layers_and_none_of_a_uniform_model(gemma3) -> None:
    assert gemma3.config.global_layers == (5, 11, 17)
    assert load_model("smollm2-135m-instruct").config.global_layers == ()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_multihead_figures_name_the_global_layers(gemma3, lang: str) -> None:
    data = view.analyse(gemma3, TEXT)
    s = view.shown(data, causal=True, global_layers=gemma3.config.global_layers)
    groups = view.kv_groups(gemma3)
    figures = {
        "grid": view.grid(s, groups, lang=lang).figure,
        "metric": view.metric(
            view.head_metrics(data.maps, data.ids), "entropy", groups, global_layers=s.global_layers, lang=lang
        ).figure,
        "search": view.search_pattern(s, "previous", groups=groups, lang=lang).panels[0].figure,
    }
    for name, fig in figures.items():
        rows = _rows(fig)
        assert len(rows) == 18, name
        assert _marked(rows, GLOBAL[lang]) == [5, 11, 17], (name, rows)
    plain = view.shown(data, causal=True)  # no global layers given: plain names
    assert _marked(_rows(view.grid(plain, groups, lang=lang).figure), GLOBAL[lang]) == []


def test_the_atlas_grid_names_the_global_layers(gemma3) -> None:
    ids = gemma3.tokenizer.encode(TEXT).ids
    stats = atlas_view.compute(gemma3, ids, window=8)
    for lang in ("en", "zh"):
        fig = atlas_view.overview(stats, "first", global_layers=gemma3.config.global_layers, lang=lang).panels[0].figure
        assert _marked(_rows(fig), GLOBAL[lang]) == [5, 11, 17]


def test_a_marked_layer_map_says_so_in_its_hover_too() -> None:
    fig = vhs.layer_head_map(
        np.zeros((3, 2)), title="t", x_title="head", y_title="layer", clickable=True, layer_marks={1: "global"}
    )
    assert _rows(fig) == ["L0", "L1 · global", "L2"]
    assert fig.data[1].text[2].startswith("L1 · global, H0")  # the click markers' hovers, row-major


def test_the_head_search_box_says_which_heads_the_picture_shows_after_the_ranking_goes() -> None:
    at = open_page("multihead")  # SmolLM2 and its documentation sentence: no token repeats
    at.segmented_control(key="mh_view").set_value("search").run()
    through = at.selectbox(key="mh_through")
    assert through.value is None and "best-ranked" in through.format_func(None)  # the ranked pair's three heads
    at.radio(key="mh_search").set_value("pattern").run()
    assert at.selectbox(key="mh_pattern").value == "induction" and not at.exception
    through = at.selectbox(key="mh_through")
    assert through.options == [through.format_func(through.value)]  # the one head, shown as its name
    layer, head = through.value
    title = plotly_specs(at)[0]["layout"]["title"]["text"]
    assert f"in L{layer} H{head}" in title and "mean" not in title
    assert any("head last opened" in c.value for c in at.caption)  # not "averaged over the best-ranked heads"
    assert not any("best-ranked heads" in c.value for c in at.caption)


def test_the_layer_pickers_and_the_sink_bars_name_the_global_layers(gemma3) -> None:
    assert model_facts.layer_names(gemma3, "zh")[4:6] == ["4", "5 · 全局"]
    assert model_facts.layer_names(load_model("tiny-gpt")) == [str(i) for i in range(4)]
    sinks = hs_view.taxonomy(gemma3, TEXT).panels[-1].figure  # the sink per layer: as is, first token dropped
    assert _marked(list(sinks.layout.xaxis.ticktext), GLOBAL["en"]) == [5, 11, 17]
    at = open_page("language_model")
    at.selectbox(key="lm_model").set_value("gemma3-270m").run()
    picker = at.selectbox(key="lm_mask_layer")
    assert _marked(list(picker.options), GLOBAL["en"]) == [5, 11, 17] and not at.exception


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_window_on_every_layer_is_not_said_to_leave_global_layers(lang: str) -> None:
    """A checkpoint whose every layer keeps the same sliding window (Mistral's shape), read past it: the atlas's sink
    note spoke of "the global layers" it does not have."""
    import torch

    from tx_explorer import models
    from tx_explorer.config import PRESETS
    from tx_explorer.families.text import TextModel
    from tx_explorer.modules.transformer import CausalLM

    torch.manual_seed(0)
    cfg = PRESETS["tiny-llama"].replace(max_len=96, sliding_window=16)
    tokenizer = models.load_model("tiny-llama").tokenizer
    tm = TextModel(name="random", model=CausalLM(cfg), tokenizer=tokenizer, kind="causal", max_len=96)
    stats = atlas_view.compute(tm, list(range(5, 101)), window=8)
    note = atlas_view.overview(stats, "first", lang=lang).notes[0]
    assert ("global" not in note) if lang == "en" else ("全局" not in note)
    assert ("every layer keeps a window of 16 keys" in note) if lang == "en" else ("每一层都只保留 16 个键" in note)
