"""Bad input, every page: one table drives every page's inputs with hostile and odd values.

Each row of ``CASES`` names a page, the inputs it sets and what the page must answer: a chart (the input is
fine, e.g. emoji) or a clear message (``st.error``/``st.warning``/``st.info`` with a meaningful phrase). Every
row also checks that nothing crashed (no exception element) and that injected HTML/Markdown is never rendered
(not in any Markdown element, not as Plotly markup). When a row leaves an error or no chart, the next request
(the inputs as they were) must bring the chart back without error; when the page answered with its chart, that
was the good answer, and the inputs go back with the next row's run. One AppTest per page serves all of its
rows, as one user keeps typing into one session.

Numbers: every slider and number input of a page is driven together to its bounds and beyond. Streamlit's
server resets values outside a widget's bounds to the default (the browser never sends them), so beyond the
bounds the page must simply keep working; ``OUT_OF_RANGE`` checks that the analysis functions behind the
widgets refuse such values themselves with a ``ValueError`` (shown by ``ui.friendly_errors``).
"""

from __future__ import annotations

import ast
import functools
import io
import json
import mimetypes
import os
import re
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from streamlit.runtime.state.common import user_key_from_element_id
from streamlit.testing.v1 import AppTest

from tests.conftest import lazy_sections, open_page, open_sections, plotly_specs
from tests.test_checkpoint import english_in_chinese
from tests.test_url_state import arrive, shown
from tx_explorer import locales, masks, models, paths, ui
from tx_explorer.analysis import (
    block_roles,
    cost,
    flash_io,
    flash_steps,
    heads,
    kv_cache,
    lm,
    memory,
    mixers,
    position_lab,
    routing,
    vit_lab,
)
from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.analysis import norm_lab as norms
from tx_explorer.analysis import operator_lab as op
from tx_explorer.analysis import self_attention as sa
from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.config import TransformerConfig
from tx_explorer.data import shapes
from tx_explorer.errors import InputError
from tx_explorer.modules.moe_lm import MoEConfig
from tx_explorer.views import circuit as circuit_view
from tx_explorer.views import cost_of_attention as cost_view
from tx_explorer.views import kv_cache as kv_view
from tx_explorer.views import mixers as mix_view
from tx_explorer.views import model_sizes as sizes_view
from tx_explorer.views import moe as moe_view
from tx_explorer.views import norms as norms_view
from tx_explorer.views import operator as op_view
from tx_explorer.views import position_lab as pos_view
from tx_explorer.views import self_attention as sa_view
from tx_explorer.views.inputs import Choice, Input, Number, Real, Section, Switch, Text, declared, option_key

ROOT = Path(__file__).resolve().parent.parent
PAGES = re.findall(r'"pages/(\w+)\.py"', (ROOT / "app.py").read_text(encoding="utf-8"))

# ---- hostile and odd text --------------------------------------------------------------------------------------
HUGE = ("The quick brown fox jumps over the lazy dog. " * 2300)[:100_000]
EMOJI = "dog 🐕 bites man 👨‍👩‍👧 🚀"
RTL = "الكلب يعض الرجل שלום עולם"
COMBINING = "cafe\u0301 n\u0303o Z\u0335a\u0335"
CONTROL = "dog\x00bites\x07man\x1b[31m\r\nend\u200b\u202eevil"
HTML = "<script>alert('x')</script><img src=x onerror=alert(1)> <b>bold</b>"
MARKDOWN = "**bold** [link](javascript:alert(1)) ![img](https://example.com/x.png) # title :red[red]"
TEXTS = {
    "empty": "",
    "blank": " \t\n  ",
    "100k": HUGE,
    "emoji": EMOJI,
    "rtl": RTL,
    "combining": COMBINING,
    "control": CONTROL,
    "html": HTML,
    "markdown": MARKDOWN,
}
# What would render if user text reached Markdown or Plotly markup unescaped.
RENDERED_MARKDOWN = ("<script", "<img", "**bold**", "](javascript:", "![img](", ":red[red]")
RENDERED_PLOTLY = ("<script", "<img", "<b>bold")
MARKDOWN_ELEMENTS = (
    "markdown",
    "caption",
    "latex",
    "title",
    "header",
    "subheader",
    "error",
    "warning",
    "info",
    "success",
    "toast",
)
MESSAGES = ("error", "warning", "info")


# ---- uploads, generated small --------------------------------------------------------------------------------------
def _save(im: Image.Image, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _declared_png(width: int, height: int) -> bytes:
    """A few dozen bytes of PNG whose header declares ``width × height`` RGB pixels (a decompression bomb)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + _chunk(b"IEND", b"")
    )


def _noise(w: int, h: int, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB").convert(mode)


def _exif_rotated() -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: rotate 90° clockwise to show
    return _save(_noise(48, 24), "JPEG", exif=exif)


def _animated() -> bytes:
    frames = [Image.new("RGB", (32, 32), c) for c in ("red", "green", "blue")]
    return _save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)


def _translucent() -> bytes:
    im = _noise(40, 40, "RGBA")
    im.putalpha(Image.linear_gradient("L").resize((40, 40)))
    return _save(im, "PNG")


STAR_PNG = _save(Image.fromarray(shapes.sample(99, label=shapes.CLASSES.index("star"), size=96).image), "PNG")
JPEG = _save(_noise(64, 64), "JPEG")
UPLOADS = {  # name → (file name, bytes, the expected outcome, a phrase of the message or of the page)
    "zero-bytes": ("empty.png", b"", "error", "empty (0 bytes)"),
    "text-named-png": ("notes.png", b"just some text, not a picture\n" * 4, "error", "not an image"),
    "truncated-png": ("cut.png", STAR_PNG[:200], "error", "truncated"),
    "truncated-jpeg": ("cut.jpg", JPEG[: len(JPEG) // 2], "error", "truncated"),
    "bomb-30000x30000": ("bomb.png", _declared_png(30_000, 30_000), "error", "decompression bomb"),
    "canvas-6000x6000": ("big.png", _declared_png(6000, 6000), "error", "the limit is 25,000,000"),
    "over-20MB": ("huge.png", b"\x89PNG\r\n\x1a\n" + bytes(20 * 2**20), "error", "the limit is 20 MB"),
    "rgb-png": ("star.png", STAR_PNG, "chart", "Read a PNG file: 96×96 pixels, mode RGB"),
    "16-bit": (
        "deep.png",
        _save(Image.fromarray(np.arange(48 * 48, dtype=np.uint16).reshape(48, 48) * 28), "PNG"),
        "chart",
        "high bit depth scaled to 8 bits",
    ),
    "cmyk-jpeg": ("print.jpg", _save(_noise(40, 40, "CMYK"), "JPEG"), "chart", "CMYK converted to RGB"),
    "palette": (
        "palette.png",
        _save(_noise(40, 40).convert("P", palette=Image.Palette.ADAPTIVE), "PNG"),
        "chart",
        "palette colours expanded",
    ),
    "alpha": ("alpha.png", _translucent(), "chart", "transparency composited over white"),
    "animated-gif": ("anim.gif", _animated(), "chart", "using the first of 3 frames"),
    "exif-rotated": ("phone.jpg", _exif_rotated(), "chart", "rotated upright (EXIF orientation 6)"),
    # blank and one-pixel pictures: nothing for the model to see, said so (no "0.0e+00", no verdict on positions)
    "blank-white": ("white.png", _save(Image.new("RGB", (120, 90), "white"), "PNG"), "warning", "Nothing to see"),
    "one-pixel": ("dot.png", _save(Image.new("RGB", (1, 1), (200, 10, 10)), "PNG"), "warning", "Nothing to see"),
}


# ---- the table -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class W:
    """One input widget: its AppTest kind and its key, or its English label when the page gives it no key."""

    kind: str
    key: str | None = None
    label: str | None = None

    def find(self, at: AppTest) -> Any | None:
        hits = [
            e for e in at.get(self.kind) if (self.key and e.key == self.key) or (self.label and e.label == self.label)
        ]
        assert len(hits) <= 1, f"{self} is ambiguous"
        return hits[0] if hits else None

    def __str__(self) -> str:
        return self.key or self.label or self.kind


@dataclass(frozen=True)
class Tab(W):
    """Lazy tabs (``st.tabs(..., key=key, on_change="rerun")``): the value is the open tab's label."""

    def find(self, at: AppTest) -> Any:
        return _OpenTab(at, self.key)


@dataclass
class _OpenTab:
    at: AppTest
    key: str

    @property
    def value(self) -> str | None:
        return self.at.session_state[self.key] if self.key in self.at.session_state else None

    def set_value(self, label: str) -> None:
        self.at.session_state[self.key] = label


def mask_tab(kind: str) -> tuple[tuple[W, str], ...]:
    return ((Tab("tab", "mask_kind"), locales.text("masks", f"kind_{kind}")),)


def labelled(kind: str, page: str, key: str) -> W:
    return W(kind, label=locales.text(page, key))


UPLOAD = W("file_uploader", "vit_up")
NUMBERS = ("at-min", "at-max", "below-min", "above-max")


@dataclass(frozen=True)
class Case:
    """One row: set ``inputs`` (after ``prepare``), run, expect ``expect``; then ``recover`` (default: the values
    the inputs had before) must bring the page's ``chart`` back, with no error."""

    page: str
    name: str
    inputs: tuple[tuple[W, Any], ...] | str  # or one of NUMBERS: every slider and number input of the page
    expect: str  # "chart", or the kind of message: "error", "warning", "info"
    says: str = ""  # a phrase of the message (or, for "chart", of the page's text)
    chart: str = ""  # the key given to ui.show_figure of the view that must appear; "" = any chart
    prepare: tuple[tuple[W, Any], ...] = ()
    recover: tuple[tuple[W, Any], ...] | None = None

    @property
    def id(self) -> str:
        return f"{self.page}-{self.name}"


def text_cases(
    page: str, fields: tuple[W, ...], chart: str, name: str = "", prepare=(), only=None, **outcomes
) -> list[Case]:
    """A case per payload in TEXTS (or ``only``) typed into every field of ``fields``; each payload gives a chart
    unless ``outcomes[payload] = (kind, phrase)`` says which message it gets. Blank text (spaces and newlines)
    gets the empty text's message unless ``blank`` says otherwise."""
    name = name or str(fields[0])
    if "empty" in outcomes:
        outcomes.setdefault("blank", outcomes["empty"])
    return [
        Case(
            page,
            f"{name}-{payload}",
            tuple((f, TEXTS[payload]) for f in fields),
            *outcomes.get(payload, ("chart", "")),
            chart=chart,
            prepare=prepare,
        )
        for payload in (only or TEXTS)
    ]


def number_cases(page: str, chart: str, prepare=(), **outcomes) -> list[Case]:
    return [
        Case(page, f"numbers-{n}", n, *outcomes.get(n.replace("-", "_"), ("chart", "")), chart=chart, prepare=prepare)
        for n in NUMBERS
    ]


# The hostile strings every declared text input meets (the long one is cut to its max_chars by Streamlit's server).
# A declared text box gets every odd string, the long one cut to 10,000 characters (five times any declared max_chars).
DECLARED_TEXTS = {**TEXTS, "10k": HUGE[:10_000]}
del DECLARED_TEXTS["100k"]


def widget_kind(inp: Input) -> str:
    """The AppTest element a declared input is drawn as (:func:`tx_explorer.ui.inputs`)."""
    if isinstance(inp, Number | Real):
        return "slider" if inp.widget == "slider" else "number_input"
    if isinstance(inp, Choice):
        return "radio" if inp.widget == "radio" else "selectbox"
    return inp.widget if isinstance(inp, Switch) else "text_input"


def declared_values(inp: Input) -> dict[str, Any]:
    """What the rows drive a declared input to: a number to its bounds, a text through DECLARED_TEXTS."""
    if isinstance(inp, Number | Real):
        return {"min": inp.low, "max": inp.high}
    return DECLARED_TEXTS if isinstance(inp, Text) else {}


def declared_cases(section: Section, chart: str, **outcomes: tuple[str, str]) -> list[Case]:
    """Each number a section declares (:mod:`tx_explorer.views.inputs`), alone, at its declared minimum and maximum,
    and each text through DECLARED_TEXTS: derived from the declaration, so a new input of a declared section gets its
    rows without an edit here. The page answers with its chart unless ``outcomes["<name>_<min|max|payload>"]`` names
    the message it must give (a blank text: the empty text's, unless ``<name>_blank`` says otherwise)."""
    rows, used = [], set()
    for inp in section.inputs:
        for end, value in declared_values(inp).items():
            key = f"{inp.name}_{end}"
            if end == "blank" and key not in outcomes:
                key = f"{inp.name}_empty"
            used.add(key)
            name = f"{section.key(inp)}-at-{end}" if end in ("min", "max") else f"{section.key(inp)}-{end}"
            w = W(widget_kind(inp), section.key(inp))
            rows.append(Case(section.page, name, ((w, value),), *outcomes.get(key, ("chart", "")), chart=chart))
    assert set(outcomes) <= used, f"{section.prefix}: no declared input for {sorted(set(outcomes) - used)}"
    return rows


# Emoji, right-to-left and combining marks take the same "not a number" path as control characters in fields
# that parse numbers (they get Arabic-Indic digits instead, which Python reads as numbers); free text gets them all.
NUMERIC_TEXT = ("empty", "blank", "100k", "control", "html", "markdown")
EMPTY_MASK = ("error", "sentence is empty")
NOT_A_NUMBER = ("error", "is not a number")
SIZES = ("error", "whole numbers")
NOT_SAME_WORDS = ("error", "must use exactly the same words")
TOP_K_ABOVE_E = ("error", "must be between 1 and")  # MoE: k experts per token of E
MH_EMPTY = ("warning", "The text is empty")
MH_LONG = ("warning", "only the first 373 tokens")  # SmolLM2's maps budget (analysis.heads.max_tokens)
# The head search (issue 39): its pair of tokens, and the text written twice ("Repeat my text") on the pattern ranking.
MH_VIEW, MH_TEXT = W("segmented_control", "mh_view"), W("text_area", "mh_text_example_code")
MH_SMOLLM2 = (W("selectbox", "mh_model"), "smollm2-135m-instruct")  # the rows before leave a checkpoint folder
MH_PAIR = (MH_SMOLLM2, (MH_VIEW, "search"), (W("radio", "mh_search"), "pair"))
MH_REPEAT = (MH_SMOLLM2, (MH_VIEW, "search"), (W("radio", "mh_search"), "pattern"), (W("toggle", "mh_repeat"), True))
MH_BACK = ((W("toggle", "mh_repeat"), False), (MH_VIEW, "grid"))  # the rows after these find the page as it was
CHAT_CUT = ("warning", "only its first")  # a chat message longer than those 373 tokens keeps its start
# A checkpoint folder typed on the multi-head page (tx_explorer.paths): folders made by the checkpoint_folders
# fixture under BYOC, whose "roots" folder is the allowed root; a good folder goes back in after each bad one.
BYOC = Path(tempfile.gettempdir()) / f"tx-explorer-byoc-{os.getpid()}"
FOLDER_BOX = W("text_input", "mh_model_folder")
GOOD_FOLDER = str(BYOC / "roots" / "qwen2")
PICK_FOLDER = ((W("selectbox", "mh_model"), ui.FOLDER), (FOLDER_BOX, GOOD_FOLDER))
NOT_ALLOWED = ("error", "this folder cannot be opened")
MOE_FOLDER_BOX = W("text_input", "moe_ckpt_model_folder")  # the MoE page's checkpoint with routed experts
MOE_PICK_FOLDER = ((W("selectbox", "moe_ckpt_model"), ui.FOLDER),)
FOLDERS = {  # name → (typed path, expected outcome)
    "qwen2": (GOOD_FOLDER, ("chart", "8 query heads share 2 key/value heads")),
    "outside-existing": (str(BYOC / "outside"), NOT_ALLOWED),
    "outside-missing": (str(BYOC / "nothing-here"), NOT_ALLOWED),
    "outside-system": ("/etc", NOT_ALLOWED),
    "dotdot-escape": (f"{BYOC}/roots/../outside", NOT_ALLOWED),
    "symlink-escape": (str(BYOC / "roots" / "escape"), NOT_ALLOWED),
    "missing-inside": (str(BYOC / "roots" / "nothing"), ("error", "is not a folder")),
    "not-a-model": (str(BYOC / "roots" / "empty"), ("error", "config.json is missing")),
    "unsupported": (str(BYOC / "roots" / "t5"), ("error", "'t5' is not supported; supported: bert, gpt2")),
    "corrupt-weights": (str(BYOC / "roots" / "corrupt"), ("error", "model.safetensors is corrupt or truncated")),
    "bad-config": (str(BYOC / "roots" / "bad-config"), ("error", "(not valid JSON at line 1, column 57)")),
    "heads-not-dividing": (
        str(BYOC / "roots" / "five-heads"),
        ("error", "64/5: our attention splits the model width evenly"),
    ),
    "gguf": (str(BYOC / "roots" / "tiny.gguf"), ("chart", "8 query heads share 2 key/value heads")),
    "gguf-truncated": (str(BYOC / "roots" / "cut.gguf"), ("error", "cut.gguf is corrupt or truncated")),
    "gguf-not-gguf": (str(BYOC / "roots" / "fake.gguf"), ("error", "not a GGUF file")),
    "gguf-architecture": (str(BYOC / "roots" / "gemma.gguf"), ("error", "holds a 'gemma' model")),
    "gguf-outside": (str(BYOC / "outside" / "tiny.gguf"), NOT_ALLOWED),
    "gguf-million-layers": (
        str(BYOC / "roots" / "layers.gguf"),
        ("error", "asks for 1000000 layers, but the weights hold the tensors of 2"),
    ),
    # gemma3 files as llama.cpp writes them (tests/test_gemma3.py), each wrong in one way
    "gemma3-no-norm": (str(BYOC / "roots" / "g3-norm.gguf"), ("error", "lacks the tensor blk.3.post")),
    "gemma3-head-width": (str(BYOC / "roots" / "g3-width.gguf"), ("error", "4 heads of width 12")),
    "gemma3-pattern": (str(BYOC / "roots" / "g3-pattern.gguf"), ("error", "local and which global cannot be read")),
    "gemma3-vocab": (str(BYOC / "roots" / "g3-vocab.gguf"), ("error", "a truncated vocabulary")),
}
S2S_UNKNOWN = ("warning", "not in the vocabulary")
OPERATOR_EDIT = ((W("radio", "source"), "edit"),)
OPERATOR_RANDOM = ((W("radio", "source"), "random"),)
VIT_SAMPLE = ((labelled("radio", "vision_transformer", "source"), "sample"),)
VIT_UPLOAD = ((labelled("radio", "vision_transformer", "source"), "upload"),)
NORM_X = W("text_input", "norm_x")  # the vector of norms_view.NORM
GUARD = (W("number_input", "cost_guard_n"), W("number_input", "cost_guard_h"))
# Head science's mechanics on tiny-gpt: its default, SmolLM2, would ablate 270 heads per input (tested on its own).
HS_TINY = ((W("selectbox", "hs_model"), "tiny-gpt"),)
# Pages whose checks do not hang on the model opened on a tiny one (state set before the first run): the KV stepper
# decodes each row's prompt, seconds a row with SmolLM2 (its first-visit default) and not what a bad input tests.
OPENED_WITH = {"kv_cache": {"kv_model": "tiny-llama"}}
HS_PATCHING = (*HS_TINY, (W("segmented_control", "hs_view"), "patching"))
HS_UNEQUAL = ("error", "needs prompts of equal token length")
ATLAS_PASTE = ((W("radio", "atlas_source"), "paste"),)
ATLAS_UPLOAD = W("file_uploader", label=locales.text("atlas", "upload"))
FLOW_BEYOND = ("error", "is outside the text")

CASES: list[Case] = [
    Case("home", "no-inputs", (), "chart", chart="home_example"),
    # operator: hand-written matrices, then every number
    *text_cases(
        "operator",
        (W("text_area", "text_Q"),),
        "weights",
        prepare=OPERATOR_EDIT,
        only=NUMERIC_TEXT,
        empty=("error", "Q is empty"),
        **{"100k": ("error", "at most 16 are allowed")},
        **{p: NOT_A_NUMBER for p in ("control", "html", "markdown")},
    ),
    Case(
        "operator",
        "text_Q-fullwidth-separators",  # a Chinese keyboard's comma, enumeration comma, semicolon and space
        ((W("text_area", "text_Q"), "2，0、0\n0；2\u30002"),),
        "chart",
        chart="weights",
        prepare=OPERATOR_EDIT,
    ),
    Case(
        "operator",
        "text_Q-arabic-digits",
        ((W("text_area", "text_Q"), "٢ ٠ ٠\n٠ ٢ ٢"),),
        "chart",
        chart="weights",
        prepare=OPERATOR_EDIT,
    ),
    Case(
        "operator",
        "text_Q-unicode-minus",  # the minus the app's own axes print, and a Chinese keyboard's full-width one
        ((W("text_area", "text_Q"), "\u22122 0 0\n0 \uff0d2 2"),),
        "chart",
        chart="weights",
        prepare=OPERATOR_EDIT,
    ),
    Case(
        "operator",
        "text_Q-width-unlike-K",  # D = 2 against the example K's D = 3
        ((W("text_area", "text_Q"), "1 2"),),
        "error",
        "Q and K must share their last dimension D",
        chart="weights",
        prepare=OPERATOR_EDIT,
    ),
    Case(
        "operator",
        "text_V-rows-unlike-K",  # 2 value rows for the example's 3 keys
        ((W("text_area", "text_V"), "1 2\n3 4"),),
        "error",
        "K and V must have the same number of rows",
        chart="weights",
        prepare=OPERATOR_EDIT,
    ),
    *text_cases(
        "operator",
        (W("text_area", "text_K"),),
        "weights",
        prepare=OPERATOR_EDIT,
        only=("blank", "html"),
        blank=("error", "K is empty"),
        html=NOT_A_NUMBER,
    ),
    *text_cases(
        "operator",
        (W("text_area", "text_V"),),
        "weights",
        prepare=OPERATOR_EDIT,
        only=("100k", "markdown"),
        markdown=NOT_A_NUMBER,
        **{"100k": ("error", "at most 16 are allowed")},
    ),
    *number_cases("operator", "weights", prepare=OPERATOR_RANDOM),
    *declared_cases(op_view.SQRT, "curve_entropy"),
    *declared_cases(op_view.CROSS, "cross_weights", dim_min=("error", "does not divide")),  # D = 1 with 4 heads
    # self-attention: the layer's settings and each sentence alone (declared: sa_view.LAYER, sa_view.ORDER; a sentence
    # alone is no longer the other's words); then both sentences the same odd text (same words, so only the input
    # itself can fail); every number at once
    *declared_cases(sa_view.LAYER, "perm_out", dim_min=("error", "does not divide")),  # D = 2 with 4 heads
    *declared_cases(
        sa_view.ORDER,
        "word_order",
        **{f"{s}_empty": ("error", "sentence is empty") for s in "ab"},
        **{f"{s}_10k": ("error", "at most 16 are allowed") for s in "ab"},
        **{f"{s}_{p}": NOT_SAME_WORDS for s in "ab" for p in ("control", "emoji", "rtl", "combining")},
        **{f"{s}_{p}": ("error", "at most 16 are allowed") for s in "ab" for p in ("html", "markdown")},
    ),
    *text_cases(
        "self_attention",
        (W("text_input", "sentence_a"), W("text_input", "sentence_b")),
        "word_order",
        name="sentences",
        only=("emoji", "rtl", "combining", "control", "html", "markdown"),
        html=("error", "at most 16 are allowed"),
        markdown=("error", "at most 16 are allowed"),
    ),
    *number_cases("self_attention", "word_order"),  # the width steps through even values: sinusoids at every one
    Case(  # an odd width typed all the same: refused in the student's terms, not the table's "n=3"
        "self_attention",
        "width-odd-sinusoidal",
        ((W("number_input", "dim"), 15), (W("number_input", "heads"), 3), (W("selectbox", "positions"), "sinusoidal")),
        "error",
        "the width D must be even; D = 15 is odd",
        chart="perm_out",
    ),
    # masks: the sentence, the block sizes, every number
    *text_cases(
        "masks",
        (W("text_input", "sentence"),),
        "causal_weights",
        prepare=mask_tab("causal"),
        empty=EMPTY_MASK,
        markdown=("error", "longer than 32 characters"),
        **{"100k": ("error", "at most 24 are allowed")},
    ),
    *text_cases(
        "masks",
        (W("text_input", "sizes_10"),),
        "block_diagonal_weights",
        name="sizes",
        prepare=mask_tab("block_diagonal"),
        only=("empty", "blank", "100k", "control", "html", "markdown"),
        empty=("error", "write the document lengths"),
        **{p: SIZES for p in ("100k", "control", "html", "markdown")},
    ),
    Case(  # a Chinese keyboard's full-width comma, semicolon, enumeration comma and space separate the lengths
        "masks",
        "sizes-full-width",
        ((W("text_input", "sizes_10"), "3，2；2、1\u30002"),),
        "chart",
        chart="block_diagonal_weights",
        prepare=mask_tab("block_diagonal"),
    ),
    *[  # each tab's numbers (only the open tab draws its inputs)
        Case("masks", f"{kind}-numbers-{n}", n, "chart", chart=f"{kind}_weights", prepare=mask_tab(kind))
        for kind in ("causal", "padding", "sliding_window", "prefix_lm")
        for n in NUMBERS
    ],
    # multi-head: the text and the model only (the page's layout is being reworked)
    *text_cases("multihead", (W("text_area", "mh_text_example_code"),), "", empty=MH_EMPTY, **{"100k": MH_LONG}),
    Case(
        "multihead",
        "model-and-html",
        ((W("selectbox", "mh_model"), "tiny-gpt"), (W("text_area", "mh_text_example_code"), HTML)),
        "chart",
    ),
    *[
        Case("multihead", f"folder-{name}", ((FOLDER_BOX, path),), *outcome, prepare=PICK_FOLDER)
        for name, (path, outcome) in FOLDERS.items()
    ],
    *[
        Case("multihead", f"folder-{payload}", ((FOLDER_BOX, TEXTS[payload]),), *outcome, prepare=PICK_FOLDER)
        for payload, outcome in {
            **dict.fromkeys(TEXTS, NOT_ALLOWED),
            **dict.fromkeys(("empty", "blank"), ("info", "Type the path of a checkpoint folder")),
        }.items()
    ],
    Case(
        "multihead",
        "search-key-after-query",
        ((W("selectbox", "mh_query"), 2), (W("selectbox", "mh_key"), 5)),
        "error",
        "a causal model cannot look ahead",
        prepare=MH_PAIR,
        recover=((W("selectbox", "mh_key"), 1), *MH_BACK),
    ),
    Case("multihead", "search-repeat-empty", ((MH_TEXT, ""),), *MH_EMPTY, prepare=MH_REPEAT),
    Case(
        "multihead",
        "search-repeat-10k",
        ((MH_TEXT, HUGE[:10_000]),),
        *MH_LONG,
        prepare=MH_REPEAT,
        recover=((MH_TEXT, locales.text("multihead", "example_code_text")), *MH_BACK),
    ),
    # Mixture of Experts: E and k (k > E refused), the typed text, the capacity factor (declared: moe_view.COST,
    # TYPED, HELDOUT); every number at once
    *declared_cases(moe_view.COST, "moe_cost", experts_min=TOP_K_ABOVE_E, top_k_max=TOP_K_ABOVE_E),
    *declared_cases(
        moe_view.TYPED,
        "moe_tokens",
        sentence_empty=("error", "text is empty"),
        sentence_10k=("warning", "(the model's context) are routed"),
    ),
    *declared_cases(moe_view.HELDOUT, "moe_drop"),
    *number_cases("moe", "moe_tokens"),
    # the checkpoint section's text, routed through tiny-moe (its default): blank reads the bundled corpus instead
    *text_cases(  # the same tokenizer as the typed section's, which meets every payload: its own three here
        "moe",
        (W("text_area", "moe_ckpt_text"),),
        f"{moe_view.CHECKPOINT_KEY}_load",
        "ckpt-text",
        only=("blank", "100k", "html"),
    ),
    # the checkpoint section's folder box (no checkpoint with routed experts is cached here): a dense model is told what
    # the section needs, an empty box asks for a path, a folder outside the roots is refused as on the multi-head page
    *[
        Case("moe", f"ckpt-folder-{name}", ((MOE_FOLDER_BOX, path),), *outcome, prepare=MOE_PICK_FOLDER)
        for name, (path, outcome) in {
            "dense": (GOOD_FOLDER, ("info", "MLPs are dense (it has no router)")),
            "empty": ("", ("info", "Type the path of a checkpoint folder")),
            "html": (HTML, NOT_ALLOWED),
            "outside-system": ("/etc", NOT_ALLOWED),
            "not-a-model": (str(BYOC / "roots" / "empty"), ("error", "config.json is missing")),
        }.items()
    ],
    # norms: the vector, γ, β and ε, the identity argument, the MLP (declared); markup in the vectors; the sentence;
    # every number at once
    *declared_cases(
        norms_view.NORM,
        "norms_ln",
        x_empty=("error", "x is empty"),
        **{f"{v}_10k": ("error", "at most 64 are allowed") for v in ("x", "gamma", "beta")},
        **{
            f"{v}_{p}": NOT_A_NUMBER
            for v in ("x", "gamma", "beta")
            for p in ("control", "emoji", "rtl", "combining", "html", "markdown")
        },
    ),
    Case("norms", "vector-arabic-digits", ((NORM_X, "٤ ٦ ٥ ٩ ٣ ٧"),), "chart", chart="norms_ln"),
    Case("norms", "vector-full-width-separators", ((NORM_X, "4，6；5、9\u30003，7"),), "chart", chart="norms_ln"),
    *declared_cases(norms_view.IDENTITY, "norms_identity"),
    *declared_cases(norms_view.MLP, "norms_mlp_counts"),
    *text_cases(
        "norms",
        (W("text_input", "norms_pair_text"),),
        "norms_pair",
        name="sentence",
        empty=("error", "text is empty"),
        **{"100k": ("info", "cut to the models' context")},
    ),
    *number_cases("norms", "norms_ln", at_min=("error", "leaves the MLP no hidden unit")),  # D = 1, ratio 0.5
    # model sizes: every number at once, then each declared number alone (no text)
    *number_cases("model_sizes", "sizes_custom"),
    *declared_cases(
        sizes_view.OWN_MODEL,
        "sizes_custom",
        dim_min=("error", "does not divide"),  # D = 1 with 12 heads
        dim_max=("error", "does not divide"),  # 65,536 / 12
        kv_heads_max=("error", "key/value heads (256) must divide the number of query heads H = 12"),
    ),
    # language model: the text, every number (top-k sampling, so that temperature and k are live)
    *text_cases(
        "language_model",
        (W("text_area", "lm_text"),),
        "lm_next",
        prepare=((W("slider", "lm_new"), 2),),
        empty=("warning", "The text is empty"),
        **{"100k": MH_LONG},  # the same maps budget as the multi-head page
    ),
    *text_cases(  # the chat message (SmolLM2's template): any text is a new turn; an empty one asks for a message
        "language_model",
        (W("text_input", "lm_chat"),),
        "lm_chat_read",
        prepare=((W("slider", "lm_chat_new"), 2),),
        empty=("info", "Write a message"),
        **{"100k": CHAT_CUT},  # the box keeps 2,000 characters, still more than the page's 373 tokens
    ),
    *[  # the chat: 10,000 characters, a history longer than the page's tokens, sampling at its bounds
        Case("language_model", "chat-10k", ((W("text_input", "lm_chat"), HUGE[:10_000]),), *CHAT_CUT, "lm_chat_read"),
        Case(
            "language_model",
            "chat-history-beyond-the-context",
            ((W("text_input", "lm_chat"), HUGE[10:810]),),  # ~180 tokens after a turn of as many and its reply
            "warning",
            "turns are left out of what it read",
            "lm_chat_read",
            prepare=((W("slider", "lm_chat_new"), 64), (W("text_input", "lm_chat"), HUGE[:800])),
        ),
        *[
            Case(
                "language_model",
                f"chat-sampling-at-{end}",
                (
                    (W("slider", "lm_chat_temp"), t),
                    (W("number_input", "lm_chat_topk"), k),
                    (W("text_input", "lm_chat"), m),
                ),
                "chart",
                chart="lm_chat_read",
                prepare=((W("radio", "lm_chat_method"), "top_k"), (W("slider", "lm_chat_new"), 4)),
            )
            for end, t, k, m in (("min", 0.1, 1, "Name a colour."), ("max", 2.0, 200, "Name a fruit."))
        ],
    ],
    *number_cases(  # top-k sampling, so that temperature and k are live (the generation's and the chat's)
        "language_model",
        "lm_next",
        prepare=((W("radio", "lm_method"), "top_k"), (W("radio", "lm_chat_method"), "top_k")),
    ),
    # vision transformer: every number on the generated sample, then every kind of upload
    *number_cases("vision_transformer", "vit_overlays", prepare=VIT_SAMPLE),
    *[
        Case(
            "vision_transformer",
            f"upload-{name}",
            ((UPLOAD, (file, data, mimetypes.guess_type(file)[0])),),
            expect,
            says,
            chart="vit_overlays",
            prepare=VIT_UPLOAD,
            recover=((UPLOAD, ("star.png", STAR_PNG, "image/png")),),
        )
        for name, (file, data, expect, says) in UPLOADS.items()
    ],
    # seq2seq: words outside the toy vocabulary are named; odd characters around known words are dropped
    *text_cases(
        "seq2seq",
        (W("text_input", "s2s_text"),),
        "s2s_align_attention",
        name="sentence",
        empty=("warning", "Type an English sentence"),
        **{"100k": ("warning", "Shorten it")},
        **{p: S2S_UNKNOWN for p in ("emoji", "rtl", "combining", "control", "html", "markdown")},
    ),
    *[
        Case(
            "seq2seq",
            f"known-words-{name}",
            ((W("text_input", "s2s_text"), text),),
            "chart",
            chart="s2s_align_attention",
        )
        for name, text in (
            ("emoji", "we see 🐕 the sky 🚀"),
            ("control", "we\x00see\x07the\u200bsky\r\n"),
            ("rtl-marks", "\u202ewe see the sky\u202c"),
            ("html-comment", "we see <!-- --> the sky"),
        )
    ],
    Case(
        "seq2seq",
        "sentence-punctuation-only",  # characters typed, but no word among them
        ((W("text_input", "s2s_text"), "?!..."),),
        "warning",
        "No words found",
        chart="s2s_align_attention",
    ),
    *number_cases("seq2seq", "s2s_align_attention"),
    # cost of attention: sizes whose naive attention cannot fit are estimated and refused with the number
    Case(
        "cost_of_attention",
        "guard-10M-tokens-1024-heads",
        tuple(zip(GUARD, (10_000_000, 1024))),
        "warning",
        "Naive attention at $N$ = 10,000,000, $H$ = 1024 needs",
        chart="cost_memory",
    ),
    Case(
        "cost_of_attention",
        "guard-128k-tokens",
        tuple(zip(GUARD, (131_072, 64))),
        "warning",
        "so it would not run",
        chart="cost_memory",
    ),
    *number_cases("cost_of_attention", "cost_tiles"),
    *declared_cases(  # H must divide D: 8 heads at D = 1, 1,024 heads at D = 512
        cost_view.MATMULS,
        "cost_flops",
        d_min=("error", "does not divide the width"),
        h_max=("error", "does not divide"),
        kv_max=("error", "must divide the number of query heads"),  # 1,024 K/V heads with H = 8
    ),
    *declared_cases(cost_view.TILES, "cost_tiles"),
    # inside a block: the probe's text (cut to 32 tokens), and a token beyond the text
    *text_cases(
        "block_roles",
        (W("text_input", "probe_text"),),
        "block_probe",
        empty=("error", "the text is empty"),
    ),
    *number_cases("block_roles", "block_probe", at_max=("error", "the token to change must be between 0 and")),
    # watch a circuit form: the live run's seed (used on Train; the shipped curves stay)
    *number_cases("circuit", "circuit_formation"),
    # position lab: the rotary demonstration's numbers (an odd head size cannot be split into pairs)
    Case(
        "position_lab", "head-dim-odd", ((W("number_input", "rot_dh"), 3),), "error", "even number", "rotary_rotation"
    ),
    *number_cases("position_lab", "rotary_rotation"),
    *declared_cases(pos_view.ROTARY, "rotary_rotation"),
    # KV cache stepper: the prompt (empty, or too long for the model's context) and the new tokens (declared:
    # kv_view.DECODE), and a window beyond the stepper's tokens (the box stops there: the value is not taken)
    *declared_cases(
        kv_view.DECODE,
        "kv_growth",
        prompt_empty=("error", "the prompt is empty"),
        prompt_10k=("error", "but the stepper holds"),
    ),
    Case("kv_cache", "window-beyond-context", ((W("number_input", "kv_window"), 4096),), "chart", "", "kv_growth"),
    *number_cases("kv_cache", "kv_growth"),
    # head science: the text (importance view), the patching prompts and answers, every number
    *text_cases(
        "head_science",
        (W("text_area", "hs_text"),),
        "hs_importance_loss",
        prepare=HS_TINY,
        empty=("warning", "The text is empty"),
        **{"100k": ("chart", "only the first 128 are analysed")},
    ),
    *text_cases(
        "head_science",
        (W("text_input", "hs_corrupt_tiny-gpt_0"),),
        "hs_patch_residual",
        name="corrupt",
        prepare=HS_PATCHING,
        empty=("error", "the text is empty"),
        **{p: HS_UNEQUAL for p in ("100k", "emoji", "rtl", "combining", "control", "html", "markdown")},
    ),
    Case(
        "head_science",
        "answer-not-one-token",
        ((W("text_input", "hs_a_tiny-gpt_0"), " supercalifragilistic"), (W("text_input", "hs_b_tiny-gpt_0"), " a")),
        "error",
        "is not a single token",
        chart="hs_patch_residual",
        prepare=HS_PATCHING,
    ),
    *number_cases("head_science", "hs_pattern", prepare=(*HS_TINY, (W("segmented_control", "hs_view"), "importance"))),
    # information flow: the text, and a predicted position beyond it (−128 or 127 on a short text)
    *text_cases(
        "flow",
        (W("text_area", "flow_text"),),
        "flow_graph",
        empty=("warning", "The text is empty"),
        **{"100k": ("chart", "only the first 128 are analysed")},
    ),
    *number_cases("flow", "flow_graph", at_min=FLOW_BEYOND, at_max=FLOW_BEYOND),
    # long-context atlas: a pasted text (empty: a hint, the corpus read meanwhile; beyond SmolLM2's 8 192 tokens),
    # uploads (binary, empty, too long), the needle's boxes (read when its button runs), numbers on tiny-llama
    *text_cases(
        "atlas",
        (W("text_area", "atlas_text"),),
        "atlas_grid_first",
        prepare=ATLAS_PASTE,
        empty=("info", "Paste a text to read it"),
        **{"100k": ("error", "exceed the model's context of 8192")},
    ),
    Case(
        "atlas",
        "one-token",
        ((W("text_area", "atlas_text"), "Hi"),),
        "error",
        "the atlas needs at least 2",
        prepare=ATLAS_PASTE,
    ),
    *[
        Case(
            "atlas",
            f"upload-{name}",
            ((ATLAS_UPLOAD, (file, data, "text/plain")),),
            expect,
            says,
            chart="atlas_grid_first",
            prepare=((W("radio", "atlas_source"), "upload"),),
            recover=((ATLAS_UPLOAD, ("notes.txt", b"The cat sat on the mat. " * 20, "text/plain")),),
        )
        for name, (file, data, expect, says) in {
            "binary": ("star.txt", STAR_PNG, "error", "this file is not text"),
            "nul-bytes": ("nul.txt", b"text\x00with a NUL", "error", "this file is not text"),
            "zero-bytes": ("empty.txt", b"", "error", "empty (0 bytes)"),
            "gbk": ("gbk.txt", "注意力让每个词看见其他词。".encode("gbk"), "error", "save it as UTF-8 text"),
            "notepad-utf16": ("unicode.txt", ("The cat sat on the mat. " * 20).encode("utf-16"), "chart", ""),
            "beyond-context": ("long.txt", HUGE.encode(), "error", "exceed the model's context of 8192"),
            "good": ("notes.txt", b"The cat sat on the mat. " * 20, "chart", ""),
        }.items()
    ],
    *text_cases(
        "atlas",
        (W("text_input", "atlas_needle"), W("text_input", "atlas_q"), W("text_input", "atlas_a")),
        "atlas_grid_first",
        name="needle",
        prepare=((W("radio", "atlas_source"), "corpus"),),
    ),
    *number_cases("atlas", "atlas_grid_first", prepare=((W("selectbox", "atlas_model"), "tiny-llama"),)),
]


def _elements(at: AppTest, kinds: tuple[str, ...]) -> list[Any]:
    return [e for kind in kinds for e in at.get(kind)]


def _texts(at: AppTest, kinds: tuple[str, ...]) -> list[str]:
    return [str(e.value) for e in _elements(at, kinds)]


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def chart_keys(at: AppTest) -> list[str]:
    return [user_key_from_element_id(e.proto.id) or "" for e in at.get("plotly_chart")]


def assert_nothing_rendered(at: AppTest) -> None:
    """User text never reaches Markdown or Plotly markup unescaped."""
    assert not at.exception, [e.message for e in at.exception]
    for text in _texts(at, MARKDOWN_ELEMENTS):
        bare = re.sub(r"\\.", "", text)  # what a backslash escapes shows literally
        assert not [f for f in RENDERED_MARKDOWN if f in bare], f"rendered as Markdown/HTML: {text[:300]!r}"
    for s in (s for spec in plotly_specs(at) for s in _strings(spec)):
        assert not [f for f in RENDERED_PLOTLY if f in s], f"rendered as Plotly markup: {s[:300]!r}"


def assert_answers(at: AppTest, chart: str) -> None:
    assert_nothing_rendered(at)
    assert not at.error, [e.value for e in at.error]
    keys = chart_keys(at)
    assert (f"fig_{chart}" in keys) if chart else keys, f"no chart {chart!r} among {keys}"


def numeric_inputs(at: AppTest, where: str) -> list[tuple[Any, Any]]:
    """Every enabled slider and number input of the page, with a value at or beyond its bounds."""
    out = []
    for el in _elements(at, ("slider", "number_input")):
        if el.proto.disabled or isinstance(el.value, (tuple, list)) or el.min is None or el.max is None:
            continue
        step = el.step or 1
        value = {"at-min": el.min, "at-max": el.max, "below-min": el.min - step, "above-max": el.max + step}[where]
        out.append((el, type(el.value)(value) if isinstance(el.value, int) else value))
    assert out, "the page has no numeric input"
    return out


def _apply(at: AppTest, pairs: tuple[tuple[W, Any], ...]) -> bool:
    """Set the widgets that are on the page; True when something changed."""
    changed = False
    for w, value in pairs:
        el = w.find(at)
        if el is not None and (w.kind == "file_uploader" or el.value != value):
            el.set_value(value)
            changed = True
    return changed


@dataclass
class Pages:
    """One AppTest per page, opened on first use and reused by every case of that page, and the values each
    page's inputs go back to with its next run."""

    opened: dict[str, AppTest]
    restore: dict[str, tuple[tuple[W, Any], ...]]

    def __call__(self, name: str) -> AppTest:
        if name not in self.opened:
            self.opened[name] = open_page(name, **OPENED_WITH.get(name, {}))
            if lazy_sections(name):
                open_sections(self.opened[name], name).run()
            assert_answers(self.opened[name], "")
        return self.opened[name]


@pytest.fixture(scope="module")
def pages():
    yield Pages({}, {})


@pytest.fixture(scope="module")
def checkpoint_folders():
    """The folders of ``FOLDERS``: random Qwen2 checkpoints (one with its weights cut in half), an empty folder and
    an unsupported config inside the allowed root, a folder outside it and a symlink out of it."""
    from tests.checkpoints import write_checkpoint, write_gguf

    roots = BYOC / "roots"
    write_checkpoint(roots / "qwen2", "qwen2")
    write_checkpoint(roots / "corrupt", "qwen2")
    weights = roots / "corrupt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (roots / "empty").mkdir()
    (roots / "t5").mkdir()
    (roots / "t5" / "config.json").write_text('{"model_type": "t5"}')
    shutil.copytree(roots / "qwen2", roots / "bad-config")
    (roots / "bad-config" / "config.json").write_text('{"model_type": "qwen2", "hidden_size": 64, "vocab_size":')
    shutil.copytree(roots / "qwen2", roots / "five-heads")
    config = json.loads((roots / "qwen2" / "config.json").read_text())
    (roots / "five-heads" / "config.json").write_text(json.dumps(config | {"num_attention_heads": 5}))
    (BYOC / "outside").mkdir()
    (roots / "escape").symlink_to(BYOC / "outside", target_is_directory=True)
    write_gguf(roots / "tiny.gguf", "qwen2", "Q8_0")
    good = (roots / "tiny.gguf").read_bytes()
    (roots / "cut.gguf").write_bytes(good[: len(good) // 2])
    (roots / "fake.gguf").write_bytes(b"PK\x03\x04" + good[4:])
    (roots / "gemma.gguf").write_bytes(
        good.replace(b"\x05" + 7 * b"\x00" + b"qwen2", b"\x05" + 7 * b"\x00" + b"gemma", 1)
    )
    (BYOC / "outside" / "tiny.gguf").write_bytes(good)
    from tests.test_gguf import _uint32

    (roots / "layers.gguf").write_bytes(_uint32("qwen2.block_count", 1_000_000)(bytearray(good)))
    from tests.test_gemma3 import write_gemma3_gguf

    write_gemma3_gguf(roots / "g3-norm.gguf", drop="blk.3.post_ffw_norm.weight")
    write_gemma3_gguf(roots / "g3-width.gguf", key_length=12)
    write_gemma3_gguf(roots / "g3-pattern.gguf", pattern="every sixth")
    write_gemma3_gguf(roots / "g3-vocab.gguf", vocab_cut=10)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(paths.ENV_ROOTS, str(roots))
        yield roots
    shutil.rmtree(BYOC, ignore_errors=True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(pages: Pages, checkpoint_folders: Path, case: Case) -> None:
    at = pages(case.page)
    restore = pages.restore.pop(case.page, ())
    _apply(at, restore)  # sent with this row's first run
    if _apply(at, case.prepare) or (
        restore and not isinstance(case.inputs, str) and any(w.find(at) is None for w, _ in case.inputs)
    ):
        at.run()
        while _apply(at, case.prepare):  # inputs that appear once another is set (a folder box after its choice)
            at.run()
        assert_answers(at, "")
    if isinstance(case.inputs, str):  # every number of the page at once
        pairs = numeric_inputs(at, case.inputs)
        before = [(W(el.type, key=el.key, label=None if el.key else el.label), el.value) for el, _ in pairs]
        for el, value in pairs:
            el.set_value(value)
    else:
        missing = [str(w) for w, _ in case.inputs if w.find(at) is None]
        assert not missing, f"not on the page: {missing}"
        before = [(w, w.find(at).value) for w, _ in case.inputs if w.kind != "file_uploader"]
        _apply(at, case.inputs)
    recover = case.recover if case.recover is not None else tuple(before)

    answered = False
    try:
        at.run()
        assert_nothing_rendered(at)
        if case.expect == "chart":
            assert_answers(at, case.chart)
            if case.says:
                assert any(case.says in t for t in _texts(at, MARKDOWN_ELEMENTS)), _texts(at, MARKDOWN_ELEMENTS)
        else:
            shown = [e.value for e in at.get(case.expect)]
            assert any(case.says in s for s in shown), (case.expect, shown, _texts(at, MESSAGES))
        if isinstance(case.inputs, str):
            for el in _elements(at, ("slider", "number_input")):  # beyond the bounds: the server keeps them in range
                if not isinstance(el.value, (tuple, list)) and el.min is not None and el.max is not None:
                    assert el.min <= el.value <= el.max, (el.label, el.value)
        keys = chart_keys(at)
        answered = not at.error and ((f"fig_{case.chart}" in keys) if case.chart else bool(keys))
    finally:
        if answered:  # the page answered with its chart (perhaps with a notice): the inputs go back with the next run
            pages.restore[case.page] = recover
        else:  # after bad input (or a failed row), the next request with good input is answered as usual
            _apply(at, recover)
            at.run()
    if not answered:
        assert_answers(at, case.chart)


@pytest.fixture(scope="module")
def chinese_folder_box(checkpoint_folders: Path) -> AppTest:
    """The multi-head page in 中文, its model choice on a typed path (one page for every row, as one visitor)."""
    return open_page("multihead", mh_model=ui.FOLDER, lang="zh")


@pytest.mark.parametrize("name", [n for n, (_, outcome) in FOLDERS.items() if outcome[0] == "error"])
def test_a_refused_path_is_told_wholly_in_chinese(chinese_folder_box: AppTest, name: str) -> None:
    """Each path of ``FOLDERS`` the page refuses, typed with the interface in 中文: the one error is the refusal's
    Chinese message, its reason included (a parser's or a reader's English words never inside it)."""
    at, path = chinese_folder_box, FOLDERS[name][0]
    with pytest.raises(InputError) as refused:
        paths.open_checkpoint(path)  # what the page's loader raises
    assert not english_in_chinese(refused.value), refused.value.message("zh")
    FOLDER_BOX.find(at).set_value(path)
    at.session_state["lang"] = "zh"  # AppTest does not send the sidebar's switch back: set it for every run
    at.run()
    assert_nothing_rendered(at)
    message = ui.escape_markdown(refused.value.message("zh"))
    assert [e.value for e in at.error] == [locales.text("common", "error_input", "zh", message=message)]


def test_a_gguf_too_big_even_in_bfloat16_is_refused_from_its_header(checkpoint_folders: Path, monkeypatch) -> None:
    """Issue 43 as an app input: a GGUF file typed in the checkpoint box whose bfloat16 weights exceed the memory the
    app sees is refused from its header, before any tensor is read, with both precisions' needs and the memory
    available in the visitor's language; nothing of it stays loaded, and the page keeps serving."""
    from tests.checkpoints import write_gguf
    from tx_explorer.interop import gguf

    # its own path (the app keeps loaded checkpoints by path); a 32 768 × 256 embedding, so that the message's
    # numbers, two decimals of a GiB, are three different ones
    path = checkpoint_folders / "too-big.gguf"
    write_gguf(path, "qwen2", "Q8_0", vocab_size=32_768, hidden_size=256)
    needs = gguf.header_needs(gguf.read_header(path))
    free = needs[torch.bfloat16] // 3
    numbers = [gguf.gib(n) for n in (needs[torch.bfloat16], needs[torch.float32], free)]
    assert len(set(numbers)) == 3, numbers
    read: list[Any] = []

    def never(*args: Any, **kwargs: Any) -> None:
        read.append(args)
        raise AssertionError("a tensor was read before the memory check")

    monkeypatch.setattr(gguf, "available_memory", lambda device: free)  # the memory the app's loader reads
    monkeypatch.setattr(gguf, "read_tensor", never)
    at = open_page("multihead", mh_model=ui.FOLDER, mh_model_folder=str(path))
    for lang, phrase in (("en", "neither fits"), ("zh", "两种都放不下")):
        at.session_state["lang"] = lang  # AppTest does not send the sidebar's switch back: set it for every run
        at.run()
        assert_nothing_rendered(at)
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and phrase in errors[0] and all(n in errors[0] for n in numbers), errors
        assert "bfloat16" in errors[0] and "float32" in errors[0] and "Traceback" not in errors[0], errors
        assert not chart_keys(at) and not read, (chart_keys(at), len(read))
    # memory back: the same path opens (the refusal was not kept), in the same session
    monkeypatch.undo()
    at.session_state["lang"] = "en"
    at.run()
    assert_answers(at, "")
    assert any("8 query heads share 2 key/value heads" in t for t in _texts(at, MARKDOWN_ELEMENTS))


def test_the_table_covers_every_page_and_every_text_or_file_input(pages: Pages) -> None:
    """Runs after the table (same AppTests): a new page or a new text box must get rows in CASES."""
    assert set(PAGES) == {c.page for c in CASES}
    covered = {(c.page, str(w)) for c in CASES if not isinstance(c.inputs, str) for w, _ in (*c.inputs, *c.prepare)}
    exempt = {("multihead", "mh_other")}  # its layout is being reworked; test_page_lm drives the page's text
    for page in PAGES:
        at = pages(page)
        for el in _elements(at, ("text_input", "text_area", "file_uploader")):
            name = el.key or el.label
            if (page, name) not in exempt and not re.fullmatch(r"sizes_\d+", name or ""):
                assert (page, name) in covered, f"{page}: input {name!r} is not in the table"
    assert not [el.label for el in _elements(pages("home"), ("text_input", "text_area", "number_input", "slider"))]


# ---- hostile query strings: a link's values are untrusted input (tx_explorer.ui.url_state) ------------------------
# name → (the query string on the multi-head page, what the page then shows). tiny-gpt: 4 layers × 4 heads, set before
# the first run (the URL's model, when dropped, leaves it so); a value dropped shows the widget's default.
MH_DEFAULTS = {"mh_model": "tiny-gpt", "mh_view": "grid", "mh_layer": 3, "mh_head": 0, "mh_example": "example_code"}
HEAD_VIEW = {"mh_view": "head"}
HOSTILE_QUERIES = {
    "layer-beyond-the-model": ({**HEAD_VIEW, "mh_layer": "999"}, {"mh_view": "head"}),
    "layer-negative-clamped": ({**HEAD_VIEW, "mh_layer": "-5"}, {"mh_view": "head", "mh_layer": 0}),
    "head-not-a-number": ({**HEAD_VIEW, "mh_head": "abc"}, {"mh_view": "head"}),
    "head-huge": ({**HEAD_VIEW, "mh_head": "9" * 400}, {"mh_view": "head"}),
    "head-float": ({**HEAD_VIEW, "mh_head": "1.5"}, {"mh_view": "head"}),
    "head-empty": ({**HEAD_VIEW, "mh_head": ""}, {"mh_view": "head"}),
    "head-repeated": ({**HEAD_VIEW, "mh_head": ["1", "2"]}, {"mh_view": "head", "mh_head": 2}),  # the last one
    "model-unknown": ({"mh_model": "gpt-5"}, {}),
    "model-folder-choice": ({"mh_model": ui.FOLDER}, {}),
    "model-a-path": ({"mh_model": "/etc"}, {}),
    "view-unknown": ({"mh_view": "<script>alert(1)</script>"}, {}),
    "example-unknown": ({"mh_example": "../../etc/passwd", "mh_text_../../etc/passwd": "x"}, {}),
    "text-100k": ({"mh_text_example_code": HUGE}, {}),
    "text-html": ({"mh_text_example_code": HTML}, {}),
    "text-control": ({"mh_text_example_code": CONTROL}, {}),
    "lang-unknown": ({"lang": "xx"}, {}),
    "lang-script": ({"lang": "<script>alert(1)</script>"}, {}),
    "unknown-parameters": ({"foo": "bar", "embed": "true"}, {}),
    "too-many-parameters": ({f"p{i}": "1" for i in range(2000)} | {"mh_layer": "1", **HEAD_VIEW}, {}),  # all ignored
}


@pytest.mark.parametrize("query, expect", HOSTILE_QUERIES.values(), ids=HOSTILE_QUERIES.keys())
def test_a_hostile_query_string_is_dropped_or_clamped(tmp_path, query: dict, expect: dict) -> None:
    """A reload or a shared link restores the page's choices from the URL; whatever it says, the page draws without an
    error, the values it cannot use dropped or clamped, and the URL then says what the page shows."""
    at = arrive(tmp_path, "multihead", query, mh_model="tiny-gpt")
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert plotly_specs(at), "no chart"
    want = MH_DEFAULTS | expect
    keys = [k for k in want if k in ("mh_model", "mh_view", "mh_example") or want["mh_view"] == "head"]
    assert {k: shown(at, k) for k in keys} == {k: want[k] for k in keys}
    assert at.session_state["lang"] == "en" and at.query_params["lang"] == "en"
    assert all(at.query_params[k] == str(shown(at, k)) for k in keys)
    text = at.query_params["mh_text_example_code"]
    assert text == at.session_state["mh_text_example_code"] and len(text) <= 20_000


# ---- out of range: the analysis functions behind the widgets refuse what the widgets never send ------------------
@functools.cache
def _lm():
    return models.load_model("tiny-gpt")


X = torch.tensor([4.0, 6.0, 5.0])
OUT_OF_RANGE = [
    pytest.param(call, message, id=name)
    for name, call, message in [
        ("operator-N_Q-0", lambda: op.random_qkv(0, 6, 8, 4, 0), "N_Q must be a positive integer"),
        ("operator-D-negative", lambda: op.random_qkv(4, 6, -1, 4, 0), "D must be a positive integer"),
        ("operator-one-key", lambda: op.softmax_saturation([1, 2], n_keys=1), "at least 2 keys"),
        ("operator-cross-heads-0", lambda: op.cross_attention(3, 7, 16, 0, 0), "num_heads must be a positive integer"),
        ("self_attention-tokens-0", lambda: sa.permutation_check(0, 16, 4, 0, 1, "none"), "positive integer"),
        ("self_attention-positions-0", lambda: sa.position_table("sinusoidal", 0, 64), "positive integer"),
        ("self_attention-odd-width", lambda: sa.position_table("sinusoidal", 3, 15), "the width D must be even"),
        ("masks-window-0", lambda: mg.build_mask("sliding_window", 10, window=0), "window must be a positive integer"),
        ("masks-prefix-beyond-n", lambda: mg.build_mask("prefix_lm", 10, prefix=11), "prefix must be an integer in"),
        ("masks-padding-beyond-n", lambda: mg.build_mask("padding", 10, length=11), "every length must lie in"),
        ("masks-no-tokens", lambda: masks.causal(0), "positive integer"),
        ("masks-model-one-token", lambda: mg.model_masks(_lm(), [1]), "the check needs at least 2 tokens"),
        ("moe-top-k-above-experts", lambda: MoEConfig().replace(num_experts=4, top_k=5), "top_k must be between"),
        (
            "moe-no-experts",
            lambda: MoEConfig().replace(num_experts=0, top_k=1),
            "num_experts must be a positive integer",
        ),
        (
            "moe-capacity-factor-0",
            lambda: routing.drop_rate(torch.full((4, 8), 0.125), 2, 0.0),
            "capacity factor must be positive",
        ),
        ("norms-negative-eps", lambda: norms.norm_steps(X, eps=-1.0), "ε must be non-negative"),
        ("norms-smoothing-1", lambda: norms.ema([1.0, 2.0], 1.0), "smoothing must lie in"),
        ("norms-no-tokens", lambda: norms.sample_residual(0, 16), "at least 1 token"),
        ("norms-mlp-width-0", lambda: norms.mlp_param_counts(0), "dim must be"),
        ("norms-mlp-no-hidden-unit", lambda: norms.mlp_param_counts(1, 0.5), "no hidden unit"),
        ("model_sizes-no-layers", lambda: TransformerConfig(num_layers=0), "num_layers must be a positive integer"),
        ("model_sizes-heads-not-dividing", lambda: TransformerConfig(dim=768, num_heads=7), "does not divide"),
        ("model_sizes-kv-heads-neg", lambda: sizes_view.own_model(kv_heads=-1), "num_kv_heads must be a positive"),
        ("model_sizes-kv-heads-not-dividing", lambda: sizes_view.own_model(kv_heads=5), "must divide the number"),
        ("language_model-no-new-tokens", lambda: lm.generate(_lm(), [1, 2], 0), "“New tokens” must lie between 1 and"),
        (
            "language_model-too-many-new",
            lambda: lm.generate(_lm(), [1, 2], 10_000),
            "“New tokens” must lie between 1 and",
        ),
        (
            "language_model-temperature-0",
            lambda: lm.generate(_lm(), [1, 2], 4, temperature=0.0),
            "temperature must be positive",
        ),
        ("language_model-top-k-0", lambda: lm.generate(_lm(), [1, 2], 4, top_k=0), "top_k must be"),
        (
            "vision_transformer-patch-outside",
            lambda: vit_lab.patch_view(np.zeros((224, 224, 3), np.uint8), vit_lab.lecture_embed(), 196),
            "outside",
        ),
        ("vision_transformer-seed-negative", lambda: shapes.sample(-1), "non-negative integer"),
        (
            "seq2seq-beam-0",
            lambda: models.load_model("seq2seq-attention").translate("we see the sky", beam=0),
            "beam_size must be a positive integer",
        ),
        ("seq2seq-no-sentences-per-bucket", lambda: ev.eval_set(0), "must be a positive integer"),
        ("cost-n-0", lambda: cost.four_matmuls(0, 512, 8), "must be a positive integer"),
        ("cost-heads-not-dividing", lambda: cost.four_matmuls(1024, 512, 7), "does not divide"),
        ("cost-tile-n-beyond", lambda: flash_steps.trace_example(n=flash_steps.MAX_TRACE_N + 1), "at most"),
        ("cost-tile-block-0", lambda: flash_steps.trace_example(block_size=0), "positive integer"),
        ("cost-naive-does-not-fit", lambda: memory.check_naive_fits(10_000_000, 1024, 256), "needs"),
        ("cost_of_attention-mixer-N-0", lambda: mixers.measure("rnn", 0), "N must be a positive integer"),
        ("cost_of_attention-mixer-unknown", lambda: mixers.build("lstm", 8), "unknown token mixer"),
        ("cost_of_attention-mixer-max-n", lambda: mix_view.measure_all(100), "N must be one of"),
        (
            "block_roles-token-beyond",
            lambda: block_roles.token_probe(_lm().model, [1, 2, 3], token=3),
            "the token to change must be between 0 and 2",
        ),
        (
            "block_roles-layer-beyond",
            lambda: block_roles.token_probe(_lm().model, [1, 2, 3], token=0, layer=4),
            "the layer must be between 0 and 3",
        ),
        ("multihead-query-after-last-token", lambda: heads.rank(np.full((1, 1, 3, 3), 1 / 3), 3, 0), "token 3"),
        ("multihead-key-after-query", lambda: heads.rank(np.full((1, 1, 3, 3), 1 / 3), 0, 2), "cannot look ahead"),
        ("head_science-layer-beyond", lambda: hs.check_head(hs.text_model(_lm()), 4, 0), "does not exist"),
        ("head_science-head-negative", lambda: hs.check_head(hs.text_model(_lm()), 0, -1), "does not exist"),
        ("head_science-one-token", lambda: hs.encode(_lm(), "a"), "at least 2 tokens are needed"),
        ("head_science-unequal", lambda: hs.activation_patching(_lm(), [1, 2], [1]), "equal token length"),
        ("cost-io-tile-0", lambda: flash_io.tiled_io(1024, 64, 0), "tile must be a positive integer"),
        ("position_lab-one-position", lambda: position_lab.rotary_relative_check(8, 1), "at least 2 positions"),
        ("position_lab-odd-head-dim", lambda: position_lab.rotary_relative_check(7, 8), "must be even"),
        ("kv_cache-window-0", lambda: kv_cache.check_window(TransformerConfig(), 0), "sliding window must hold"),
        ("circuit-seed-negative", lambda: circuit_view.live_settings(-1), "the seed must be a non-negative integer"),
        ("kv_cache-new-tokens-beyond", lambda: kv_cache.check_prompt(TransformerConfig(), [1], 65), "new tokens"),
    ]
]


@pytest.mark.parametrize("call, message", OUT_OF_RANGE)
def test_analysis_refuses_values_beyond_the_widgets(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# ---- declared sections: the page shows what is declared, and the compute never fails beyond the bounds ---------
DECLARED = declared()


def test_sections_are_declared() -> None:
    assert DECLARED, "no section declares its inputs (tx_explorer.views.inputs)"


@pytest.mark.parametrize("section", DECLARED, ids=lambda s: s.prefix)
def test_a_declared_section_is_what_its_page_shows(pages: Pages, section: Section) -> None:
    """Every declared input is on its page, keyed and drawn as declared, with the declared bounds, options and
    length limit (the rows derived from a declaration test what the visitor meets)."""
    at = pages(section.page)
    for inp in section.inputs:
        el = next((e for e in at.get(widget_kind(inp)) if e.key == section.key(inp)), None)
        assert el is not None, f"{section.key(inp)} is declared but not on the page as a {widget_kind(inp)}"
        if isinstance(inp, Number | Real):
            assert (el.min, el.max, el.step) == (inp.low, inp.high, inp.step), section.key(inp)
        if isinstance(inp, Choice):
            assert tuple(el.options) == tuple(locales.text(section.page, option_key(inp, o)) for o in inp.options)
        if isinstance(inp, Text):
            assert el.max_chars == inp.max_chars, section.key(inp)


def _beyond(inp: Input) -> dict[str, Any]:
    """A number one step past each bound, a text through DECLARED_TEXTS whole (no widget cuts it here)."""
    if isinstance(inp, Number | Real):
        return {str(v): v for v in (inp.low - inp.step, inp.high + inp.step)}
    return DECLARED_TEXTS if isinstance(inp, Text) else {}


@pytest.mark.parametrize(
    "section, name, value",
    [
        pytest.param(s, inp.name, v, id=f"{s.prefix}-{inp.name}-{k}")
        for s in DECLARED
        for inp in s.inputs
        for k, v in _beyond(inp).items()
    ],
)
def test_a_declared_section_beyond_its_bounds_answers_or_refuses_clearly(section: Section, name: str, value: Any):
    """The browser never sends a value beyond a widget's bounds (nor a text beyond its length), but the notebook API
    does: the compute answers, or refuses with a ValueError (a clear message in the app), never another exception."""
    try:
        section(**{name: value})
    except ValueError as exc:
        assert str(exc)


# ---- no page renders user content as HTML ----------------------------------------------------------------------------
def _uploader_style(call: ast.Call) -> bool:
    """``st.html(_UPLOADER_STYLE.format(...))``: ui.file_uploader's style, the locale's words and Streamlit's limit
    as CSS strings (json.dumps), no user content (test_uploader_words)."""
    arg = call.args[0] if call.args else None
    return (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr == "format"
        and getattr(arg.func.value, "id", "") == "_UPLOADER_STYLE"
    )


def _html_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "html" and not _uploader_style(node):  # st.html, components.v1.html
            found.append(f"{path.name}:{node.lineno} {name}(...)")
        for kw in node.keywords:
            if kw.arg == "unsafe_allow_html" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"{path.name}:{node.lineno} unsafe_allow_html")
    return found


def test_no_page_renders_html(tmp_path: Path) -> None:
    ui_modules = sorted((ROOT / "tx_explorer" / "ui").glob("*.py"))
    files = [ROOT / "app.py", *ui_modules, *sorted((ROOT / "pages").glob("*.py"))]
    assert len(files) == len(PAGES) + 1 + len(ui_modules) and len(ui_modules) > 1
    assert [hit for f in files for hit in _html_calls(f)] == []
    probe = tmp_path / "probe.py"  # the check itself finds both forms
    probe.write_text(
        "import streamlit as st\nst.markdown(x, unsafe_allow_html=True)\nst.html(y)\n"
        "st.html(_UPLOADER_STYLE.format(key=k))\nst.html(OTHER.format(key=k))\n",  # the uploader's style alone passes
        encoding="utf-8",
    )
    assert len(_html_calls(probe)) == 3
