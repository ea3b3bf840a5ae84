"""A long-context attention atlas: every head's habits over thousands of tokens, never an N × N map.

:func:`head_stats` runs a causal model layer by layer. Each layer's queries, keys and values come from the
layer's own projection (rotary, grouped-query heads and ALiBi through the module's code); its attention is
computed by our tiled kernel (:func:`~tx_explorer.attention.flash_attention_forward`, §4.4) one block of query
rows at a time, which also returns every row's log-sum-exp. A second pass over the same key tiles recomputes
each tile's weights from it, ``a_ij = exp(s_ij − lse_i)`` (as the kernel's backward does), and reduces them to
per-query and per-key statistics. At no moment is more than one ``[H, tile, tile]`` block of weights alive, so
memory grows linearly with the text: at 8 192 tokens SmolLM2's dense maps would be 30 · 9 · 8192² · 4 B = 72 GB
(:func:`dense_bytes`).

Statistics, for query i and key j ≤ i with weights ``a_ij``:

- ``first``    a_i0, the share on the first token (the "attention sink", Xiao et al. 2023);
- ``entropy``  −Σ_j a_ij log a_ij in nats (0: one key; log(i + 1): uniform over all keys seen);
- ``local``    Σ_{i − j < window} a_ij, the share on the last ``window`` keys (the query itself included);
- ``distance`` Σ_j a_ij (i − j), how far back the head looks on average;
- ``received`` Σ_i a_ij per key j: the attention it receives from all queries (the "heavy hitters");
- ``span``     Σ_{j ∈ span} a_ij, the share on a chosen range of keys (a planted needle).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tx_explorer import masks
from tx_explorer.analysis.head_science import HELDOUT_FILE
from tx_explorer.attention import flash_attention_forward
from tx_explorer.data import corpus
from tx_explorer.errors import InputError, positive_int
from tx_explorer.families.text import TextModel
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.transformer import CausalLM

TILE = 256  # query rows and key columns per block: [H, 256, 256] float32 = 2.4 MB for SmolLM2's 9 heads
MAX_DENSE = 512  # the widest exact block of weights a page asks for
STATS = ("first", "entropy", "local", "distance", "received")
Progress = Callable[[int, int], None]  # progress(layer, query rows of that layer done); may raise to cancel


@dataclass(frozen=True)
class HeadStats:
    """Per layer, head and position ``[L, H, T]`` (float32, CPU): see the module docstring for each statistic.

    ``hidden`` is the model's final hidden state ``[T, D]`` (after its last norm), equal to a normal forward's.
    """

    first: Tensor
    entropy: Tensor
    local: Tensor
    distance: Tensor
    received: Tensor
    span: Tensor | None
    window: int
    hidden: Tensor
    windows: tuple[int | None, ...]  # per layer, the keys back it sees (its sliding window), None: all

    def stat(self, name: str) -> Tensor:
        """One statistic by name (``STATS`` or "span")."""
        if name not in (*STATS, "span") or (name == "span" and self.span is None):
            raise ValueError(f"unknown statistic {name!r}; choose one of {STATS}")
        return getattr(self, name)

    def per_head(self, name: str) -> np.ndarray:
        """``[L, H]``: a query statistic averaged over the positions, or ``received`` as the largest share of all
        attention any one key receives (Σ_i a_ij / T: how much one heavy hitter holds)."""
        t = self.stat(name)
        if name == "received":
            return (t.amax(dim=-1) / t.shape[-1]).numpy()
        return t.mean(dim=-1).numpy()


def _check_model(tm: TextModel) -> CausalLM:
    model = tm.model
    if tm.kind != "causal" or not isinstance(model, CausalLM):
        raise InputError("not_causal_lm", model=tm.name)
    return model


def _ids(tm: TextModel, ids: Sequence[int]) -> Tensor:
    if len(ids) == 0:
        raise InputError("text_empty")
    return torch.tensor([list(ids)], dtype=torch.long, device=next(tm.model.parameters()).device)


def _first_key(q0: int, window: int | None) -> int:
    """The first key any query from ``q0`` on may see: 0, or the start of a sliding window."""
    return 0 if window is None else max(0, q0 - window + 1)


def _window(model: CausalLM, layer: int) -> int | None:
    """How many keys back layer ``layer`` sees (:attr:`TransformerConfig.windows`)."""
    return model.cfg.windows[layer]


def _visible(model: CausalLM, layer: int, q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """``[Nq, Nk]``: what layer ``layer`` lets these queries see, the stack's mask and the layer's own window."""
    visible = model.mask_between(q_pos, k_pos)
    window = _window(model, layer)
    return visible if window is None else visible & masks.causal_between(q_pos, k_pos, window)


def _bias(attn: MultiHeadAttention, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
    """The position part's additive bias for these queries and keys (ALiBi's ``[H, Nq, Nk]``), or None."""
    return attn.position.score_bias(q_pos, k_pos) if attn.position is not None else None


class _Reducer:
    """Statistics of one layer's attention, filled one (query block, key tile) at a time."""

    def __init__(self, heads: int, n: int, window: int, span: tuple[int, int] | None, device: torch.device) -> None:
        new = lambda: torch.zeros(heads, n, device=device)  # noqa: E731  # (H, T)
        self.first, self.entropy, self.local, self.distance, self.received = new(), new(), new(), new(), new()
        self.span = new() if span is not None else None
        self.window, self.span_keys = window, span

    def add(self, a: Tensor, log_a: Tensor, i0: int, i1: int, j0: int, j1: int, back: Tensor) -> None:
        """Weights ``a [H, bq, bk]`` (0 where hidden), their logs, of queries i0…i1 − 1 on keys j0…j1 − 1;
        ``back [bq, bk]`` = i − j."""
        rows = slice(i0, i1)
        if j0 == 0:
            self.first[:, rows] = a[..., 0]
        self.entropy[:, rows] -= (a * log_a).sum(dim=-1)
        self.distance[:, rows] += (a * back).sum(dim=-1)
        if j1 - 1 > i0 - self.window:  # some key of this tile lies within the window of some query
            self.local[:, rows] += (a * (back < self.window)).sum(dim=-1)
        if self.span is not None and j0 < self.span_keys[1] and j1 > self.span_keys[0]:
            lo, hi = max(self.span_keys[0], j0) - j0, min(self.span_keys[1], j1) - j0
            self.span[:, rows] += a[..., lo:hi].sum(dim=-1)
        self.received[:, j0:j1] += a.sum(dim=-2)


def _attend(
    attn: MultiHeadAttention,
    h: Tensor,
    pos: Tensor,
    model: CausalLM,
    layer: int,
    reducer: _Reducer,
    tile: int,
    tick: Callable[[int], None],
) -> Tensor:
    """One layer's attention on ``h [1, T, D]`` computed block by block, its statistics into ``reducer``;
    returns the layer's output ``[1, T, D]`` (after W_O), as the module's forward would."""
    n = h.shape[1]
    q, k, v = attn.project_qkv(h, pos=pos)  # (1, H, T, Dh), (1, H_kv, T, Dh) × 2: rotary turned here
    # 16-bit weights: scores, weights and statistics in float32, as the module's own traced maps are (bfloat16's
    # 8-bit mantissa moved a 64-token entropy by 0.09 nats); the output returns to the model's dtype
    wide = torch.promote_types(q.dtype, torch.float32)
    q, k, v = q.to(wide), attn.expand_kv(k.to(wide)), attn.expand_kv(v.to(wide))  # (1, H, T, Dh) each
    scale = attn.scale or 1.0 / math.sqrt(q.shape[-1])  # the module's own factor (Gemma 3: 1/√256), else 1/√D_H
    out = torch.empty_like(q)  # (1, H, T, Dh)
    for i0 in range(0, n, tile):
        i1 = min(i0 + tile, n)
        q_pos, lo = pos[i0:i1], _first_key(i0, _window(model, layer))
        visible = _visible(model, layer, q_pos, pos[lo:i1])  # (bq, Nk): the layer's own mask, linear in T
        qi = q[:, :, i0:i1] * scale  # (1, H, bq, Dh): scaled first, as the kernel does, so both passes' scores agree
        out[:, :, i0:i1], lse = flash_attention_forward(
            qi,
            k[:, :, lo:i1],
            v[:, :, lo:i1],
            mask=visible,
            bias=_bias(attn, q_pos, pos[lo:i1]),  # (H, bq, Nk) for ALiBi, else None
            block_size=tile,
            scale=1.0,
            score_mod=attn.softcap,  # Gemma 2's cap on the scaled scores, else None
        )  # (1, H, bq, Dh), (1, H, bq)
        if attn.sinks is not None:  # gpt-oss: each row's softmax has the head's sink logit too, a key with no value
            full = attn.sinks.log_normaliser(lse)  # (1, H, bq)
            out[:, :, i0:i1] *= (lse - full).exp()[..., None]  # the kernel normalised over the keys alone
            lse = full  # the second pass's weights then sum to 1 − the sink's share, as the layer's do
        for j0 in range(lo, i1, tile):  # second pass: the same tiles, now normalised by the known lse
            j1 = min(j0 + tile, i1)
            k_pos = pos[j0:j1]
            s = torch.matmul(qi, k[:, :, j0:j1].transpose(-2, -1))[0]  # (H, bq, bk)
            if attn.softcap is not None:
                s = attn.softcap(s)
            bias = _bias(attn, q_pos, k_pos)  # (H, bq, bk) or None
            if bias is not None:
                s += bias
            log_a = s.sub_(lse[0, :, :, None])  # log a_ij = s_ij − lse_i, finite even where hidden
            a = log_a.exp()
            shown = visible[:, j0 - lo : j1 - lo]  # (bq, bk)
            if not bool(shown.all()):
                a.masked_fill_(~shown, 0.0)
            back = (q_pos[:, None] - k_pos[None, :]).to(a.dtype)  # (bq, bk): i − j
            reducer.add(a, log_a, i0, i1, j0, j1, back)
        tick(i1)
    y = out.transpose(1, 2).reshape(1, n, attn.q_dim).to(h.dtype)  # (1, T, H·Dh)
    return attn.proj(y)


@torch.no_grad()
def head_stats(
    tm: TextModel,
    ids: Sequence[int],
    *,
    window: int = 64,
    span: tuple[int, int] | None = None,
    tile: int = TILE,
    progress: Progress | None = None,
) -> HeadStats:
    """Statistics of every layer's and head's attention on ``ids`` (see the module docstring), in memory linear
    in their number.

    Args:
        tm: a causal text model (its own device: CUDA when the app put it there).
        ids: token ids, one sequence.
        window: keys counted as local: the last ``window`` ones, the query itself included.
        span: ``(start, end)`` keys whose share each query gives (a planted sentence), or None.
        tile: query rows and key columns per block.
        progress: called as ``progress(layer, rows done)`` after every block of query rows; raising there stops.
    """
    model = _check_model(tm)
    window, tile = positive_int("window", window), positive_int("tile", tile)
    x = model.embed(_ids(tm, ids))  # (1, T, D)
    n = x.shape[1]
    if span is not None and not 0 <= span[0] < span[1] <= n:
        raise ValueError(f"span {span} is not a range of keys within 0…{n}")
    pos = torch.arange(n, device=x.device)
    layers: list[_Reducer] = []
    for i, block in enumerate(model.blocks):
        reducer = _Reducer(block.attn.num_heads, n, window, span, x.device)
        tick = functools.partial(progress, i) if progress is not None else lambda rows: None
        attend = functools.partial(
            _attend, block.attn, pos=pos, model=model, layer=i, reducer=reducer, tile=tile, tick=tick
        )
        # the block's own residual and norms (Gemma's sandwich: a norm on each sub-layer's output too)
        x = block.residual(x, attend, block.norm1, block.post_attn_norm)
        x = block.residual(x, block.mlp, block.norm2, block.post_mlp_norm)
        layers.append(reducer)
    stack = lambda name: torch.stack([getattr(r, name) for r in layers]).float().cpu()  # noqa: E731  # (L, H, T)
    return HeadStats(
        first=stack("first"),
        entropy=stack("entropy"),
        local=stack("local"),
        distance=stack("distance"),
        received=stack("received"),
        span=stack("span") if span is not None else None,
        window=window,
        hidden=model.norm(x)[0].float().cpu(),
        windows=tuple(_window(model, i) for i in range(len(model.blocks))),
    )


def dense_bytes(tm: TextModel, n: int, *, itemsize: int = 4) -> int:
    """Bytes the N × N weights of every layer and query head would take at ``n`` tokens (float32 by default): what
    the atlas never holds."""
    return tm.config.num_layers * tm.config.num_heads * n * n * itemsize


def keys_seen(n: int, window: int | None = None) -> np.ndarray:
    """``[n]``: how many keys each position sees in a causal layer: itself and every earlier key, or at most the
    last ``window`` of them (a sliding window: Gemma 3's local layers see 512)."""
    seen = np.arange(1, n + 1)
    return seen if window is None else np.minimum(seen, window)


def even_first(n: int, window: int | None = None) -> float:
    """The first token's share, averaged over ``n`` positions, of a head that spreads its attention evenly over the
    keys it sees (causal; ``window``: its layer's sliding window, past which the first token is out of sight): the
    bar a sink must clear to say something (a 2-token text gives 0.75 without trying)."""
    seen = keys_seen(n, window)
    return float(np.mean(np.where(np.arange(n) < seen, 1.0 / seen, 0.0)))  # position i sees key 0 while i < seen


def even_local(n: int, local: int, window: int | None = None) -> float:
    """The share within the last ``local`` keys, averaged over ``n`` positions, of a head that spreads its attention
    evenly over the keys it sees (``window``: its layer's sliding window): 1 while the text is no longer than
    ``local`` (every key is within it)."""
    seen = keys_seen(n, window)
    return float(np.mean(np.minimum(seen, local) / seen))


def even_entropy(n: int, window: int | None = None) -> float:
    """The entropy in nats, averaged over ``n`` positions, of a head that spreads its attention evenly over the keys
    it sees (``window``: its layer's sliding window): log of their number, the most a row of weights can have."""
    return float(np.mean(np.log(keys_seen(n, window))))


# ---- the text ----------------------------------------------------------------------------------------------------
# What Windows' Notepad writes as "Unicode": UTF-16, marked by its byte-order mark (little or big end first)
UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


def read_upload(data: bytes) -> str:
    """An uploaded ``.txt`` file as text: UTF-8 (a byte-order mark allowed) or UTF-16 with its byte-order mark;
    anything else is refused (GBK or Latin-1 bytes cannot be told apart from one another without guessing)."""
    if not data:
        raise InputError("file_empty")
    try:
        text = data.decode("utf-16" if data.startswith(UTF16_MARKS) else "utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("atlas_not_text") from None
    if "\x00" in text:  # valid UTF-8 can still be binary (NUL bytes never occur in text files)
        raise InputError("atlas_not_text")
    return text


MIN_TOKENS = 2  # one token attends only to itself: every head a "sink", every statistic trivially 1 or 0


def encode_text(tm: TextModel, text: str) -> list[int]:
    """The token ids of ``text``, refused when it is shorter than :data:`MIN_TOKENS` or longer than the model's
    context (never cut)."""
    enc = tm.encode(text)
    if enc.truncated:
        raise InputError("context_exceeded", count=enc.num_tokens, limit=tm.max_len)
    if len(enc.ids) < MIN_TOKENS:
        raise InputError("atlas_too_short", count=len(enc.ids), least=MIN_TOKENS)
    return enc.ids


def corpus_ids(tm: TextModel, n: int) -> list[int]:
    """The first ``n`` tokens of the bundled held-out documents of our training corpus (``data/``), continued by
    the corpus's standard-library documents when ``n`` is longer (:mod:`tx_explorer.data.corpus`). The text opens
    with the tokens the model's tokenizer puts first (Gemma 3's <bos>, where its global layers' sinks sit; none for
    the others)."""
    n = positive_int("tokens", n)
    if n > tm.max_len:
        raise InputError("context_exceeded", count=n, limit=tm.max_len)
    encode = lambda text, opening=False: tm.tokenizer.encode(text, add_special_tokens=opening).ids  # noqa: E731
    ids = encode("\n".join(json.loads(HELDOUT_FILE.read_text(encoding="utf-8"))["documents"]), opening=True)
    for doc in corpus.documents("stdlib") if len(ids) < n else ():
        ids += encode("\n" + doc)
        if len(ids) >= n:
            break
    return ids[:n]


# ---- exact dense rows, for a block the visitor opens -----------------------------------------------------------
@dataclass(frozen=True)
class DenseRows:
    """The exact weights of queries ``rows`` at one layer ``[H, R, T]`` (zero where hidden), and the statistics
    :func:`dense_stats` computes from them (``[H, R]`` each)."""

    weights: Tensor
    rows: tuple[int, int]
    stats: dict[str, Tensor]


def dense_stats(weights: Tensor, q_pos: Tensor, window: int) -> dict[str, Tensor]:
    """The query statistics from full rows of weights ``[..., R, T]`` for queries at ``q_pos [R]``."""
    back = (q_pos[:, None] - torch.arange(weights.shape[-1], device=weights.device)[None, :]).to(weights)  # (R, T)
    return {
        "first": weights[..., 0],
        "entropy": -torch.special.xlogy(weights, weights).sum(dim=-1),
        "local": (weights * ((back >= 0) & (back < window))).sum(dim=-1),
        "distance": (weights * back).sum(dim=-1),
    }


@torch.no_grad()
def dense_rows(tm: TextModel, ids: Sequence[int], layer: int, rows: tuple[int, int], *, window: int = 64) -> DenseRows:
    """Exact attention of query rows ``rows = (start, end)`` (at most :data:`MAX_DENSE`) at ``layer``.

    The layers before run as a normal forward; this layer's q and k come from its own projection and the weights
    from its explicit path (:meth:`MultiHeadAttention.attend`: the reference operator
    :func:`~tx_explorer.attention.scaled_dot_product_attention`, or the soft cap and sinks around it), never the
    tiles.
    """
    model = _check_model(tm)
    x = model.embed(_ids(tm, ids))  # (1, T, D)
    n = x.shape[1]
    start, end = rows
    if not 0 <= layer < len(model.blocks):
        raise InputError("probe_layer", layer=layer, last=len(model.blocks) - 1)
    if not 0 <= start < end <= n or end - start > MAX_DENSE:
        raise InputError("atlas_rows", start=start, end=end, n=n, limit=MAX_DENSE)
    pos = torch.arange(n, device=x.device)
    mask = model.mask(n, x.device)  # (T, T) bool, shared by every head: what the model's forward applies
    for block in model.blocks[:layer]:
        x = block(x, mask, pos=pos)
    attn = model.blocks[layer].attn
    block = model.blocks[layer]
    q, k, v = attn.project_qkv(block.attention_input(x))
    k, v = attn.expand_kv(k)[:, :, :end], attn.expand_kv(v)[:, :, :end]  # (1, H, end, Dh): later keys are hidden
    q_pos = pos[start:end]
    bias = attn.position.score_bias(q_pos, pos[:end]) if attn.position is not None else None  # (H, R, end) or None
    # the layer's own explicit path: the reference operator, or its soft cap and sinks where it has them
    _, weights = attn.attend(q[:, :, start:end], k, v, _visible(model, layer, q_pos, pos[:end]), bias)  # (1, H, R, end)
    full = weights.new_zeros(weights.shape[1], end - start, n)  # (H, R, T): keys after the rows are hidden
    full[..., :end] = weights[0]
    full = full.float().cpu()
    return DenseRows(weights=full, rows=(start, end), stats=dense_stats(full, q_pos.cpu(), window))


# ---- a needle in the haystack ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Needle:
    """A sentence planted in a long text, then asked for at its end."""

    ids: list[int]  # haystack with the needle, then the question
    span: tuple[int, int]  # the needle's tokens
    answer: str


CONTENT = "\x00content\x00"  # stands for the user's message while a chat template is rendered around it


def chats(tm: TextModel) -> bool:
    """Whether ``tm`` reads a prompt as a conversation, through its chat template (an instruction-tuned model)."""
    return bool(getattr(tm, "chat_template", None))


def plant(tm: TextModel, haystack: Sequence[int], needle: str, question: str, answer: str, depth: float) -> Needle:
    """``needle`` inserted at ``depth`` (0 = start, 1 = end) of ``haystack``'s tokens, ``question`` appended.

    A model with a chat template (SmolLM2-Instruct) reads it all as one user message, the assistant's turn open
    after it, as it was tuned; others continue the text plainly."""
    if not 0.0 <= depth <= 1.0:
        raise InputError("atlas_depth", depth=depth)
    if not needle.strip() or not question.strip() or not answer.strip():
        raise InputError("text_empty")
    encode = lambda s: tm.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    before, after = "", ""
    if chats(tm):
        before, after = tm.chat_prompt([{"role": "user", "content": CONTENT}]).split(CONTENT)
    head, planted, asked = encode(before), encode(" " + needle.strip() + " "), encode("\n" + question.strip())
    opening = next((i for i, t in enumerate(haystack) if t not in tm.special_ids), len(haystack))
    cut = max(round(depth * len(haystack)), opening)  # after the text's opening <bos> (Gemma 3), even at depth 0
    ids = [*head, *haystack[:cut], *planted, *haystack[cut:], *asked, *encode(after)]
    if len(ids) > tm.max_len:
        raise InputError("context_exceeded", count=len(ids), limit=tm.max_len)
    start = len(head) + cut
    return Needle(ids=ids, span=(start, start + len(planted)), answer=answer.strip())


@torch.no_grad()
def greedy(tm: TextModel, ids: Sequence[int], new_tokens: int, *, chunk: int = TILE) -> list[int]:
    """Up to ``new_tokens`` greedy tokens after ``ids`` (fewer when a special token ends the text): the prompt fed
    through our KV cache ``chunk`` tokens at a time, its last row's logits alone read (a whole 8k prompt's would be
    1.6 GB for SmolLM2's vocabulary), then one token per step."""
    model, cache = _check_model(tm), KVCache()
    x = _ids(tm, ids)  # (1, N)
    for c0 in range(0, x.shape[1], chunk):  # no LM head but on the last row: a chunk's [chunk, V] is 0.5 GB (Gemma 3)
        hidden = model.states(x[:, c0 : c0 + chunk], cache=cache)
    logits = model.logits(hidden[:, -1:])[:, -1]  # (1, V)
    out: list[int] = []
    for _ in range(positive_int("new_tokens", new_tokens)):
        nxt = logits.argmax(dim=-1, keepdim=True)  # (1, 1)
        if int(nxt) in tm.special_ids:  # end of text, end of the assistant's turn
            break
        out.append(int(nxt))
        logits = model(nxt, cache=cache)[:, -1]
    return out


def answered(continuation: str, answer: str) -> bool:
    """Whether the model's continuation contains the answer (case and surrounding spaces ignored)."""
    return answer.strip().casefold() in continuation.casefold()
