"""The KV cache page past Gemma 3 270M's window (issue 41): its stepper walks 128 tokens, short of the local layers'
512, so the page runs a prompt filled with bundled text past the window. Local layers keep exactly 512 rows, the
global ones (5, 11, 17) every token, the bytes formula for mixed layers equals the tensors' bytes at every step and
cached = uncached decoding, computed by the view and drawn by the page. The real model (model and app tiers); the
same logic on a tiny random model is tests/test_kv_cache.py's (unit tier)."""

from __future__ import annotations

import pytest
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer import model_cache, models
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.errors import InputError
from tx_explorer.views import kv_cache as view

pytestmark = pytest.mark.usefixtures("one_thread")
NAME = "gemma3-270m"
WINDOW = 512
GLOBAL = (5, 11, 17)
NEW = 2  # a pass over the 268M weights per step: few steps (the prompt's own tokens are stepped too)
TOKENS = WINDOW + kv.PAST_TOKENS + NEW - 1  # fed by the last step


@pytest.fixture(scope="module")
def gemma3_270m():
    if NAME not in models.available_models("text"):
        pytest.skip(f"{NAME} is not installed on this machine (make run assembles it)")
    return model_cache.shared_model(NAME)  # the process's copy, the one the page below reads too: loaded once


def _rows(tokens: int) -> tuple[int, ...]:
    return tuple(tokens if layer in GLOBAL else min(tokens, WINDOW) for layer in range(18))


def test_a_run_past_the_window_keeps_512_rows_on_the_local_layers_of_gemma3_270m(gemma3_270m):
    cfg = gemma3_270m.config
    assert view.past_window(gemma3_270m) == WINDOW
    d = view.decoding(gemma3_270m, view.PROMPT, NEW, past=True)
    assert d.steps[-1].position + 1 == TOKENS and d.prefill < WINDOW <= d.prompt_len
    assert d.steps[0].layer_rows[0] < WINDOW  # the prompt's own tokens are stepped across the window's edge
    assert [k.shape[2] for k in d.cache.keys] == list(_rows(TOKENS))
    for s in d.steps:  # the formula for mixed layers written out, against the cache's tensors at every step
        t = s.position + 1
        assert s.layer_rows == _rows(t)
        assert s.nbytes == s.formula == 2 * 1 * 256 * 4 * (15 * min(t, WINDOW) + 3 * t)
    assert d.identical and d.max_diff <= kv.tolerance(cfg, d.logit_scale)
    decoded = view.decoded(gemma3_270m, d)
    assert decoded.ok and f"the local layers (15) hold 512 rows each, the global layers (3) {TOKENS}" in decoded.check
    last = d.steps[-1].position
    local, global_ = (view.cache_view(gemma3_270m, d.ids, decoded.labels, last, i, decoding=d) for i in (0, 5))
    assert local.keys.data.shape == (WINDOW, 256) and global_.keys.data.shape == (TOKENS, 256)
    assert tuple(local.layers.data) == _rows(TOKENS) and f"(15 · 512 + 3 · {TOKENS})" in local.numbers
    # bad prompts are refused before any pass, with a message in both languages
    for prompt, key in (("  ", "kv_prompt_empty"), ("keys and values " * 100, "kv_prompt_too_long")):
        with pytest.raises(InputError) as exc:
            view.decoding(gemma3_270m, prompt, NEW, past=True)
        assert exc.value.key == key and exc.value.message("zh")


def test_the_kv_cache_page_draws_the_run_past_the_window_on_gemma3_270m(gemma3_270m):
    at = open_page("kv_cache", timeout=600, kv_model=NAME, kv_past=True, kv_new=NEW)
    assert_clean(at)
    check = at.success[0].value
    assert check.startswith("Past the window")
    assert f"the local layers (15) hold 512 rows each, the global layers (3) {TOKENS}" in check
    assert any("tokens of the bundled text" in c.value for c in at.caption)
    numbers = next(m.value for m in at.markdown if "tensors hold" in m.value)
    assert f"(15 · 512 + 3 · {TOKENS})" in numbers

    def keys_title() -> str:
        return next(t for s in plotly_specs(at) if (t := s["layout"]["title"]["text"]).startswith("Cached keys"))

    assert keys_title().startswith("Cached keys, layer 0: 512 rows")
    at.radio(key="kv_layer").set_value(5).run()  # a global layer
    assert_clean(at)
    assert keys_title().startswith(f"Cached keys, layer 5: {TOKENS} rows")
    slider = at.slider(key="kv_step")
    first = int(slider.min)
    assert slider.max == TOKENS - 1 and first < WINDOW - 1  # from the prefill's last token, across the window's edge
    slider.set_value(first).run()  # replayed from the cache the prefill left
    assert_clean(at)
    assert any(f"After step {first}: the local layers (15) hold {first + 1} rows each" in m.value for m in at.markdown)
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert "越过窗口" in at.success[0].value
