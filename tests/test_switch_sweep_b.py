"""A switch of the sidebar language (English ↔ 中文) keeps what the visitor opened, typed and chose: the pages of
sweep B (home, head science, block roles, flow, atlas, circuit, ViT, MoE, cost of attention) driven in a browser,
switched after each interaction, and what broke pinned here in AppTest."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean, open_page
from tx_explorer import locales, models

pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at, lang: str):
    at.session_state["lang"] = lang  # lasts one run: set before each
    at.run()
    assert_clean(at)
    return at


def _expander(at, key: str, lang: str):
    label = locales.text("cost_of_attention", key, lang)
    return next(e for e in at.expander if e.label == label)


def test_the_cost_pages_backend_list_opened_stays_open_after_a_language_switch():
    """The SDPA backends expander (unkeyed, its label translated) closed on a switch: Streamlit made a new one."""
    at = open_page("cost_of_attention")
    assert not _expander(at, "backends_header", "en").proto.expanded  # closed on a CPU at first
    at.session_state["cost_backends"] = True  # the visitor opens it
    _run(at, "en")
    assert _expander(at, "backends_header", "en").proto.expanded
    _run(at, "zh")
    assert _expander(at, "backends_header", "zh").proto.expanded
    _run(at, "en")
    assert _expander(at, "backends_header", "en").proto.expanded


def test_mean_ablations_reference_set_is_named_in_the_language_shown():
    """The note on mean ablation's reference set quoted the analysis's English ("8 held-out windows × 64 tokens")
    in 中文 too: it is worded from the numbers now, in both languages."""
    from tx_explorer.analysis import head_science as hs
    from tx_explorer.views import head_science as view

    tm = hs.text_model(models.load_model("tiny-gpt"))
    numbers = view.importance_numbers(tm, "The cat sat on the mat.", mode="mean")
    count, length = hs.heldout_windows(tm)[0].shape
    notes = {lang: view.importance_words(tm, numbers, lang=lang).notes for lang in ("en", "zh")}
    en = next(n for n in notes["en"] if n.startswith("Reference of the means"))
    zh = next(n for n in notes["zh"] if n.startswith("均值的参考集"))
    assert en == f"Reference of the means: {count} held-out windows × {length} tokens ({count * length} tokens)."
    assert zh == f"均值的参考集：{count} 个留出窗口 × {length} 个 token（{count * length} 个 token）。"
