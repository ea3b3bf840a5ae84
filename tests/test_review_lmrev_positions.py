"""Review of the position lab (tag lmrev): every negative number its prose and tables write, with a true minus."""

from __future__ import annotations

import re

import pytest

from tx_explorer.families import positions as positions_family
from tx_explorer.views import position_lab as view

HYPHEN_NUMBER = re.compile(r"(?<![\w.{^])-\d")  # "-0.0002", not "b^{-2i}" nor "arXiv:2205-…"


@pytest.fixture(scope="module")
def results() -> positions_family.Results:
    return positions_family.load_results(positions_family.BUNDLE)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_findings_and_every_table_write_a_negative_number_with_a_true_minus(results, lang: str) -> None:
    """ "shuffling their context moves their loss by sinusoidal -0.0002 ± 0.0002" in the findings, the verdicts'
    numbers and the loss table's order column: the verdicts' gaps had their minus, the numbers beside them not."""
    findings = view.findings(results, lang=lang)
    cells = [
        v
        for rows in (view.verdict_rows(results, lang=lang), view.loss_table(results, lang=lang))
        for r in rows
        for v in r.values()
    ]
    assert not HYPHEN_NUMBER.findall(findings), findings
    assert not [c for c in cells if HYPHEN_NUMBER.search(c)]
    assert "−0.0002" in findings  # sinusoidal's order probe: the shipped runs have a negative one
