"""Reading a causal language model (§6): embeddings, next-token distributions, per-token loss, generation.

Every function takes logits or a :class:`~tx_explorer.families.text.TextModel` and returns numbers; nothing
here draws.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from tx_explorer.analysis.heads import max_tokens
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.cache import KVCache, common_prefix
from tx_explorer.trace import Trace


def embedding_rows(tm: TextModel, ids: list[int]) -> np.ndarray:
    """The embedding lookup (§6.1): row ``id`` of the ``[V, D]`` token matrix for each token → ``[N, D]``."""
    return tm.model.embed.tok_embed.weight[torch.as_tensor(ids)].detach().cpu().numpy()


def tied_output(tm: TextModel) -> bool:
    """Whether the output layer's ``[V, D]`` matrix is the token embedding matrix (weight tying, GPT-2; Llama and
    Mistral keep two), read from the tensors rather than the config."""
    head, embed = tm.model.head.weight, tm.model.embed.tok_embed.weight
    if head is embed:  # one parameter (as a tied model is built): no need to compare 28M numbers per rerun
        return True
    return head.shape == embed.shape and bool(torch.equal(head, embed))


def token_losses(logits: Tensor, ids: list[int]) -> np.ndarray:
    """Teacher forcing: −ln p(x_{t+1} | x_≤t) for t = 0 … N−2 → ``[N − 1]`` nats (nothing predicts token 0)."""
    if len(ids) < 2:
        raise InputError("loss_two_tokens")
    target = torch.as_tensor(ids[1:], dtype=torch.long)
    return F.cross_entropy(logits[0, :-1].float(), target, reduction="none").double().numpy()


@dataclass(frozen=True)
class Generation:
    """A prompt and its continuation. Row t of the causal map over ``ids`` is what token t attended to
    when the model produced token t + 1 — the attention of each generated token."""

    ids: list[int]
    tokens: list[str]
    prompt_len: int
    prompt_cut: bool  # the prompt's start was dropped to leave room for the new tokens
    limit: int  # tokens prompt + continuation may hold: the context, or fewer to keep every map (max_tokens)
    maps: np.ndarray  # [L, H, T, T] over prompt + continuation


def token_limit(tm: TextModel) -> int:
    """Tokens a prompt and its continuation (a generation, or a conversation and its reply) may hold on the page:
    the context, or fewer so that every step's map can be kept (:func:`max_tokens`; SmolLM2: 373)."""
    return min(tm.max_len, max_tokens(tm))


def generate(
    tm: TextModel,
    prompt: list[int],
    max_new_tokens: int,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> Generation:
    """Continue ``prompt`` within one context window (so the trace of the result shows every step exactly), with
    our KV cache (:meth:`TextModel.stream`); the prompt's start is dropped if it leaves no room."""
    limit = token_limit(tm)
    if not 1 <= max_new_tokens < limit:
        raise InputError("new_tokens_range", limit=limit - 1, value=max_new_tokens)
    kept = prompt[-(limit - max_new_tokens) :]
    sampling = dict(greedy=greedy, temperature=temperature, top_k=top_k, seed=seed)
    ids = [*kept, *tm.stream(kept, max_new_tokens, **sampling)]
    trace = tm.maps(ids)
    return Generation(
        ids=ids,
        tokens=tm.labels(ids),
        prompt_len=len(kept),
        prompt_cut=len(kept) < len(prompt),
        limit=limit,
        maps=trace.stack()[:, 0].numpy(),
    )


@dataclass(frozen=True)
class Repeats:
    """How much a continuation repeats itself (the loop greedy decoding can fall into, §6.3)."""

    tokens: int  # the continuation's length
    n: int  # the run length counted
    copied: int  # tokens that end a run of ``n`` tokens the continuation had already written
    span: tuple[int, int] | None  # (start, length) of its longest run written twice without overlap, if copied


def repeats(ids: Sequence[int], n: int = 4) -> Repeats:
    """Count the tokens of the continuation ``ids`` that end an ``n``-token run it had written before, and find
    its longest run written twice without overlapping (where any ``n``-token run repeats)."""
    ids = list(ids)
    seen: set[tuple[int, ...]] = set()
    copied = 0
    for end in range(n, len(ids) + 1):
        run = tuple(ids[end - n : end])
        copied += run in seen
        seen.add(run)
    span = None
    if copied:
        for length in range(len(ids) // 2, 1, -1):  # the longest first
            first: dict[tuple[int, ...], int] = {}
            for i in range(len(ids) - length + 1):
                start = first.setdefault(tuple(ids[i : i + length]), i)
                if i - start >= length:  # written again after its first copy ended
                    span = (start, length)
                    break
            if span:
                break
    return Repeats(len(ids), n, copied, span)


END_OF_TURN, LIMIT = "end_of_turn", "limit"  # why a reply stopped


@dataclass(frozen=True)
class Reply:
    """A reply as it grows: its tokens (the end-of-turn token not among them) and text; ``stop`` says why it ended
    (:data:`END_OF_TURN` or :data:`LIMIT`), None while it grows."""

    ids: list[int]
    text: str
    stop: str | None = None
    end: int | None = None  # the end-of-turn token it stopped at


def replies(
    tm: TextModel,
    prompt: Sequence[int],
    max_new_tokens: int,
    *,
    stop: frozenset[int],
    greedy: bool = True,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    cache: KVCache | None = None,
    trace: Trace | None = None,
) -> Iterator[Reply]:
    """The reply to ``prompt`` as it grows, one :class:`Reply` per new token, with our KV cache
    (:meth:`TextModel.stream`: the prompt read once, then one step per token); the last one says why it stopped. A
    text is held back while it ends inside a character (a Chinese character is several byte tokens).

    ``cache``: one holding the prompt's first tokens already (:class:`Prefixes`), filled further; ``trace``: the
    steps' attention rows, for :func:`reply_attention`."""
    out: list[int] = []
    shown = ""
    sampling = dict(greedy=greedy, temperature=temperature, top_k=top_k, seed=seed)
    for token in tm.stream(prompt, max_new_tokens, stop=stop, cache=cache, trace=trace, **sampling):
        if token in stop:
            yield Reply(out, tm.decode(out), END_OF_TURN, token)
            return
        out.append(token)
        text = tm.decode(out)
        if len(out) == max_new_tokens:  # the stream ends here
            yield Reply(out, text, LIMIT)
        elif not text.endswith("\ufffd") and text != shown:
            yield Reply(list(out), text)
            shown = text


class Prefixes:
    """The KV caches of the last few conversations, by the tokens each holds: a new turn's prompt starts with the
    conversation so far, so it reads only what follows the longest one it shares (a chat server's prefix cache).
    One per model, shared by every session (a token's keys and values depend on it and the tokens before it alone,
    so a shared prefix gives the same numbers); ``size`` caches at most (SmolLM2 at 373 tokens: 17 MB each)."""

    def __init__(self, size: int = 8) -> None:
        self._kept: OrderedDict[tuple[int, ...], KVCache] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def cache_for(self, ids: Sequence[int]) -> KVCache:
        """A new cache holding the longest kept prefix of ``ids`` (all but the last token, whose logits the reply
        needs), or an empty one."""
        with self._lock:
            best, found = 0, None
            for held, cache in self._kept.items():
                n = common_prefix(held, ids[:-1])
                if n > best and cache.complete():  # a sliding window that dropped rows keeps no whole prefix
                    best, found = n, (held, cache)
            if found is None:
                return KVCache()
            self._kept.move_to_end(found[0])
            return found[1].prefix(best)  # a copy: the kept one stays as it is

    def keep(self, ids: Sequence[int], cache: KVCache) -> None:
        """Keep ``cache``, which holds ``ids[: cache.seen]``, for later prompts that start with them."""
        with self._lock:
            self._kept[tuple(ids[: cache.seen])] = cache
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)


@dataclass(frozen=True)
class ChatPrompt:
    """What the model reads for a new message: the kept turns and the message, as the chat template writes them."""

    messages: list[dict[str, str]]
    ids: list[int]
    dropped: int  # earlier turns (a message and its reply) left out, oldest first, to fit in ``limit``
    cut: int | None  # the message's tokens kept when it alone is too long (its start), else None
    limit: int
    start: int  # where the new message's turn begins: before it the system message and the earlier turns
    markers: tuple[str, ...] = ()  # special tokens' text typed in the new message, read as the characters typed
    new: int = 0  # the new tokens the reply was given room for
    opening: int | None = None  # where the template's opening of the reply begins (<|im_start|>assistant↵), if any


def chat_tokens(tm: TextModel, message: str) -> int:
    """Tokens the model reads for a conversation of ``message`` alone: any system message the template writes, the
    turn markers and the message (:func:`chat_prompt` with no earlier turn and room to spare)."""
    return len(tm.chat_ids([{"role": "user", "content": message}]))


def chat_prompt(
    tm: TextModel, history: Sequence[Mapping[str, str]], message: str, max_new_tokens: int, limit: int
) -> ChatPrompt:
    """``history`` (user and assistant messages in turn) and ``message`` as the model reads them, leaving room for
    ``max_new_tokens`` within ``limit`` tokens: the oldest turns are dropped until they fit, and a message too long
    on its own keeps its start.

    Raises:
        InputError: ``chat_empty`` for an empty message; ``new_tokens_range`` when not even one token of the
            message fits beside the template and ``max_new_tokens``.
    """
    history = [{"role": m["role"], "content": m["content"]} for m in history]
    room = limit - max_new_tokens
    for first in range(0, len(history) + 1, 2):  # a turn is a message and its reply
        messages = [*history[first:], {"role": "user", "content": message}]
        ids = tm.chat_ids(messages)
        if len(ids) <= room:
            return _prompt(tm, messages, ids, first // 2, None, limit, room)
    words = tm.typed.ids(message)
    markup = len(ids) - len(words)  # the template's own tokens around the message
    keep = room - markup
    while keep >= 1:
        messages = [{"role": "user", "content": tm.decode(words[:keep]).rstrip("\ufffd")}]
        ids = tm.chat_ids(messages)
        if len(ids) <= room:  # text cut inside a word may split into a few more tokens: cut again
            return _prompt(tm, messages, ids, len(history) // 2, keep, limit, room)
        keep -= len(ids) - room
    raise InputError("new_tokens_range", limit=max(limit - markup - 1, 0), value=max_new_tokens)


def _prompt(
    tm: TextModel, messages: list[dict[str, str]], ids: list[int], dropped: int, cut: int | None, limit: int, room: int
) -> ChatPrompt:
    start, markers = _turn_start(tm, ids, messages), tm.typed.markers(messages[-1]["content"])
    opening = max(common_prefix(ids, tm.chat_ids(messages, opening=False)), start)
    return ChatPrompt(messages, ids, dropped, cut, limit, start, markers, limit - room, opening)


def _turn_start(tm: TextModel, ids: list[int], messages: list[dict[str, str]]) -> int:
    """The first token of the last message's turn: the last special token (the template's turn marker) before the
    message's first token, found as the first token where the prompt written with another message differs."""
    other = tm.chat_ids([*messages[:-1], {"role": "user", "content": "\u2063" + messages[-1]["content"]}])
    return max((i for i in range(common_prefix(ids, other)) if ids[i] in tm.special_ids), default=0)


def end_of_turn(tm: TextModel) -> int | None:
    """The special token the chat template closes an assistant's turn with (SmolLM2's ``<|im_end|>``, Gemma's
    ``<end_of_turn>``): the first one after a reply's text, found where the conversation written with another reply
    first differs; None where the template writes none there or refuses the conversation."""

    def ids(reply: str) -> list[int]:
        turns = [("user", "Hi"), ("assistant", reply), ("user", "Thanks")]
        return tm.chat_ids([{"role": role, "content": text} for role, text in turns])

    try:
        written, other = ids("Hello"), ids("\u2063Hello")
    except InputError:
        return None
    return next((i for i in written[common_prefix(written, other) :] if i in tm.special_ids), None)


@dataclass(frozen=True)
class ReplyAttention:
    """What each reply token read: row i of ``rows [L, H, R, N]`` is the attention of the position that produced
    reply token i (for a reply ended by the model, the last row produced its end-of-turn token) over the prompt and
    the reply before it."""

    tokens: list[str]  # the prompt's and the reply's labels (N)
    produced: list[str]  # the R tokens the rows produced
    prompt_len: int
    start: int  # the new message's turn begins here (ChatPrompt.start)
    rows: np.ndarray  # [L, H, R, N], float16: a reply's rows are kept in the session
    opening: int | None = None  # the template's opening of the reply begins here (ChatPrompt.opening)

    def shares(self, token: int, layer: int, head: int | None = None) -> tuple[float, float, float]:
        """Reply token ``token``'s weight on the earlier turns (and system message), on the new message's turn and
        on the reply so far, for one head or the mean of the heads; the three sum to 1."""
        w = self.row(token, layer, head)
        p, s = self.prompt_len, self.start
        return float(w[:s].sum()), float(w[s:p].sum()), float(w[p:].sum())

    def parts(self, token: int, layer: int, head: int | None = None) -> tuple[float, float, float]:
        """As :meth:`shares`, the reply counted from the template's opening of it (SmolLM2's ``<|im_start|>
        assistant↵``, where the step of reply token 0 stands): the earlier turns, the new message's turn up to that
        opening, the opening and the reply so far. The opening is the template's, not the user's: counted in the
        message's turn, it held up to two thirds of that share (SmolLM2's last layer, reply token 0: 0.33 of 0.49)."""
        w = self.row(token, layer, head)
        s, o = self.start, self.prompt_len if self.opening is None else self.opening
        return float(w[:s].sum()), float(w[s:o].sum()), float(w[o:].sum())

    def row(self, token: int, layer: int, head: int | None = None) -> np.ndarray:
        """The weights of reply token ``token``'s step over the tokens it could read → ``[prompt_len + token]``."""
        if not 0 <= token < len(self.produced):  # the page's picker offers only the reply's tokens
            raise ValueError(f"reply token {token} is outside the reply's {len(self.produced)} tokens")
        rows = self.rows[layer].astype(np.float32)
        w = rows.mean(axis=0) if head is None else rows[head]
        return w[token, : self.prompt_len + token]


def reply_attention(tm: TextModel, prompt: ChatPrompt, reply: Reply, trace: Trace) -> ReplyAttention:
    """What each reply token read, from ``trace``: :func:`replies`' steps, one query row per layer and step (a
    sliding-window layer's row covers its last keys). These are the rows a pass over prompt + reply traces at the
    positions that produced the reply (the causal mask, §6; tests/test_lm.py holds them to it), without that pass
    (SmolLM2 at 185 tokens: 0.65 s)."""
    ids = [*prompt.ids, *reply.ids]
    produced = [*reply.ids, *([] if reply.end is None else [reply.end])]
    steps = [r.weights[0, :, 0] for r in trace if r.kind != "router"]  # (H, keys) each, layer by layer, step by step
    layers = len(tm.model.blocks)
    if len(steps) != layers * len(produced):
        raise ValueError(f"the trace holds {len(steps)} rows, not {layers} layers × {len(produced)} steps")
    rows = np.zeros((layers, steps[0].shape[0], len(produced), len(ids)), dtype=np.float16)  # (L, H, R, N)
    for i, w in enumerate(steps):
        step, layer = divmod(i, layers)
        end = len(prompt.ids) + step  # the step read every token before the one it produced
        rows[layer, :, step, end - w.shape[-1] : end] = w.numpy()
    return ReplyAttention(tm.labels(ids), tm.labels(produced), len(prompt.ids), prompt.start, rows, prompt.opening)


def above_diagonal_max(maps: np.ndarray) -> float:
    """Largest weight any query puts on a future key, over every layer and head of ``maps [..., N, N]``."""
    maps = np.asarray(maps)
    rows, cols = np.triu_indices(maps.shape[-1], k=1)
    return float(maps[..., rows, cols].max(initial=0.0))


@dataclass(frozen=True)
class Reading:
    """A text read by a causal model: tokens, embeddings, attention, predictions and losses."""

    ids: list[int]
    tokens: list[str]
    truncated: bool
    num_tokens: int  # before truncation
    embeddings: np.ndarray  # [N, D] rows of the token embedding matrix
    maps: np.ndarray  # [L, H, N, N]
    top_ids: np.ndarray  # [N, k] most likely next tokens after each position
    top_probs: np.ndarray  # [N, k]
    top_labels: list[list[str]]
    losses: np.ndarray  # [N − 1] −ln p(actual next token)
    prefix_len: int  # the prefix read again on its own (⌈N/2⌉ tokens)
    prefix_delta: float  # max |Δ logit| over those positions between the prefix alone and the whole text
    prefix_scale: float  # max |logit| over those positions: float32 rounding is relative to it


def alone_states(tm: TextModel, ids: Sequence[int]) -> Tensor:
    """:meth:`TextModel.states` ``[N, D]`` of ``ids`` run alone on the materialised path a traced forward takes: what
    the LM head turns into their logits (85 times smaller than SmolLM2's logits, so a page can keep it per text)."""
    return tm.states(ids, Trace())


def prefix_invariance(
    tm: TextModel, ids: list[int], logits: Tensor, cut: int, alone: Callable[[Sequence[int]], Tensor] | None = None
) -> float:
    """Largest |Δ| between the logits of the first ``cut`` positions computed from those tokens alone and
    ``logits [1, N, V]`` computed from all of ``ids``: zero under the causal mask (training and inference agree,
    §6). Both runs take the same materialised path; float32 products of different lengths may still round
    differently (a few ulps of the largest logit), never by what the later tokens say.

    ``alone``: :func:`alone_states` as the caller keeps it (a page edited at its end reads the same opening again);
    the logits are made from it here, by the model's own head, :data:`LOGIT_ROWS` positions at a time."""
    states = (alone or partial(alone_states, tm))(ids[:cut])  # (cut, D)
    with torch.no_grad():
        return max(float((tm.model.logits(states[rows]) - logits[0, rows]).abs().max()) for rows in _row_chunks(cut))


LOGIT_ROWS = 64  # positions whose V logits :func:`read` holds at once: Gemma 3's 262 144 × 64 floats, 67 MB


def _row_chunks(n: int) -> list[slice]:
    """Positions 0 … n − 1 in slices of at most :data:`LOGIT_ROWS`."""
    return [slice(start, min(start + LOGIT_ROWS, n)) for start in range(0, n, LOGIT_ROWS)]


def read(tm: TextModel, text: str, k: int = 10, alone: Callable[[Sequence[int]], Tensor] | None = None) -> Reading:
    """Everything the language-model page shows about ``text`` (truncated to the context); ``alone``: see
    :func:`prefix_invariance`.

    The final states are read once (traced, for the maps), then the LM head turns them into logits
    :data:`LOGIT_ROWS` positions at a time, each slice read for its top tokens, losses and the prefix check and let
    go: the whole ``[N, V]`` at once, and the copies its softmax, loss and check made, peaked at 1.2 GB on Gemma 3
    (512 positions × 262 144 tokens); every number is computed per position, so the slices give the same ones."""
    if tm.kind != "causal":
        raise InputError("not_causal_lm", model=tm.name)
    enc = tm.encode(text, max_tokens(tm))
    ids, n = list(enc.ids), len(enc.ids)
    trace = Trace()
    states = tm.states(ids, trace)  # (N, D): the traced run, before the LM head
    trace.label(enc.tokens)
    cut = (n + 1) // 2
    prefix = (alone or partial(alone_states, tm))(ids[:cut])  # (cut, D)
    targets = torch.as_tensor(ids[1:], dtype=torch.long)
    top_ids, top_probs, losses = [], [], []
    delta = scale = 0.0
    with torch.no_grad():
        for rows in _row_chunks(n):
            logits = tm.model.logits(states[rows])  # (R, V)
            top = torch.topk(logits, min(k, logits.shape[-1]), dim=-1)  # (R, k): the softmax keeps the order
            norm = torch.logsumexp(logits.float(), dim=-1, keepdim=True).double()
            top_ids.append(top.indices), top_probs.append(torch.exp(top.values.double() - norm))
            scored = slice(rows.start, min(rows.stop, n - 1))  # the last position has no next token to score
            if scored.stop > scored.start:
                part = logits[: scored.stop - scored.start].float()
                losses.append(F.cross_entropy(part, targets[scored], reduction="none").double())
            if rows.start < cut:  # the opening: its logits alone against these
                within = logits[: min(rows.stop, cut) - rows.start]
                alone_logits = tm.model.logits(prefix[rows.start : min(rows.stop, cut)])
                delta = max(delta, float((alone_logits - within).abs().max()))
                scale = max(scale, float(within.abs().max()))
    found = torch.cat(top_ids).numpy()
    return Reading(
        ids=ids,
        tokens=list(enc.tokens),
        truncated=enc.truncated,
        num_tokens=enc.num_tokens,
        embeddings=embedding_rows(tm, ids),
        maps=trace.stack()[:, 0].numpy(),
        top_ids=found,
        top_probs=torch.cat(top_probs).numpy(),
        top_labels=[tm.labels(row) for row in found.tolist()],
        losses=torch.cat(losses).numpy() if losses else np.zeros(0),
        prefix_len=cut,
        prefix_delta=delta,
        prefix_scale=scale,
    )
