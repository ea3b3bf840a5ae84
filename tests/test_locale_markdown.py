"""Bold in the locale files renders as bold: CommonMark closes ``**`` only where the run is right-flanking, so
"**局部层与全局层。**15 个" (a full stop before it, a digit after) printed its asterisks on the atlas page in 中文.
Read with markdown-it, the CommonMark parser Streamlit's own rules follow (it comes with Streamlit, through rich)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from markdown_it import MarkdownIt

from tx_explorer import locales

LOCALES = Path(locales.__file__).parent
FIELD = re.compile(r"\{[^{}]*\}")


def test_every_bold_phrase_of_every_string_renders_with_its_fields_filled():
    md = MarkdownIt("commonmark")
    raw = [
        (f.stem, key, lang)
        for f in sorted(LOCALES.glob("*.json"))
        for key, entry in json.loads(f.read_text(encoding="utf-8")).items()
        for lang, s in entry.items()
        if "**" in s and "**" in md.renderInline(FIELD.sub("1", s))  # a digit where a field stands: the hard case
    ]
    assert raw == []


def test_the_chinese_taxonomy_spaces_token_before_head():
    zh = locales.text("head_science", "strongest_previous", "zh", heads="L1 H2 (0.90)")
    assert "token 头" in zh and "归纳头" in locales.text("head_science", "strongest_induction", "zh", heads="")


# A maths name with a subscript typed as D_H, H_kv, W_up: a capital, an underscore (config fields are lower case)
RAW_SUBSCRIPT = re.compile(r"(?<![A-Za-z_`])[A-Z]_[A-Za-z{]")


def test_error_messages_name_no_subscript_in_raw_text():
    """An error is shown escaped (it may quote a visitor's input), so ``$D_H$`` would print its dollars: the messages
    say such names in words (a head's width) or not at all, never as D_H or [W_gate; W_up]."""
    errors = json.loads((LOCALES / "errors.json").read_text(encoding="utf-8"))
    raw = {(key, lang): s for key, entry in errors.items() for lang, s in entry.items() if RAW_SUBSCRIPT.search(s)}
    assert raw == {}
    assert RAW_SUBSCRIPT.search("not H·Dh + 2·H_kv·Dh") and not RAW_SUBSCRIPT.search("`model_type` and mlp_ratio")
