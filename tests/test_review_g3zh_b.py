"""Review of the head-science, block-roles, flow, atlas and circuit pages in 中文 and English: what a student saw."""

import json
import re
from pathlib import Path

import pytest

LOCALES = Path(__file__).resolve().parents[1] / "tx_explorer" / "locales"


@pytest.mark.parametrize("page", sorted(p.stem for p in LOCALES.glob("*.json")))
def test_no_space_between_chinese_and_its_quotation_marks(page):
    """中文 quotes touch the characters beside them ("预测“▁the”之后"); the flow graph's title and the needle's
    verdict read "预测 “▁`”" and "回答中包含 “blue harbor”", 14 strings of other pages the same."""
    strings = json.loads((LOCALES / f"{page}.json").read_text(encoding="utf-8"))
    spaced = {
        k: s["zh"] for k, s in strings.items() if re.search(r"[\u4e00-\u9fff] “|” [\u4e00-\u9fff]", s.get("zh", ""))
    }
    assert not spaced
