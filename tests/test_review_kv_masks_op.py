"""Review of the KV cache, Masks and attention-operator pages, in English and 中文. Each test holds what a visitor
met before its fix:

* KV cache, "Cached = uncached" (every model; SmolLM2: "logits within 6.2e-05 (tolerance 2.3e-03)", Gemma 3:
  "4.2e-05 … 1.1e-03"): the verdict and the chart's intro wrote the exponents with a hyphen, not a true minus,
  and an exact 0 would have read "0.0e+00". They are written by ``views.rounding`` now: "6.2e−05", "0".
* Masks, the gallery's check: "hidden pairs have weight **exactly 0.0**" and "(max error 0.0e+00)" (a sliding
  window of 1), "1.2e-07" with a hyphen; and a one-token sentence (or a grid with every cell ticked) was said to
  have "all 0 hidden (query, key) pairs of 1 … exactly 0.0". An exact 0 reads "0", a tiny error "1.2e−07", and a
  mask that hides nothing is said to hide nothing.
* Attention operator, "Replace V or K": the two metrics were written with ``.3g`` ("1e+03", "5.96e-08") while the
  sentence under them wrote the same numbers as "1,000" and "5.96e−8": they are written alike now.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales
from tx_explorer.views import kv_cache as kv_view
from tx_explorer.views import masks as masks_view
from tx_explorer.views import rounding

LANGS = ("en", "zh")


def T(page: str, key: str, lang: str = "en", **fmt: object) -> str:
    return locales.text(page, key, lang, **fmt)


# ---- KV cache: the verdict's numbers -----------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_the_cache_verdict_writes_a_true_minus_and_an_exact_zero(kv_decoding, lang):
    tm, d = kv_decoding
    shown = kv_view.decoded(tm, d, lang=lang)
    tol = kv_view.kv.tolerance(tm.config, d.logit_scale)
    assert tol < 1 and "−" in rounding(tol)  # a tolerance below 1: its exponent is negative
    for words in (shown.check, shown.same):
        assert "e-" not in words, words  # was "logits within 6.2e-05 (tolerance 2.3e-03)"
        assert rounding(tol) in words
    assert rounding(d.max_diff) in shown.check
    exact = dataclasses.replace(d, steps=[dataclasses.replace(s, logit_diff=0.0) for s in d.steps])
    said = kv_view.decoded(tm, exact, lang=lang)
    assert said.ok and "0.0e+00" not in said.check + said.same
    steps = len(d.steps)
    yes = T("kv_cache", "yes", lang)
    assert said.check == T("kv_cache", "check_ok", lang, steps=steps, diff="0", tol=rounding(tol), equal=yes)


# ---- Masks: the gallery's check ----------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_the_mask_check_writes_an_exact_zero_as_0(lang):
    window = masks_view.sentence_mask("a b c d", "sliding_window", window=1, lang=lang)  # one key a row: error 0
    assert window.ok and "0.0" not in window.check and "e+00" not in window.check
    assert window.check == T("masks", "check_ok", lang, hidden=12, total=16, rowsum="0")
    causal = masks_view.sentence_mask("the cat sat on the mat because it was tired", "causal", lang=lang)
    assert causal.ok and "e-" not in causal.check  # a rounding error with a true minus: "1.2e−07"
    assert ("exactly 0**" if lang == "en" else "恰好为 0**") in causal.check


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("sentence, kind, options", [("word", "causal", {}), ("a b c", "prefix_lm", {"prefix": 3})])
def test_a_mask_that_hides_nothing_is_said_to_hide_nothing(sentence, kind, options, lang):
    m = masks_view.sentence_mask(sentence, kind, lang=lang, **options)
    n = len(sentence.split())
    assert m.ok and m.check.startswith(T("masks", "check_none", lang, total=n * n, rowsum="").split("(")[0])
    assert "all 0 hidden" not in m.check and "被隐藏的 0 个" not in m.check  # was "all 0 hidden … exactly 0.0"


# ---- Attention operator: the replacement's metrics ---------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_the_replacement_metrics_read_as_the_sentence_under_them(lang):
    typed = dict(text_Q="100 0\n0 100", text_K="1 0\n0 1", text_V="1000 0\n-1000 0")  # one-hot rows: Y = ±1000
    at = open_page("operator", source="edit", op_open_qkv=True, replace="V", **typed)
    at.session_state["lang"] = lang
    at.run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    a, y = metrics[T("operator", "weights_diff", lang)], metrics[T("operator", "out_diff", lang)]
    assert a == "0" and "e+" not in y and y.replace(",", "").replace(".", "").isdigit(), y  # was "1.1e+03"
    reading = T("operator", "replace_result_V", lang, a=a, y=y)
    assert reading in [m.value for m in at.markdown]  # the same number in the metric and in the sentence


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tokens_help_says_no_window_of_a_model_it_may_not_be(lang):
    """The help of "Tokens of the bundled text" said "Past 512 tokens Gemma 3's local layers reach their window"
    whichever model was picked (SmolLM2 has no window); Gemma 3 is now an example of a layer with one."""
    said = locales.text("masks", "model_tokens_help", lang, limit=1024)
    assert ("A layer with a sliding window (Gemma 3's" in said) if lang == "en" else ("如 Gemma 3 的局部层" in said)
    assert "Past 512 tokens" not in said


def test_the_chinese_kv_verdicts_say_token_as_the_page_does():
    for key in ("same_equal", "same_differ"):
        assert "词元" not in locales.text("kv_cache", key, "zh", diff="0", tol="0", changed=1, steps=2)
