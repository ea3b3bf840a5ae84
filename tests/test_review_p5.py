"""Review of the self-attention, position-lab, ViT, block-roles and circuit pages: maths written as maths, Chinese
without half-width spaces between words, and a title that fits the width it is drawn at."""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import pytest

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer import locales
from tx_explorer.families import positions as positions_family
from tx_explorer.views import position_lab
from tx_explorer.views import self_attention as sa

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread

CJK = "\u4e00-\u9fff"
# a half-width space between two Chinese words ("平均损失 无位置"); a closing bracket counts as the word before it
SPACED_WORDS = re.compile(f"[{CJK}）] [{CJK}（]")
# what read as raw maths in the prose: x1…xN, i − j, m − n, ½·W̄, ⟨R(m)q, R(n)k⟩, "q and k"
RAW_MATHS = re.compile(r"x1…xN|… P − 1|\b[ijmn] − [ijmn]\b|½|W̄|⟨|\bq (and|和) k\b|\bmoving k\b|\bwhatever i\b|1/√D")


def _prose(text: str) -> str:
    """``text`` less its LaTeX ($…$) and code (`…`)."""
    return re.sub(r"`[^`]*`", "", re.sub(r"\$[^$]*\$", "", text))


PROSE = {  # markdown the pages show (intros, readings, checks, help): maths in it is LaTeX
    "self_attention": ("perm_intro", "enc_reading_sinusoidal", "enc_offset_only", "enc_offset_not", "enc_band_chance"),
    "position_lab": ("intro", "rotary_intro", "check_numbers", "positions_help"),
    "vision_transformer": ("rollout_intro",),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(("page", "key"), [(p, k) for p, keys in PROSE.items() for k in keys])
def test_the_prose_writes_its_maths_as_latex(page, key, lang):
    text = locales.text(page, key, lang)
    assert not RAW_MATHS.search(_prose(text)), text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_shuffled_tokens_are_named_with_subscripts(lang):
    perm = sa.permutation(n=12, dim=8, heads=2, seed=0, kind="none", lang=lang)
    ticks = json.loads(perm.out.figure.to_json())["layout"]["yaxis"]["ticktext"]
    assert "x₁" in ticks and "x₁₂" in ticks and not any(re.search(r"x\d", t) for t in ticks)
    assert "x₁₂" in perm.order and not re.search(r"x\d", perm.order)


def test_the_sinusoidal_reading_writes_its_offset_as_latex():
    table, sim, _ = sa.encodings("sinusoidal", 64, 64)
    words = sa.encoding_reading("sinusoidal", table.data, sim.data, lang="en")
    assert "$i - j$" in words and "i − j" not in _prose(words)


def test_the_similarity_map_labels_its_positions_as_the_table_labels_its_dimensions():
    """The similarity map wrote 0, 3, 6 … 63 turned on its side under a table labelled 0, 10, 20 … upright."""
    table, sim, _ = sa.encodings("sinusoidal", 64, 64)
    axes = [json.loads(p.figure.to_json())["layout"]["xaxis"] for p in (table, sim)]
    assert axes[1]["tickvals"] == axes[0]["tickvals"] == [str(p) for p in range(0, 64, 10)]
    assert axes[1].get("tickangle") == axes[0].get("tickangle")


@pytest.fixture(scope="module")
def results() -> positions_family.Results:
    return positions_family.load_results(positions_family.BUNDLE)


def test_the_position_verdicts_in_chinese_put_no_space_between_words(results):
    rows = position_lab.verdict_rows(results, lang="zh")
    cells = [cell for row in rows for cell in row.values()]
    assert not [c for c in cells if SPACED_WORDS.search(c)]
    findings = position_lab.findings(results, lang="zh")
    assert not SPACED_WORDS.search(findings), findings
    assert not re.search(r"\d和", findings), findings  # "0.0002和可学习": views.listed spaces 和 beside a number


def test_the_rotary_title_stays_on_one_line_above_its_diamond_note():
    at = open_page("position_lab")
    assert_clean(at)
    start = locales.text("position_lab", "rotation_start", "en")
    (title,) = [f["layout"]["title"]["text"] for f in plotly_specs(at) if start in f["layout"]["title"]["text"]]
    # drawn the page wide: the title whole on its line, the ◆ note on the next (wrapped at half the page's width,
    # "… 0 …<br>63<br>◆ = position 0" ran into the plot's top)
    assert title.count("<br>") == 1, title


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_position_maps_name_their_columns_as_their_rows(lang):
    """The small maps' grid: rows titled "patch row", the column numbers on top titled too (they were bare)."""
    from tx_explorer.models import load_model
    from tx_explorer.views import vision_transformer as vit

    own, sincos = vit.positions(load_model("vit-shapes"), lang=lang)
    for panel in (own, sincos):
        layout = panel.figure.layout
        assert layout.xaxis.title.text == locales.text("vision_transformer", "fig_patch_col", lang)
        assert layout.yaxis.title.text == locales.text("vision_transformer", "fig_patch_row", lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_position_prose_reads_the_bundles_own_context(results, lang):
    """The loss note and the ALiBi row name the context the bundle was trained at and the last position read, not a
    typed 64 and 255: a bundle retrained at 48 tokens says 48, 47 and 48–255."""
    other = dataclasses.replace(results, summary=copy.deepcopy(results.summary))
    other.summary["settings"]["seq_len"] = 48
    note = position_lab.loss_note(other, lang=lang)
    assert "48" in note and "47" in note and not re.search(r"\b6[34]\b", note), note
    col = locales.text("position_lab", "col_numbers", lang)
    assert any("48–255" in row[col] for row in position_lab.verdict_rows(other, lang=lang))
    assert any("64–255" in row[col] for row in position_lab.verdict_rows(results, lang=lang))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_position_verdicts_write_one_minus_sign(results, lang):
    """A gap was written with a true minus ("9.93e−05") beside its spread with a hyphen ("1.09e-07"), and the
    numbers beside them with hyphens too ("7.32e-07")."""
    text = " ".join(v for row in position_lab.verdict_rows(results, lang=lang) for v in row.values())
    assert "e−" in text and not re.search(r"\de-\d", text)
