"""Review of the multi-head and atlas pages on Gemma 3 270M, in English and 中文, each test holding what a visitor met
before its fix:

* Atlas, needle test on Gemma 3 with the sentence planted more than 512 tokens before the question (700 tokens of
  the corpus, depth 0 %): the grid showed 0 on all 60 heads of the 15 local layers, unexplained, and beside it "spread
  evenly, attention would give it …" as if every head could have looked. The local layers' window hides the sentence
  from the last position: the note now says so with the distance and the window, names the global layers (5, 11, 17)
  as the only ones that can fetch it and the best of their heads, and the grid marks the global layers as the atlas's
  own grid does.
* Atlas, "An exact block of weights" on Gemma 3's layer 0 (local), rows 600… × keys 0… of 700 tokens: every cell 0
  and "This block holds 0.000 of its rows' attention", with no word of why. The note now counts the cells the
  layer's 512-key window hides (0 by the mask, not by the head); a global layer's block gets no such note.
* Multi-head, head search on a query and a key farther apart than some layers' window (a model whose window is
  shorter than the 512 tokens the page keeps, as a gpt-oss folder's 128): those layers' heads ranked last, or every
  head tied at 0, with no word that the 0 is the mask's. On Gemma 3 the page's 512 tokens stay within its window.
"""

from __future__ import annotations

import numpy as np
import pytest

from tx_explorer import locales
from tx_explorer.analysis import heads
from tx_explorer.config import TransformerConfig
from tx_explorer.models import load_model
from tx_explorer.views import atlas as atlas_view
from tx_explorer.views import listed
from tx_explorer.views import multihead as mh_view

pytestmark = pytest.mark.usefixtures("one_thread")

LANGS = ("en", "zh")


def T(page: str, key: str, lang: str, **fmt: object) -> str:
    return locales.text(page, key, lang, **fmt)


@pytest.fixture(scope="module")
def gemma3():
    return load_model("gemma3-270m")


@pytest.fixture(scope="module")
def far_needle(gemma3):
    """A needle at depth 0 of 700 tokens: more than 512 tokens before the question, out of the local layers' reach."""
    ids = atlas_view.source_ids(gemma3, "corpus", tokens=700)
    return atlas_view.plant_needle(gemma3, ids, "The code is 4417.", "What is the code?", "4417", 0.0, new_tokens=2)


@pytest.mark.parametrize("lang", LANGS)
def test_a_needle_past_the_local_window_is_said_hidden_from_the_local_layers(gemma3, far_needle, lang):
    found = far_needle
    full = list(gemma3.config.global_layers)
    local = [i for i in range(gemma3.config.num_layers) if i not in full]
    gap = found.tokens - found.span[1]
    assert gap >= gemma3.config.sliding_window  # the planted sentence lies beyond the window from the last position
    assert np.all(found.share[local] == 0) and found.share[full].max() > 0  # the mask's zeros, the global layers' not
    result = atlas_view.needle(found, lang=lang)
    layer, head = np.unravel_index(int(np.argmax(found.share)), found.share.shape)
    said = T(
        "atlas",
        "needle_hidden",
        lang,
        gap=f"{gap:,}",
        window="512",
        local=15,
        heads=60,
        full="5, 11, 17" if lang == "en" else "5、11、17",
        layer=int(layer),
        head=int(head),
        share=f"{found.share.max():.2f}",
    )
    assert said in result.notes
    assert int(layer) in full
    y = result.panels[0].figure.layout.yaxis  # the grid's rows name the global layers, as the atlas's grid
    names = [str(t) for t in (y.ticktext if y.ticktext is not None else result.panels[0].figure.data[0].y)]
    word = {"en": "global", "zh": "全局"}[lang]
    assert [i for i, n in enumerate(names) if n.endswith(f" · {word}")] == full


@pytest.mark.parametrize("lang", LANGS)
def test_a_needle_every_layer_sees_gets_no_such_note(far_needle, lang):
    near = atlas_view.NeedleTest(**{**far_needle.__dict__, "span": (far_needle.tokens - 40, far_needle.tokens - 20)})
    notes = atlas_view.needle(near, lang=lang).notes
    assert not any("512" in n for n in notes)
    everywhere = atlas_view.NeedleTest(**{**far_needle.__dict__, "windows": (512,) * len(far_needle.windows)})
    assert atlas_view.needle(everywhere, lang=lang).notes[0] == T(
        "atlas", "needle_hidden_all", lang, gap=f"{far_needle.tokens - far_needle.span[1]:,}", window="512"
    )


@pytest.fixture(scope="module")
def long_read(gemma3):
    ids = atlas_view.source_ids(gemma3, "corpus", tokens=700)
    return ids, atlas_view.compute(gemma3, ids, window=64)


@pytest.mark.parametrize("lang", LANGS)
def test_a_block_past_a_local_layers_window_says_its_zeros_are_the_masks(gemma3, long_read, lang):
    ids, stats = long_read
    found = atlas_view.exact_block(gemma3, ids, stats, 0, 0, 600, 0, 32)  # layer 0: local, window 512
    assert np.all(found.weights == 0)  # keys 0…31 lie 569 or more back from rows 600…631
    said = T("atlas", "block_window", lang, count="1,024", cells="1,024", window=512)
    assert said in atlas_view.block(found, lang=lang).notes
    near = atlas_view.exact_block(gemma3, ids, stats, 0, 0, 600, 100, 32)  # keys 100…131: 469…531 back, some hidden
    hidden = sum(1 for i in range(600, 632) for j in range(100, 132) if i - j >= 512)
    assert T("atlas", "block_window", lang, count=f"{hidden:,}", cells="1,024", window=512) in (
        atlas_view.block(near, lang=lang).notes
    )
    everything = atlas_view.exact_block(gemma3, ids, stats, 5, 0, 600, 0, 32)  # layer 5: global, sees every key
    assert everything.weights.sum() > 0
    assert not any("512" in n for n in atlas_view.block(everything, lang=lang).notes)


# ---- the head search past a layer's window ----------------------------------------------------------------------
def _windowed(windows, special=(False,) * 7, hide=False):
    """Seven tokens through a causal model of three layers whose ``windows`` are applied: uniform rows over what each
    layer lets a query see (the special tokens, hidden when ``hide``, still count as positions)."""
    n, layers = 7, len(windows)
    i, j = np.indices((n, n))
    maps = np.zeros((layers, 2, n, n), np.float32)
    for layer, w in enumerate(windows):
        seen = (j <= i) & ((i - j < w) if w is not None else True)
        maps[layer] = seen / seen.sum(-1, keepdims=True)
    data = heads.TextAttention(list("abcdefg"), list(special), False, n, maps, list(range(n)))
    return mh_view.shown(data, hide, causal=True, global_layers=(1,), windows=windows)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_key_past_some_layers_window_is_said_the_masks_zero(lang):
    """A model whose window is shorter than the tokens the page keeps (a gpt-oss folder: 128) ranked its local
    layers' heads last on a far key without a word: their 0 is the mask's."""
    s = _windowed((2, None, 2))
    notes = mh_view.search_pair(s, 6, 1, causal=True, lang=lang).notes
    said = T("multihead", "pair_window", lang, q=6, k=1, back=5, window=2, layers=2, total=3,
             which=listed(["0", "2"], lang, "and"))  # fmt: skip
    assert said in notes
    assert not [n for n in mh_view.search_pair(s, 6, 5, causal=True, lang=lang).notes if "0 —" in n or "——" in n]
    every = mh_view.search_pair(_windowed((2, 2, 2)), 6, 1, causal=True, lang=lang).notes
    assert T("multihead", "pair_window_all", lang, q=6, k=1, back=5, window=2) in every


def test_the_distance_counts_hidden_special_tokens():
    """With the special tokens hidden, the indices are of the kept tokens; the window counts every position."""
    s = _windowed((3, None, 3), special=(True, False, True, False, False, False, False), hide=True)
    assert s.labels == list("bdefg")  # query 4 is "g" (position 6), key 1 is "d" (position 3): 3 back, past 3
    assert any("3 tokens before" in n for n in mh_view.search_pair(s, 4, 1, causal=True).notes)
    assert not any("tokens before" in n for n in mh_view.search_pair(s, 4, 2, causal=True).notes)


def test_a_configs_windows_are_each_layers():
    cfg = TransformerConfig(num_layers=3, layer_types=("sliding", "full", "sliding"), sliding_window=4)
    assert cfg.windows == (4, None, 4)
    assert TransformerConfig(num_layers=2, sliding_window=8).windows == (8, 8)  # Mistral: every layer's
    assert TransformerConfig(num_layers=2).windows == (None, None)
