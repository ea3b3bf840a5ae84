"""Comparing attention heads (§4.1): what each head looks at, how heads differ, and lenses on one head.

Inputs are one sequence's maps ``[L, H, N, N]`` (``Trace.stack()[:, 0]``) unless stated otherwise.

* Per-head metrics: entropy of each query's distribution, mean attention distance Σⱼ αᵢⱼ|i − j|, and the
  share of attention on the previous token, the first token and the query itself (Clark et al. 2019,
  "What does BERT look at?", measured the same quantities).
* Head similarity: the Jensen–Shannon distance between two heads' rows, averaged over queries.
* Norm-weighted attention (Kobayashi et al. 2020): αᵢⱼ·‖f_h(xⱼ)‖, where f_h(x) = (x W_V^h + b_V^h) W_O^h is
  what token j actually sends through head h. A large weight on a vector near zero moves nothing.
* The query/key inspector: one head, one query, every intermediate of the lecture's four matrix products.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tx_explorer import masks
from tx_explorer.analysis.information import entropy
from tx_explorer.analysis.rollout import rollout
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.attention import MultiHeadAttention

PATTERNS = ("previous", "first", "duplicate", "induction", "self")  # what :func:`pattern_scores` scores
METRICS = ("entropy", "distance", *PATTERNS)


def _tensor(maps: np.ndarray | Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """A tensor of ``maps``; numpy input is copied, as cached maps are read-only (torch cannot wrap those)."""
    return maps.to(dtype) if isinstance(maps, Tensor) else torch.tensor(np.array(maps), dtype=dtype)


def _check_maps(maps: Tensor) -> Tensor:
    maps = _tensor(maps, torch.float64)
    if maps.dim() != 4 or maps.shape[-1] != maps.shape[-2]:
        raise ValueError(f"expected square maps [L, H, N, N], got shape {tuple(maps.shape)}")
    return maps


def head_metrics(maps: Tensor, ids: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Per-head averages over queries, each ``[L, H]``.

    entropy: −Σⱼ αᵢⱼ ln αᵢⱼ in nats (0 = one key; ln n = uniform over n keys).
    distance: Σⱼ αᵢⱼ |i − j| in tokens.
    previous / first / self: αᵢ,ᵢ₋₁, αᵢ,₀, αᵢᵢ. These three skip query 0, where previous does not exist
    and first = self (under a causal mask its whole weight is forced onto itself).
    duplicate / induction: of the token ``ids`` (:func:`pattern_scores`); NaN without them.
    """
    a = _check_maps(maps)
    n = a.shape[-1]
    idx = torch.arange(n, dtype=torch.float64)
    mean_entropy = entropy(a).mean(-1)
    distance = torch.einsum("lhij,ij->lh", a, (idx[:, None] - idx[None, :]).abs()) / n
    patterns = pattern_scores(a, range(n) if ids is None else ids)  # distinct ids: no duplicate, no induction
    return {"entropy": mean_entropy.numpy(), "distance": distance.numpy(), **patterns}


def js_distance(p: Tensor, q: Tensor) -> Tensor:
    """Jensen–Shannon distance √JS(p‖q) with log base 2 (in [0, 1], a metric) along the last axis.

    JS(p‖q) = H(m) − ½H(p) − ½H(q) with m = ½(p + q), the same as ½KL(p‖m) + ½KL(q‖m).
    """
    p, q = torch.as_tensor(p, dtype=torch.float64), torch.as_tensor(q, dtype=torch.float64)
    js = entropy(0.5 * (p + q), bits=True) - 0.5 * entropy(p, bits=True) - 0.5 * entropy(q, bits=True)
    return js.clamp_min(0).sqrt()


def head_similarity(maps: Tensor, max_queries: int = 64) -> np.ndarray:
    """``[L·H, L·H]`` Jensen–Shannon distances between heads (layer-major order), mean over query rows.

    Long inputs use ``max_queries`` evenly spaced query rows (every row for N ≤ max_queries).
    """
    a = _check_maps(maps)
    n = a.shape[-2]
    rows = torch.linspace(0, n - 1, min(n, max_queries)).round().long().unique()
    flat = a[..., rows, :].reshape(-1, len(rows), n)  # (K = L·H, rows, N)
    own = entropy(flat, bits=True)  # (K, rows): reused by every pair
    k = flat.shape[0]
    out = torch.zeros(k, k, dtype=torch.float64)
    for i in range(k):  # pairs (i, j ≥ i) only: the distance is symmetric
        js = entropy(0.5 * (flat[i] + flat[i:]), bits=True) - 0.5 * own[i] - 0.5 * own[i:]  # (K − i, rows)
        out[i, i:] = out[i:, i] = js.clamp_min(0).sqrt().mean(-1)
    return out.numpy()


def head_labels(num_layers: int, num_heads: int) -> list[str]:
    """``["L0 H0", "L0 H1", …]`` in the layer-major order used by :func:`head_similarity`."""
    return [f"L{layer} H{head}" for layer in range(num_layers) for head in range(num_heads)]


def keep_tokens(maps: np.ndarray, keep: list[bool]) -> np.ndarray:
    """Drop the rows and columns of tokens not kept (e.g. [CLS]/[SEP]); weights are *not* renormalised.

    Keeping every token returns ``maps`` itself.

    ``maps [..., N, N]`` → ``[..., n, n]`` with n = sum(keep).
    """
    k = np.asarray(keep, dtype=bool)
    maps = np.asarray(maps)
    if k.shape[0] != maps.shape[-1]:
        raise ValueError(f"keep has {k.shape[0]} entries for {maps.shape[-1]} tokens")
    if not k.any():
        raise ValueError("every token would be hidden")
    if k.all():
        return maps  # no copy: a 512-token model's maps are 75 MB
    return maps[..., k, :][..., k]


@torch.no_grad()
def value_vectors_out(mha: MultiHeadAttention, x: Tensor) -> Tensor:
    """f_h(xⱼ) = (xⱼ W_V^h + b_V^h) W_O^h for every head and token: ``x [B, N, D]`` → ``[B, H, N, D]``.

    Σ_h Σⱼ αᵢⱼ^h f_h(xⱼ) + b_O is exactly the attention block's output for query i.
    """
    v = mha.expand_kv(mha.project_qkv(x)[2])  # (B, H, N, Dh): under GQA each query head reads its group's values
    w_o = mha.proj.weight.t().reshape(mha.num_heads, mha.head_dim, mha.dim)  # (H, Dh, D): rows of W_O per head
    return torch.einsum("bhnd,hde->bhne", v, w_o)


def norm_weighted(mha: MultiHeadAttention, x: Tensor, weights: Tensor) -> Tensor:
    """Kobayashi et al. 2020: ‖αᵢⱼ f_h(xⱼ)‖ = αᵢⱼ·‖f_h(xⱼ)‖; ``weights [B, H, N, N]`` → ``[B, H, N, N]``."""
    norms = value_vectors_out(mha, x).norm(dim=-1)  # (B, H, N)
    return weights * norms[:, :, None, :]


@dataclass(frozen=True)
class QueryKeyView:
    """One head, one query i, every step (shapes for N tokens, head width D_H)."""

    q: np.ndarray  # [D_H]      qᵢ = xᵢ W_Q^h
    k: np.ndarray  # [N, D_H]   kⱼ = xⱼ W_K^g(h): the key/value head g(h) that query head h reads
    scores: np.ndarray  # [N]   qᵢ·kⱼ / √D_H (+ the position bias; −∞ where masked)
    weights: np.ndarray  # [N]  softmax of the scores
    v: np.ndarray  # [N, D_H]   vⱼ = xⱼ W_V^g(h)
    weighted: np.ndarray  # [N, D_H]  αᵢⱼ vⱼ
    out: np.ndarray  # [D_H]     yᵢ = Σⱼ αᵢⱼ vⱼ
    shapes: list[tuple[str, str]]  # (key, shapes) of the four products: qkv, qk, av, out (as in analysis.cost)
    kv_head: int  # g(h); equal to the head itself without grouped-query attention


def _product(a: tuple[int, ...], b: tuple[int, ...], out: tuple[int, ...]) -> str:
    return f"{list(a)} · {list(b)} → {list(out)}"


@torch.no_grad()
def inspect_query(
    mha: MultiHeadAttention, x: Tensor, head: int, query: int, mask: Tensor | None = None
) -> QueryKeyView:
    """The query/key inspector for ``x [1, N, D]``; ``mask`` as the stack hands it to the layer (``[N, N]`` or None).

    Under grouped-query (or multi-query) attention query head h reads key/value head g(h) (``mha.groups``), as
    the model's forward does; the shapes are read from the projection weights, which hold H_kv key heads. The
    weights are the layer's own (:meth:`MultiHeadAttention.attend`): its scale on QKᵀ where it is not 1/√D_H, its
    soft cap (Gemma 2), its learned sinks (gpt-oss: the row sums to less than 1) and its sliding window all count,
    so that they equal the map the other views show."""
    n = x.shape[1]
    if not 0 <= head < mha.num_heads:
        raise ValueError(f"head must lie in [0, {mha.num_heads - 1}], got {head}")
    if not 0 <= query < n:
        raise ValueError(f"query must lie in [0, {n - 1}], got {query}")
    g = mha.groups[head]
    q_all, k_all, v_all = mha.project_qkv(x)  # (1, H, N, Dh), (1, H_kv, N, Dh) twice
    # each (N, Dh), in float32 at least, as the layer computes its scores and weights (a bfloat16 model's too)
    q, k, v = (
        t[0, i].to(torch.promote_types(t.dtype, torch.float32)) for t, i in ((q_all, head), (k_all, g), (v_all, g))
    )
    pos = torch.arange(n, device=x.device)
    window = getattr(mha, "window", None)  # a sliding-window layer hides keys that lie too far back, as its forward
    if window is not None:
        band = masks.causal_between(pos, pos, window)
        mask = band if mask is None else mask & band
    row = None if mask is None else mask[query : query + 1]  # (1, N)
    bias = None
    if mha.position is not None:  # ALiBi adds its per-head bias to the scores (rotary already turned q and k)
        bias = mha.position.score_bias(pos, pos)  # (H, N, N) or None
    bias_row = None if bias is None else bias[:, query : query + 1]  # (H, 1, N)
    # (N,): e_ij as the layer computes it, before its softmax (−∞ where hidden)
    masked = mha.masked_scores(q[query : query + 1], k, row, None if bias_row is None else bias_row[head])[0]
    _, weights = mha.attend(q_all[:, :, query : query + 1], mha.expand_kv(k_all), mha.expand_kv(v_all), row, bias_row)
    w = weights[0, head, 0].to(v.dtype)  # (N,): the layer's own weights, which the other views show
    (h, _, dh), h_kv = q_all.shape[1:], k_all.shape[1]
    w_qkv, w_o = mha.qkv.weight, mha.proj.weight  # (D + 2·H_kv·Dh, D), (D, H·Dh): nn.Linear stores (out, in)
    shapes = [
        ("qkv", _product((n, w_qkv.shape[1]), tuple(w_qkv.shape[::-1]), (n, w_qkv.shape[0]))),
        ("qk", _product((h, n, dh), (h_kv, dh, n), (h, n, n))),
        ("av", _product((h, n, n), (h_kv, n, dh), (h, n, dh))),
        ("out", _product((n, w_o.shape[1]), tuple(w_o.shape[::-1]), (n, w_o.shape[0]))),
    ]
    return QueryKeyView(
        q=q[query].numpy(),
        k=k.numpy(),
        scores=masked.numpy(),
        weights=w.numpy(),
        v=v.numpy(),
        weighted=(w[:, None] * v).numpy(),
        out=(w @ v).numpy(),
        shapes=shapes,
        kv_head=g,
    )


PROJECTION_TOLERANCE = 1e-5  # "k = x·W_K": the largest difference at most this × the largest |entry| (float32)


@dataclass(frozen=True)
class ProjectionCheck:
    """§2.4's K = XW_K and V = XW_V for the key/value head a query head reads, rebuilt in float64 from the rows of
    the fused projection weight that hold W_K and W_V of that head (rotary turns the keys afterwards, as the
    model does)."""

    kv_head: int  # g(h)
    readers: tuple[int, ...]  # every query head that reads this key/value head (h alone without shared heads)
    k_rows: tuple[int, int]  # [first, last + 1) rows of the fused weight (nn.Linear's [out, in]) that are W_K^g
    v_rows: tuple[int, int]
    k_diff: float  # max |kⱼ − xⱼ W_K^g| over the tokens and dimensions
    v_diff: float  # max |vⱼ − xⱼ W_V^g|
    scale: float  # the largest |entry| of xW_K^g and xW_V^g
    qk_norm: bool  # the keys were put through the model's QK-norm before rotary, as the model does

    @property
    def holds(self) -> bool:
        return max(self.k_diff, self.v_diff) <= PROJECTION_TOLERANCE * self.scale


@torch.no_grad()
def projection_check(mha: MultiHeadAttention, x: Tensor, head: int) -> ProjectionCheck:
    """The keys and values query head ``head`` reads from ``x [1, N, D]``, against x times the raw weight rows."""
    g, dh = mha.groups[head], mha.head_dim
    q_dim, kv_dim = mha.num_heads * dh, mha.num_kv_heads * dh
    k_rows, v_rows = (q_dim + g * dh, q_dim + (g + 1) * dh), (q_dim + kv_dim + g * dh, q_dim + kv_dim + (g + 1) * dh)
    w, b, xd = mha.qkv.weight.double(), mha.qkv.bias, x[0].double()  # (D + 2·D_kv, D), (N, D)

    def by_hand(rows: tuple[int, int]) -> Tensor:  # xⱼ W^g (+ its bias): (N, Dh)
        out = xd @ w[rows[0] : rows[1]].T
        return out if b is None else out + b[rows[0] : rows[1]].double()

    k_hand, v_hand = by_hand(k_rows), by_hand(v_rows)
    scale = max(float(k_hand.abs().max()), float(v_hand.abs().max()))
    if mha.qk_norm is not None:  # QK-norm (Gemma 3, Qwen3, OLMo 2) scales each key to unit RMS, times γ
        k_hand = _qk_normed(mha, by_hand((q_dim, q_dim + kv_dim)), g)
    if mha.position is not None:  # rotary turns each key by its position (the other parts leave keys alone)
        k_hand = mha.position.rotate(k_hand[None, None], torch.arange(x.shape[1]))[0, 0]
    _, k, v = mha.project_qkv(x)  # (1, H_kv, N, Dh) twice: what the model computes
    return ProjectionCheck(
        g,
        tuple(h for h in range(mha.num_heads) if mha.groups[h] == g),
        k_rows,
        v_rows,
        float((k[0, g].double() - k_hand).abs().max()),
        float((v[0, g].double() - v_hand).abs().max()),
        scale,
        mha.qk_norm is not None,
    )


def _qk_normed(mha: MultiHeadAttention, keys: Tensor, g: int) -> Tensor:
    """Key/value head ``g``'s keys after the QK-norm, by hand in float64 from every head's keys ``[N, H_kv·Dh]``:
    each head's vector of unit RMS (Gemma 3, Qwen3) or a token's heads together (OLMo 2's norm across heads),
    times the norm's weight γ."""
    norm, dh = mha.qk_norm.k, mha.head_dim
    n = keys.shape[0]
    across = norm.weight.numel() != dh  # OLMo 2: one γ entry per dimension of every key/value head
    grouped = keys if across else keys.view(n, -1, dh)  # (N, H_kv·Dh) or (N, H_kv, Dh)
    unit = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + norm.eps)
    normed = (unit * norm.weight.double()).reshape(n, -1, dh)  # (N, H_kv, Dh)
    return normed[:, g]


@dataclass(frozen=True)
class TextAttention:
    """One text through one model: its tokens and every layer's and head's map."""

    tokens: list[str]
    special: list[bool]
    truncated: bool
    num_tokens: int  # before truncation
    maps: np.ndarray  # [L, H, N, N] float32
    ids: list[int]  # the token ids (pattern scores read repeated tokens from them)


MAX_TOKENS = 512  # L·H·N² maps are kept: 12 × 12 × 1024² floats would be 600 MB for GPT-2's full context
MAP_BUDGET = 12 * 12 * 512**2  # map cells kept for one text: GPT-2 or MiniLM at 512 tokens (151 MB of float32)


def max_tokens(tm: TextModel) -> int:
    """Tokens analysed with every map kept: :data:`MAX_TOKENS`, or fewer for a model with more heads than GPT-2,
    so that its maps stay within :data:`MAP_BUDGET` (SmolLM2's 30 × 9 heads: 373 tokens)."""
    return min(MAX_TOKENS, math.isqrt(MAP_BUDGET // (tm.config.num_layers * tm.config.num_heads)))


def analyse(tm: TextModel, text: str) -> TextAttention:
    """Tokenise (truncating to the context, at most :func:`max_tokens`) and run ``text``, keeping every map."""
    enc = tm.encode(text, max_tokens(tm))
    maps = tm.maps(enc.ids, enc.tokens).stack()[:, 0].numpy()  # (L, H, N, N): batch of one
    return TextAttention(list(enc.tokens), list(enc.special), enc.truncated, enc.num_tokens, maps, list(enc.ids))


def norm_weighted_maps(tm: TextModel, text: str, maps: np.ndarray) -> np.ndarray:
    """Kobayashi's ‖αᵢⱼ f_h(xⱼ)‖ for every layer and head, each row rescaled to sum 1 → ``[L, H, N, N]``.

    The rescaling puts the lens on the same [0, 1] colour scale as α: it keeps where a query's *transported
    vectors* come from, not their overall size.
    """
    ids = tm.encode(text, max_tokens(tm)).ids
    out = []
    for layer, x in enumerate(tm.attention_inputs(ids)):
        w = norm_weighted(tm.attention_module(layer), x, _tensor(maps[layer])[None])[0]  # (H, N, N)
        out.append(w / w.sum(-1, keepdim=True).clamp_min(1e-12))
    return torch.stack(out).numpy()


def rollout_maps(maps: np.ndarray) -> np.ndarray:
    """Rollout through layers 0…l for every l (Abnar & Zuidema 2020) → ``[L, N, N]``."""
    a = _tensor(maps)[:, None]  # (L, 1, H, N, N): the batch axis rollout expects
    return torch.stack([rollout(a[: layer + 1])[0] for layer in range(a.shape[0])]).numpy()


def attention_input(tm: TextModel, text: str, layer: int) -> tuple[Tensor, int]:
    """What ``layer``'s attention receives for ``text``: ``x [1, N, D]`` and N."""
    ids = tm.encode(text, max_tokens(tm)).ids
    if not 0 <= layer < len(tm.model.blocks):
        raise ValueError(f"layer must lie in [0, {len(tm.model.blocks) - 1}], got {layer}")
    return tm.attention_inputs(ids)[layer], len(ids)


def inspect_text(tm: TextModel, text: str, layer: int, head: int, query: int) -> QueryKeyView:
    """:func:`inspect_query` on the input that ``layer``'s attention receives for ``text``."""
    x, n = attention_input(tm, text, layer)
    return inspect_query(tm.attention_module(layer), x, head, query, tm.mask(n))


def projection_text(tm: TextModel, text: str, layer: int, head: int) -> ProjectionCheck:
    """:func:`projection_check` on the input that ``layer``'s attention receives for ``text``."""
    return projection_check(tm.attention_module(layer), attention_input(tm, text, layer)[0], head)


# --- finding the head: pattern scores and a ranking of every head -------------------------------------------------


def pattern_keys(ids: Sequence[int]) -> dict[str, np.ndarray]:
    """Which keys each query's pattern score sums, ``[N, N]`` bool (rows = queries), from the token ids alone.

    previous: j = i − 1; first: j = 0; self: j = i (these three for queries i ≥ 1, as :func:`head_metrics`);
    duplicate: j < i holding the query's own token id; induction: j ≤ i whose *previous* token holds the query's
    id (the token right after an earlier occurrence: "… A B … A" → B; Olsson et al. 2022)."""
    ids = np.asarray(ids)
    n = len(ids)
    i = np.arange(n)
    later = i[:, None] >= 1  # (N, 1): query 0 has no past (it sees only itself under a causal mask)
    same = ids[:, None] == ids[None, :]  # (N, N): [i, j] = query i's token at key j
    after_same = np.zeros((n, n), dtype=bool)
    after_same[:, 1:] = same[:, :-1]  # [i, j] = query i's token at key j − 1
    return {
        "previous": later & (i[None, :] == i[:, None] - 1),
        "first": later & (i[None, :] == 0),
        "duplicate": same & (i[None, :] < i[:, None]),
        "induction": after_same & (i[None, :] <= i[:, None]),
        "self": later & (i[None, :] == i[:, None]),
    }


def _numpy_maps(maps: np.ndarray | Tensor) -> np.ndarray:
    a = maps.detach().cpu().numpy() if isinstance(maps, Tensor) else np.asarray(maps)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expected square maps [L, H, N, N], got shape {a.shape}")
    return a


def pattern_scores(
    maps: np.ndarray | Tensor,
    ids: Sequence[int],
    *,
    skip_first: bool = False,
    queries: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """Each pattern of :func:`pattern_keys` as a per-head score ``[L, H]``: the weight a query puts on the pattern's
    keys, averaged over the queries that have such a key (``queries``: only these rows; NaN where none has one).

    ``skip_first``: the first token is left out as an attention sink (Xiao et al. 2023), each row renormalised over
    keys 1…; ``first`` stays the raw share on token 0, the share that was left out."""
    a = _numpy_maps(maps)
    n = a.shape[-1]
    if len(ids) != n:
        raise ValueError(f"{len(ids)} token ids for maps of {n} tokens")
    rows = np.zeros(n, dtype=bool)
    rows[np.arange(n) if queries is None else np.asarray(queries, dtype=int)] = True
    if skip_first:  # what a row gives keys 1…, summed over them (learned sinks leave rows below 1); float32 sums: 3×
        # faster. Not the row's sum less token 0's: where the sink takes 0.9999, float32's rounding of the sum (6e-8)
        # is a part in a thousand of the 1e-4 left, and a row all on key 1 scored 1.001 above heads that tied at 1.
        kept = a[..., :, 1:].sum(-1).astype(np.float64)  # (L, H, N)
    out = {}
    for name, keys in pattern_keys(ids).items():
        keys = keys & rows[:, None]
        if skip_first and name != "first":
            keys[:, 0] = False
        scored = keys.any(-1)  # (N,): queries with at least one such key
        if not scored.any():
            out[name] = np.full(a.shape[:2], np.nan)
            continue
        share = np.einsum("lhij,ij->lhi", a, keys.astype(a.dtype))[..., scored].astype(np.float64)  # (L, H, Q)
        if skip_first and name != "first":  # rows renormalised over keys 1…; a row all on the sink keeps 0
            left = kept[..., scored]
            share = np.divide(share, left, out=np.zeros_like(share), where=left > 1e-12)
        out[name] = share.mean(-1)
    return out


def uniform_scores(
    ids: Sequence[int],
    *,
    causal: bool = True,
    skip_first: bool = False,
    queries: Sequence[int] | None = None,
) -> dict[str, float]:
    """What each pattern of :func:`pattern_scores` scores for a head that spreads every row evenly over the keys its
    query sees (every key for an encoder, keys 0…i under a causal mask): the chance level a head's score is read
    against (NaN where no query is scored)."""
    n = len(ids)
    seen = np.tril(np.ones((n, n))) if causal else np.ones((n, n))
    even = (seen / seen.sum(-1, keepdims=True))[None, None]  # (1, 1, N, N)
    return {k: float(v[0, 0]) for k, v in pattern_scores(even, ids, skip_first=skip_first, queries=queries).items()}


def top_heads(scores: np.ndarray, k: int | None = None) -> list[tuple[int, int, float]]:
    """The ``k`` heads (all when None) with the largest ``scores [L, H]``, as (layer, head, score), best first."""
    values = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-values, axis=None, kind="stable")[:k]  # NaN sorts last
    return [(int(i // values.shape[1]), int(i % values.shape[1]), float(values.flat[i])) for i in order]


def query_key_weights(
    maps: np.ndarray | Tensor, query: int, key: int, *, skip_first: bool = False, causal: bool = True
) -> np.ndarray:
    """Every head's weight from ``query`` to ``key``, ``[L, H]`` (``skip_first``: rows renormalised over keys 1…).

    Raises:
        InputError: a token outside the text, a key after the query in a causal model (it cannot look ahead), or
            key 0 while the first token is left out.
    """
    a = _numpy_maps(maps)
    n = a.shape[-1]
    for index in (query, key):
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < n:
            raise InputError("heads_token_range", index=index, last=n - 1)
    if causal and key > query:
        raise InputError("heads_look_ahead", i=query, j=key)
    if not skip_first:
        return a[..., query, key].astype(np.float64)  # (L, H)
    if key == 0:
        raise InputError("heads_sink_key")
    return without_first(a[..., query, :])[..., key]  # (L, H)


def without_first(maps: np.ndarray) -> np.ndarray:
    """Rows of attention ``[..., N]`` with the first token left out as a sink: key 0 set to 0 and each row
    renormalised over keys 1… by its own sum (below 1 where a model learned sinks; a row all on the sink stays 0), as
    float64."""
    a = np.array(maps, dtype=np.float64)
    a[..., 0] = 0.0
    left = a.sum(-1, keepdims=True)
    return np.divide(a, left, out=np.zeros_like(a), where=left > 1e-12)


def rank(
    maps: np.ndarray | Tensor,
    query: int,
    key: int,
    top: int | None = None,
    *,
    skip_first: bool = False,
    causal: bool = True,
) -> list[tuple[int, int, float]]:
    """Every head ranked by the weight ``query`` puts on ``key`` (:func:`query_key_weights`): the ``top`` best (all
    when None) as (layer, head, weight)."""
    return top_heads(query_key_weights(maps, query, key, skip_first=skip_first, causal=causal), top)


# --- learned attention sinks (gpt-oss): rows that sum to less than 1 ----------------------------------------------
def row_sums(maps: np.ndarray | Tensor) -> Tensor:
    """Σⱼ Aᵢⱼ of every row of ``maps [..., N, N]`` → ``[..., N]``: 1 under a plain softmax (up to rounding). Where a
    model learned a sink logit per head (gpt-oss), that logit joins each row's softmax as a key with no value and
    is dropped from the traced map, so 1 − Σⱼ Aᵢⱼ is the share the sink took from the row."""
    return _tensor(maps).sum(dim=-1)


@dataclass(frozen=True)
class RowSums:
    """Each head's traced rows summed (:func:`row_sums`), taken over a text's queries: ``[L, H]`` each."""

    mean: np.ndarray  # a row's sum, averaged over the queries
    min: np.ndarray  # the smallest row's sum
    tokens: int  # the queries (rows) of each map

    @property
    def share(self) -> np.ndarray:
        """``[L, H]``: the mean share of a row a learned sink took, 1 − Σ (0 without sinks)."""
        return 1 - self.mean

    @property
    def top(self) -> np.ndarray:
        """``[L, H]``: the largest share the sink took from one row."""
        return 1 - self.min

    @property
    def lowest(self) -> tuple[int, int]:
        """(layer, head) of the row with the smallest sum."""
        layer, head = np.unravel_index(int(self.min.argmin()), self.min.shape)
        return int(layer), int(head)

    @property
    def most(self) -> tuple[int, int]:
        """(layer, head) whose rows the sink takes the most from on average."""
        layer, head = np.unravel_index(int(self.share.argmax()), self.share.shape)
        return int(layer), int(head)

    def summary(self) -> dict[str, float | int]:
        """The numbers the pages say: ``n`` queries; a row's sum on average over every layer, head and query
        (``mean``) and the lowest (``min``, at ``low_layer``, ``low_head``); the sink's mean share (``share``) and
        its share of that lowest row (``top``); the head it takes most from (``layer``, ``head``), by ``most``."""
        (low_layer, low_head), (layer, head) = self.lowest, self.most
        return dict(
            n=self.tokens,
            mean=float(self.mean.mean()),
            min=float(self.min[low_layer, low_head]),
            low_layer=low_layer,
            low_head=low_head,
            share=float(self.share.mean()),
            top=float(self.top[low_layer, low_head]),
            layer=layer,
            head=head,
            most=float(self.share[layer, head]),
        )


def head_row_sums(maps: np.ndarray | Tensor) -> RowSums:
    """:class:`RowSums` of every layer's and head's map, ``maps [L, H, N, N]``."""
    sums = row_sums(maps)  # (L, H, N)
    return RowSums(sums.mean(dim=-1).numpy(), sums.amin(dim=-1).numpy(), sums.shape[-1])


@torch.no_grad()
def traced_row_sums(tm: TextModel, ids: Sequence[int]) -> RowSums:
    """:func:`head_row_sums` of ``tm``'s own traced maps (one forward pass) on ``ids``."""
    trace = tm.maps(ids)
    return head_row_sums(trace.stack(name_contains="attn")[:, 0].float().cpu())  # (L, H, N, N): batch of one
