"""The multi-head page's head search, the sections of "Compare heads" below its heatmap, the query/key inspector,
and clicks that open a head (Streamlit glue over :mod:`tx_explorer.views.multihead`).

A click on a chart cannot set the widgets drawn above it in the same run (Streamlit refuses a widget's state once the
widget is drawn), so a click asks for widget values (:func:`ask`) that the next run applies before drawing them
(:func:`apply_asked`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from tx_explorer import models
from tx_explorer.analysis.heads import PATTERNS, TextAttention
from tx_explorer.families.text import TextModel
from tx_explorer.ui.below_fold import below_fold
from tx_explorer.ui.figures import PAGE_PX, row, show, show_figure
from tx_explorer.ui.sections import section
from tx_explorer.ui.text import escape_markdown, friendly_errors, model_description
from tx_explorer.views import Panel, model_facts
from tx_explorer.views import multihead as view

ASKED = "mh_asked"  # widget values a click asked for, applied before the widgets are drawn
LAST = "mh_last_click"  # (chart, point) of the click last followed: a chart keeps its selection across reruns
# The views' sections drawn once scrolled near (ui.below_fold; ui.fold_again when the view changes): the best heads
# of "Find the head", and below the metric heatmap of "Compare heads" the three that follow it. Both views open below
# the first screen, after an 820 px heatmap on SmolLM2.
FOLDED = ("multihead_best", "multihead_similarity", "multihead_pair", "multihead_sentences")


def model_help(T: Callable[..., str]) -> str:
    """The model picker's help: each model it offers, in the words of its own description (so that a model added
    to the registry is named too), then checkpoints of one's own."""
    described = "\n".join(f"- {model_description(name)}" for name in models.available_models("text"))
    return T("model_help", models=described)


def apply_asked() -> None:
    """Put the values a click asked for into the widgets' state; call before those widgets are drawn."""
    st.session_state.update(st.session_state.pop(ASKED, {}))


def ask(picked: Any, chart: str, values: Callable[[Any], Mapping[str, Any]]) -> None:
    """Follow a new click on ``chart`` (``picked``: its point's ``customdata``): ask for ``values(picked)`` and
    rerun. The same point still selected on a later run is no new click; a chart drawn without a selection forgets
    it, so that clicking the same cell again later opens it again."""
    if picked is None:
        if st.session_state.get(LAST, (None,))[0] == chart:
            del st.session_state[LAST]
        return
    if st.session_state.get(LAST) == (chart, picked):
        return
    st.session_state[LAST] = (chart, picked)
    st.session_state[ASKED] = dict(values(picked))
    st.rerun()


def open_head(picked: Any, chart: str) -> None:
    """A click on a head's cell ([layer, head]) opens that head in the "One head" view."""
    ask(picked, chart, lambda p: {"mh_view": "head", "mh_layer": int(p[0]), "mh_head": int(p[1])})


def _show_clickable(panel: Panel) -> Any:
    """A full-width panel whose points can be clicked: the ``customdata`` of the point clicked, if any."""
    points = show_figure(panel.figure, panel.key, panel.data, clickable=True, width_px=PAGE_PX)
    return points[0] if points else None


def head_search(T: Callable[..., str], lang: str, tm: TextModel, s: view.Shown, single: str | None) -> None:
    """Every head ranked by a query's weight on a key or by a pattern, the text coloured by the best heads, and
    clicks: a token of the text picks the query or the key, a cell of the ranking opens its head.

    ``single``: the typed text when the page shows it written twice (the pattern is then scored on the second copy).
    """
    st.markdown(T("search_intro"))
    found = view.sink(s)
    st.caption(escape_markdown(view.sink_note(found, s.labels[0], lang=lang)))
    c = st.columns([3, 2])
    mode = c[0].radio(
        T("search"), view.SEARCHES, format_func=lambda m: T(f"search_{m}"), horizontal=True, key="mh_search"
    )
    skip = c[1].toggle(T("skip_first"), value=found.used, key="mh_skip", help=T("skip_first_help"))
    n, groups = len(s.labels), view.kv_groups(tm)
    token = dict(options=range(n), format_func=lambda i: f"{i}: {s.labels[i]}")
    c = st.columns(2)
    query = c[0].selectbox(T("query_token"), index=n - 1, key="mh_query", **token)
    result = None
    with friendly_errors():  # a key after the query: said, and the text stays to click another key
        if mode == "pair":
            key = c[1].selectbox(T("key_token"), index=min(1, n - 1), key="mh_key", **token)
            causal = tm.kind != "encoder"
            result = view.search_pair(s, query, key, skip_first=skip, causal=causal, groups=groups, lang=lang)
        else:
            pattern = c[1].selectbox(
                T("pattern"),
                PATTERNS,
                index=PATTERNS.index("induction"),  # the one a student comes looking for
                format_func=lambda p: T(f"metric_{p}"),
                key="mh_pattern",
            )
            queries, copy = (
                (view.repeat_queries(tm, single, s), view.copy_tokens(tm, single)) if single else (None, None)
            )
            result = view.search_pattern(
                s, pattern, skip_first=skip, queries=queries, groups=groups, lang=lang, copy=copy
            )
    ranked = result is not None and bool(result.best)
    st.subheader(T("text_header"))
    st.caption(T("text_intro" if ranked else "text_intro_unranked"))  # no ranking: the head last opened, said so
    c = st.columns(3)
    direction = c[0].radio(
        T("direction"), view.DIRECTIONS, format_func=lambda d: T(f"direction_{d}"), key="mh_direction"
    )
    click = "query"
    if mode == "pair":
        click = c[1].radio(T("click"), view.CLICKS, format_func=lambda k: T(f"click_{k}"), key="mh_click")
    chosen = (st.session_state.get("mh_layer", len(s.maps) - 1), st.session_state.get("mh_head", 0))
    best = result.best if ranked else [chosen]  # no ranking (a tie, no pattern): the head last opened
    options = [None, *best] if ranked else best
    if st.session_state.get("mh_through", options[0]) not in options:
        # Another ranking, or none: its first choice. Kept, the last one's stayed on the box ("the 3 best-ranked,
        # averaged" above one head's picture) while the picture showed another.
        st.session_state["mh_through"] = options[0]
    through = c[2].selectbox(  # the best heads together, or one of them; unranked, "the 1 best-ranked" was false
        T("through"),
        options,
        format_func=lambda h: (
            T("through_best", n=len(best)) if h is None else s.head_names[h[0] * s.maps.shape[1] + h[1]]
        ),
        key="mh_through",
    )
    shown_heads = best if through is None else [through]
    picked = _show_clickable(view.text_picture(s, query, shown_heads, direction, skip_first=skip, lang=lang))
    ask(picked, "text", lambda i: {f"mh_{click}": int(i)})
    if result is None:
        return
    for note in result.notes:
        st.caption(escape_markdown(note))
    if result.panels:
        st.caption(T("click_hint"))
        open_head(_show_clickable(result.panels[0]), "rank")
        best_heads(T, result)


@below_fold("multihead_best", height=1020)
def best_heads(T: Callable[..., str], result: view.Search) -> None:
    """The best heads' maps, side by side, and the ranking's table."""
    row(*result.panels[1:])
    # Static, ranked by its index: a data grid took the browser about a second to mount beside five charts. The index
    # shown: pandas makes ranks 1…10 a RangeIndex, which st.table hides by default.
    st.table(pd.DataFrame(result.table).set_index(T("rank")), hide_index=False)


def _pick_head(where: Any, label: str, key: str, s: view.Shown, index: int = 0) -> int:
    """A head of the model, by its name ("L17 H3"), picked in ``where`` (a column)."""
    names = s.head_names
    return where.selectbox(
        label, range(len(names)), index=min(index, len(names) - 1), format_func=names.__getitem__, key=key
    )


@below_fold("multihead_similarity", height=970)
def similar(T: Callable[..., str], similarity: Callable[[], Panel]) -> None:
    """Which heads behave alike: ``similarity()``, the heads' distances (cached by the page), shown."""
    section(T, "similarity", level="subheader")
    with friendly_errors():
        show(similarity())


@below_fold("multihead_pair", height=1500)
def pair(T: Callable[..., str], lang: str, s: view.Shown) -> None:
    """Two heads picked side by side, each under its picker, and their difference below the first: half the page
    each (three to a row left a map 50 px wide beside its token labels and colour bar)."""
    st.subheader(T("pair_header"))
    c = st.columns(2)
    a, b = _pick_head(c[0], T("head_a"), "mh_a", s), _pick_head(c[1], T("head_b"), "mh_b", s, index=1)
    with friendly_errors():
        first, second, difference = view.pair(s, a, b, lang=lang)
        row(first, second)
        with st.columns(2)[0]:
            show(difference, width_px=PAGE_PX / 2)


@below_fold("multihead_sentences", height=970)
def same_head(
    T: Callable[..., str],
    lang: str,
    tm: TextModel,
    s: view.Shown,
    hide_special: bool,
    analysed: Callable[[str], TextAttention],
) -> None:
    """One head on the page's text and on another typed here (``analysed``: the page's cached analysis)."""
    section(T, "two_sentences", level="subheader")
    other = st.text_input(T("other_text"), T("other_default"), max_chars=20_000, key="mh_other")
    pick = _pick_head(st.columns(2)[0], T("same_head"), "mh_same", s)
    with friendly_errors():
        if not other.strip():
            st.info(T("other_empty"))
            return
        second = analysed(other)
        if second.truncated:
            st.warning(model_facts.say("multihead", "truncated", tm, lang, n=second.num_tokens))
        row(*view.same_head(s, second, pick, hide_special, lang=lang))


def query_key(T: Callable[..., str], lang: str, tm: TextModel, text: str, tokens: list[str]) -> None:
    """The query/key inspector: one head and one query, every step with the model's numbers."""
    st.markdown(T("qk_intro"))
    st.latex(view.LATEX["qk"])
    c = st.columns(3)
    layer = c[0].selectbox(T("layer"), range(len(tm.model.blocks)), key="qk_layer")
    head = c[1].selectbox(T("head"), range(tm.config.num_heads), key="qk_head")
    n = len(tokens)
    query = c[2].selectbox(T("query"), range(n), index=n - 1, key="qk_query", format_func=lambda i: f"{i}: {tokens[i]}")
    qk = view.inspector(tm, text, tokens, layer, head, query, lang=lang)
    st.table(qk.shapes)
    st.markdown(qk.projection)
    row(qk.scores, qk.weights)
    c = st.columns(2)
    # Half the page each: fitted to the page's width, Gemma 3's 256 dimensions' labels lay level there and turned in
    # the column, where Plotly grew the bottom margins 11–16 px after the first draw
    with c[0]:
        show(qk.query, qk.keys, width_px=PAGE_PX / 2)
    with c[1]:
        show(qk.values, qk.weighted, width_px=PAGE_PX / 2)
