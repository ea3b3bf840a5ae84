"""A switch of the sidebar language (English ↔ 中文) only re-words what a model computed: the numbers are kept under
keys without the language, computed once for both, and worded on each run. Before, the atlas's needle test vanished
until pressed again, and the circuit page scored the pretrained LLMs' heads again, the atlas's block and the MoE
checkpoint's routing ran again, and the cost sweep's job was not shared across languages.

Function level: the numbers once, worded in both languages with the same numbers in the figures. Page level
(AppTest, in-process: the expensive analysis function counted through monkeypatch), on tiny models."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer import locales, model_cache, models, ui
from tx_explorer.analysis import atlas, cost
from tx_explorer.analysis import induction as ind
from tx_explorer.views import atlas as atlas_view
from tx_explorer.views import circuit as circuit_view
from tx_explorer.views import cost_of_attention as cost_view
from tx_explorer.views import moe as moe_view

pytestmark = pytest.mark.usefixtures("one_thread")
LANGS = ("en", "zh")


def _drawn(panel) -> list[list]:
    """The numbers a figure draws: each trace's numeric x, y and z (a category axis is words)."""
    values = lambda t: (np.asarray(v) for a in ("x", "y", "z") if (v := getattr(t, a, None)) is not None)  # noqa: E731
    return [[v.tolist() for v in values(t) if v.dtype.kind in "fiu"] for t in panel.figure.data]


def _same_numbers(en, zh) -> None:
    """Two worded panels of one computation: the same numbers behind them and drawn, their titles in each language."""
    data = (en.data, zh.data) if isinstance(en.data, dict) else ({"": en.data}, {"": zh.data})
    assert data[0].keys() == data[1].keys()
    for key in data[0]:
        np.testing.assert_array_equal(data[0][key], data[1][key])
    assert _drawn(en) == _drawn(zh)
    assert en.figure.layout.title.text != zh.figure.layout.title.text or en.figure.layout.xaxis.title.text != (
        zh.figure.layout.xaxis.title.text
    )


def _counted(monkeypatch, module, name: str, when=lambda *a, **kw: True) -> list:
    """``module.name`` wrapped to count its calls (those ``when`` accepts); the list of their arguments."""
    calls, real = [], getattr(module, name)

    def counting(*args, **kwargs):
        if when(*args, **kwargs):
            calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def _switch(at, lang: str):
    at.session_state["lang"] = lang
    at.run()
    assert_clean(at)
    return at


# ---- 1. the atlas: the exact block and the needle test ----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    tm = models.load_model("tiny-llama")
    ids = atlas.corpus_ids(tm, 96)
    return tm, ids, atlas_view.compute(tm, ids, window=16)


def test_the_atlas_block_is_computed_once_and_worded_in_both_languages(tiny):
    tm, ids, stats = tiny
    found = atlas_view.exact_block(tm, ids, stats, 2, 1, 60, 0, 32)
    en, zh = (atlas_view.block(found, lang=lang) for lang in LANGS)
    _same_numbers(en.panels[0], zh.panels[0])
    assert en.notes[0].startswith("Check:") and zh.notes[0].startswith("核对：")
    assert f"{found.diff:.1e}" in en.notes[0] and f"{found.diff:.1e}" in zh.notes[0]


def test_the_needle_is_planted_once_and_worded_in_both_languages(tiny):
    tm, ids, _ = tiny
    found = atlas_view.plant_needle(tm, ids, "The code is 4417.", "The code is", "4417", 0.5, lang="zh")
    en, zh = (atlas_view.needle(found, lang=lang) for lang in LANGS)
    _same_numbers(en.panels[0], zh.panels[0])
    reply = found.reply.strip() or "∅"
    assert en.notes[2] == f"The model's answer: {reply}" and zh.notes[2] == f"模型的回答：{reply}"


def _needle_grid(at, lang: str) -> dict:
    bare = lambda title: title.replace("<br>", "").replace(" ", "")  # noqa: E731  (wrapped to the figure's width)
    start = bare(locales.text("atlas", "needle_title", lang).split("{")[0])
    return next(s for s in plotly_specs(at) if bare(s["layout"]["title"]["text"]).startswith(start))["data"][0]


def test_the_needle_result_stays_after_a_language_switch_and_nothing_is_run_again(monkeypatch):
    """The needle result (run on a click) vanished on a switch to 中文 until clicked again; the block ran again."""
    greedy = _counted(monkeypatch, atlas, "greedy")  # the needle's answer: once per click
    dense = _counted(monkeypatch, atlas, "dense_rows")  # the exact block's pass
    at = open_page("atlas", timeout=300, atlas_model="tiny-gpt", atlas_open_block=True, atlas_open_needle=True)
    assert_clean(at)
    at.button(key="atlas_needle_run").click().run()
    assert_clean(at)
    assert (len(greedy), len(dense)) == (1, 1)
    en = _needle_grid(at, "en")
    _switch(at, "zh")
    captions = [c.value for c in at.caption]
    assert any(c.startswith("模型的回答：") for c in captions), captions  # still shown, no second click
    assert any(c.startswith("核对：") for c in captions), captions
    assert (len(greedy), len(dense)) == (1, 1)  # re-worded, not recomputed
    assert _needle_grid(at, "zh")["z"] == en["z"]
    _switch(at, "en")
    assert any(c.value.startswith("The model's answer:") for c in at.caption) and len(greedy) == 1


# ---- 2. the circuit page: the pretrained LLMs' heads scored once for both languages ------------------------------


def test_the_heads_are_scored_once_and_worded_in_both_languages():
    bundle = models.load_model(circuit_view.BUNDLE)
    scores = circuit_view.score_heads(bundle, models.load_model("tiny-llama"))
    en, zh = (circuit_view.comparison(scores, lang=lang) for lang in LANGS)
    _same_numbers(en.scatter, zh.scatter)
    assert en.captions[0].startswith("tiny-llama (") and zh.captions[0].startswith("tiny-llama（")


def test_a_language_switch_does_not_score_the_pretrained_heads_again(monkeypatch):
    """`compared(names, lang)` scored SmolLM2's 270 heads and Gemma 3's 72 once per server *and language*."""
    monkeypatch.setattr(circuit_view, "pretrained", lambda installed=True: ["tiny-llama"])  # cheap, for the count
    tiny = model_cache.shared_model("tiny-llama").model  # the page's copy (ui.cached_model)
    scored = _counted(monkeypatch, ind, "measure", when=lambda model, *a, **kw: model is tiny)
    at = open_page("circuit")
    assert_clean(at)
    assert len(scored) == 1
    en = next(c.value for c in at.caption if c.value.startswith("tiny-llama ("))
    _switch(at, "zh")
    assert len(scored) == 1
    zh = next(c.value for c in at.caption if c.value.startswith("tiny-llama（"))
    assert en.split("best induction head ")[1][:4] in zh  # the same best head: "L1H0", said in Chinese


# ---- 3. the MoE page's checkpoint section: routed once, worded per language -------------------------------------


def test_a_text_is_routed_once_and_its_statistics_worded_in_both_languages():
    routed = moe_view.route_text(models.load_model("tiny-moe"), "The cat sat on the mat.")
    en, zh = (moe_view.routed_statistics(routed, lang=lang) for lang in LANGS)
    assert list(en.statistics.stats.values()) == list(zh.statistics.stats.values())
    _same_numbers(en.statistics.load, zh.statistics.load)
    assert _drawn(en.statistics.entropy) == _drawn(zh.statistics.entropy)
    assert en.about.startswith("$E = 8$ experts per block") and zh.about.startswith("每个 block 有 $E = 8$ 个专家")


def test_a_language_switch_does_not_route_the_checkpoint_text_again(monkeypatch):
    read = _counted(monkeypatch, atlas, "corpus_ids")  # the section's default text: the corpus's first tokens
    at = open_page("moe", moe_open_ckpt=True)
    assert_clean(at)
    assert len(read) == 1
    stats = at.table[0].value
    _switch(at, "zh")
    assert len(read) == 1
    assert any("每个 block 有 $E = 8$ 个专家" in m.value for m in at.markdown)
    np.testing.assert_array_equal(at.table[0].value.to_numpy(), stats.to_numpy())


# ---- 4. the cost page: the sweep's job keyed without the language -----------------------------------------------


def test_a_sweep_is_numbers_worded_in_both_languages():
    fake = lambda method, n, **kw: cost.Measurement(method, n, 1e-6 * n, 4 * n * n, kw["repeats"])  # noqa: E731
    kw = dict(heads=1, head_dim=8, repeats=1, block=64, dtype="float32", device=cost_view.torch.device("cpu"))
    found = cost_view.sweep(lambda f, text: None, methods=cost.METHODS, max_n=256, measure=fake, lang="zh", **kw)
    en, zh = (cost_view.curves(1, 8, 64, "float32", kw["device"], found.runs, lang=lang) for lang in LANGS)
    _same_numbers(en.time, zh.time)
    assert list(en.results.values()) == list(zh.results.values())


def test_sessions_in_either_language_share_one_sweep_job(monkeypatch):
    """The job pool joins identical concurrent requests by key: with the language in it, an English and a Chinese
    visitor pressing "measure" together each ran the whole sweep."""
    keys, real = [], ui.run_job

    def recording(fn, *, key=None, **kw):
        keys.append(key)
        return real(fn, key=key, **kw)

    monkeypatch.setattr(ui, "run_job", recording)
    at = open_page("cost_of_attention")
    at.selectbox(key="cost_max_n").set_value(256)
    for name, value in (("cost_repeats", 1), ("cost_heads", 1), ("cost_head_dim", 8)):
        at.number_input(key=name).set_value(value)
    at.button(key="cost_measure").click().run()
    assert_clean(at)
    method = locales.text("cost_of_attention", "col_method", "zh")
    _switch(at, "zh")
    assert any(method in d.value.columns for d in at.dataframe)  # the measured runs kept, worded in Chinese
    at.session_state["lang"] = "zh"  # AppTest's URL still says "en": a later run would read it back
    at.button(key="cost_measure").click().run()
    assert_clean(at)
    sweeps = [k for k in keys if k and k[0] == "cost_sweep"]
    assert len(sweeps) == 2 and sweeps[0] == sweeps[1], sweeps
