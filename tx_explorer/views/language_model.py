"""Language modelling page (lecture §6): embeddings, the causal mask, the next-token distribution, per-token loss,
and step-by-step generation with the attention behind each new token."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from torch import Tensor

from tx_explorer import masks
from tx_explorer.analysis import lm
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.analysis.heads import max_tokens
from tx_explorer.families.text import TextModel
from tx_explorer.interop.checkpoint import CHAT_FILES
from tx_explorer.modules.cache import KVCache
from tx_explorer.trace import Trace
from tx_explorer.views import (
    Panel,
    axes,
    listed,
    model_facts,
    rounding,
    sentences,
    split_bytes,
    texts,
    token_strip,
)
from tx_explorer.views.multihead import heavy  # noqa: F401  (the page's long-text test: the same maps, the same tokens)
from tx_explorer.viz import bars as vb
from tx_explorer.viz import charts, style
from tx_explorer.viz.heatmap import X_TICKS, heatmap
from tx_explorer.viz.style import safe_labels

PAGE = "language_model"
METHODS = ("greedy", "temperature", "top_k")
TOP = 15  # next-token candidates shown
PAGE_X_TICKS = 2 * X_TICKS  # token labels a page-wide chart's x axis holds upright without touching
CLIP_PERCENTILE = 99.5  # the embedding map's colours end at this percentile of |value|: one spike washed out the rest
LATEX = (
    r"p(x_{t+1}\mid x_1,\dots,x_t)=\mathrm{softmax}(h_t W_{\text{head}}),"
    r"\quad W_{\text{head}}\in\mathbb{R}^{D\times V},"
    r"\qquad \mathcal{L}=-\frac{1}{N-1}\sum_{t}\ln p(x_{t+1}\mid x_{\le t})"
)


def read(tm: TextModel, text: str, k: int = TOP, alone: Callable[[Sequence[int]], Tensor] | None = None) -> lm.Reading:
    """Tokens, embeddings, every map, the top-k next tokens at each position and the per-token losses (``alone``:
    the opening's states as the page keeps them, see :func:`lm.prefix_invariance`)."""
    return lm.read(tm, text, k, alone)


def alone_states(tm: TextModel, ids: Sequence[int]) -> Tensor:
    """The states the prefix check reads (:func:`lm.alone_states`)."""
    return lm.alone_states(tm, ids)


def _sampling(method: str, temperature: float, top_k: int, seed: int) -> dict:
    """The sampling settings of one of :data:`METHODS`, as :meth:`TextModel.stream` takes them."""
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; use one of {METHODS}")
    top = top_k if method == "top_k" else None
    return dict(greedy=method == "greedy", temperature=temperature, top_k=top, seed=seed)


def _token_bars(labels: Sequence[str], name: str, values: np.ndarray, **titles: str) -> go.Figure:
    """One bar per token of a page-wide chart: every k-th token named on the x axis when all of them would touch
    (a chat's 89 ran into one block), each bar's token named in its hover."""
    fig = charts.bars(labels, {name: values}, x_ticks=PAGE_X_TICKS, **titles)
    return fig.update_traces(hovertext=safe_labels(labels), hovertemplate="%{hovertext}<br>%{y:.4f}<extra></extra>")


def _to_its_max(values: np.ndarray, rows: Sequence[str], cols: Sequence[str], *, lang: str, **titles: str) -> go.Figure:
    """Attention weights coloured from 0 to their own largest, which the colour bar states: on the fixed 0–1 scale
    a step's weights, at most 0.1–0.4 off the first token, were all one dark colour."""
    top = float(np.nanmax(values, initial=0.0)) or 1.0
    fig = heatmap(values, rows, cols, zmax=top, **titles)  # labels raw: heatmap escapes them itself
    bar = texts(PAGE, lang)("weight_to_max", max=f"{top:.2g}")
    return fig.update_traces(colorbar=dict(title=dict(text=bar)))


# A label made of bytes only, one of them past ASCII: part of a character whose UTF-8 bytes the tokenizer split
# (tx_explorer.data.tokenizer writes them \xNN). An invisible character alone (\x0d) is not one.
# The "New tokens" sliders' (top, default) before a model's room lowers them (:func:`new_tokens`): a generation's steps
# are all traced and drawn; a chat reply streams, its rows kept step by step.
GEN_NEW = (64, 24)
CHAT_NEW = (128, 48)


def new_tokens(tm: TextModel, most: int, usual: int) -> tuple[int, int]:
    """A "New tokens" slider's top and default on ``tm``: ``most`` and ``usual``, or fewer where the page's token
    limit (:func:`lm.token_limit`: the context, or the maps' budget) leaves less room: the top one token short of it
    (the prompt keeps one), the default half of it, so that the prompt keeps as many tokens as the model writes
    (a Qwen2 of 16 tokens' context: 15 and 8)."""
    limit = lm.token_limit(tm)
    return min(most, limit - 1), min(usual, limit // 2)


@dataclass(frozen=True)
class ChatExample:
    text: str  # the message the chat box opens with, answered on opening
    note: str | None  # why it is in English on a page in another language, else None


def chat_example(tm: TextModel, *, lang: str = "en") -> ChatExample:
    """The message the chat opens with: in the page's language, or in English where ``tm``'s tokenizer splits that
    language's example into bytes of its characters, a sign that little of the language was in the text it was
    trained on (SmolLM2 reads the Chinese question as 17 tokens, 14 of them bytes; the English one as 7), which the
    note says with this model's counts."""
    english = texts(PAGE, "en")("chat_default")
    T = texts(PAGE, lang)
    own = T("chat_default")
    labels = tm.labels(tm.typed.ids(own))
    if own == english or not (split := split_bytes(labels)):
        return ChatExample(own, None)
    counts = dict(n=len(labels), split=split, english=len(tm.typed.ids(english)))
    return ChatExample(english, T("chat_default_english", model=tm.name, text=own, **counts))


def chat_new_tokens(tm: TextModel, example: str) -> tuple[int, int]:
    """The chat's "New tokens" slider's top and default on ``tm``: :data:`CHAT_NEW`, or fewer where the page's token
    limit leaves less room (:func:`new_tokens`), and fewer again where the chat template's own tokens take it: the top
    leaves a one-token message its turn (any system message and the turn markers: a higher one could only be
    refused), the default leaves room for ``example``, the message the box opens with and the chat answers on
    opening, so that the chat never opens on a message of its own cut short (a 64-token GGUF whose template and
    example take 39 tokens, 17 of them the template's: 46 and 25, where half the context, 32, cut the example)."""
    top, usual = new_tokens(tm, *CHAT_NEW)
    limit = lm.token_limit(tm)
    try:
        whole = lm.chat_tokens(tm, example)
    except ValueError:  # a template that refuses a conversation of one message: the chat says so when it runs
        return top, usual
    markup = whole - len(tm.typed.ids(example))
    top = max(1, min(top, limit - markup - 1))
    return top, max(1, min(usual, top, limit - whole))


def generate(
    tm: TextModel,
    prompt: str,
    new: int = GEN_NEW[1],
    method: str = "greedy",
    temperature: float = 0.8,
    top_k: int = 20,
    seed: int = 0,
) -> lm.Generation:
    """``new`` tokens after ``prompt`` (greedy, temperature or top-k sampling), with the maps of every step."""
    sampling = _sampling(method, temperature, top_k, seed)
    return lm.generate(tm, tm.encode(prompt, max_tokens(tm)).ids, new, **sampling)


def continuation(tm: TextModel, g: lm.Generation) -> str:
    """ "prompt ⟶ continuation" as text: the prompt as it was typed, without the special tokens its encoding added
    (Gemma 3's ``<bos>``; the token lists show them), the continuation as generated."""
    prompt = [i for i in g.ids[: g.prompt_len] if i not in tm.special_ids]
    return tm.decode(prompt) + " ⟶ " + tm.decode(g.ids[g.prompt_len :])


LOOP_RUN = 4  # the loop check counts repeated runs of this many tokens (a repeated word pair is common prose)


def loop_check(g: lm.Generation, *, lang: str = "en", escape: Callable[[str], str] = lambda s: s) -> str | None:
    """Whether the continuation repeats itself, measured (:func:`lm.repeats`): how many of its tokens end a run of
    :data:`LOOP_RUN` tokens it had already written, and its longest span written twice; None for a continuation
    too short to hold a run twice. ``escape``: the page's Markdown escape for the span's tokens."""
    new = g.ids[g.prompt_len :]
    if len(new) <= LOOP_RUN:
        return None
    T, found = texts(PAGE, lang), lm.repeats(new, LOOP_RUN)
    if not found.copied:
        return T("gen_loop_none", n=LOOP_RUN, new=len(new))
    start, length = found.span
    span = escape(token_strip(g.tokens[g.prompt_len + start : g.prompt_len + start + length]))
    key = "gen_loop_one" if found.copied == 1 else "gen_loop"
    return T(key, copied=found.copied, new=len(new), n=LOOP_RUN, span=span, k=length)


@dataclass(frozen=True)
class Turn:
    """One exchange of a conversation, as the session keeps it."""

    message: str
    reply: str
    stop: str  # why the reply ended: lm.END_OF_TURN or lm.LIMIT
    new: int  # the new-token limit it was written under
    end: str | None = None  # the special token the model stopped at, where it is not the template's end of a turn


def chat_turn(tm: TextModel, message: str, reply: lm.Reply, new: int) -> Turn:
    """``reply`` to ``message`` as the session keeps it, with the special token it stopped at where that token is not
    the one the template ends a turn with (the chat stops at any special token: SmolLM2 may write
    ``<|endoftext|>``)."""
    end = None
    if reply.end is not None and reply.end != lm.end_of_turn(tm):
        end = tm.labels([reply.end])[0]
    return Turn(message, reply.text, reply.stop, new, end)


def chat_prompt(tm: TextModel, turns: Sequence[Turn], message: str, new: int) -> lm.ChatPrompt:
    """The conversation so far and ``message`` as the model reads them (oldest turns dropped to fit the page's
    token cap, :func:`lm.token_limit`). A turn whose reply was empty is left out: a template refuses an empty
    message."""
    history = [
        {"role": role, "content": text}
        for t in turns
        if t.reply.strip()
        for role, text in (("user", t.message), ("assistant", t.reply))
    ]
    return lm.chat_prompt(tm, history, message, new, lm.token_limit(tm))


def chat_replies(
    tm: TextModel,
    prompt: lm.ChatPrompt,
    new: int,
    method: str = "greedy",
    temperature: float = 0.8,
    top_k: int = 20,
    seed: int = 0,
    *,
    cache: KVCache | None = None,
    trace: Trace | None = None,
) -> Iterator[lm.Reply]:
    """The reply as it grows (greedy, temperature or top-k sampling, the same text for the same seed), ending at
    the template's end-of-turn token or after ``new`` tokens; the last one says which. ``cache``: the conversation
    so far, already read (:class:`lm.Prefixes`); ``trace``: for :func:`chat_attention`."""
    sampling = _sampling(method, temperature, top_k, seed)
    return lm.replies(tm, prompt.ids, new, stop=tm.special_ids, cache=cache, trace=trace, **sampling)


def chat_models(names: Sequence[str], load: Callable[[str], TextModel]) -> list[str]:
    """Those of ``names`` whose model (``load(name)``) has a chat template: the ones the chat section can talk to."""
    return [n for n in names if load(n).chat_template]


def no_chat(tm: TextModel, chatty: Sequence[str], *, lang: str = "en") -> str:
    """Why the chat section has nothing to talk to on ``tm`` (a model without a chat template), and which models
    have one (``chatty``, :func:`chat_models`). A checkpoint folder is not called a base model: an instruction-tuned
    one saved without its template reads the same, so the files where the loader looked are named instead."""
    T = texts(PAGE, lang)
    others = T("chat_others", names=listed(chatty, lang)) if chatty else T("chat_others_none")
    if (source := tm.info.get("source")) and Path(source).is_dir():  # bundled models have none
        why = T("chat_folder_none", model=tm.name, files=listed((f"`{f}`" for f in CHAT_FILES), lang))
    else:
        why = T("chat_none", model=tm.name)
    return sentences([why, others], lang)


def refusal(tm: TextModel, *, lang: str = "en") -> str | None:
    """The page's message for a model it cannot read (an encoder: it predicts no next token), else None."""
    if tm.kind == "causal":
        return None
    return texts(PAGE, lang)("not_causal", named=model_facts.named(tm, lang))


def chat_notices(prompt: lm.ChatPrompt, *, lang: str = "en") -> list[str]:
    """What was left out of what the model read for the last reply: the oldest turns, or the end of a message too
    long alone (and then every earlier turn, said only where there was one), with what would have it read whole."""
    T = texts(PAGE, lang)
    if prompt.cut is not None:
        said = [
            T("chat_cut_one" if prompt.cut == 1 else "chat_cut", kept=prompt.cut, limit=prompt.limit, new=prompt.new)
        ]
        if prompt.dropped:
            said.append(T("chat_cut_turns_one" if prompt.dropped == 1 else "chat_cut_turns", n=prompt.dropped))
        return [sentences([*said, T("chat_cut_fix")], lang)]
    dropped = "chat_dropped_one" if prompt.dropped == 1 else "chat_dropped"
    return [T(dropped, n=prompt.dropped, limit=prompt.limit)] if prompt.dropped else []


def chat_markers(prompt: lm.ChatPrompt, *, lang: str = "en") -> str | None:
    """What became of the special tokens' text typed in the new message (``<|im_end|>``): read as the characters
    typed, never as the template's markers. None when the message holds none."""
    if not prompt.markers:
        return None
    T = texts(PAGE, lang)
    markers = listed([f"`{m}`" for m in prompt.markers], lang, last="and")
    return T("chat_markers_one" if len(prompt.markers) == 1 else "chat_markers", markers=markers)


def chat_served(n: int, served: int, *, lang: str = "en") -> str:
    """How many of the prompt's ``n`` tokens an earlier turn's cache served (``served``), and how many were read
    (one, the last, when a kept conversation held all the others: its logits start the reply)."""
    T = texts(PAGE, lang)
    if not served:
        return T("chat_served_none", n=n)
    key = "chat_served_one" if served == 1 else "chat_served_last" if n - served == 1 else "chat_served"
    return T(key, served=served, read=n - served)


def chat_stop(turn: Turn, *, lang: str = "en") -> str:
    """Why the reply stopped, in words: the template's end of a turn, another special token (named), or the limit."""
    T = texts(PAGE, lang)
    if turn.stop != lm.END_OF_TURN:
        return T("chat_stop_limit", new=turn.new)
    return T("chat_stop_end") if turn.end is None else T("chat_stop_special", token=turn.end)


def chat_attention(tm: TextModel, prompt: lm.ChatPrompt, reply: lm.Reply, trace: Trace) -> lm.ReplyAttention:
    """What each token of ``reply`` read, from the trace its steps recorded (:func:`lm.reply_attention`)."""
    return lm.reply_attention(tm, prompt, reply, trace)


@dataclass(frozen=True)
class ChatRead:
    shares: dict[str, str]  # the step's weight on the earlier turns, the new message's turn and the reply so far
    step: Panel  # the weights of one reply token's step over what it could read
    rows: Panel  # every reply token's row


def chat_read(
    att: lm.ReplyAttention, token: int = 0, layer: int = 0, head: int | None = None, *, lang: str = "en"
) -> ChatRead:
    """What reply token ``token`` read in the history, the new message and the reply before it (one head, or the
    mean of the heads)."""
    T = texts(PAGE, lang)
    w = att.row(token, layer, head)
    ctx = [f"{i}: {t}" for i, t in enumerate(att.tokens[: len(w)])]
    produced = safe_labels(att.produced)
    fig = _token_bars(
        ctx,
        T("weight"),
        w,
        x_title=T("context"),
        y_title=T("weight"),
        title=T("chat_step_title", token=produced[token], i=token),
    )
    rows = att.rows[layer].astype(np.float32)
    rows = rows.mean(axis=0) if head is None else rows[head]
    grid = _to_its_max(
        rows,
        [f"{i}: {t}" for i, t in enumerate(att.produced)],
        att.tokens,
        lang=lang,
        title=T("chat_rows_title"),
        x_title=T("context"),
        y_title=T("chat_produced"),
    )
    earlier, message, reply = att.parts(token, layer, head)
    shares = {T("chat_on_history"): f"{earlier:.0%}", T("chat_on_message"): f"{message:.0%}"}
    return ChatRead(
        {**shares, T("chat_on_reply"): f"{reply:.0%}"}, Panel("lm_chat_read", fig, w), Panel("lm_chat_rows", grid, rows)
    )


def tied(tm: TextModel) -> bool:
    """Whether the model's output layer is its embedding matrix (the embeddings section says which)."""
    return lm.tied_output(tm)


def embed_intro(tm: TextModel, *, lang: str = "en") -> str:
    """The embeddings section's prose: the lookup, whether the output layer is the same matrix, and the scale the
    model puts on the rows before its first block, where it has one."""
    T, cfg = texts(PAGE, lang), tm.config
    said = [T("embed_intro", vocab=cfg.vocab_size, dim=cfg.dim), T("embed_tied" if tied(tm) else "embed_untied")]
    if cfg.embed_scale:  # Gemma: the first block reads the rows × √D, not the rows drawn
        said.append(T("embed_scaled", dim=cfg.dim, scale=f"{math.sqrt(cfg.dim):.1f}"))
    return sentences(said, lang)


def embeddings(r: lm.Reading, dim: int, *, lang: str = "en") -> Panel:
    """Each token's embedding row, the colours clipped at :data:`CLIP_PERCENTILE` of |value| (Gemma 3's ``<bos>``
    row holds one entry several times any other's), the hover giving each value."""
    T = texts(PAGE, lang)
    rows = [f"{t} (id {i})" for t, i in zip(r.tokens, r.ids)]  # the heatmap escapes them: <b> stays text
    size = np.abs(r.embeddings)
    top = float(size.max())
    limit = float(np.percentile(size, CLIP_PERCENTILE)) or top or 1.0
    fig = heatmap(
        r.embeddings,
        rows,
        [str(d) for d in range(r.embeddings.shape[1])],
        title=T("embed_title_one" if len(r.tokens) == 1 else "embed_title", n=len(r.tokens), dim=dim),
        x_title=T("dims"),
        y_title=T("tokens_axis"),
        colorscale=style.DIVERGING,
        zmin=-limit,
        zmax=limit,
        zmid=0.0,
    )
    bar = T("embed_clipped", limit=f"{limit:.2g}", pct=f"{CLIP_PERCENTILE:g}", max=f"{top:.2g}")
    return Panel("lm_embed", fig.update_traces(colorbar=dict(title=dict(text=bar))), r.embeddings)


@dataclass(frozen=True)
class Causal:
    mask: Panel
    weights: Panel  # one head's weights: zero above the diagonal
    check: str  # the largest weight above the diagonal over every layer and head
    prefix: str  # the prefix's logits alone vs inside the whole text (§6: training and inference agree)
    checked: bool  # False for a one-token text: no future token to hide, nothing appended to a prefix


def causal(r: lm.Reading, layer: int = 0, head: int = 0, *, window: int | None = None, lang: str = "en") -> Causal:
    """The mask ``layer`` applies beside one head's weights, and the check over all heads. ``window``: the layer's
    sliding window (keys a query sees, itself included; :func:`layer_window`), drawn into its mask and checked on
    the layer's heads where the text is longer than it."""
    T, ax, toks = texts(PAGE, lang), axes(lang), r.tokens  # heatmap escapes its labels itself
    # the numbers below as the prose writes them (:func:`rounding`): an exact 0 is "0", not "0.0e+00", and "3.1e−05"
    # has a true minus
    n = len(toks)
    banded = window is not None and n > window  # a window that hides some earlier key of this text
    mask = (masks.sliding_window(n, window) if banded else masks.causal(n)).float().numpy()
    w = r.maps[layer, head]
    leak = lm.above_diagonal_max(r.maps)
    title = T("mask_title_window", window=f"{window:,}", layer=layer) if banded else T("mask_title")
    panels = (
        Panel("lm_mask", heatmap(mask, toks, toks, title=title, **ax), mask),
        Panel("lm_weights", heatmap(w, toks, toks, title=T("weights_title", layer=layer, head=head), **ax), w),
    )
    if len(toks) == 1:  # a verdict here would rest on no evidence: an empty triangle, a prefix that is the text
        return Causal(*panels, T("mask_check_one"), T("prefix_single"), checked=False)
    one = "_one" if r.prefix_len == 1 else ""
    check = T("mask_check", value=rounding(leak), layers=r.maps.shape[0], heads=r.maps.shape[1])
    if banded:  # the earlier keys the window hides (causal, outside the band): weight 0 on each head too
        hidden = (masks.causal(n) & ~masks.sliding_window(n, window)).numpy()  # (N, N)
        beyond = float(np.asarray(r.maps[layer])[..., hidden].max(initial=0.0))
        said = T("window_check", layer=layer, window=f"{window:,}", heads=r.maps.shape[1], value=rounding(beyond))
        check = sentences([check, said], lang)
    elif window is not None:  # a local layer whose window this text does not pass: say why its mask is causal
        check = sentences([check, T("window_within", layer=layer, window=f"{window:,}", n=n)], lang)
    return Causal(
        *panels,
        check,
        T(
            prefix_verdict(r.prefix_delta, r.prefix_scale, r.maps.shape[0]),
            part=T(f"prefix_part{one}", k=r.prefix_len),
            positions=T(f"prefix_positions{one}", k=r.prefix_len),
            n=len(r.tokens),
            value=rounding(r.prefix_delta),
            relative=rounding(r.prefix_delta / max(r.prefix_scale, 1e-30)),
        ),
        checked=True,
    )


FLOAT32_EPS = 2.0**-23  # float32's relative rounding step


def layer_window(tm: TextModel, layer: int) -> int | None:
    """The sliding window ``layer`` of ``tm`` applies (every layer's on Mistral, a local one's on Gemma), else None."""
    return mg.layer_window(tm.config, layer)


def prefix_verdict(delta: float, scale: float, layers: int) -> str:
    """The locale key for the prefix check: exactly zero, float32 rounding, or not. Rounding of products of another
    length compounds layer by layer, so the bound grows with depth: 8 ε₃₂ per layer of the largest logit (4 layers:
    3.8e-6; SmolLM2's 30: 2.9e-5, where 2–3e-6 is measured)."""
    if delta == 0:
        return "prefix_exact"
    return "prefix_close" if delta <= 8 * FLOAT32_EPS * layers * scale else "prefix_moved"


@dataclass(frozen=True)
class NextToken:
    candidates: Panel  # the top candidates, the actual next token highlighted
    actual: str | None  # the token that follows in the text (None at its end)
    loss: float | None  # −ln p(actual)

    @property
    def probability(self) -> float | None:
        return None if self.loss is None else float(np.exp(-self.loss))


def next_token(r: lm.Reading, position: int | None = None, *, lang: str = "en") -> NextToken:
    """The top candidates for the token after ``position`` (default: the last) and the actual one's loss."""
    T, toks, n = texts(PAGE, lang), safe_labels(r.tokens), len(r.tokens)
    pos = n - 1 if position is None else position
    if not 0 <= pos < n:
        raise ValueError(f"position {pos} is outside the text's {n} tokens")
    actual = r.ids[pos + 1] if pos + 1 < n else None
    hit = [i for i, t in enumerate(r.top_ids[pos]) if t == actual]
    fig = vb.topk_bars(
        r.top_labels[pos],
        r.top_probs[pos],
        title=T("next_title", token=toks[pos], pos=pos),
        highlight=hit[0] if hit else None,
        x_title=T("probability"),
    )
    follows = actual is not None
    return NextToken(
        Panel("lm_next", fig, r.top_probs[pos]),
        r.tokens[pos + 1] if follows else None,
        float(r.losses[pos]) if follows else None,
    )


def losses(r: lm.Reading, *, lang: str = "en") -> tuple[dict[str, str], Panel] | None:
    """Mean loss and perplexity, and each token's loss (None for a single token: nothing is predicted)."""
    T = texts(PAGE, lang)
    if len(r.tokens) < 2:
        return None
    mean = float(r.losses.mean())
    labels = [f"{i}: {t}" for i, t in enumerate(r.tokens)]
    fig = _token_bars(labels[1:], T("loss"), r.losses, title=T("loss_title"), x_title=T("predicted"), y_title=T("nats"))
    return {T("mean_loss"): f"{mean:.3f}", T("perplexity"): f"{np.exp(mean):.1f}"}, Panel("lm_loss", fig, r.losses)


def generation(
    g: lm.Generation, step: int = 1, layer: int = 0, head: int | None = None, *, lang: str = "en"
) -> tuple[Panel, Panel]:
    """Where generated token ``step`` looked (one head, or the mean of the heads), and every new token's row."""
    T = texts(PAGE, lang)
    maps = g.maps[layer].mean(axis=0) if head is None else g.maps[layer, head]
    row = g.prompt_len + step - 2  # the position whose prediction produced generated token `step`
    gen_toks = safe_labels(g.tokens)
    ctx = [f"{i}: {t}" for i, t in enumerate(g.tokens[: row + 1])]
    fig = _token_bars(
        ctx,
        T("weight"),
        maps[row, : row + 1],
        x_title=T("context"),
        y_title=T("weight"),
        title=T("gen_step_title", token=gen_toks[row + 1], step=step),
    )
    rows_new = maps[g.prompt_len - 1 : -1]
    grid = _to_its_max(  # labels raw: heatmap escapes them (escaped twice, <|im_end|> showed as &lt;|im_end|&gt;)
        rows_new,
        [f"→ {t}" for t in g.tokens[g.prompt_len :]],
        g.tokens,
        lang=lang,
        title=T("gen_map_title"),
        x_title=T("context"),
        y_title=T("generated"),
    )
    return Panel("lm_gen_step", fig, maps[row, : row + 1]), Panel("lm_gen_map", grid, rows_new)
