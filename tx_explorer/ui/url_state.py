"""The language and each page's main choices kept in the URL's query string: a reload, or a link a teacher shares,
opens the same view.

One table, :data:`KEPT`, names per page (its ``url_path``: the file's stem) the widget keys kept and the kind of value
each holds; the pages themselves know nothing of it. app.py restores a page's keys into ``st.session_state`` before
the page's widgets are built and writes them back when the run ends (:func:`kept_in_url`); a fragment's rerun does
not pass through app.py, so it writes them as its :func:`~tx_explorer.ui.text.friendly_errors` block closes
(:func:`write_after_fragment`). The sidebar restores the language before its switch is drawn
(:func:`restore_language`).

A value is restored only when the URL holds something else than what this session last wrote there, and only on
a reload or an opened link (nothing written yet for that key) or on the browser's Back and Forward buttons (Streamlit
reruns with that entry's query string and says so: ``is_history_navigation``); otherwise the widget, which the visitor
may just have changed, is the truth. Any other rerun can carry a URL older than the last one written: a click sent
while the run that writes it is still under way (a switch flipped, then a tab clicked at once) carries the URL from
before the switch, which must not flip it back. Switching pages drops the
query string (Streamlit's navigation keeps only parameters bound to widgets); the new page's run writes the language
and its own keys back.

A query string is untrusted input. A value of the wrong type, beyond its kind's bounds, too long, or a model that is
not registered is dropped (or a number clamped into the bounds the table knows), silently: the widget then shows
what it showed. A value within those bounds but not among the widget's options (a layer beyond the chosen model) is
dropped by Streamlit itself, which resets a select box, radio, segmented control, select slider or number box whose
session value it does not offer; a slider raises instead, so a slider is kept only with its exact bounds.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

import streamlit as st

from tx_explorer import locales, models
from tx_explorer.ui import compat
from tx_explorer.views import inputs as declared_inputs

# Proxies and servers refuse request lines over about 8 KB (nginx's default large_client_header_buffers, the proxy of
# deploy/nginx.conf, which leaves it so); a page keeps at most a few texts, so one text takes at most half of that,
# URL-encoded (a Chinese character is 9 encoded characters). A longer text is left out of the URL, and one arriving
# longer is dropped.
URL_TEXT_BUDGET = 4000
WORD_MAX = 200  # a model name, an option, a view: longer is not one of ours
NUMBER_MAX = 10**9  # a whole number's sanity bound where the table knows no other (the widget checks its own)

_WRITTEN = "tx_url_written"  # session state: the kept keys' values as this session last wrote them to the URL
_PAGE = "tx_url_page"  # session state: the page whose keys a fragment's rerun writes
_FULL_RUN = "tx_url_full_run"  # session state: app.py's run is under way (it writes the URL when it ends)


# ---- kinds of value: parse what the URL says (None: dropped), show a value as the URL's text (None: not kept) ------
@dataclass(frozen=True)
class Whole:
    """A whole number, clamped into ``[low, high]``: an index (layer, head, token), a seed, a count."""

    low: int = 0
    high: int = NUMBER_MAX

    def parse(self, raw: str) -> int | None:
        if len(raw) > 20:  # no number of ours has more digits; int() of a long string costs quadratic time
            return None
        try:
            return min(max(int(raw), self.low), self.high)
        except ValueError:
            return None

    def show(self, value: Any) -> str | None:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Real:
    """A finite real number, clamped into ``[low, high]``."""

    low: float
    high: float

    def parse(self, raw: str) -> float | None:
        try:
            value = float(raw) if len(raw) <= 40 else math.nan
        except ValueError:
            return None
        return min(max(value, self.low), self.high) if math.isfinite(value) else None

    def show(self, value: Any) -> str | None:
        return repr(float(value)) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Flag:
    """On or off: ``true`` or ``false``."""

    def parse(self, raw: str) -> bool | None:
        return {"true": True, "false": False}.get(raw.lower())

    def show(self, value: Any) -> str | None:
        return str(value).lower() if isinstance(value, bool) else None


@dataclass(frozen=True)
class Word:
    """A short printable name (a model, an option, a view), one of ``among`` where given."""

    among: tuple[str, ...] = ()

    def parse(self, raw: str) -> str | None:
        ok = 0 < len(raw) <= WORD_MAX and raw.isprintable() and (not self.among or raw in self.among)
        return raw if ok else None

    def show(self, value: Any) -> str | None:
        return self.parse(value) if isinstance(value, str) else None  # e.g. not the picker's "\0folder" choice


@dataclass(frozen=True)
class Model:
    """A model picker's choice, kept only when it is a registered model's name: a checkpoint folder is a path on the
    server, which a link shared elsewhere cannot mean and a URL must not choose. Checked here, not by the picker, so
    that an unknown name leaves the session's model as it was instead of resetting it to the picker's default."""

    def parse(self, raw: str) -> str | None:
        return raw if raw in models.REGISTRY else None

    def show(self, value: Any) -> str | None:
        return self.parse(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class Text:
    """A typed text of at most ``max_chars`` characters (the widget's own limit) that fits :data:`URL_TEXT_BUDGET`."""

    max_chars: int

    def parse(self, raw: str) -> str | None:
        return raw if len(raw) <= self.max_chars and len(quote_plus(raw)) <= URL_TEXT_BUDGET else None

    def show(self, value: Any) -> str | None:
        return self.parse(value) if isinstance(value, str) else None


Kind = Whole | Real | Flag | Word | Model | Text


@dataclass(frozen=True)
class Kept:
    """A widget key kept in the URL. ``{name}`` in it stands for the value of the kept key ``name``, listed before it
    (``mh_text_{mh_example}``: the text typed for the chosen example).

    ``fragment``: the widget is drawn inside a fragment (``st.fragment``, ``ui.below_fold``). A fragment's rerun writes
    only these: there the session value of a widget outside the fragment can be stale, e.g. a select box whose
    option labels changed with the language still holds the label the browser last sent (seen on the multi-head page:
    "Documentation sentence" for ``mh_example`` after 中文 was chosen)."""

    key: str
    kind: Kind
    fragment: bool = False

    def resolve(self, state: Mapping[str, Any]) -> str | None:
        """The key for the values in ``state``; None while a key it names holds no short printable name."""
        values = {name: state.get(name) for name in re.findall(r"{(\w+)}", self.key)}
        return None if any(Word().show(v) is None for v in values.values()) else self.key.format_map(values)

    def pattern(self) -> re.Pattern[str]:
        """Every key this one can resolve to."""
        return re.compile(re.sub(r"\\{\w+\\}", ".+", re.escape(self.key)))


@dataclass(frozen=True)
class Declared:
    """Every input of a declared section (:mod:`tx_explorer.views.inputs`), its bounds, options and length as declared:
    ``Declared("kv_cache", "DECODE")`` is ``tx_explorer.views.kv_cache.DECODE``, imported when its page first runs."""

    module: str
    name: str
    fragment: bool = False  # its ``ui.inputs`` are drawn inside a fragment (:class:`Kept`)

    def kept(self) -> tuple[Kept, ...]:
        section = getattr(importlib.import_module(f"tx_explorer.views.{self.module}"), self.name)
        return tuple(Kept(section.key(inp), _kind(inp), self.fragment) for inp in section.inputs)


def _kind(inp: declared_inputs.Input) -> Kind:
    if isinstance(inp, declared_inputs.Number):
        return Whole(inp.low, inp.high)
    if isinstance(inp, declared_inputs.Real):
        return Real(inp.low, inp.high)
    if isinstance(inp, declared_inputs.Choice):
        return Word(inp.options)
    if isinstance(inp, declared_inputs.Switch):
        return Flag()
    return Text(inp.max_chars)


LANGUAGE = Kept("lang", Word(tuple(locales.LANGUAGES)))  # every page's; checked exactly: texts are looked up in it
WORD, FLAG, INDEX, MODEL = Word(), Flag(), Whole(), Model()

# page (pages/<page>.py) → what it keeps, in the order restored. Main choices only: a URL a teacher pastes stays
# short. Left out: the vision page's choices and the seq2seq maps' layer and head (details of one view), multiselects,
# and sliders whose bounds depend on the text or the model (a token position, a decoding step).
KEPT: dict[str, tuple[Kept | Declared, ...]] = {
    "seq2seq": (Kept("s2s_text", Text(400)),),
    "operator": (
        Kept("source", WORD, fragment=True),
        Kept("d", Whole(1, 64), fragment=True),  # a slider
        Kept("seed", Whole(0, 10_000), fragment=True),
        Kept("scaled", FLAG, fragment=True),
        *(Kept(f"text_{m}", Text(1000), fragment=True) for m in "QKV"),
        Kept("op_qk_model", MODEL, fragment=True),
    ),
    "self_attention": (Declared("self_attention", "LAYER"), Declared("self_attention", "ORDER", fragment=True)),
    "position_lab": (
        Kept("loss_smoothing", Whole(1, 32), fragment=True),  # a slider
        Kept("attn_layer", INDEX, fragment=True),
        Declared("position_lab", "ROTARY", fragment=True),
    ),
    "masks": (
        Kept("sentence", Text(500), fragment=True),
        Kept("mask_seed", Whole(0, 10_000), fragment=True),
        Kept("masks_model", MODEL, fragment=True),
        Kept("masks_tokens", Whole(2, 1024), fragment=True),  # mask_gallery.MAX_MODEL_TOKENS
    ),
    "multihead": (
        Kept("mh_model", MODEL),
        Kept("mh_example", WORD),
        Kept("mh_text_{mh_example}", Text(20_000)),
        Kept("mh_hide", FLAG),
        Kept("mh_repeat", FLAG),  # the typed text written twice: its induction heads light up
        Kept("mh_view", WORD),
        Kept("mh_layer", INDEX, fragment=True),
        Kept("mh_head", INDEX, fragment=True),
    ),
    "norms": (
        Kept("runs_metric", WORD, fragment=True),
        Kept("runs_smoothing", Real(0.0, 0.95), fragment=True),
        Declared("norms", "NORM", fragment=True),
    ),
    "model_sizes": (Kept("sizes_share", FLAG, fragment=True), Declared("model_sizes", "OWN_MODEL", fragment=True)),
    "language_model": (
        Kept("lm_model", MODEL),
        Kept("lm_text", Text(20_000)),
        Kept("lm_mask_layer", INDEX, fragment=True),
        Kept("lm_mask_head", INDEX, fragment=True),
    ),
    "head_science": (
        Kept("hs_model", MODEL),
        Kept("hs_view", WORD, fragment=True),
        Kept("hs_example", INDEX, fragment=True),
        Kept("hs_text", Text(20_000), fragment=True),
        Kept("hs_layer_{hs_model}", INDEX, fragment=True),
        Kept("hs_head_{hs_model}", INDEX, fragment=True),
    ),
    "block_roles": (
        Kept("probe_model", MODEL, fragment=True),
        Kept("probe_text", Text(500), fragment=True),
        Kept("probe_token", INDEX, fragment=True),
        Kept("probe_layer", INDEX, fragment=True),
    ),
    "flow": (
        Kept("flow_model", MODEL),
        Kept("flow_text", Text(20_000), fragment=True),
        Kept("flow_target", Whole(-NUMBER_MAX), fragment=True),  # a number box: counted from the end when negative
    ),
    "atlas": (
        Kept("atlas_model", MODEL),
        Kept("atlas_source", WORD, fragment=True),
        Kept("atlas_text", Text(400_000), fragment=True),
        Kept("atlas_layer_{atlas_model}", INDEX, fragment=True),  # a click on the grid reruns only the fragment
        Kept("atlas_head_{atlas_model}", INDEX, fragment=True),
        Kept("atlas_stat", WORD, fragment=True),
    ),
    "circuit": (Kept("circuit_step", INDEX, fragment=True),),
    "moe": (Declared("moe", "COST", fragment=True), Declared("moe", "TYPED", fragment=True)),
    "cost_of_attention": (
        Declared("cost_of_attention", "MATMULS", fragment=True),
        Kept("cost_heads", INDEX, fragment=True),
        Kept("cost_head_dim", INDEX, fragment=True),
        Kept("cost_block", INDEX, fragment=True),
        Kept("cost_max_n", INDEX, fragment=True),
    ),
    "kv_cache": (
        Kept("kv_model", MODEL),
        Declared("kv_cache", "DECODE", fragment=True),
        Kept("kv_past", FLAG, fragment=True),  # Gemma 3: the run past its local layers' 512-token window
        Kept("kv_layer", INDEX, fragment=True),
    ),
}


def kept(page: str) -> tuple[Kept, ...]:
    """What ``page`` keeps in the URL, the language first, declared sections expanded."""
    rows = KEPT.get(page, ())
    return (LANGUAGE, *(k for row in rows for k in (row.kept() if isinstance(row, Declared) else (row,))))


# ---- restoring and writing -----------------------------------------------------------------------------------------
def _restore(rows: tuple[Kept, ...]) -> None:
    state, written = st.session_state, st.session_state.get(_WRITTEN, {})
    navigated = compat.history_navigation()
    for row in rows:
        key = row.resolve(state)
        raw = st.query_params.get(key) if key is not None else None
        if raw is None or raw == written.get(key) or (key in written and not navigated):
            continue
        value = row.kind.parse(raw)
        if value is not None:
            state[key] = value


def restore_language() -> None:
    """The sidebar's language from the URL, before its switch is drawn and the first text looked up."""
    _restore((LANGUAGE,))


def _write(page: str, *, fragment: bool = False) -> None:
    """The URL's query string made to hold ``page``'s kept values as they are now (one message, when any differs);
    in a fragment's rerun (``fragment``), only those of widgets drawn in fragments, the rest as last written."""
    rows, state = kept(page), st.session_state
    written: dict[str, str] = state.get(_WRITTEN, {})
    wanted: dict[str, str] = {}
    for row in rows:
        if fragment and not row.fragment:
            wanted |= {k: v for k, v in written.items() if row.pattern().fullmatch(k)}
            continue
        key = row.resolve(written if fragment else state)  # what a key names is outside the fragment
        if key is not None and key in state and (shown := row.kind.show(state[key])) is not None:
            wanted[key] = shown
    patterns = [row.pattern() for row in rows]
    current = st.query_params.to_dict()
    others = {k: v for k, v in current.items() if not any(p.fullmatch(k) for p in patterns)}
    if current != others | wanted:
        st.query_params.from_dict(others | wanted)
    state[_WRITTEN] = wanted


@contextlib.contextmanager
def kept_in_url(page: str) -> Iterator[None]:
    """Around the page's run (app.py): its kept values restored from the URL first, written back when it ends (also
    after ``st.stop()``, e.g. a blank text)."""
    st.session_state[_PAGE], st.session_state[_FULL_RUN] = page, True
    _restore(kept(page)[1:])  # the language: restored by the sidebar already
    try:
        yield
    finally:
        st.session_state[_FULL_RUN] = False
        _write(page)


def write_after_fragment() -> None:
    """In a fragment's rerun (app.py's full run writes at its end): the URL made to hold what its widgets chose."""
    page = st.session_state.get(_PAGE)
    if page is not None and not st.session_state.get(_FULL_RUN):
        _write(page, fragment=True)
