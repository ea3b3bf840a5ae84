"""Review of the text pages with Gemma 3 270M selected, in English and 中文, each test holding what a visitor met
before its fix:

* Long-context atlas, Gemma 3 on 1 024 tokens of the bundled text: "The largest average share on the first token:
  0.27 in a local layer, 0.68 in a global one", read as local layers sinking less. Past position 511 a local layer's
  queries no longer see the first token at all (its window has moved on), so its mean over all queries halves with
  the text's length: over the 512 queries that still see it, a local layer gives it up to 0.55. The note says why
  and gives that share too.
* What a head does, logit lens: "the largest read out L0 after MLP, at token 12 `.`" — the token was written as a
  Markdown code span inside a note the page shows escaped, so the backticks stood in the sentence. It is quoted
  now, as the other notes quote tokens.
* Language modelling, "The causal mask in use", Gemma 3 at layer 0 (a local layer, window 512): the page said only
  "Largest weight on a future token …", under a map titled "Causal mask", while the caption above it names a
  512-token window on 15 layers and the page reads 512 tokens at most. It now says that this layer keeps a window,
  that the text's tokens all lie within it (so the mask is the causal one and the window hides nothing), and where
  to see it at work; a global layer's verdict says nothing of a window.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import locales, models
from tx_explorer.config import PRESETS
from tx_explorer.families.text import TextModel
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import atlas as atlas_view
from tx_explorer.views import head_science as hs_view
from tx_explorer.views import language_model as lm_view

WINDOW, N = 16, 96


@pytest.fixture(scope="module")
def local_global():
    """A random tiny model of local and global layers (Gemma 3's pattern, layers 0 and 2 local) read on more tokens
    than its window."""
    torch.manual_seed(0)
    cfg = PRESETS["tiny-llama"].replace(max_len=N, sliding_window=WINDOW, layer_types=("sliding", "full") * 2)
    tokenizer = models.load_model("tiny-llama").tokenizer
    tm = TextModel(name="random", model=CausalLM(cfg), tokenizer=tokenizer, kind="causal", max_len=N)
    ids = torch.randint(0, cfg.vocab_size, (N,), generator=torch.Generator().manual_seed(1)).tolist()
    return tm, atlas_view.compute(tm, ids, window=8)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_local_layers_sink_share_is_also_given_over_the_queries_that_see_the_first_token(local_global, lang):
    tm, stats = local_global
    first = stats.first.numpy()  # (L, H, T)
    assert np.all(first[[0, 2], :, WINDOW:] == 0)  # what the note says: past the window a local layer cannot see it
    over_all, over_seen = first[[0, 2]].mean(-1).max(), first[[0, 2], :, :WINDOW].mean(-1).max()
    assert over_seen > 2 * over_all  # the number the note gave alone understates the local layers' sink
    note = atlas_view.layer_kinds(tm, stats, lang=lang)
    assert f"{over_all:.2f}" in note and f"{over_seen:.2f}" in note
    if lang == "en":
        assert f"queries past position {WINDOW - 1} no longer see the first token" in note
        seen = f"over the first {WINDOW} queries, which still see it, a local layer gives it up to {over_seen:.2f}"
        assert seen in note
    else:
        assert f"位置 {WINDOW - 1} 之后的查询已看不见首个 token" in note and f"最高为 {over_seen:.2f}" in note


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_logit_lens_note_quotes_its_token_without_markdown(lang):
    kl = np.array([[0.5, 214.0, 1.0], [0.01, 3.0, 0.2]])
    note = hs_view._log_scale(kl, ["L0 after MLP", "L0 after attention"], ["<bos>", ".", "`x"], lang)
    assert "`" not in note and "“.”" in note  # ui.show_result escapes a note: a code span shows its backticks
    assert note == locales.text(
        "head_science",
        "lens_log",
        lang,
        low="0.01",
        high="214",
        row="L0 after MLP",
        position="1",
        token=".",
        median="0.75",
        tenth="21.4",
        share="83%",
        floor=f"{hs_view.KL_FLOOR:g}",
    )


@pytest.fixture(scope="module")
def gemma3_270m():
    return models.load_model("gemma3-270m")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_local_layer_within_its_window_says_why_its_mask_is_causal(gemma3_270m, lang):
    r = lm_view.read(gemma3_270m, "The cat sat on the mat.", 3)
    n = len(r.tokens)
    local, full = 0, gemma3_270m.config.global_layers[0]
    said = lm_view.causal(r, local, 0, window=lm_view.layer_window(gemma3_270m, local), lang=lang).check
    assert locales.text("language_model", "window_within", lang, layer=local, window="512", n=n) in said
    plain = lm_view.causal(r, full, 0, window=lm_view.layer_window(gemma3_270m, full), lang=lang).check
    assert lm_view.layer_window(gemma3_270m, full) is None and plain == locales.text(
        "language_model", "mask_check", lang, value="0", layers=18, heads=4
    )
