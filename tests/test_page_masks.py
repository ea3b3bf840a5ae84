"""The masks page's block-diagonal tab keeps its widgets while the document lengths are refused."""

from __future__ import annotations

from tests.conftest import open_page
from tx_explorer import locales


def test_refused_document_lengths_keep_the_causal_checkbox():
    """Lengths of 7 for the default sentence's 10 tokens: the error is shown, and "Also causal" stays beside it."""
    tab = locales.text("masks", "kind_block_diagonal")
    at = open_page("masks", mask_kind=tab, sizes_10="7", blocks_causal=True)
    assert not at.exception, [e.message for e in at.exception]
    assert any("sum to 7 but the sequence has 10 tokens" in e.value for e in at.error), [e.value for e in at.error]
    boxes = [c for c in at.checkbox if c.key == "blocks_causal"]
    assert len(boxes) == 1 and boxes[0].label == locales.text("masks", "with_causal") and boxes[0].value
