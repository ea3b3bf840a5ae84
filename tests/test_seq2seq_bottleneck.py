"""Section 4 of the Seq2Seq page: lecture §1.2's "with attention quality does not fall with length", as a verdict
computed from the length curves, never typed."""

from __future__ import annotations

import math

import pytest

from tx_explorer import models
from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.views import seq2seq as view


def _result(accuracy: tuple[float, float], exact: tuple[float, float], n: int = 50) -> dict:
    """An :func:`ev.evaluate` result of two buckets (the verdict reads the first and the last)."""
    return {"buckets": ["3–5", "36–40"], "n": [n, n], "token_accuracy": list(accuracy), "exact_match": list(exact)}


def test_the_exact_match_fall_is_weighed_against_its_standard_error():
    trend = ev.length_trend(_result((1.0, 0.954), (1.0, 0.56)))
    assert trend.buckets == ("3–5", "36–40") and trend.token_accuracy == (1.0, 0.954)
    assert trend.exact_se == pytest.approx(math.sqrt(0.56 * 0.44 / 50)) and trend.falls
    assert not ev.length_trend(_result((1.0, 0.99), (0.9, 0.86))).falls  # 4 points, standard error 6.4
    assert not ev.length_trend(_result((1.0, 1.0), (1.0, 1.0))).falls  # no fall, no noise


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_shipped_curves_refute_the_typed_claim_with_their_numbers(lang):
    """The shipped curves: attention loses far less word accuracy than the fixed vector, but its exact match still
    falls from 100 % to 56 % (Bahdanau) and 12 % (Transformer): the verdict says both, with the numbers."""
    results = {k: models.load_model(f"seq2seq-{k}").results for k in view.KINDS}
    text = view.bottleneck_verdict(results, lang=lang)
    for r in results.values():
        assert f"{r['token_accuracy'][0]:.1%} → {r['token_accuracy'][-1]:.1%}" in text
        assert f"{r['exact_match'][0]:.0%} → {r['exact_match'][-1]:.0%}" in text
    says = {"en": ("degrade more slowly", "does not hold here"), "zh": ("退化得慢", "不成立")}[lang]
    assert all(s in text for s in says)
    fixed_loss = results["fixed"]["token_accuracy"][0] - results["fixed"]["token_accuracy"][-1]
    assert f"{100 * fixed_loss:.1f}" in text
    if lang == "zh":
        assert "。 " not in text


def test_the_verdict_follows_the_numbers_not_the_lecture():
    """Attention that loses as much as the fixed vector, and attention that keeps its quality: each verdict flips."""
    fixed = _result((0.9, 0.2), (0.8, 0.0))
    same = view.bottleneck_verdict({"fixed": fixed, "attention": _result((0.9, 0.2), (0.8, 0.0))})
    assert "does not degrade more slowly" in same and "does not hold here" in same
    flat = view.bottleneck_verdict({"fixed": fixed, "attention": _result((1.0, 0.99), (0.9, 0.86))})
    assert "does degrade more slowly" in flat and "quality holds" in flat and "does not hold" not in flat
