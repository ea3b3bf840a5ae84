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


def test_a_head_and_a_unit_are_named_one_way_on_every_page():
    """The circuit page named heads "L1H0" where every other page writes "L1 H0", and the atlas wrote entropy in
    "奈特" where the other pages' 中文 writes nats."""
    root = LOCALES.parent
    glued = re.compile(r"L\{[^{}]*\}H\{")
    sources = [*LOCALES.glob("*.json"), *root.glob("views/*.py"), *root.glob("viz/*.py")]
    assert [p.name for p in sources if glued.search(p.read_text(encoding="utf-8"))] == []
    assert [p.name for p in LOCALES.glob("*.json") if "奈特" in p.read_text(encoding="utf-8")] == []
