"""The long-context atlas page through AppTest: the first load in both languages with its computed facts,
a statistic switched, a head opened by a click, the exact block checked against the atlas, the needle test, and
the view functions' numbers against the analysis."""

from __future__ import annotations

import functools
import re
from unittest import mock

import numpy as np
import pytest
import torch
from streamlit.elements.plotly_chart import PlotlySelectionState, PlotlyState
from streamlit.testing.v1 import local_script_runner

from tests.conftest import assert_clean, open_page, plotly_specs
from tests.test_url_state import arrive
from tx_explorer import locales, models
from tx_explorer.analysis import atlas
from tx_explorer.analysis.memory import format_bytes
from tx_explorer.config import PRESETS
from tx_explorer.families.text import TextModel
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import atlas as view

pytestmark = pytest.mark.usefixtures("one_thread")


def _titles(at) -> list[str]:
    return [s["layout"].get("title", {}).get("text", "").replace("<br>", " ") for s in plotly_specs(at)]


def _captions(at) -> list[str]:
    return [c.value for c in at.caption]


def _opened(at, name: str):
    """The expander of the section opened on demand ``name`` (found by its header)."""
    return next(e for e in at.expander if e.label == locales.text("atlas", f"{name}_header", "en"))


@pytest.fixture(scope="module")
def page():
    at = open_page("atlas", timeout=600)
    assert_clean(at)
    return at


def test_every_string_is_bilingual_with_the_same_placeholders():
    import string

    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    for key, entry in locales.table("atlas").items():
        assert entry.get("en", "").strip() and entry.get("zh", "").strip(), key
        assert fields(entry["en"]) == fields(entry["zh"]), key


def test_first_load_reads_the_corpus_and_states_its_facts(page):
    name = models.available_models("text", kind="causal")[0]  # the picker's first: SmolLM2 when present
    tm = models.load_model(name)
    n = min(view.DEFAULT_TOKENS, tm.max_len)
    captions = _captions(page)
    assert any(f"Read {n} tokens through {len(tm.model.blocks)} layers" in c for c in captions), captions
    sinks = next(c for c in captions if c.startswith("Sinks:"))
    count, heads = map(int, re.search(r"Sinks: (\d+) of (\d+) heads", sinks).groups())
    assert heads == len(tm.model.blocks) * tm.config.num_heads and 0 <= count <= heads
    titles = _titles(page)
    assert any(t.startswith("Share of attention on the first token") for t in titles), titles
    assert len(page.dataframe[0].value) == heads  # every head's numbers
    assert view.dense_maps(tm) in [m.value for m in page.markdown]  # what its maps would take, under its caption


def test_a_statistic_and_a_head_switch_and_the_page_speaks_chinese(page):
    page.radio(key="atlas_stat").set_value("entropy").run()
    assert_clean(page)
    assert any(t.startswith("Entropy of each query") for t in _titles(page))
    layer_box = next(n for n in page.number_input if n.key and n.key.startswith("atlas_layer_"))
    layer_box.set_value(1).run()
    assert_clean(page)
    assert any(t.startswith("L1 H") and "entropy at each query position" in t for t in _titles(page))
    page.session_state["lang"] = "zh"
    page.run()
    assert_clean(page)
    assert any(c.startswith("汇聚点") for c in _captions(page))
    page.session_state["lang"] = "en"
    page.run()


def test_the_exact_block_agrees_with_the_atlas(page):
    page.session_state["atlas_open_block"] = True
    page.run()
    assert_clean(page)
    check = next(c for c in _captions(page) if c.startswith("Check:"))
    diff = float(re.search(r"at most ([0-9.e+-]+) over", check).group(1))
    assert diff < 1e-4, check
    assert any("exact weights of this block" in t for t in _titles(page))
    box = _opened(page, "block")  # its inputs and its check inside the opened box, not under it
    assert {"atlas_size", "atlas_r0", "atlas_c0"} <= {n.key for n in box.number_input}
    assert any(c.value.startswith("Check:") for c in box.caption)


def test_the_needle_test_runs_on_tiny_llama_and_answers_or_says_not():
    at = open_page("atlas", timeout=600)
    at.selectbox(key="atlas_model").set_value("tiny-llama").run()
    at.session_state["atlas_open_needle"] = True
    at.run()
    at.text_input(key="atlas_needle").set_value("The code is 4417.")
    at.text_input(key="atlas_q").set_value("The code is")
    at.text_input(key="atlas_a").set_value("4417")
    at.button(key="atlas_needle_run").click().run()
    assert_clean(at)
    captions = _captions(at)
    assert any(c.startswith("The model's answer:") for c in captions), captions
    assert any(c.startswith(("Answered:", "Not answered:")) for c in captions), captions
    assert any(t.startswith("Share of the last position's attention on the planted sentence") for t in _titles(at))
    box = _opened(at, "needle")
    assert [t.key for t in box.text_input] == ["atlas_needle", "atlas_q", "atlas_a"] and box.button
    assert any(c.value.startswith("The model's answer:") for c in box.caption)


def test_views_report_the_analysis_numbers():
    tm = models.load_model("tiny-llama")
    ids = atlas.corpus_ids(tm, 128)
    stats = view.compute(tm, ids, window=16)
    result = view.overview(stats, "first")
    first = stats.first.mean(-1).numpy()
    assert result.notes[0].startswith(f"Sinks: {int((first > 0.5).sum())} of {first.size} heads")
    np.testing.assert_allclose(result.panels[0].data, first)
    np.testing.assert_allclose(view.head_along(stats, "local", 2, 1).data, stats.local[2, 1].numpy())
    reports = []
    view.compute(tm, ids[:100], report=lambda f, text: reports.append((f, text)))
    assert reports[-1][0] == 1.0 and reports[-1][1] == "layer 3 (layers 0–3) · 100 of 100 tokens"  # from 0
    block = view.block(view.exact_block(tm, ids, stats, 3, 1, 100, 0, 28))
    assert block.panels[0].data.shape == (28, 28)
    copy = view.moved(tm, torch.device("cpu"))  # the page's GPU copy, here on the CPU: a new model, same numbers
    assert copy.model is not tm.model and copy.tokenizer is tm.tokenizer
    torch.testing.assert_close(view.compute(copy, ids, window=16).entropy, stats.entropy, rtol=0, atol=0)


def test_short_texts_counts_are_said_to_mean_nothing_and_one_token_is_drawn():
    """A student's review: 28 tokens in a 64-key window gave "270 of 270 heads" local as a finding, and one token
    drew an empty curve. A count that a head spreading its attention evenly would pass is said to say nothing;
    the table's statistics are shown to three places."""
    assert atlas.even_first(1) == 1.0 and atlas.even_first(2) == 0.75 and atlas.even_first(5) < 0.5
    assert atlas.even_local(28, 64) == 1.0 and atlas.even_local(4096, 64) < 0.1
    tm = models.load_model("tiny-llama")
    ids = atlas.corpus_ids(tm, 128)  # its context
    for n, trivial in ((1, True), (28, True), (128, False)):
        stats = view.compute(tm, ids[:n], window=8 if n == 128 else 64)
        sinks, _, local = view.overview(stats, "first").notes
        assert ("says nothing" in local) == trivial, local
        assert ("says nothing" in sinks) == (n == 1), sinks
        assert "spreading its attention evenly" in sinks + local
    assert view.overview(stats, "first").decimals == dict.fromkeys(
        [locales.text("atlas", f"stat_{s}") for s in atlas.STATS], 3
    )
    one = view.head_along(view.compute(tm, ids[:1]), "first", 0, 0).figure
    assert all("markers" in trace.mode for trace in one.data)


@pytest.mark.parametrize(
    "key", ["grid_first", "grid_entropy", "grid_local", "grid_distance", "grid_received", "needle_title"]
)
def test_chinese_titles_never_leave_a_character_alone_on_a_line(key):
    """A title wrapped to a figure's width (two-up or the page's) broke "…的平" from "均" (and "N" from "），")."""
    from tx_explorer.viz import style

    for n, window in ((512, 64), (8192, 4096), (32768, 4096)):
        title = locales.text("atlas", key, "zh").format(n=n, window=window, depth="50%")
        for width in (style.COLUMN_PX, style.PAGE_PX):
            lines = style.wrap(title, 0.9 * width).split("<br>")
            assert all(len(line) >= 3 and line[0] not in "，。）)" for line in lines[1:]), lines


def _fragment_rerun(at):
    """The run a click or a box inside the page's fragment asks for: that fragment alone. AppTest's own runs are
    whole-script runs, whose end writes every kept choice to the URL whatever the fragment's rerun would."""
    (fragment,) = at._fragment_storage._fragments  # the page's one fragment, registered by the run before
    rerun = functools.partial(local_script_runner.RerunData, fragment_id_queue=[fragment])
    with mock.patch.object(local_script_runner, "RerunData", rerun):
        at.run()
    assert not at.title  # the fragment ran, not the page
    return at


def test_a_head_clicked_in_the_grid_reaches_the_url_and_a_reload_opens_it(tmp_path):
    """A click on L21 H2 set the boxes to 21/2 while the URL kept the head opened before (18/8)."""
    keys = ("atlas_layer_tiny-llama", "atlas_head_tiny-llama")
    at = arrive(tmp_path, "atlas", {"atlas_model": "tiny-llama"})
    assert_clean(at)
    assert (at.query_params[keys[0]], at.query_params[keys[1]]) != ("3", "1")
    # What ui.show_figure receives from the browser's selection: the clicked cell's customdata, [layer, head].
    points = PlotlySelectionState(points=[{"customdata": [3, 1]}], point_indices=[0], box=[], lasso=[])
    at.session_state["fig_atlas_grid_first"] = PlotlyState(selection=points)
    _fragment_rerun(at)
    assert_clean(at)
    assert [n.value for n in at.number_input if n.key in keys] == [3, 1]
    assert (at.query_params[keys[0]], at.query_params[keys[1]]) == ("3", "1")
    again = arrive(tmp_path, "atlas", dict(at.query_params))  # a reload, or the link shared
    assert [n.value for n in again.number_input if n.key in keys] == [3, 1]


def test_the_prose_about_the_model_is_the_selected_model_s():
    """Gemma 3 selected, the page still spoke of SmolLM2: its 30 layers × 9 heads at 8 192 tokens (72 GB) and its
    chat template."""
    known = {"smollm2-135m-instruct": "72.5 GB", "gemma3-270m": "309 GB"}  # 30 · 9 · 8192² · 4 B, 18 · 4 · 32768² · 4 B
    names = {*models.available_models("text", kind="causal"), "tiny-llama"}
    others = {*(n for n, e in models.REGISTRY.items() if e.family in ("text", "moe")), "SmolLM2", "Gemma", "GPT-2"}
    for name in names:
        tm = models.load_model(name)
        cfg = tm.config
        size = format_bytes(cfg.num_layers * cfg.num_heads * tm.max_len**2 * 4)
        assert size == known.get(name, size)
        for lang in locales.LANGUAGES:
            maps, reads = view.dense_maps(tm, lang=lang), view.needle_reads(tm, lang=lang)
            assert f"{cfg.num_layers} " in maps and f"{cfg.num_heads} " in maps and f"{tm.max_len:,}²" in maps, maps
            assert size in maps and tm.name in maps and tm.name in reads
            assert reads == locales.text(
                "atlas", "needle_chat" if tm.chat_template else "needle_plain", lang, model=name
            )
            said = (maps + reads).replace(tm.name, "")
            assert not [o for o in others if o.lower() in said.lower()], said
    for key, entry in locales.table("atlas").items():  # no sentence names a model or types its numbers
        for text in entry.values():
            assert not [o for o in others if o.lower() in text.lower()] and "8 192" not in text, (key, text)


def test_local_and_global_layers_say_which_mean_distance_they_report():
    """The note's reach is the largest mean distance of a single query; the table's mean distance averages a head's
    queries (over a 512-token window at most 255.5), which "mean distances up to 490" was read as."""
    torch.manual_seed(0)
    window, n = 16, 96
    cfg = PRESETS["tiny-llama"].replace(max_len=n, sliding_window=window, layer_types=("sliding", "full") * 2)
    tokenizer = models.load_model("tiny-llama").tokenizer
    tm = TextModel(name="random", model=CausalLM(cfg), tokenizer=tokenizer, kind="causal", max_len=n)
    for tokens, key in ((n, "note_layer_kinds"), (window, "note_layer_kinds_short")):
        ids = torch.randint(0, cfg.vocab_size, (tokens,), generator=torch.Generator().manual_seed(1)).tolist()
        stats = view.compute(tm, ids, window=window)
        distance = stats.distance.numpy()
        reach, full_reach = f"{distance[[0, 2]].max():,.0f}", f"{distance[[1, 3]].max():,.0f}"
        assert stats.per_head("distance").max() < distance.max()  # the table's numbers are not these
        en, zh = (view.layer_kinds(tm, stats, lang=lang) for lang in ("en", "zh"))
        assert en.startswith(locales.text("atlas", key, "en").split("{")[0])
        single = reach if key.endswith("short") else full_reach  # the short note gives the local layers' first
        assert f"a single query's mean distance reaches {single}" in en
        assert "table's mean distance is each head's average over all its queries" in en
        assert f"单个查询的平均距离最大为 {single}" in zh
        assert "表格中的平均距离是每个头对其全部查询取的平均" in zh


def test_the_even_baselines_count_the_keys_each_layer_sees():
    """Gemma 3 on 793 tokens: "spread evenly over all the keys it sees, entropy would average 5.68 nats", counted
    as if every layer saw every key, where its 15 local layers see 512 at most (5.60 counted with the window); the
    locality and sink baselines likewise. Each baseline is counted with each layer's window, against a loop."""
    window, n, local = 16, 96, 8
    for w in (None, window, 200):  # a window longer than the text hides nothing
        seen = [min(q + 1, w or n) for q in range(n)]
        assert atlas.even_entropy(n, w) == pytest.approx(np.mean(np.log(seen)))
        assert atlas.even_local(n, local, w) == pytest.approx(np.mean([min(s, local) / s for s in seen]))
        first = [1 / s if q < (w or n) else 0.0 for q, s in enumerate(seen)]  # key 0 leaves a window behind
        assert atlas.even_first(n, w) == pytest.approx(np.mean(first))
    assert atlas.even_first(2) == 0.75 and atlas.even_entropy(n, window) < atlas.even_entropy(n)
    torch.manual_seed(0)
    tokenizer = models.load_model("tiny-llama").tokenizer
    ids = torch.randint(0, 300, (n,), generator=torch.Generator().manual_seed(1)).tolist()
    baselines = {"entropy": lambda w: atlas.even_entropy(n, w), "local": lambda w: atlas.even_local(n, local, w)}
    kinds = ("sliding", "full") * 2
    for layer_types, windows in ((kinds, (window, None) * 2), (None, (window,) * 4)):  # Gemma 3's; Mistral's
        cfg = PRESETS["tiny-llama"].replace(max_len=n, sliding_window=window, layer_types=layer_types)
        tm = TextModel(name="random", model=CausalLM(cfg), tokenizer=tokenizer, kind="causal", max_len=n)
        stats = view.compute(tm, ids, window=local)
        assert stats.windows == windows
        for lang in locales.LANGUAGES:
            _, entropy, near = view.overview(stats, "first", lang=lang).notes
            said = {
                "entropy": lambda v, lang=lang: locales.text("atlas", "nats", lang, value=f"{v:.2f}"),
                "local": lambda v: f"{v:.2f}",
            }
            notes = {"entropy": entropy, "local": near}
            for name, base in baselines.items():
                form, note = said[name], notes[name]
                if layer_types is None:  # every layer sees the window: one number, counted with it
                    assert form(base(window)) in note and form(base(None)) not in note, note
                else:  # the local layers and the global ones, each with its own
                    assert form(base(window)) != form(base(None))
                    kinds_said = locales.text(
                        "atlas", "even_kinds", lang, local=form(base(window)), window=window, full=form(base(None))
                    )
                    assert kinds_said in note, note
            # locality: over half in the local layers alone, 0.29 in the global ones: a count, not "says nothing"
            assert (atlas.even_local(n, local, window) > 0.5) and (atlas.even_local(n, local) < 0.5)
            assert ("says nothing" in near) == (layer_types is None and lang == "en"), near
