"""The multi-head page's maps and inspector as a student reads them (SmolLM2 review): the best heads' maps drawn with
the weights the ranking read, a causal model's future keys as gaps, q and y each on its own scale, the fused weight's
axis named as the table writes it, the inspector's titles above their plots."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer import locales, models
from tx_explorer.analysis import heads
from tx_explorer.views import multihead as view
from tx_explorer.viz import style

RAW = np.array([0.6, 0.288, 0.112])  # the last query's weights: most on the sink, 0.72 of the rest on key 1


def _shown(causal: bool = True) -> view.Shown:
    m = np.tril(np.ones((3, 3)))
    m /= m.sum(-1, keepdims=True)
    m[2] = RAW
    return view.Shown(m[None, None], ["Return", "▁a", "."], [True] * 3, ["L0 H0"], False, [1, 2, 3], causal)


def _z(panel) -> np.ndarray:
    return np.array(panel.figure.data[0].z, dtype=float)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_best_heads_maps_show_the_weights_the_ranking_read(lang: str) -> None:
    """With the first token left out, a ranked head's map is its renormalised rows and says so (L17 H3 ranked on
    0.70 showed 1.00 on the first token and 0.00 on the key); the first token's own share is ranked and drawn raw."""
    T = lambda key: locales.text("multihead", key, lang)  # noqa: E731
    s = _shown()
    kept = view.search_pair(s, 2, 1, skip_first=True, lang=lang)
    top = kept.panels[1]
    np.testing.assert_allclose(_z(top)[2], [0.0, 0.72, 0.28])
    assert _z(top)[2, 1] == pytest.approx(kept.table[T("score_column")][0], abs=1e-4)
    assert top.figure.layout.title.text == "L0 H0" + T("skip_title")
    pattern = view.search_pattern(s, "previous", skip_first=True, lang=lang).panels[1]
    np.testing.assert_allclose(_z(pattern)[2], heads.without_first(RAW))
    for raw in (view.search_pair(s, 2, 1, lang=lang), view.search_pattern(s, "first", skip_first=True, lang=lang)):
        np.testing.assert_allclose(_z(raw.panels[1])[2], RAW)
        assert raw.panels[1].figure.layout.title.text == "L0 H0"


def test_a_causal_models_future_keys_are_gaps_in_every_small_map() -> None:
    """Masked cells were written "0.00" in the weight maps; a causal model's are gaps (no number either), an
    encoder's maps keep every cell."""
    for causal in (True, False):
        s = _shown(causal)
        other = heads.TextAttention(s.labels, [False] * 3, False, 3, s.maps, s.ids)
        panels = [
            *view.search_pair(s, 2, 1, skip_first=True).panels[1:],
            *view.pair(s, 0, 0),
            *view.same_head(s, other, 0),
        ]
        for panel in panels:
            z, future = _z(panel), np.triu(np.ones((3, 3), dtype=bool), 1)
            assert np.isnan(z[future]).all() == causal and np.isfinite(z[~future]).all(), panel.key
            text = panel.figure.data[0].text
            if causal and text is not None:
                assert not any(np.asarray(text)[future]), panel.key


def test_the_page_draws_a_causal_models_future_keys_as_gaps_and_no_unreadable_numbers() -> None:
    """On the page (tiny-gpt, causal): the compared heads, their difference and one head on two sentences leave the
    future keys blank, and write no numbers in cells too narrow to read them."""
    at = open_page("multihead", mh_model="tiny-gpt", mh_view="compare")
    assert_clean(at)
    names = ("L0 H0", "L0 H1", "L0 H0 − L0 H1", "First sentence", "Second sentence")
    maps = [s for s in plotly_specs(at) if s["layout"]["title"]["text"] in names]
    assert len(maps) == len(names)
    for spec in maps:
        z = spec["data"][0]["z"]
        assert all(cell is None for i, row in enumerate(z) for cell in row[i + 1 :]), spec["layout"]["title"]
        assert all(cell is not None for i, row in enumerate(z) for cell in row[: i + 1])
        assert not spec["data"][0].get("texttemplate"), spec["layout"]["title"]


@pytest.fixture(scope="module")
def tm():
    return models.load_model("tiny-gpt")


TEXT = "Return a new list containing all items from the iterable in ascending order."


def _inspector(tm, lang: str) -> view.Inspector:
    tokens = view.analyse(tm, TEXT).tokens
    return view.inspector(tm, TEXT, tokens, 1, 2, len(tokens) - 1, lang=lang)


def test_the_query_and_the_heads_output_each_have_their_own_scale(tm) -> None:
    """q (about ±4 on SmolLM2) and y = Σαv (about ±0.03) on one scale drew y white: each row its own scale and bar."""
    qk = _inspector(tm, "en")
    v = heads.inspect_text(tm, TEXT, 1, 2, len(view.analyse(tm, TEXT).tokens) - 1)
    rows = [t for t in qk.query.figure.data if t.type == "heatmap"]
    assert len(rows) == 2
    for trace, values in zip(rows, (v.q, v.out)):
        np.testing.assert_allclose(np.ravel(trace.z), values)
        assert trace.zmax == pytest.approx(np.abs(values).max()) and trace.zmin == -trace.zmax
    assert rows[0].colorbar.y > rows[1].colorbar.y  # each bar beside its own row
    np.testing.assert_array_equal(qk.query.data, np.vstack([v.q, v.out]))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_check_names_the_fused_weights_columns_as_the_table_writes_it(tm, lang: str) -> None:
    """The prose said "rows 576–639" of a weight the table writes as [576, 960], where they are columns."""
    qk = _inspector(tm, lang)
    stored = list(tm.attention_module(1).qkv.weight.shape)  # nn.Linear's [out, in]
    table_row = list(qk.shapes.values())[1][0]  # the shapes of the QKV projection: x · W → …
    assert f"· {stored[::-1]} →" in table_row
    assert str(stored[::-1]) in qk.projection and str(stored) in qk.projection
    check = heads.projection_text(tm, TEXT, 1, 2)
    k = f"{check.k_rows[0]}–{check.k_rows[1] - 1}"
    assert (f"columns {k}" if lang == "en" else f"第 {k} 列") in qk.projection
    assert not re.search(r"rows \d|第 \d+–\d+ 行", qk.projection)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_inspectors_axes_say_keys_as_the_other_maps_do_and_titles_clear_their_plots(tm, lang: str) -> None:
    """The keys' axis said "key" beside maps saying "keys (columns)" / "键 key（列）"; here keys are rows, so
    "keys (rows)" / "键 key（行）". The weighted values' title ran into its plot: every title's lines fit the
    top margin once the page has laid the figure out."""
    qk = _inspector(tm, lang)
    columns = locales.text("common", "axis_keys", lang)
    rows = columns.replace("columns", "rows").replace("列", "行")
    for panel in (qk.keys, qk.values, qk.weighted):
        assert panel.figure.layout.yaxis.title.text == rows
    for panel in (qk.scores, qk.weights):
        assert panel.figure.layout.xaxis.title.text == re.sub(r"\s*[（(].*", "", columns)
    for panel in (qk.scores, qk.weights, qk.query, qk.keys, qk.values, qk.weighted):
        fig = style.tidy(panel.figure, style.COLUMN_PX)
        lines = fig.layout.title.text.count("<br>") + 1
        assert fig.layout.margin.t >= 10 + lines * 1.3 * style.TITLE_PX, (panel.key, fig.layout.title.text)


def _flat(layers: int, num_heads: int, n: int, rows: np.ndarray | None = None) -> view.Shown:
    """Causal maps of ``layers`` × ``num_heads`` heads on ``n`` tokens, uniform over what each query sees, with
    ``rows [L, H, n]`` (the last query's row of each head) when given."""
    m = np.tril(np.ones((n, n)))
    m = np.broadcast_to(m / m.sum(-1, keepdims=True), (layers, num_heads, n, n)).copy()
    if rows is not None:
        m[:, :, -1] = rows
    labels = ["<bos>", *(f"t{i}" for i in range(1, n))]
    names = heads.head_labels(layers, num_heads)
    return view.Shown(m, labels, [True] * n, names, False, list(range(n)), True)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_ranking_where_every_head_ties_names_no_best_head(lang: str) -> None:
    """Gemma 3 on "猫" (<bos>, 猫), query 1, key 1, the first token left out: key 1 was the only key left, every
    head scored 1.000, and the page named "Best head: layer 0, head 0" beside three identical maps."""
    T = lambda key, **f: locales.text("multihead", key, lang, **f)  # noqa: E731
    rng = np.random.default_rng(0)
    sink = rng.uniform(0.5, 0.99, (3, 4))  # every head a different share on <bos>: the raw weights differ
    s = _flat(3, 4, 2, np.stack([sink, 1 - sink], -1))
    only = view.search_pair(s, 1, 1, skip_first=True, lang=lang)
    assert only.notes == (T("pair_only_key_skip", q=1, k=1, weight=1.0),) and not only.best and not only.panels
    assert "1.000" in only.notes[0]
    first = view.search_pair(s, 0, 0, lang=lang)  # a causal model's first query sees only itself
    assert first.notes == (T("pair_only_key", q=0, k=0, weight=1.0),) and not first.best
    # the raw weights rank: the heads differ (the sink's share), and the best is named
    raw = view.search_pair(s, 1, 1, lang=lang)
    layer, head = np.unravel_index(np.argmax(1 - sink), sink.shape)
    assert raw.best[0] == (layer, head) and len(raw.panels) == 1 + view.TOP
    assert raw.notes[0] == T("pair_best", layer=layer, head=head, q=1, k=1, weight=1 - sink[layer, head])
    # three keys, every head's row alike: a tie of all 12, said with its count and no best head
    even = view.search_pair(_flat(3, 4, 3), 2, 1, lang=lang)
    assert even.notes == (T("pair_tie_all", count=12, q=2, k=1, weight=1 / 3),) and not even.panels
    pattern = view.search_pattern(_flat(3, 4, 3), "previous", lang=lang)
    score = (1 / 2 + 1 / 3) / 2  # queries 1 and 2, each even over the keys it sees
    assert pattern.notes == (T("pattern_tie_all", count=12, pattern=T("metric_previous"), score=score),)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_top_shared_by_several_heads_is_said_to_be_a_tie_with_its_count(lang: str) -> None:
    """Five of twelve heads put all of query 2's weight on key 1: no one of them is "the best head"."""
    T = lambda key, **f: locales.text("multihead", key, lang, **f)  # noqa: E731
    rows = np.tile([0.5, 0.3, 0.2], (3, 4, 1))
    rows.reshape(-1, 3)[[1, 4, 6, 7, 11]] = [0.0, 1.0, 0.0]
    found = view.search_pair(_flat(3, 4, 3, rows), 2, 1, lang=lang)
    assert found.best == [(0, 1), (1, 0), (1, 2)]  # the first three of the tie, in the model's order
    assert found.notes[0] == T("pair_tie", count=5, total=12, q=2, k=1, weight=1.0, layer=0, head=1)
    assert "5" in found.notes[0] and "12" in found.notes[0]
    alone = rows.copy()
    alone[2, 3] = [0.0, 0.0, 1.0]  # one head alone on top: a best head again
    alone.reshape(-1, 3)[[1, 4, 6, 7]] = [0.1, 0.9, 0.0]
    clear = view.search_pair(_flat(3, 4, 3, alone), 2, 2, lang=lang)
    assert clear.best[0] == (2, 3) and clear.notes[0] == T("pair_best", layer=2, head=3, q=2, k=2, weight=1.0)


def test_the_projection_check_names_a_bias_only_where_the_model_has_one() -> None:
    """Gemma 3 (no biases) was told its keys were rebuilt "plus their bias"; GPT-2-style models have one."""
    from tests.test_heads import TEXTS, _random_text_model

    for bias in (True, False):
        tm = _random_text_model(num_heads=4, bias=bias)
        assert tm.config.attention_bias[0] == bias
        tokens = tm.labels(tm.encode(TEXTS[0], heads.MAX_TOKENS).ids)
        for lang in ("en", "zh"):
            said = view.inspector(tm, TEXTS[0], tokens, 1, 0, 0, lang=lang).projection
            assert (locales.text("multihead", "projection_bias", lang) in said) == bias, said
            assert ("bias" in said or "偏置" in said) == bias, said
