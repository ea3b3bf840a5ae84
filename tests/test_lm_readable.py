"""The language-model page's figures and token strips read at a glance (review 4): a long context's labels thinned,
weight maps coloured to their own largest, the embedding map clipped at a high percentile, Gemma's √D scale and
split UTF-8 bytes said in words."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import assert_clean, open_page

from tx_explorer import locales, models
from tx_explorer.analysis import lm
from tx_explorer.views import language_model as view
from tx_explorer.views import split_bytes_note

N = 89  # the reviewed chat's context: two turns in Chinese and the reply's first token
CHINESE = ["\\xe5\\xae", "\\x83", "的", "人", "\\xe5\\x8f", "\\xa3"]  # 它的人口 as SmolLM2's byte-level BPE labels it


def _weights(rows: int, cols: int, top: float) -> np.ndarray:
    """Rows of weights whose largest is ``top`` (a mean of heads spread thin over a long context)."""
    w = np.random.default_rng(0).uniform(0.0, top, size=(rows, cols))
    w[-2, 0] = top  # a row every map shows: the generation map leaves out the last
    return w


def _reply(top: float = 0.38, n: int = N) -> lm.ReplyAttention:
    tokens = [f"t{i}" for i in range(n)]
    rows = np.broadcast_to(_weights(5, n, top), (2, 3, 5, n)).astype(np.float16)  # (L, H, R, N)
    return lm.ReplyAttention(tokens, tokens[-5:], n - 5, n // 2, rows)


def _generation(top: float = 0.3) -> lm.Generation:
    tokens = [f"g{i}" for i in range(N)]
    maps = np.broadcast_to(np.tril(_weights(N, N, top)), (2, 3, N, N))  # (L, H, T, T)
    return lm.Generation(list(range(N)), tokens, N - 8, False, 512, maps)


def _ticks_apart(fig) -> int:
    ticks = list(fig.layout.xaxis.tickvals)
    assert len(ticks) <= view.PAGE_X_TICKS and len(fig.layout.xaxis.ticktext) == len(ticks)
    return ticks[1] - ticks[0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_long_contexts_bars_name_every_kth_token_and_the_hover_names_each(lang: str) -> None:
    """89 context tokens ran into one unreadable block under the chat's bars (review 4, item 1)."""
    read = view.chat_read(_reply(), token=4, lang=lang).step.figure
    assert _ticks_apart(read) == 2 and list(read.data[0].hovertext) == [f"{i}: t{i}" for i in range(N - 1)]
    step = view.generation(_generation(), step=8, lang=lang)[0].figure
    assert _ticks_apart(step) == 2 and list(step.data[0].hovertext)[-1] == f"{N - 2}: g{N - 2}"
    short = view.chat_read(_reply(n=20), lang=lang).step.figure
    assert list(short.layout.xaxis.tickvals) == list(range(15))  # a short context: every token named


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chat_and_generation_weight_maps_are_coloured_to_their_own_largest(lang: str) -> None:
    """On a fixed 0–1 scale weights of at most 0.1–0.4 were one dark colour (review 4, item 2)."""
    rows = view.chat_read(_reply(0.38), lang=lang).rows.figure.data[0]
    steps = view.generation(_generation(0.3), lang=lang)[1].figure.data[0]
    for trace, top in ((rows, 0.38), (steps, 0.3)):
        assert trace.zmin == 0 and trace.zmax == pytest.approx(top, rel=1e-3)
        assert trace.colorbar.title.text == locales.text("language_model", "weight_to_max", lang).format(max=top)


def test_the_embedding_map_clips_its_colours_at_a_high_percentile_and_says_so() -> None:
    """Gemma 3's ``<bos>`` row holds one entry 0.93 where the 99.5th percentile is 0.12: it washed out every other
    row (review 4, item 3)."""
    e = np.random.default_rng(1).normal(0.0, 0.04, size=(6, 640)).astype(np.float32)
    e[0, 500] = 0.93
    r = SimpleNamespace(tokens=["<bos>", *"abcde"], ids=list(range(6)), embeddings=e)
    limit = float(np.percentile(np.abs(e), 99.5))
    for lang in ("en", "zh"):
        trace = view.embeddings(r, 640, lang=lang).figure.data[0]
        assert trace.zmax == pytest.approx(limit) == -trace.zmin and limit < 0.2 and trace.zmid == 0
        said = trace.colorbar.title.text
        assert f"±{limit:.2g}" in said and "99.5" in said and "0.93" in said
        assert trace.z[0][500] == pytest.approx(0.93)  # the hover gives the value itself


def test_the_embedding_prose_says_the_models_own_scale_where_it_has_one() -> None:
    """ "No arithmetic, just a lookup" — but Gemma multiplies the rows by √D before block 0 (review 4, item 3)."""
    tm = models.load_model("tiny-gpt")
    scaled = SimpleNamespace(config=dataclasses.replace(tm.config, embed_scale=True), model=tm.model)
    dim, scale = tm.config.dim, f"{tm.config.dim**0.5:.1f}"
    for lang in ("en", "zh"):
        said = view.embed_intro(scaled, lang=lang)
        assert f"√D = √{dim} ≈ {scale}" in said and "embed_scale" in said
        assert "embed_scale" not in view.embed_intro(tm, lang=lang)
    assert "。 " not in view.embed_intro(scaled, lang="zh")  # Chinese sentences run on without spaces


def test_split_bytes_are_explained_only_where_a_token_is_one() -> None:
    for lang in ("en", "zh"):
        note = split_bytes_note(CHINESE, lang)
        assert note == locales.text("common", "split_bytes", lang) and "`\\xNN`" in note
    assert split_bytes_note(["Return", "▁a", "▁new"]) is None
    assert split_bytes_note(["▁line", "\\x00", "↵"]) is None  # a control character's code: a whole character


def test_the_page_and_the_chat_explain_the_bytes_of_a_chinese_text() -> None:
    at, note = open_page("language_model"), locales.text("common", "split_bytes", "zh")

    def run() -> None:
        at.session_state["lang"] = "zh"  # AppTest does not send the sidebar's switch back: set it for every run
        at.run()
        assert_clean(at)

    run()
    assert not any(c.value == note for c in at.caption)  # the default text: no byte tokens, no note
    at.text_area(key="lm_text").set_value("它的人口是多少？")
    run()
    assert sum(c.value == note for c in at.caption) == 1
    at.text_area(key="lm_text").set_value("Return a new list")
    at.session_state["lm_open_chat"] = True
    run()  # the chat answers its default message, in English
    assert not any(c.value == note for c in at.caption)
    at.slider(key="lm_chat_new").set_value(4)
    at.text_input(key="lm_chat").set_value("它的人口是多少？")
    run()
    assert sum(c.value == note for c in at.caption) == 1  # under what the chat's model read
