"""Maths in the prose of the norms, model-sizes, MoE and ViT pages is LaTeX between dollars (rendered by KaTeX), in
English and 中文: "stacked $L$ times", "$12 L D^2$", "$D \\to 4D \\to D$", "$\\mathcal{N}(0,\\ 0.02)$", not the raw
letters "stacked L times", "12·L·D²", "D → 4D → D", "N(0, 0.02)". Figure titles and table cells, where LaTeX does
not render, keep their Unicode (D², 12·L·D²) and are not listed here; widget labels: tests/test_maths_labels.py."""

from __future__ import annotations

import re

import pytest

from tx_explorer import locales
from tx_explorer.views import model_sizes

MATHS = re.compile(r"\$[^$]*\$")  # inline maths, as KaTeX renders it
FIELD = re.compile(r"\{[^{}]*\}")  # a field filled in by str.format ({k}, {router}): not a symbol of the prose
CJK = re.compile(r"[\u4e00-\u9fff]")

# page -> key -> the raw symbols that must no longer stand outside $…$ (both languages, or {"en": …, "zh": …})
CHANGED: dict[str, dict[str, list[str] | dict[str, list[str]]]] = {
    "norms": {
        "runs_intro": ["D", "L", "12·L·D²"],
        "depth_intro": ["L2", "x²", "√"],
        "depth_note": ["l", "x + F(x)", "N(0, 0.02)"],
        "ln_intro": ["μ", "γ", "β", "x"],
        "ln_note": ["μ", "γ", "β", "x̂", "x"],
        "eps_not_small_ln": ["ε", "σ²", "σ", "√"],
        "eps_not_small_rms": ["ε", "x²"],
        "id_intro": ["Norm(x)", "x"],
        "mlp_intro": ["D", "D × 4D", "8D/3", "8D²", "σ", "σ(XW₁)", "x·sigmoid(x)"],
        "mlp_counts": ["D", "2·D", "3·D"],
        "swiglu_by_hand": ["D", "≤"],
        "scale_help": ["x", "N(0, 1)"],
        "beta_help": ["β"],
        "mlp_bias_help": ["D"],
    },
    "model_sizes": {
        "intro": ["L", "D", "12·D²", "4D²", "8D²", "V·D", "D → 4D → D"],
        "table_notes": ["D", "16D²", "12D²"],
        "bd_embedding_falls": ["D", "L", "12·L·D²"],
        "bd_mlp_some": ["8D²", "12D²"],
        "heads_same": ["H", "D", "W_Q"],
        "stack_intro": ["L"],
        "since_intro": ["12·D²", "4D²", "8D²"],
        "fit_part": ["4D²", "8D²"],
        "fit_verdict": ["8D/3", "8D²"],
    },
    "moe": {
        "intro": ["E", "k", "A", "top-k"],
        "about": ["E", "k"],
        "capacity_intro": ["k", "i", "k · tokens", "10⁻²", "10⁻³"],
        "cost_header": ["E", "k"],
        "cost_intro": ["E", "k"],
        "top_k_help": ["E", "k"],
        # "{router} k FLOPs" is kilo-FLOPs, not top-k: the experts' k is matched with its noun
        "cost_caption": {"en": ["k experts", "QKᵀ", "AV"], "zh": ["k 个专家", "QKᵀ", "AV"]},
        "stacked_note": ["W₁", "W₂", "E", "D", "H", "4D", "2·E·D·H"],
        "typed_intro": ["k"],
        "gates_caption": ["k"],
        "stats_caption": ["E", "k", "ln E", "1/E", "top-k", "C(E−k, k)"],
        "entropy_caption": ["E", "ln E"],
        "cooc_caption": ["k"],
        "size_note": ["E", "k", "D", "4D", "D → 4D → D"],
        "ckpt_intro": ["E", "k", "top-k"],
        "ckpt_dense": ["E", "k"],
        "ckpt_about": ["E", "k"],
        "ckpt_few": ["E"],
    },
    "vision_transformer": {
        "intro": ["P×P", "P", "D"],
        "model_facts": ["D"],
        "familiar_measures": ["ln"],
        "patch_intro": ["D", "P"],
        "patch_numbers": ["D"],
        "pool_header": ["N×D", "1×D", "N", "D", "C"],
        "pool_intro": ["D", "N", "C"],
    },
}


def _pattern(symbol: str) -> re.Pattern[str]:
    """The symbol as a word of its own: no Latin letter or digit touching it where it starts or ends with one (D
    but not the D of "GPT-2 XL D", of "LayerNorm" or of "[CLS]"; k in "top-k" too)."""
    before = r"(?<![A-Za-z0-9_])" if symbol[0].isalnum() else ""
    after = r"(?![A-Za-z0-9_])" if symbol[-1].isalnum() else ""
    return re.compile(before + re.escape(symbol) + after)


def raw_symbols(s: str, symbols: list[str]) -> list[str]:
    """The symbols that stand in ``s`` outside its inline maths (and outside its format fields)."""
    prose = FIELD.sub(" ", MATHS.sub(" ", s))
    return [sym for sym in symbols if _pattern(sym).search(prose)]


def _cases(page: str) -> list[tuple[str, str, list[str]]]:
    return [
        (key, lang, spec[lang] if isinstance(spec, dict) else spec)
        for key, spec in CHANGED[page].items()
        for lang in ("en", "zh")
    ]


def _check(page: str, key: str, lang: str, symbols: list[str]) -> None:
    s = locales.table(page)[key][lang]
    assert raw_symbols(s, symbols) == [], f"{page}.{key} [{lang}]: {s}"
    assert s.count("$") % 2 == 0  # every formula closed
    if lang == "zh":  # 第 $t$ 步: a formula is spaced from the Chinese characters beside it
        for m in MATHS.finditer(s):
            assert not CJK.fullmatch(s[m.start() - 1 : m.start()] or "a"), f"{key}: …{s[m.start() - 2 : m.end()]}"
            assert not CJK.fullmatch(s[m.end() : m.end() + 1] or "a"), f"{key}: {s[m.start() : m.end() + 2]}…"


@pytest.mark.parametrize(
    ("page", "key", "lang", "symbols"),
    [(page, *case) for page in ("norms", "model_sizes", "moe", "vision_transformer") for case in _cases(page)],
)
def test_the_prose_writes_its_maths_as_latex(page, key, lang, symbols):
    _check(page, key, lang, symbols)


def test_the_checker_finds_raw_symbols_and_passes_latex():
    assert raw_symbols("stacked L times, 12·L·D², top-k", ["L", "12·L·D²", "k"]) == ["L", "12·L·D²", "k"]
    assert raw_symbols("stacked $L$ times, $12 L D^2$, top-$k$, LayerNorm, [CLS], {k}", ["L", "k", "C"]) == []


@pytest.mark.parametrize(
    ("page", "key", "lang", "fields"),
    [
        ("norms", "depth_note", "en", {"init": "", "spreads": "", "residuals": ""}),
        ("norms", "eps_not_small_ln", "zh", {"eps": "0.01", "var": "2.5e−07"}),
        ("norms", "eps_not_small_rms", "en", {"eps": "0.01", "ms": "2.5e−06"}),
        (
            "norms",
            "ln_note",
            "en",
            dict.fromkeys(("mean", "ln_mean", "ln_var", "rms_ms", "rms_mean", "below_one"), "1"),
        ),
        ("moe", "stats_caption", "zh", {"ln_e": "2.079", "first": "0.125", "any": "0.464"}),
    ],
)
def test_latex_braces_survive_the_format_fields(page, key, lang, fields):
    """A formatted string writes LaTeX's braces doubled ({{N}}): filled in, each formula has single braces."""
    s = locales.text(page, key, lang, **fields)
    assert "{{" not in s and "}}" not in s
    assert all(m.group(0).count("{") == m.group(0).count("}") for m in MATHS.finditer(s))


def test_gemma3s_gap_to_its_card_has_two_decimals_under_a_tenth_of_a_percent():
    """268,098,176 against the card's 268.0M is +0.04%: "+0.0%" read as no gap at all."""
    assert "相差 +0.04%" in model_sizes.vocabulary_share(lang="zh")
    assert "+0.04% from its model card" in model_sizes.vocabulary_share(lang="en")
    assert model_sizes._percent_gap(1_010, 1_000) == "+1.0%" and model_sizes._percent_gap(9_996, 10_000) == "−0.04%"
