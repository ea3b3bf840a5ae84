"""One numbering everywhere: layers and heads are counted from 0 in every figure's labels, titles,
hovers and tables, in both languages, as the home page says. Reads the figures the pages draw (through the
notebook API, which calls the same view functions) for the small bundled models."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tx_explorer import explore, locales, models

ROOT = Path(__file__).resolve().parents[1]
# kind → patterns whose group 1 is a layer's or a head's number, in either language
NUMBERS = {
    "layer": (
        r"\b(?:[Ll]ayer|[Bb]lock)s? (\d+)\b",
        r"(?<![A-Za-z])L(\d+)",
        r"第 ?(\d+) ?(?:层|块|个 block)",
        r"层 ?(\d+)",
    ),
    "head": (
        r"(?<!KV )(?<!key/value )\b[Hh]ead (\d+)\b",
        r"(?<![A-Za-z])[Hh](\d+)\b",
        r"第 ?(\d+) ?个头",
        r"(?<!KV )头 ?(\d+)",
    ),
}
# notebook function → (its arguments: small inputs, the bundled models; the model whose layers and heads it labels,
# or None where the figures' own model is not a text model)
FIGURES = {
    "heads": ({"text": "The cat sat on the mat."}, "tiny-gpt"),
    "next_token": ({"new": 3}, "tiny-gpt"),
    "block_roles": ({}, "tiny-gpt"),
    "kv_cache": ({"new_tokens": 3}, "tiny-llama"),
    "flow": ({"model": "tiny-llama", "text": "The cat sat on the mat."}, "tiny-llama"),
    "atlas": ({"model": "tiny-llama", "tokens": 64}, "tiny-llama"),
    "vit": ({}, None),
    "seq2seq": ({}, None),
    "moe": ({}, None),
    "circuit": ({}, None),
}


def strings(spec: object) -> Iterator[str]:
    """Every string of a figure's JSON that a reader sees (binary arrays' and images' base64 left out)."""
    if isinstance(spec, str):
        yield spec
    elif isinstance(spec, dict):
        for key, value in spec.items():
            if key not in ("bdata", "source"):  # "source": an image trace's data URI (a mosaic's PNG)
                yield from strings(value)
    elif isinstance(spec, list | tuple):
        for value in spec:
            yield from strings(value)


def numbers(figures: explore.Figures) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {kind: set() for kind in NUMBERS}
    for fig in figures.values():
        for text in strings(fig.to_plotly_json()):
            for kind, patterns in NUMBERS.items():
                found[kind] |= {int(m.group(1)) for p in patterns for m in re.finditer(p, text)}
    return found


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_layers_and_heads_are_counted_from_zero_in_every_figure(name, lang, one_thread):
    kwargs, model = FIGURES[name]
    found = numbers(getattr(explore, name)(**kwargs, lang=lang))
    assert any(found.values()), f"{name} ({lang}) names no layer or head: the patterns no longer read its labels"
    for kind, seen in found.items():
        if len(seen) > 1:  # a row of layers or heads counted from 1 would miss the first (one alone may be any)
            assert 0 in seen, (name, lang, kind, sorted(seen))
    if model is not None:
        cfg = models.load_model(model).config
        assert max(found["layer"], default=0) < cfg.num_layers, (name, lang, sorted(found["layer"]))
        assert max(found["head"], default=0) < cfg.num_heads, (name, lang, sorted(found["head"]))


def test_no_label_adds_one_to_a_layer_or_head():
    """The figures above cover the default views; this covers every other label the pages and views write."""
    offset = re.compile(
        r"\b(?:layer|head|layers|heads|block|l|h|g|c_layer|c_head)=[\w.\[\]]+ ?\+ ?1\b"  # T("…", layer=i + 1)
        r"|(?:[LH]|layer |head )\{[^}]*\+ ?1\}"  # f"L{i + 1}"
    )
    sources = [*ROOT.glob("pages/*.py"), *ROOT.glob("tx_explorer/views/*.py"), *ROOT.glob("tx_explorer/viz/*.py")]
    hits = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in [*sources, ROOT / "tx_explorer" / "explore.py"]
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if offset.search(line)
    ]
    assert not hits, hits


def test_the_home_page_says_which_base():
    how_to = locales.table("home")["how_to"]
    assert "from 0" in how_to["en"] and "从 0 开始" in how_to["zh"]
