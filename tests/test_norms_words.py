"""The norms page's words about its shipped runs: an empty pick says what to do, numbers and the corpus read right."""

from __future__ import annotations

import re

import pytest

from tx_explorer.views import norms as view


@pytest.fixture(scope="module")
def res():
    return view.load_results()


@pytest.mark.parametrize(("lang", "words"), [("en", "Pick at least one variant"), ("zh", "请至少选择一个变体")])
def test_no_variant_picked_draws_no_empty_chart_but_says_what_to_pick(res, lang, words):
    """Clearing the Variants picker drew axes step −1…6, loss −1…4 and no message."""
    runs = view.runs(res, [], lang=lang)
    assert runs.curves is None and runs.empty.startswith(words)
    assert len(runs.claims) == len(view.runs(res, res.names, lang=lang).claims)  # the claims read every run still
    assert view.runs(res, res.names[:1], lang=lang).empty is None
    profiles, note = view.depth(res, [], lang=lang)
    assert profiles is None and note.startswith(words)


def test_the_claims_write_a_true_minus_and_percent_as_the_app_does(res):
    """ "gap -0.236" had a hyphen; "within 1 %" a space the app's English never puts before %."""
    rows = view.runs(res, res.names).claims
    verdicts = " ".join(r["At this scale"] for r in rows)
    assert not re.search(r"(?<!\w)-\d", verdicts), verdicts
    assert re.search(r"gap −\d", verdicts)  # the shipped runs' depth claim does not hold: its gap is negative
    assert any(r["Claim"].endswith("(within 1%)") for r in rows)


@pytest.mark.parametrize(("lang", "start"), [("en", "The block variants were trained on "), ("zh", "这些 block 变体")])
def test_the_corpus_note_names_the_runs_in_words(res, lang, start):
    """ "`variants` was trained on its own text, not `tiny-gpt`'s" read like a grammar slip."""
    note = view.corpus(res, lang=lang)
    assert note.startswith(start) and "`variants`" not in note, note
    assert "。 " not in note  # no space after a Chinese full stop
