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
"""

from __future__ import annotations

import numpy as np
import pytest

from tx_explorer import locales
from tx_explorer.models import load_model
from tx_explorer.views import atlas as atlas_view

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
