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


def test_a_checkpoints_first_patching_pair_has_prompts_of_equal_length(tmp_path):
    """A random checkpoint's tokenizer split the generic first pair in 8 and 5 tokens: the patching view opened on an
    error box. The pairs whose prompts are as many tokens come first; a bundled model keeps its own."""
    from tests.checkpoints import write_checkpoint
    from tx_explorer.analysis import head_science as hs
    from tx_explorer.interop.checkpoint import load_checkpoint

    write_checkpoint(tmp_path / "qwen2", "qwen2")
    tm = load_checkpoint(tmp_path / "qwen2")
    length = lambda text: len(tm.encode(text).ids)  # noqa: E731
    first = hs.EXAMPLE_PAIRS["*"][0]
    assert length(first.clean) != length(first.corrupt)  # the case this guards
    pair = hs.example_pairs("qwen2", tm)[0]
    assert length(pair.clean) == length(pair.corrupt)
    assert hs.example_pairs("tiny-gpt", tm) == hs.EXAMPLE_PAIRS["tiny-gpt"]


def test_a_no_break_space_keeps_a_formula_on_one_line_of_a_title():
    """gpt-oss's sink figure title broke inside its formula: "1 − Σⱼ<br>Aᵢⱼ"."""
    from tx_explorer import locales
    from tx_explorer.viz import style

    for lang in locales.LANGUAGES:
        title = locales.text("multihead", "learned_sinks_title", lang)
        for width in range(160, 420, 20):
            lines = style.wrap(title, width).split("<br>")
            assert any("1\u00a0−\u00a0Σⱼ\u00a0Aᵢⱼ" in line for line in lines), (width, lines)
    assert style.wrap("a b c d e f", 40).count("<br>") >= 2  # ordinary spaces still break
