"""A rerun that changes nothing recomputes nothing — the model work of each page is cached by input."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import assert_clean, open_page

from tx_explorer.analysis import heads, lm
from tx_explorer.families.images import ImageClassifier
from tx_explorer.families.translation import Translator

# page → (object, attribute) of the model work its main view does after an input
WORK = {
    "multihead": (heads, "analyse"),
    "language_model": (lm, "generate"),
    "vision_transformer": (ImageClassifier, "classify"),
    "seq2seq": (Translator, "translate"),
}


@pytest.mark.parametrize("page", list(WORK))
def test_a_rerun_that_changes_nothing_recomputes_nothing(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    owner, name = WORK[page]
    calls: Counter[str] = Counter()
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    at = open_page(page)
    if page == "language_model":  # generation opens on demand
        at.session_state["lm_open_gen"] = True
        at.run()
    assert_clean(at)
    first = calls[name]
    at.run()
    assert_clean(at)
    assert calls[name] == first, f"{page}: {name} ran again on a rerun with the same input"
