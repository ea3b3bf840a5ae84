"""Small fixes from a read of the pages that no helper covered (self-attention, seq2seq, figures)."""

from __future__ import annotations

import dataclasses

from tx_explorer.analysis import self_attention as analysis
from tx_explorer.views import self_attention as view


def test_an_exact_equivariance_says_0_not_0_0e_00(monkeypatch):
    """One head on tokens whose shuffle is exact (a difference of exactly 0) wrote "(0.0e+00)"."""
    real = analysis.permutation_check

    def exact(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), max_diff=0.0)

    monkeypatch.setattr(view.self_attention, "permutation_check", exact)
    verdict = view.permutation(n=4, dim=8, heads=2, seed=0, kind="none").verdict
    assert "(0)" in verdict and "e+00" not in verdict


def test_the_fixed_models_one_c_is_maths_in_prose_and_italic_in_the_legend():
    """ "one c for every step" named the fixed model in the page's prose and in its charts' legend alike."""
    from tx_explorer import models
    from tx_explorer.views import seq2seq

    translators, _ = seq2seq.load_translators(models.load_model)
    results = {k: t.results for k, t in translators.items() if t.results}
    for lang, prose in (("en", "one $c$ for every step"), ("zh", "每步同一个 $c$")):
        assert prose in seq2seq.labels(lang)["fixed"]
        legend = [trace.name for panel in seq2seq.by_length(results, lang=lang) for trace in panel.figure.data]
        assert not [name for name in legend if "$" in name]
        assert any("<i>c</i>" in name for name in legend)


def test_the_model_card_counts_one_local_or_one_global_layer_in_the_singular():
    """A two-layer checkpoint read "a sliding window of 4 tokens on 1 local layers; the global layers (1) see"."""
    from tx_explorer.config import TransformerConfig
    from tx_explorer.ui import pickers
    from tx_explorer.views import texts

    def card(types):
        cfg = TransformerConfig(num_layers=len(types), sliding_window=4, layer_types=types)
        return pickers._window(texts("common", "en"), cfg)

    assert card(("sliding", "full")).endswith("on 1 local layer; the global layer (1) sees every earlier token")
    assert "on 2 local layers; the global layer (2) sees" in card(("sliding", "sliding", "full"))
    assert "on 1 local layer; the global layers (1, 2) see" in card(("sliding", "full", "full"))
    assert "on 10 local layers; the global layers (5, 11) see" in card((*["sliding"] * 5, "full") * 2)
