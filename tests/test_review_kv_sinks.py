"""Review of three pages, in English and 中文, each test holding what a visitor met before its fix:

* Model sizes, "Your own model": grouped-query attention was only described ("one key/value head would save …",
  not offered). The section now has a key/value heads input H_kv (default H: multi-head): the count, the check
  against the meta-device model and the chart (a second bar: the same shape with multi-head attention) follow it,
  the heads sentence speaks of the chosen H_kv, and a value that does not divide H is refused in words.
* Long-context atlas, Gemma 3 past its 512-token window: "Sinks: 5 of 72 heads" at 1 024 tokens against 8 at 512,
  because a local layer's queries past the window cannot see the first token (their share is 0) and the mean over
  all queries falls. The note now also counts the local layers over the queries that still see it.
* Language modelling, Gemma 3 reading 512 tokens: seconds with no spinner (the read was cached with
  show_spinner=False). A long text now goes through the job pool with a bar that says what runs; a short one is
  read at once.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_clean, open_page

from tx_explorer import locales, models, ui
from tx_explorer.analysis import atlas
from tx_explorer.config import TransformerConfig
from tx_explorer.views import atlas as atlas_view
from tx_explorer.views import model_sizes as sizes
from tx_explorer.views import multihead, sentences

LANGS = ("en", "zh")
GPT2_SMALL = TransformerConfig(vocab_size=50_257, max_len=1024, dim=768, num_layers=12, num_heads=12)  # the default


def T(page: str, key: str, lang: str, **fmt: object) -> str:
    return locales.text(page, key, lang, **fmt)


def _total(cfg: TransformerConfig) -> int:
    return sum(sizes.counted(cfg.to_dict())[1].values())


# ---- model sizes: the key/value heads --------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("kv", [4, 1])
def test_the_key_value_heads_change_the_count_the_chart_and_the_words(kv, lang):
    mine = sizes.OWN_MODEL(kv_heads=kv, lang=lang)  # GPT-2 small's shape, 12 query heads
    multi = sizes.OWN_MODEL(lang=lang)  # the default: as many key/value heads as query heads
    assert mine.total == _total(GPT2_SMALL.replace(num_kv_heads=kv)) and mine.ok  # checked on the meta device
    assert multi.total == _total(GPT2_SMALL) == 124_439_808
    fewer = multi.total - mine.total
    # W_K and W_V shrink from D × D to D × (H_kv·D_H) in each of the 12 layers (their biases with them)
    assert fewer == 12 * 2 * (768 + 1) * (768 - kv * 64)
    bars = mine.parts.figure.data
    assert list(bars[0].y) == [T("model_sizes", "your_model", lang), T("model_sizes", "multi_head_model", lang, h=12)]
    assert [sum(b.x[i] for b in bars) for i in (0, 1)] == [mine.total, multi.total]  # the saving, side by side
    said = T(
        "model_sizes",
        "heads_mqa" if kv == 1 else "heads_gqa",
        lang,
        kv=kv,
        h=12,
        d=768,
        width=kv * 64,
        fewer=f"{fewer:,}",
        layers=12,
        multi=f"{multi.total:,}",
    )
    assert said in mine.heads
    assert "would" not in mine.heads and "则会" not in mine.heads  # no longer what one head *would* save
    assert len(multi.parts.figure.data[0].y) == 1  # multi-head: one bar, as before


@pytest.mark.parametrize("lang", LANGS)
def test_a_key_value_count_that_does_not_divide_the_heads_is_refused_in_words(lang):
    at = open_page("model_sizes")
    at.session_state["lang"] = lang
    at.session_state["reached_model_sizes_custom"] = True  # the section is drawn when scrolled to
    at.run()
    box = at.number_input(key="sizes_kv_heads")
    assert box.value == 0 and at.number_input(key="sizes_heads").value == 12  # 0: as many as H, multi-head
    at.session_state["lang"] = lang
    at.number_input(key="sizes_heads").set_value(8).run()  # H alone changes: H_kv follows, no refusal
    assert_clean(at)
    assert any(f"{_total(GPT2_SMALL.replace(num_heads=8)):,}" in s.value for s in at.success)
    at.session_state["lang"] = lang
    at.number_input(key="sizes_heads").set_value(12).run()
    box = at.number_input(key="sizes_kv_heads")
    assert box.label == T("model_sizes", "kv_heads", lang)
    at.session_state["lang"] = lang  # set again before each run: AppTest's next run sends back the URL's language
    box.set_value(5).run()
    assert not at.exception
    refused = T("errors", "kv_heads_divide", lang, kv_heads=5, heads=12)
    assert [e.value for e in at.error] == [T("common", "error_input", lang, message=refused)]
    at.session_state["lang"] = lang
    at.number_input(key="sizes_kv_heads").set_value(3).run()
    assert_clean(at)
    assert any(f"{_total(GPT2_SMALL.replace(num_kv_heads=3)):,}" in s.value for s in at.success)


# ---- atlas: sinks counted over the queries that see the first token -------------------------------------------
def _stats(first: np.ndarray, windows: tuple[int | None, ...]) -> atlas.HeadStats:
    """Statistics with the given first-token shares ``[L, H, T]``; the others flat (they do not bear on sinks)."""
    t = torch.as_tensor(first, dtype=torch.float32)
    flat = torch.full_like(t, 0.5)
    return atlas.HeadStats(t, flat, flat, flat, flat, None, 4, torch.zeros(t.shape[-1], 2), windows)


N, WINDOW = 32, 8
# layer 0 local (window 8), layer 1 global; head 0 of each gives the first token 0.9 wherever it can see it
SHARES = np.full((2, 2, N), 0.05)
SHARES[:, 0, :] = 0.9
SHARES[0, :, WINDOW:] = 0.0  # past its window a local layer's query cannot see the first token


@pytest.mark.parametrize("lang", LANGS)
def test_the_sink_count_past_the_window_is_also_given_over_the_queries_that_see_the_first_token(lang):
    stats = _stats(SHARES, (WINDOW, None))
    assert stats.per_head("first")[0, 0] < atlas_view.SINK  # 0.9 over 8 of 32 queries: 0.225, no sink on average
    note = atlas_view.overview(stats, lang=lang).notes[0]
    assert ("2 of 4 heads are sinks" if lang == "en" else "4 个头中有 2 个是汇聚点") in note  # L0 H0 counted too
    seen = atlas_view.first_seen(stats)
    assert seen[0, 0] == pytest.approx(0.9) and seen[1, 0] == pytest.approx(0.9)  # the global layer's as it was
    even = T(
        "atlas",
        "even_kinds",
        lang,
        local=f"{atlas.even_first(N, WINDOW):.2f}",
        window="8",
        full=f"{atlas.even_first(N):.2f}",
    )
    plain = T("atlas", "note_sinks", lang, count=1, heads=4, n=N, even=even, layer=1, head=0, share="0.90")
    over_seen = T(
        "atlas",
        "note_sinks_seen",
        lang,
        window="8",
        cap="7",
        count=2,
        heads=4,
        even=f"{atlas.even_first(WINDOW):.2f}",
        layer=0,
        head=0,
        share="0.90",
    )
    assert note == sentences([plain, over_seen], lang)


@pytest.mark.parametrize("lang", LANGS)
def test_layers_alike_keep_the_plain_count(lang):
    shares = SHARES.copy()
    shares[0] = shares[1]  # two global layers
    even = f"{atlas.even_first(N):.2f}"
    plain = T("atlas", "note_sinks", lang, count=2, heads=4, n=N, even=even, layer=0, head=0, share="0.90")
    assert atlas_view.overview(_stats(shares, (None, None)), lang=lang).notes[0] == plain
    # a window no shorter than the text hides nothing: such a layer is counted as a global one
    assert atlas_view.overview(_stats(shares, (N, None)), lang=lang).notes[0] == plain


@pytest.fixture(scope="module")
def gemma3_270m():
    return models.load_model("gemma3-270m")


def test_gemma3_sinks_past_its_window_are_counted_as_at_512_tokens(gemma3_270m):
    """8 sinks at 512 tokens; at 1 024 the plain count falls to 5, the local layers' queries past 511 seeing 0."""
    at_512, at_1024 = (
        atlas_view.compute(gemma3_270m, atlas_view.source_ids(gemma3_270m, "corpus", tokens=n)) for n in (512, 1024)
    )
    count_512 = int((at_512.per_head("first") > atlas_view.SINK).sum())
    plain, seen = (
        int((v > atlas_view.SINK).sum()) for v in (at_1024.per_head("first"), atlas_view.first_seen(at_1024))
    )
    assert plain < count_512 == seen  # the reviewer's 5 against 8
    short = atlas_view.overview(at_512, global_layers=gemma3_270m.config.global_layers).notes[0]
    note = atlas_view.overview(at_1024, global_layers=gemma3_270m.config.global_layers).notes[0]
    assert "first 512 queries" not in short  # 512 tokens lie within the window: one count
    assert f"Sinks: {plain} of 72 heads" in note and "first 512 queries, which still see it" in note
    assert f"{seen} of 72 heads are sinks" in note


# ---- language model: a long read says what runs --------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_a_long_text_is_read_on_the_job_pool_with_its_label_and_a_short_one_at_once(monkeypatch, lang):
    labels: list[str] = []
    run_job = ui.run_job

    def recording(fn, *, label, **kw):
        labels.append(label)
        return run_job(fn, label=label, **kw)

    monkeypatch.setattr(ui, "run_job", recording)
    monkeypatch.setattr(multihead, "HEAVY_TOKENS", 8)  # tiny-gpt's context is 128 tokens: make 9 tokens "long"
    at = open_page("language_model", lm_model="tiny-gpt")
    at.session_state["lang"] = lang
    at.run()
    assert not labels  # the default text, a few tokens: read at once
    at.session_state["lang"] = lang  # set again before each run: AppTest's next run sends back the URL's language
    at.text_area(key="lm_text").set_value(f"a text of well over eight tokens, read here in {lang} for the pool").run()
    assert_clean(at)
    assert len(labels) == 1 and at.code  # the read went through the pool, and was shown
    assert labels[0] == T("language_model", "read_working", lang)  # its bar says what runs
    at.session_state["lang"] = lang
    at.text_area(key="lm_text").set_value(f"short {lang}").run()
    assert_clean(at)
    assert len(labels) == 1  # a short text: not on the pool
