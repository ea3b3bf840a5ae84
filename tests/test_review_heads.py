"""The multi-head page's head search as a student uses it on SmolLM2 and Gemma 3 (review `heads`): a one-token text,
a text whose first copy fills the page's cap, a sink that takes almost every row, the ranking's table, the
inspector on layers that scale, cap, sink or window their scores, and the words about the chosen model."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import assert_clean, open_page, plotly_specs
from test_heads import TEXTS, _random_text_model

from tx_explorer import locales, models
from tx_explorer.analysis import heads
from tx_explorer.analysis.head_science import INDUCTION_THRESHOLD
from tx_explorer.views import multihead as view

SMOLLM2, GEMMA = "smollm2-135m-instruct", "gemma3-270m"
SCIENCE = {
    lang: locales.text("common", "page_head_science", lang) for lang in ("en", "zh")
}  # the induction bar's pages
CIRCUIT = {lang: locales.text("common", "page_circuit", lang) for lang in ("en", "zh")}


def T(key: str, lang: str = "en", **fields: object) -> str:
    return locales.text("multihead", key, lang, **fields)


def _causal(maps: np.ndarray, ids: list[int]) -> view.Shown:
    layers, num_heads, n = maps.shape[:3]
    labels = [f"t{i}" for i in range(n)]
    return view.Shown(maps, labels, [True] * n, heads.head_labels(layers, num_heads), False, ids, True)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_sink_taking_almost_every_row_ties_the_heads_it_leaves_nothing_else(lang: str) -> None:
    """Gemma 3 on "Hello" (<bos>, Hello), the first token left out: query 1 sees only itself, so every head scores
    1 on "self". The rest of a row was its float32 sum less the sink's 0.9999, and the rounding made one head 1.001
    and "Best head for “Share on itself”: layer 1, head 1" of a tie of 72."""
    rng = np.random.default_rng(0)
    sink = 1 - 10.0 ** rng.uniform(-6, -3, (3, 4))  # what each head's query 1 puts on <bos>
    maps = np.zeros((3, 4, 2, 2), dtype=np.float32)
    maps[..., 0, 0] = 1
    maps[..., 1, 0], maps[..., 1, 1] = sink, 1 - sink
    scores = heads.pattern_scores(maps, [2, 7], skip_first=True)["self"]
    np.testing.assert_allclose(scores, 1.0, atol=1e-6)
    found = view.search_pattern(_causal(maps, [2, 7]), "self", skip_first=True, lang=lang)
    assert found.notes == (T("pattern_tie_all", lang, count=12, pattern=T("metric_self", lang), score=1.0),)
    assert not found.best and not found.panels


def test_the_renormalised_scores_are_the_maps_the_best_heads_are_drawn_with() -> None:
    """pattern_scores left out the first token as heads.without_first does for the maps drawn beside the ranking."""
    rng = np.random.default_rng(1)
    n, ids = 9, [5, 1, 2, 3, 1, 2, 3, 4, 1]
    logits = rng.normal(0, 6, (2, 3, n, n))
    logits[..., 0] += 12  # a strong sink, as SmolLM2's and Gemma's heads keep
    logits = np.where(np.tri(n, dtype=bool), logits, -np.inf)
    maps = np.exp(logits - logits.max(-1, keepdims=True))
    maps = (maps / maps.sum(-1, keepdims=True)).astype(np.float32)
    keys = heads.pattern_keys(ids)
    kept = heads.without_first(maps)
    for name in ("previous", "duplicate", "induction", "self"):
        k = keys[name].copy()
        k[:, 0] = False
        scored = k.any(-1)
        want = (kept * k).sum(-1)[..., scored].mean(-1)
        got = heads.pattern_scores(maps, ids, skip_first=True)[name]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_one_token_text_says_why_nothing_is_ranked_and_shows_no_nan(lang: str) -> None:
    """SmolLM2 on "Hello" (one token, no <bos>): the sink note said "mean share over every head: nan", and "previous",
    "first" and "self" said the text lacked "an earlier copy of the same token", which they do not need."""
    maps = np.ones((2, 3, 1, 1), dtype=np.float32)
    s = _causal(maps, [4])
    note = view.sink_note(view.sink(s), "Hello", lang=lang)
    assert note == T("sink_alone", lang, token="Hello") and "nan" not in note
    for pattern in ("previous", "first", "self"):
        said = view.search_pattern(s, pattern, lang=lang).notes
        assert said == (T("pattern_none_short", lang, pattern=T(f"metric_{pattern}", lang), n=1, start=1),)
    for pattern in ("duplicate", "induction"):  # these do need an earlier copy
        assert view.search_pattern(s, pattern, lang=lang).notes == (
            T("pattern_none", lang, pattern=T(f"metric_{pattern}", lang)),
        )
    two = _causal(np.tile(np.array([[1, 0], [0.9, 0.1]], dtype=np.float32), (2, 3, 1, 1)), [2, 7])  # <bos>, Hello
    said = view.search_pattern(two, "previous", skip_first=True, lang=lang).notes[0]
    assert said == T("pattern_none_short_skip", lang, pattern=T("metric_previous", lang), n=2, start=2)
    grid = json.dumps(view.grid(s, lang=lang).figure.to_plotly_json(), default=str)
    per_head = heads.head_metrics(maps, [4])
    for metric in ("previous", "first", "self"):
        panel = view.metric(per_head, metric, lang=lang)
        hovers = next(t for t in panel.figure.data if t.type == "scatter").text
        assert all(T("fig_no_value", lang) in h and "nan" not in h for h in hovers)
        assert view.metric_note(per_head, metric, s, lang=lang) is not None
    assert view.metric_note(per_head, "entropy", s, lang=lang) is None
    assert "nan" not in grid


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_verdict_carries_its_chance_level_and_the_induction_count(lang: str) -> None:
    """ "Best head … scoring 0.970" alone: next to what a head spreading its weight evenly scores, and for induction
    how many heads reach the head-science pages' bar."""
    rng = np.random.default_rng(2)
    n, ids = 8, [9, 1, 2, 3, 1, 2, 3, 4]
    maps = rng.uniform(0.01, 1, (3, 4, n, n)) * np.tri(n)
    maps[0, 1] = np.eye(n, k=-2) + 1e-3 * np.tri(n)  # an induction head: query i reads i − 2 (… 1 2 3 1 → 2)
    maps /= maps.sum(-1, keepdims=True)
    s = _causal(maps.astype(np.float32), ids)
    found = view.search_pattern(s, "induction", lang=lang)
    scores = heads.pattern_scores(s.maps, ids)["induction"]
    even = heads.uniform_scores(ids)["induction"]
    assert even == pytest.approx(np.mean([1 / 5, 1 / 6, 1 / 7]))  # queries 4, 5, 6: one key of i + 1
    assert found.best[0] == (0, 1)
    above = int((scores >= INDUCTION_THRESHOLD).sum())
    assert found.notes[1:3] == (
        T("pattern_uniform", lang, score=even),
        T(
            "induction_count",
            lang,
            count=above,
            total=12,
            threshold=INDUCTION_THRESHOLD,
            science=SCIENCE[lang],
            circuit=CIRCUIT[lang],
        ),
    )
    assert f"{even:.3f}" in found.notes[1] and str(above) in found.notes[2] and "*" not in found.notes[2]
    encoder = heads.uniform_scores(ids, causal=False)["previous"]
    assert encoder == pytest.approx(1 / n)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_text_whose_first_copy_fills_the_cap_is_not_told_to_turn_on_repeat(lang: str) -> None:
    """A 601-token text written twice on SmolLM2: the 373 tokens kept are all the first copy's, and the page said
    'turn on “Repeat my text”' with the switch on. A second copy cut short says how much of it was scored."""
    tm = models.load_model("tiny-gpt")
    cap = heads.max_tokens(tm)
    text = " ".join(TEXTS) * 40
    assert tm.encode(text).num_tokens > min(cap, tm.max_len)
    data = view.analyse(tm, view.repeated(text))
    s = view.shown(data, causal=True)
    queries, copy = view.repeat_queries(tm, text, s), view.copy_tokens(tm, text)
    assert not queries and data.truncated
    found = view.search_pattern(s, "induction", queries=queries, copy=copy, lang=lang)
    assert found.notes == (T("repeat_past_cap", lang, copy=copy, kept=len(s.labels)),) and not found.best
    assert str(copy) in found.notes[0] and str(len(s.labels)) in found.notes[0]
    assert T("repeat", lang) not in found.notes[0]
    kept = len(s.labels)
    words = text.split()
    half = next(  # a text of more than half the tokens kept: its second copy is cut by the cap
        t for t in (" ".join(words[:k]) for k in range(1, len(words))) if kept // 2 + 4 < view.copy_tokens(tm, t) < kept
    )
    data = view.analyse(tm, view.repeated(half))
    s = view.shown(data, causal=True)
    queries, copy = view.repeat_queries(tm, half, s), view.copy_tokens(tm, half)
    assert data.truncated and 0 < len(queries) < copy
    found = view.search_pattern(s, "induction", queries=queries, copy=copy, lang=lang)
    assert T("repeat_note_cut", lang, count=len(queries), copy=copy, kept=len(s.labels)) in found.notes


CASES = {  # layers whose scores are not softmax(q·k/√D_H) over the stack's mask alone
    "scale": dict(num_heads=4, attn_scale=0.05),  # Gemma 2's query_pre_attn_scalar ≠ D_H
    "softcap": dict(num_heads=4, attn_softcap=0.5),  # Gemma 2
    "sinks": dict(num_heads=4, attention_sinks=True, bias=False),  # gpt-oss: rows sum to less than 1
    "window": dict(  # a local layer shorter than the text (gpt-oss: 128 tokens), QK-norm and one key/value head
        num_heads=4, num_kv_heads=1, qk_norm=True, positions="rotary", sliding_window=4, layer_types=("sliding", "full")
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_inspectors_weights_are_the_maps_every_other_view_shows(case: str) -> None:
    """The inspector recomputed softmax(q·k/√D_H) under the stack's causal mask: a layer with its own scale, a soft
    cap, learned sinks or a sliding window got other weights than the model's map (up to 0.82 apart)."""
    import torch

    tm = _random_text_model(**CASES[case])
    if case == "sinks":
        for block in tm.model.blocks:
            torch.nn.init.normal_(block.attn.sinks.logits, std=2.0)
    text = TEXTS[0]
    data = heads.analyse(tm, text)
    n, lowest = len(data.tokens), 1.0
    for layer in range(tm.config.num_layers):
        for head in range(tm.config.num_heads):
            for query in (1, n // 2, n - 1):
                v = heads.inspect_text(tm, text, layer, head, query)
                np.testing.assert_allclose(v.weights, data.maps[layer, head, query], atol=1e-6)
                np.testing.assert_allclose(v.out, v.weighted.sum(0), atol=1e-6)
                assert np.isfinite(v.scores).sum() == (data.maps[layer, head, query] > 0).sum()
                lowest = min(lowest, float(v.weights.sum()))
    assert (lowest < 0.99) == (case == "sinks")  # the sink's share is missing from the rows, as in the maps


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_key_value_head_for_the_layer_is_called_multi_query(lang: str) -> None:
    """Gemma 3's inspector said "Query heads 0, 1, 2, 3 all read these columns (grouped-query attention)" under a
    caption saying multi-query attention."""
    tm = _random_text_model(num_heads=4, num_kv_heads=1)
    tokens = tm.labels(tm.encode(TEXTS[0], heads.MAX_TOKENS).ids)
    said = view.inspector(tm, TEXTS[0], tokens, 0, 2, 3, lang=lang).projection
    fields = dict(heads="0, 1, 2, 3", n=4, g=0, head=2)
    assert T("projection_shared_all", lang, **fields) in said
    assert T("projection_shared", lang, **fields) not in said
    grouped = _random_text_model(num_heads=4, num_kv_heads=2)
    said = view.inspector(grouped, TEXTS[0], tokens, 0, 2, 3, lang=lang).projection
    assert T("projection_shared", lang, heads="2, 3", n=2, g=1, head=2) in said


def test_the_page_shows_the_rankings_rank_and_names_every_model_it_offers(monkeypatch) -> None:
    """pandas 3 turns the ranks 1…10 into a RangeIndex, which st.table hid: the table read "Head | Score" with no
    rank. The picker's help named SmolLM2, tiny-gpt, MiniLM and tiny-llama but not Gemma 3 270M."""
    monkeypatch.setenv("TX_EXPLORER_DRAW_ALL", "1")
    at = open_page("multihead", mh_model="tiny-gpt", mh_view="search")
    assert_clean(at)
    table = at.table[0]
    assert not table.proto.hide_index and table.value.index.name == T("rank")
    helped = next(s for s in at.selectbox if s.key == "mh_model").help
    for name in models.available_models("text"):
        described = locales.table("common").get(f"model_{name}", {}).get("en") or models.REGISTRY[name].description
        assert described in helped, name


def test_the_notes_on_smollm2_and_gemma_name_each_models_own_numbers() -> None:
    """Both real models through the search on one text written twice: the verdicts carry their numbers, the heads'
    count is the model's own (270, 72), and no note says "nan"."""
    for name, total in ((SMOLLM2, 30 * 9), (GEMMA, 18 * 4)):
        if name not in models.available_models("text"):
            continue
        tm = models.load_model(name)
        text = "Return a new list containing all items from the iterable in ascending order."
        s = view.shown(view.analyse(tm, view.repeated(text)), causal=True)
        queries = view.repeat_queries(tm, text, s)
        found = view.search_pattern(
            s, "induction", skip_first=True, queries=queries, copy=view.copy_tokens(tm, text), groups=view.kv_groups(tm)
        )
        said = " ".join(found.notes)
        assert f"of {total} heads score at least" in said and "nan" not in said, said
        best = float(re.search(r"scoring ([\d.]+)", said).group(1).rstrip("."))
        even = float(re.search(r"would score ([\d.]+)", said).group(1).rstrip("."))
        assert best > 0.8 > 0.1 > even, said  # SmolLM2's L18 H6 and Gemma's L5 H1 read the copy; chance does not
        assert f"Scored on the {len(queries)} tokens of the second copy" in said


@pytest.mark.parametrize("name", [SMOLLM2, GEMMA])
def test_the_page_opens_every_view_on_a_one_token_text(name: str) -> None:
    if name not in models.available_models("text"):
        pytest.skip(f"{name} is not installed")
    at = open_page("multihead", timeout=600, mh_model=name, mh_view="search", mh_text_example_code="Hello")
    assert_clean(at)
    for view_name in ("grid", "search", "compare", "head", "qk"):
        at.segmented_control(key="mh_view").set_value(view_name).run()
        assert_clean(at)
        said = " ".join(str(e.value) for kind in ("caption", "info", "markdown") for e in getattr(at, kind))
        assert "nan" not in said.replace("nanoGPT", ""), view_name
        assert "nan" not in json.dumps(plotly_specs(at)).replace("NaN", ""), view_name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_norm_lens_says_what_the_chosen_model_changes_in_it(lang: str) -> None:
    """The lens wrote f_h(x_j) = x_j W_V^h W_O^h for every model: SmolLM2's and Gemma's heads read a shared key/value
    head's values, and Gemma normalises the block's output again after W_O, which the lens leaves out."""
    plain = _random_text_model(num_heads=4)
    shared = _random_text_model(num_heads=4, num_kv_heads=1, norm_position="sandwich", norm="rmsnorm")
    base = T("lens_norm_help", lang)
    assert view.lens_help(plain, "norm", lang=lang) == base
    said = view.lens_help(shared, "norm", lang=lang)
    assert said.startswith(base) and T("lens_norm_shared", lang, model=shared.name) in said
    assert T("lens_norm_after", lang, model=shared.name) in said and "W_V^{g(h)}" in said
    assert view.lens_help(shared, "rollout", lang=lang) == T("lens_rollout_help", lang)
