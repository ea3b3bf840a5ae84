"""Page views: what each page section draws, computed and turned into figures without Streamlit.

A page section calls one function here with its widgets' values and the language; it gets back a small
dataclass of numbers and :class:`Panel` s (figure + the arrays behind it) and only lays them out. The notebook
API (:mod:`tx_explorer.explore`) and the page benchmark call the same functions, so all three draw the same thing.
Layering: views import analysis, viz and locales, never Streamlit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from tx_explorer import locales

Text = Callable[..., str]  # T("key", **fields) -> the page's string in one language


@dataclass(frozen=True)
class Panel:
    """One figure as a page shows it: a key (element and download names), the figure, the numbers behind it."""

    key: str
    figure: go.Figure
    data: np.ndarray | Mapping[str, np.ndarray] | None = None


@dataclass(frozen=True)
class Result:
    """A section's answer: panels to show, one-line computed facts under them, a table (column → values) and,
    for a table whose numbers are to sort, the places each column is shown to (a grid drops trailing zeros)."""

    panels: tuple[Panel, ...]
    notes: tuple[str, ...] = ()
    table: dict[str, list] | None = None
    decimals: dict[str, int] | None = None


def texts(page: str, lang: str = "en") -> Text:
    """``T = texts("operator", "zh"); T("intro")``: the page's strings (``locales/<page>.json``) in ``lang``."""
    if lang not in locales.LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; use one of {list(locales.LANGUAGES)}")
    return lambda key, **fmt: locales.text(page, key, lang, **fmt)


def sentences(parts: Sequence[str], lang: str = "en") -> str:
    """Sentences run on: a space between them in English, none after a Chinese full stop ("。 有" was left)."""
    return ("" if lang == "zh" else " ").join(parts)


def signed(number: str) -> str:
    """A formatted number with a true minus ("gap −0.236"): a hyphen reads as a dash, and the prose writes −."""
    return number.replace("-", "−")


def rounding(v: float) -> str:
    """A float's rounding error (or any tiny difference) in a sentence or a metric: "1.2e−07" with a true minus, an
    exact 0 as "0" (not "0.0e+00")."""
    return "0" if v == 0 else signed(f"{v:.1e}")


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def subscripted(letter: str, i: int) -> str:
    """A name with its index as the maths writes it, ``x₁₂``, where LaTeX cannot render (tick labels, plain lines):
    "x12" reads as a name, not as x with index 12."""
    return f"{letter}{str(i).translate(_SUBSCRIPTS)}"


_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # Chinese characters and full-width punctuation


def listed(names: Iterable[str], lang: str = "en", last: str | None = None) -> str:
    """Names run on as a list: "a, b, c" in English, "a、b、c" in Chinese. ``last="and"`` or ``"or"`` joins the
    last two in words, for a list inside a sentence: "a, b and c", "甲、乙和丙" (beside a Latin word or a number,
    with a space: "a、b 和 c")."""
    T, names = texts("common", lang), [str(n) for n in names]
    if last is None or len(names) < 2:
        return T("list_sep").join(names)
    # 中文's 和 or 或 takes a space beside a number or a Latin word, as the prose writes 第 0 层 ("0.0002和可学习")
    before, after = ("" if _CJK.fullmatch(c) else " " for c in (names[-2][-1:] or "和", names[-1][:1] or "和"))
    return T(f"list_{last}", names=T("list_sep").join(names[:-1]), name=names[-1], before=before, after=after)


_SPLIT_BYTES = re.compile(r"(?:\\x[0-9a-f]{2})*\\x[89a-f][0-9a-f](?:\\x[0-9a-f]{2})*")


def token_strip(tokens: Sequence[str]) -> str:
    """Token labels in a row, each within ‹ ›: joined by " | ", a token holding "|" (a typed pipe, ``<|im_end|>``'s
    ``|`` read as characters) could not be told from the joins. A label holds no space (▁ stands for one), so each
    ends at the › before a space."""
    return " ".join(f"‹{t}›" for t in tokens)


def split_bytes(tokens: Sequence[str]) -> int:
    """How many token labels are bytes of a character the tokenizer split (``\\xe5\\x9b``)."""
    return sum(bool(_SPLIT_BYTES.fullmatch(t)) for t in tokens)


def split_bytes_note(tokens: Sequence[str], lang: str = "en") -> str | None:
    """What ``\\xNN`` in a strip of token labels means, where a token is such a byte (None elsewhere): a Chinese
    text read by a tokenizer trained on English is mostly bytes."""
    return texts("common", lang)("split_bytes") if split_bytes(tokens) else None


def axes(lang: str = "en") -> dict[str, str]:
    """Translated axis titles of an attention map (rows = queries, columns = keys), as heatmap kwargs."""
    T = texts("common", lang)
    return {"x_title": T("axis_keys"), "y_title": T("axis_queries")}


def figures(*panels: Panel | None) -> dict[str, go.Figure]:
    """``{key: figure}`` of the panels given (None skipped): what the notebook API returns."""
    return {p.key: p.figure for p in panels if p is not None}


def corpus_note(
    model: str, corpus: Mapping, vocab: Mapping[str, int], reference: str, *, lang: str = "en", page: str = "common"
) -> str:
    """Which text and tokenizer a bundled model was trained on, read from its own training record (``corpus`` of
    training.json or summary.json) against ``reference``'s (tiny-gpt's): never a sentence typed about it.
    ``page``: the locale whose ``corpus_same``, ``corpus_other``, ``tokenizer_same`` and ``tokenizer_own`` say it
    (the norms page names its bundle of six models in words: "`variants` was trained" read as a slip)."""
    from tx_explorer import model_cache  # the registry loads every family: imported when a note is asked for
    from tx_explorer.data.corpus import SOURCE_WORDS

    ref = model_cache.shared_model(reference)
    T, say, theirs = texts("common", lang), texts(page, lang), ref.info["corpus"]
    mb = lambda c: f"{c['characters'] / 1e6:.2f}"  # noqa: E731
    fields = {"model": model, "reference": reference, "mb": mb(corpus), "documents": f"{corpus['documents']:,}"}
    same = corpus["sha256"] == theirs["sha256"]
    source = corpus["source"]  # its words in the page's language (the record's are English), its packages as recorded
    if source.startswith(SOURCE_WORDS):
        source = T("corpus_source") + source[len(SOURCE_WORDS) :]
    other = {"ref_mb": mb(theirs), "source": source}
    text = say("corpus_same", **fields) if same else say("corpus_other", **fields, **other)
    tokenizer = say("tokenizer_same" if vocab == ref.tokenizer.get_vocab() else "tokenizer_own", **fields)
    return sentences([text, tokenizer], lang)  # no space after a Chinese full stop
