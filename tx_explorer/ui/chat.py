"""The language-model page's chat: a conversation kept in the session, each reply streamed as it is written and
why it stopped, then what a token of the last reply read in the history, the new message and the reply itself."""

from __future__ import annotations

from typing import Any

import streamlit as st

from tx_explorer import models
from tx_explorer.analysis import lm
from tx_explorer.trace import Trace
from tx_explorer.ui.figures import metrics, show
from tx_explorer.ui.inputs import select_or_none
from tx_explorer.ui.pickers import cached_model
from tx_explorer.ui.sections import keep_open, keep_within, lazy_section, section
from tx_explorer.ui.text import friendly_errors, lang, texts
from tx_explorer.views import language_model as view
from tx_explorer.views import model_facts, split_bytes_note

MESSAGE = "lm_chat"  # the message box: a new text in it is a new turn
TURNS = "lm_chat_turns"  # session state: model name → its turns (view.Turn), oldest first
SENT = "lm_chat_sent"  # the message last answered: reruns with the same text (another widget) write no new turn
LAST = "lm_chat_last"  # model name → (what the model read, its last reply's attention, tokens a kept cache served)
AGAIN = "lm_chat_redo"  # the model whose last reply "Answer again" writes anew, until the run that writes it
SETTINGS = ("lm_chat_new", "lm_chat_method", "lm_chat_temp", "lm_chat_topk", "lm_chat_seed")  # the chat's widgets


@st.cache_resource(show_spinner=False)
def _prefixes(name: str) -> lm.Prefixes:
    """Model ``name``'s kept conversations, shared by every session: a turn reads only what follows them."""
    return lm.Prefixes()


def _new_conversation(name: str) -> None:
    st.session_state[TURNS][name] = []
    st.session_state.get(LAST, {}).pop(name, None)
    st.session_state.pop(AGAIN, None)
    st.session_state[MESSAGE] = st.session_state[SENT] = ""  # an empty box waiting for a message, not an error


def _keep_message() -> None:
    """The message box as last answered, where a run left it out (a model without a chat template picked, the
    section closed, another page seen): Streamlit forgets a widget a run does not draw, the box came back holding
    the example, which differs from the message last answered, and was answered as a turn nobody sent."""
    if MESSAGE not in st.session_state and st.session_state.get(SENT) is not None:
        st.session_state[MESSAGE] = st.session_state[SENT]


def _answer_again(name: str) -> None:
    """The last turn's message to be answered again with the settings as they are now, in place of its reply: the
    box's text, unchanged, would send nothing (Enter on the same text is no new value)."""
    st.session_state[AGAIN] = name


def _exchange(message: str) -> Any:
    """The user's message (plain text: never Markdown) and the container of the reply."""
    with st.chat_message("user"):
        st.text(message)
    return st.chat_message("assistant")


@st.fragment
def chat_section(name: str, tm: Any) -> None:
    """The page's chat section: a conversation with an instruction-tuned model, opened on demand; a base model has
    no turns to chat in, which the section says, naming the loaded models that have them."""
    T = texts("language_model")
    _keep_message()
    keep_open(*SETTINGS)  # through a model without a template, or the section closed: the chat's settings kept
    if not tm.chat_template:
        section(T, "chat", intro=False)
        loaded = models.shipped("text", kind="causal")  # loaded at the server's start: read at no cost
        st.info(view.no_chat(tm, view.chat_models(loaded, cached_model), lang=lang()))
    elif box := lazy_section(T, "chat", key="lm_open_chat"):
        with box, friendly_errors():
            conversation(name, tm)


def conversation(name: str, tm: Any) -> None:
    """The chat's settings, its turns, a new turn when the message box holds a new text, and the last reply's
    attention."""
    T, language = texts("language_model"), lang()
    example = view.chat_example(tm, lang=language)
    c = st.columns([4, 1])
    message = c[0].text_input(T("chat_message"), example.text, max_chars=2000, key=MESSAGE, help=T("chat_message_help"))
    if example.note and message == example.text:  # why the page's language is not the example's
        c[0].caption(example.note)
    top, usual = view.chat_new_tokens(tm, example.text)  # a short context leaves the conversation room
    keep_within("lm_chat_new", 1, top)  # kept from another model, whose context may be longer
    new = c[1].slider(T("new_tokens"), 1, top, usual, key="lm_chat_new") if top > 1 else top
    c = st.columns(4)
    method = c[0].radio(T("method"), view.METHODS, format_func=lambda m: T(f"method_{m}"), key="lm_chat_method")
    greedy = method == "greedy"  # nothing drawn: no temperature to set, no seed
    temperature = c[1].slider(T("temperature"), 0.1, 2.0, 0.8, 0.1, key="lm_chat_temp", disabled=greedy)
    top_k = c[2].number_input(T("top_k"), 1, 200, 20, key="lm_chat_topk", disabled=method != "top_k")
    seed = c[3].number_input(texts("common")("seed"), 0, 1_000_000, 0, key="lm_chat_seed", disabled=greedy)
    turns, last = st.session_state.setdefault(TURNS, {}).setdefault(name, []), st.session_state.setdefault(LAST, {})
    again = st.session_state.pop(AGAIN, None) == name and bool(turns)  # the last turn's reply, written anew
    for turn in turns[:-1] if again else turns:
        with _exchange(turn.message):
            st.code(turn.reply, language=None, wrap_lines=True)
            st.caption(view.chat_stop(turn, lang=language))
    sampling = (method, float(temperature), int(top_k), int(seed))
    if again:
        _answer(name, tm, turns[-1].message, new, sampling, again=True)
    elif not message.strip():  # nothing to answer: what to do next, not an error
        st.session_state[SENT] = message  # the last message typed again after it is a new turn
        st.info(T("chat_write"))
    elif message != st.session_state.get(SENT):
        st.session_state[SENT] = message  # answered once: a rerun for another widget writes no new turn
        _answer(name, tm, message, new, sampling)
    with st.container(horizontal=True):
        st.button(
            T("chat_again"),
            key="lm_chat_again",
            on_click=_answer_again,
            args=(name,),
            disabled=not turns,
            help=T("chat_again_help"),
        )
        st.button(T("chat_new"), key="lm_chat_clear", on_click=_new_conversation, args=(name,), disabled=not turns)
    if name in last:
        _last_reply(tm, *last[name])


def _answer(
    name: str, tm: Any, message: str, new: int, sampling: tuple[str, float, int, int], *, again: bool = False
) -> None:
    """A new turn: ``message`` read after the conversation so far (what a kept conversation holds served from its
    cache), its reply streamed as it is written, then kept with what it read. ``again``: ``message`` is the last
    turn's, answered anew after the turns before it; the new reply takes the old one's place once written."""
    turns, last = st.session_state[TURNS][name], st.session_state[LAST]
    history = turns[:-1] if again else turns
    prompt = view.chat_prompt(tm, history, message, new)
    kept, steps = _prefixes(name), Trace()
    cache = kept.cache_for(prompt.ids)
    served = cache.seen
    with _exchange(message):
        box = st.empty()
        for reply in view.chat_replies(tm, prompt, new, *sampling, cache=cache, trace=steps):
            box.code(reply.text, language=None, wrap_lines=True)
        turn = view.chat_turn(tm, message, reply, new)
        turns[len(history) :] = [turn]
        st.caption(view.chat_stop(turn, lang=lang()))
    kept.keep([*prompt.ids, *reply.ids], cache)
    last[name] = (prompt, view.chat_attention(tm, prompt, reply, steps), served)


def _last_reply(tm: Any, prompt: Any, att: Any, served: int) -> None:
    """What the model read for the last reply (and what was left out, what an earlier turn's cache served), and
    what one of its tokens attended to."""
    T, language = texts("language_model"), lang()
    for note in view.chat_notices(prompt, lang=language):
        st.warning(note)
    if typed := view.chat_markers(prompt, lang=language):
        st.info(typed)
    st.markdown(T("chat_prompt", n=len(prompt.ids)))
    st.caption(view.chat_served(len(prompt.ids), served, lang=language))
    st.code(tm.decode(prompt.ids), language=None, wrap_lines=True)
    st.code(view.token_strip(att.tokens[: att.prompt_len]), language=None, wrap_lines=True)
    if note := split_bytes_note(att.tokens[: att.prompt_len], language):
        st.caption(note)
    st.markdown(T("chat_read_intro"))
    c = st.columns(3)
    produced = att.produced
    token = c[0].selectbox(
        T("chat_token"), range(len(produced)), format_func=lambda i: f"{i}: {produced[i]}", key="lm_chat_token"
    )
    names = model_facts.layer_names(tm, language)  # Gemma 3's global layers named as such, as in the sections above
    layer = c[1].selectbox(T("layer"), range(att.rows.shape[0]), format_func=names.__getitem__, key="lm_chat_layer")
    head = select_or_none(c[2], T("head"), att.rows.shape[1], T("mean_heads"), key="lm_chat_head")
    read = view.chat_read(att, token, layer, head, lang=language)
    metrics(read.shares)
    show(read.step, read.rows)
