"""Information flow: which heads and MLPs carry the answer, from one forward pass.

In a pre-norm block the residual stream is a sum of writes: ``x_{l+1} = x_l + Σ_h head_h + b_O + MLP``, and a
head's write at query i is itself a sum over the keys it reads, ``Σ_j a_ij · v_j W_O^h``. :func:`decompose`
splits one run into these parts (read through the :class:`~tx_explorer.edit.Edit` and
:class:`~tx_explorer.trace.Trace` contracts, no hooks). :func:`importance` scores each part's share of each
residual update by the proximity rule of Information Flow Routes (Ferrando & Voita 2024):

    prox(z, y) = max(0, ‖y‖₁ − ‖y − z‖₁),   share(z) = prox(z, y) / Σ_k prox(z_k, y)

over the parts z_k of the update y (the residual itself, each token's write summed over heads, W_O's bias; or
the residual and the MLP). :func:`routes` keeps the parts whose share passes a threshold, walking back from
one token's final residual. Per-source writes are built one layer at a time, ``[T, T, D]``, and reduced at once:
never ``T × T × H × D``, never for the whole model.

Sandwich blocks (Gemma 2/3; OLMo 2 without the norms in front) normalise each sub-layer's output before adding it,
``x_mid = x + post_attn_norm(Σ_h head_h + b_O)``, ``x_next = x_mid + post_mlp_norm(MLP(·))``. Their RMSNorms are
frozen at this run's statistic, as the final norm is for direct logit attribution: with ``a_i`` the sub-layer's
whole output at position i, ``RMSNorm(a)_i = a_i ⊙ w / rms(a_i)`` is linear in ``a_i``, so each part's write at i is
the part ⊙ ``w / rms(a_i)`` and the parts still sum exactly to the model's residual. It is a linearisation: exact
for this run's residual, not for a changed one (take a part away and the norm would rescale the rest); reruns
(:func:`edge_heads`) go through the model's own norms. Pre-norm blocks hold a scale of ones: one code path.

Post-norm blocks (BERT, MiniLM) renormalise each sum, ``x_{l+1} = norm(x_l + f(x_l))``: the residual after a
layer is not a sum of writes, so nothing here decomposes them (:func:`decomposable` says so first), nor a
sub-layer's LayerNorm output norm, whose mean subtraction is no per-position scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn

from tx_explorer.analysis import head_science as hs
from tx_explorer.edit import Edit
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.norms import LayerNorm, RMSNorm
from tx_explorer.trace import Trace

QUERY_CHUNK = 32  # queries whose per-source writes are held at once: 32 × 128 × 576 floats = 9 MB for SmolLM2
THRESHOLD = 0.04  # the peer's default share (LLM Transparency Tool: a slider from 0.01 to 0.10)
NodeKind = Literal["x", "m", "mlp"]  # residual entering block l (l = L: the final one), after its attention, MLP
Node = tuple[str, int, int]  # (kind, layer, position)


def _out_norms(block: nn.Module) -> tuple[nn.Module | None, nn.Module | None]:
    """The norms on a block's attention and MLP outputs (None where the block has none, or no MLP)."""
    return block.post_attn_norm, block.post_mlp_norm if block.mlp is not None else None


def decomposable(tm: TextModel) -> bool:
    """Whether the residual stream is a sum of the parts' writes: pre-norm blocks, and sandwich blocks whose output
    norms are RMSNorms (frozen at the run's statistic, see the module's docstring)."""
    return all(
        block.norm_position != "post" and all(n is None or isinstance(n, RMSNorm) for n in _out_norms(block))
        for block in tm.model.blocks
    )


def frozen_norms(tm: TextModel) -> bool:
    """Whether the decomposition freezes norms after the sub-layers (a linearisation of this run, not a sum)."""
    return any(n is not None for block in tm.model.blocks for n in _out_norms(block))


def undecomposable_norm(tm: TextModel) -> str:
    """Why the stream is not a sum of writes: ``"post"`` (norm(x + f(x))) or ``"sandwich"`` (x + LayerNorm(f(·)):
    a LayerNorm's mean subtraction on a sub-layer's output is no per-position scale to freeze)."""
    return "post" if any(block.norm_position == "post" for block in tm.model.blocks) else "sandwich"


@dataclass(frozen=True)
class Decomposition:
    """One sequence's run split into writes to the residual stream (float, on the model's device)."""

    embed: Tensor  # [T, D] the embeddings entering block 0 (tokens + positions)
    heads: Tensor  # [L, H, T, D] each head's write at each query position: its slice of W_O, then attn_scale
    attn_bias: Tensor  # [L, T, D] W_O's bias as written at each position, through attn_scale (zeros without one)
    mlp: Tensor  # [L, T, D] each MLP's (or mixture of experts') write, through mlp_scale
    attn_scale: Tensor  # [L, T, D] the post-attention norm frozen at this run, w / rms(a_i) (ones without one)
    mlp_scale: Tensor  # [L, T, D] the post-MLP norm frozen the same way (ones without one)
    residual: Tensor  # [L + 1, T, D] the model's own residual entering each block, then after the last
    mid: Tensor  # [L, T, D] the model's own residual after each block's attention
    head_out: Tensor  # [L, H, T, Dh] each head's output before W_O (what Edit records at site "head")
    weights: Tensor  # [L, H, T, T] post-softmax attention (rows = queries)
    values: Tensor  # [L, H, T, Dh] the values each query head reads (its key/value group's under GQA/MQA)
    # A decoder's keys and values of every layer and position as the run made them (batch 1): what a later run over
    # the same opening tokens (an edit at the text's end, an edge's rerun from a layer) attends to, kept, not projected
    # again from the residuals (SmolLM2: 20 ms of each edit). None for an encoder, whose positions read later ones.
    cache: KVCache | None = field(default=None, compare=False, repr=False)

    @property
    def num_layers(self) -> int:
        return self.heads.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.embed.shape[0]


def _device(tm: TextModel) -> torch.device:
    return next(tm.model.parameters()).device


def _check(tm: TextModel) -> None:
    if not decomposable(tm):
        raise InputError("flow_post_norm", model=tm.name)


def head_projection(tm: TextModel, layer: int) -> Tensor:
    """W_O of ``layer`` split by head: ``[D, H, Dh]`` (head h owns input columns h·Dh … (h+1)·Dh − 1)."""
    attn = tm.attention_module(layer)
    return attn.proj.weight.view(attn.dim, attn.num_heads, attn.head_dim)  # (D, H, Dh)


def frozen_scale(norm: nn.Module | None, whole: Tensor) -> Tensor:
    """An RMSNorm held at the statistic of ``whole [..., D]``: the scale ``w / rms(whole)`` ``[..., D]``, so that
    ``norm(whole) = whole ⊙ scale`` and any split of ``whole`` passes through it part by part; ones without a norm."""
    if norm is None:
        return torch.ones_like(whole)
    return torch.rsqrt(whole.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight


# Each tensor's token axis, for joining a kept prefix to the positions after it (the weights, with two, apart).
TOKEN_AXIS = dict(
    embed=0, heads=2, attn_bias=1, mlp=1, attn_scale=1, mlp_scale=1, residual=1, mid=1, head_out=2, values=2
)


@torch.no_grad()
def decompose(tm: TextModel, ids: Sequence[int], *, reuse: tuple[Decomposition, int] | None = None) -> Decomposition:
    """Run ``ids`` once (recording heads and residuals, tracing attention) and split it into writes, so that
    ``residual[l + 1] = embed + Σ_{k≤l} (heads[k].sum(0) + attn_bias[k] + mlp[k])``, output norms frozen.

    ``reuse=(earlier, n)``: ``earlier`` decomposed a text whose first ``n`` tokens are these. Under a causal mask a
    position's every part depends on it and the positions before it alone, so those ``n`` are taken from
    ``earlier`` and only the rest run, over keys and values projected from its residuals (:func:`_prefix_cache`),
    as a KV cache would serve them; equal to the whole run up to float rounding (the tests hold it). At least the
    last token runs; an encoder (each position reads the later ones) always runs whole."""
    _check(tm)
    first = 0 if reuse is None or tm.kind != "causal" else max(0, min(reuse[1], reuse[0].num_tokens, len(ids) - 1))
    cache = _prefix_cache(tm, reuse[0], 0, first, 1) if first else None
    part = _decompose_run(tm, ids[first:], cache)
    return part if first == 0 else _joined(reuse[0], first, part)


def _decompose_run(tm: TextModel, ids: Sequence[int], cache: KVCache | None) -> Decomposition:
    """:func:`decompose` of ``ids`` after the tokens ``cache`` holds: rows for ``ids`` alone, weights over every key."""
    rec, trace = Edit().record(), Trace()
    if cache is None and tm.kind == "causal":
        cache = KVCache()  # filled by the run: the decomposition keeps it (Decomposition.cache)
    tm.states(ids, trace, edit=rec, cache=cache)  # no LM head: its T × V logits are never read here
    weights = trace.stack(name_contains="attn")[:, 0].to(_device(tm))  # (L, H, T, K)
    del trace  # its records: a second copy of the weights
    site = lambda name, layer: rec.captured.get_site(name, layer)[0]  # noqa: E731
    layers = len(tm.model.blocks)
    first = site("head", 0)  # (H, T, Dh)
    # The largest part, filled in place: a list of layers stacked at the end would hold it twice at the peak.
    heads = first.new_empty(layers, first.shape[0], first.shape[1], tm.config.dim)  # (L, H, T, D)
    bias, mlp, attn_scale, mlp_scale, values = [], [], [], [], []
    ones = first.new_ones(first.shape[1], tm.config.dim)  # (T, D): the scale without an output norm
    for layer, block in enumerate(tm.model.blocks):
        attn, (attn_norm, mlp_norm) = block.attn, _out_norms(block)
        heads[layer] = torch.einsum("htk,dhk->htd", site("head", layer), head_projection(tm, layer))  # (H, T, D)
        b = attn.proj.bias if attn.proj.bias is not None else first.new_zeros(attn.dim)  # (D,)
        # Without an output norm the scale is ones: nothing to multiply (the same numbers, passes over [H, T, D] less).
        scale = ones if attn_norm is None else frozen_scale(attn_norm, heads[layer].sum(0) + b)  # (T, D): of a_i
        if attn_norm is not None:
            heads[layer] *= scale
        attn_scale.append(scale)
        bias.append(b * scale)  # (T, D)
        mid = site("mid", layer)  # (T, D): the MLP's input is norm2(mid); an attention-only block has none
        if block.mlp is None:
            m = torch.zeros_like(mid)
        elif mlp_norm is None:  # the block added the MLP's output to mid: read it back, no second pass through it
            m = site("post", layer) - mid
        else:  # a sandwich: post − mid is the normed output, the frozen scale needs the MLP's own
            m = block.mlp(block.norm2(mid[None]))[0]
        mlp_scale.append(ones if mlp_norm is None else frozen_scale(mlp_norm, m))
        mlp.append(m if mlp_norm is None else m * mlp_scale[-1])
        v = attn.project_values(block.norm1(site("pre", layer)[None]))  # (1, H_kv, T, Dh)
        values.append(attn.expand_kv(v)[0])  # (H, T, Dh)
    return Decomposition(
        embed=site("pre", 0),
        heads=heads,
        attn_bias=torch.stack(bias),
        mlp=torch.stack(mlp),
        attn_scale=torch.stack(attn_scale),
        mlp_scale=torch.stack(mlp_scale),
        residual=torch.stack([site("pre", 0), *(site("post", layer) for layer in range(layers))]),
        mid=torch.stack([site("mid", layer) for layer in range(layers)]),
        head_out=torch.stack([site("head", layer) for layer in range(layers)]),
        weights=weights.to(heads.dtype),
        values=torch.stack(values),
        cache=cache,  # after the kept prefix (if any), this run's positions: every position of the text
    )


def _joined(earlier: Decomposition, first: int, part: Decomposition) -> Decomposition:
    """``earlier``'s first ``first`` positions followed by ``part``'s (run after them): one decomposition."""
    joined = {
        name: torch.cat([getattr(earlier, name).narrow(axis, 0, first), getattr(part, name)], dim=axis)
        for name, axis in TOKEN_AXIS.items()
    }
    n = first + part.num_tokens
    weights = part.weights.new_zeros(*part.weights.shape[:2], n, n)  # (L, H, T, T): a prefix's row ends at its keys
    weights[:, :, :first, :first] = earlier.weights[:, :, :first, :first]
    weights[:, :, first:] = part.weights  # (L, H, T − first, T)
    return Decomposition(**joined, weights=weights, cache=part.cache)  # the part's run extended the prefix's cache


def token_writes(tm: TextModel, dec: Decomposition, layer: int, queries: slice = slice(None)) -> Tensor:
    """What each key j writes into query i's residual at ``layer``, summed over heads: ``[Q, T, D]`` for the
    ``queries`` rows, ``(Σ_h a_ij^h · v_j^h W_O^h) ⊙ attn_scale_i``. Summed over j it is ``heads[layer].sum(0)``
    (never stored)."""
    return _token_writes(dec, _value_writes(tm, dec, layer), layer, queries, dec.num_tokens)


def _value_writes(tm: TextModel, dec: Decomposition, layer: int) -> Tensor:
    """``v_j W_O^h`` ``[H, T, D]``: what each head would write reading key j alone."""
    return torch.einsum("hjk,dhk->hjd", dec.values[layer], head_projection(tm, layer))  # (H, T, D)


def _token_writes(dec: Decomposition, vo: Tensor, layer: int, queries: slice, keys: int) -> Tensor:
    """:func:`token_writes` of the first ``keys`` keys ``[Q, K, D]``, from :func:`_value_writes` ``vo``."""
    writes = torch.einsum("hij,hjd->ijd", dec.weights[layer, :, queries, :keys], vo[:, :keys])  # (Q, K, D)
    return writes.mul_(dec.attn_scale[layer, queries, None])  # the query's frozen norm, the same for every key


def proximity(parts: Tensor, whole: Tensor) -> Tensor:
    """``max(0, ‖y‖₁ − ‖y − z‖₁)`` of parts ``[..., K, D]`` against their whole ``[..., D]`` → ``[..., K]``."""
    return (whole.abs().sum(-1, keepdim=True) - (whole.unsqueeze(-2) - parts).abs_().sum(-1)).clamp_min(0)


def _shares(prox: Tensor) -> Tensor:
    """Each part's proximity over the sum of its update's ``[..., K]`` (0 where no part is near the whole)."""
    total = prox.sum(-1, keepdim=True)
    return torch.where(total > 0, prox / total.clamp_min(torch.finfo(prox.dtype).tiny), torch.zeros_like(prox))


@dataclass(frozen=True)
class Importance:
    """Shares of each residual update (numpy, each update's shares sum to 1 unless no part is near it)."""

    attn_residual: np.ndarray  # [L, T] the residual x_i's share of position i's attention update
    attn_tokens: np.ndarray  # [L, T, T] token j's write (all heads) in position i's update, rows = i
    attn_bias: np.ndarray  # [L, T] W_O's bias
    mlp_residual: np.ndarray  # [L, T] the residual's share of the MLP update
    mlp: np.ndarray  # [L, T] the MLP's write


@torch.no_grad()
def importance(tm: TextModel, dec: Decomposition, *, reuse: tuple[Importance, int] | None = None) -> Importance:
    """The proximity shares of every part of every update, one layer at a time.

    ``reuse=(earlier, n)``: a decoder's first ``n`` positions are those ``earlier`` scored (see :func:`decompose`):
    their updates are made of parts of themselves and earlier positions alone, so their rows are taken, not
    computed (the last token's always are)."""
    res, tok, bias, mlp_res, mlp = [], [], [], [], []
    n = dec.num_tokens
    first = 0 if reuse is None or tm.kind != "causal" else max(0, min(reuse[1], reuse[0].mlp.shape[1], n - 1))
    for layer in range(dec.num_layers):
        vo = _value_writes(tm, dec, layer)  # (H, T, D): once per layer, read by every chunk
        seen = (dec.weights[layer] != 0).any(0)  # (T, T): key j has a weight in query i's row
        shares = []
        for start in range(first, n, QUERY_CHUNK):  # a few queries at a time: [Q, T, D], not [T, T, D]
            rows = slice(start, start + QUERY_CHUNK)
            # Keys after the last one these queries see (a decoder's later tokens) write exactly 0 (weight 0): their
            # proximity is 0, no need to compute it. Three parts apart, not concatenated: no copy of [Q, T, D].
            keys = int(seen[rows].any(0).nonzero().max()) + 1 if seen[rows].any() else 0
            y = dec.mid[layer, rows]  # (Q, D): x + Σ_j writes + b_O
            prox = y.new_zeros(y.shape[0], n + 2)  # (Q, T + 2): the residual, each token, the bias
            prox[:, :1] = proximity(dec.residual[layer, rows, None], y)
            prox[:, 1 : keys + 1] = proximity(_token_writes(dec, vo, layer, rows, keys), y)
            prox[:, -1:] = proximity(dec.attn_bias[layer, rows, None], y)
            shares.append(_shares(prox))  # (Q, T + 2)
        s = torch.cat(shares)  # (T − first, T + 2)
        res.append(s[:, 0]), tok.append(s[:, 1:-1]), bias.append(s[:, -1])
        after = torch.stack([dec.mid[layer, first:], dec.mlp[layer, first:]], dim=1)  # (T − first, 2, D)
        s = _shares(proximity(after, dec.residual[layer + 1, first:]))  # (T − first, 2)
        mlp_res.append(s[:, 0]), mlp.append(s[:, 1])
    numpy = lambda parts: torch.stack(parts).float().cpu().numpy()  # noqa: E731
    scored = Importance(numpy(res), numpy(tok), numpy(bias), numpy(mlp_res), numpy(mlp))  # rows first … T − 1
    return scored if first == 0 else _joined_importance(reuse[0], first, scored)


def _joined_importance(earlier: Importance, first: int, part: Importance) -> Importance:
    """``earlier``'s rows of the first ``first`` positions followed by ``part``'s rows (the positions after them)."""
    rows = lambda a, b: np.concatenate([a[:, :first], b], axis=1)  # noqa: E731  (L, T)
    tokens = np.zeros(part.attn_tokens.shape[:1] + (part.attn_tokens.shape[2],) * 2, part.attn_tokens.dtype)
    tokens[:, :first, :first] = earlier.attn_tokens[:, :first, :first]  # a prefix's row ends at its own keys
    tokens[:, first:] = part.attn_tokens  # (L, T − first, T)
    return Importance(
        rows(earlier.attn_residual, part.attn_residual),
        tokens,
        rows(earlier.attn_bias, part.attn_bias),
        rows(earlier.mlp_residual, part.mlp_residual),
        rows(earlier.mlp, part.mlp),
    )


@dataclass(frozen=True)
class Edge:
    """A part of ``target``'s update that passed the threshold; ``weight`` is its share."""

    source: Node
    target: Node
    kind: Literal["attn", "residual", "mlp"]  # a token's write through attention, the residual, the MLP's write
    weight: float


@dataclass(frozen=True)
class Graph:
    """Nodes and edges that reach ``target``'s final residual (node ("x", L, target)) with shares ≥ threshold."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    target: int  # position, 0 … T − 1
    threshold: float
    num_layers: int
    num_tokens: int


def position(target: int, n: int) -> int:
    """A position given as Python indexes (−1 = the last of ``n``) as 0 … n − 1; refused outside the text."""
    if not -n <= target < n:
        raise InputError("flow_position_range", position=target, count=n)
    return target % n


def routes(imp: Importance, target: int = -1, threshold: float = THRESHOLD) -> Graph:
    """Walk back from ``target``'s final residual, layer by layer, keeping every part with share ≥ ``threshold``.

    An MLP's write is an edge ("mlp", l, i) → ("x", l + 1, i); the MLP node reads ("m", l, i), drawn as an edge
    of the same share. The residual's own share is an edge from the same position one step below."""
    if not 0 < threshold <= 1:
        raise InputError("flow_threshold_range", value=threshold)
    layers, n = imp.mlp.shape
    target = position(target, n)
    edges: list[Edge] = []
    above = {target}  # positions whose node ("x", l + 1, i) is in the graph
    for layer in reversed(range(layers)):
        mids: set[int] = set()
        for i in sorted(above):
            top = ("x", layer + 1, i)
            if imp.mlp_residual[layer, i] >= threshold:
                edges.append(Edge(("m", layer, i), top, "residual", float(imp.mlp_residual[layer, i])))
                mids.add(i)
            if imp.mlp[layer, i] >= threshold:
                share = float(imp.mlp[layer, i])
                edges += [
                    Edge(("mlp", layer, i), top, "mlp", share),
                    Edge(("m", layer, i), ("mlp", layer, i), "mlp", share),
                ]
                mids.add(i)
        above = set()
        for i in sorted(mids):
            mid = ("m", layer, i)
            if imp.attn_residual[layer, i] >= threshold:
                edges.append(Edge(("x", layer, i), mid, "residual", float(imp.attn_residual[layer, i])))
                above.add(i)
            for j in np.nonzero(imp.attn_tokens[layer, i] >= threshold)[0].tolist():
                edges.append(Edge(("x", layer, j), mid, "attn", float(imp.attn_tokens[layer, i, j])))
                above.add(j)
    nodes = dict.fromkeys([("x", layers, target), *(n for e in edges for n in (e.target, e.source))])
    return Graph(tuple(nodes), tuple(edges), target, threshold, layers, n)  # top-down: targets before sources


def graph(tm: TextModel, ids: Sequence[int], target: int = -1, threshold: float = THRESHOLD) -> Graph:
    """The route graph of ``ids`` to ``target``'s final residual: :func:`decompose`, :func:`importance`,
    :func:`routes`."""
    return routes(importance(tm, decompose(tm, ids)), target, threshold)


# --- one edge: attention weight, contribution and causal effect per head ------------------------------------------
@dataclass(frozen=True)
class EdgeHeads:
    """Per head of one layer, for the edge key → query: three views, and their rank correlations."""

    weight: np.ndarray  # [H] a_ij: the attention weight
    norm: np.ndarray  # [H] ‖a_ij · v_j W_O^h ⊙ attn_scale_i‖₂: the size of what the edge writes
    share: np.ndarray  # [H] the head's piece's proximity share of query i's attention update
    effect: np.ndarray  # [H] the target's logit change when only this piece is removed (see :func:`edge_heads`)
    correlations: dict[str, float]  # Spearman ρ of each pair of views, over heads ("weight~norm", …)
    metric: str  # what the effect measures


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's ρ (Pearson on ranks, ties averaged); NaN when either side is constant."""
    ra, rb = (_ranks(v) for v in (a, b))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    order = v.argsort(kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v))
    for value in np.unique(v):  # ties share their mean rank
        tied = v == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def _check_edge(dec: Decomposition, layer: int, query: int, key: int) -> None:
    n = dec.num_tokens
    if not 0 <= layer < dec.num_layers:
        raise InputError("flow_layer_range", layer=layer, layers=dec.num_layers)
    position(query, n), position(key, n)
    if key % n > query % n and bool((dec.weights[layer, :, query, key] == 0).all()):
        raise InputError("flow_edge_hidden", i=query % n, j=key % n)


@torch.no_grad()
def predicted(tm: TextModel, dec: Decomposition, target: int) -> int:
    """The token the model predicts after ``target`` (argmax of its logits there)."""
    return int(tm.model.logits(tm.model.norm(dec.residual[-1, target])).argmax())


def token_logit(tm: TextModel, hidden: Tensor, token: int) -> Tensor:
    """``tm.model.logits(hidden)[..., token]`` from ``hidden [..., D]`` without the other V − 1 logits (SmolLM2's
    head over ten rows: 22 ms of a click)."""
    return tm.model.logits(hidden, torch.tensor([token], device=hidden.device))[..., 0]  # (...,)


def _prefix_cache(tm: TextModel, dec: Decomposition, layer: int, first: int, rows: int) -> KVCache | None:
    """The keys and values of positions 0 … ``first − 1`` at blocks ``layer`` … L − 1 as this run made them, for
    ``rows`` rows (None when ``first`` is 0): the run's own (:attr:`Decomposition.cache`) while it holds every row,
    else projected from the recorded residuals (each block's own ``attention_input`` and ``project_qkv``, rotary at
    the true positions). Either way no prefix pass through the blocks."""
    if first == 0:
        return None
    if dec.cache is not None and dec.cache.complete():  # the run's own rows (no window has dropped one)
        cache = dec.cache.prefix(first)
        cache.keys = [k.expand(rows, -1, -1, -1) for k in cache.keys]  # (B, H_kv, first, Dh)
        cache.values = [v.expand(rows, -1, -1, -1) for v in cache.values]
        return cache
    cache = KVCache()
    pos, _ = cache.begin(first, None, dec.residual.device)
    for i, block in enumerate(tm.model.blocks):
        if i < layer:  # never read: the rerun starts at ``layer``; the cache fills its layers in order
            attn = block.attn
            k = v = dec.residual.new_empty(rows, attn.num_kv_heads, 0, attn.head_dim)  # (B, H_kv, 0, Dh)
        else:
            _, k, v = block.attn.project_qkv(block.attention_input(dec.residual[i, :first][None]), pos=pos)
            k, v = k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)  # (B, H_kv, first, Dh)
        cache.update(i, k, v)
    cache.commit(pos)
    return cache


@torch.no_grad()
def rerun_without_pieces(
    tm: TextModel, dec: Decomposition, layer: int, query: int, target: int, pieces: Tensor, *, prefix: bool = True
) -> Tensor:
    """The final hidden state at ``target`` ``[H + 1, D]`` when row h reruns the model from ``layer`` with
    ``pieces[h] [Dh]`` taken out of head h's output at ``query`` (the other heads as recorded); the last row is the
    reference, every head as recorded.

    Under a causal mask the positions before ``query`` do not change (nothing they read is changed), and
    the positions after ``target`` cannot reach it: only ``query`` … ``target`` rerun, their queries at their
    true positions, attending to the recorded keys and values of the earlier positions (:func:`_prefix_cache`).
    ``prefix=False`` (and an encoder, whose every position reads the query) reruns every position from 0: the
    plain computation, which the shortcut equals up to float rounding (the tests hold it to that)."""
    n = dec.num_tokens
    causal = tm.kind == "causal"
    keep = target + 1 if causal else n  # a decoder's later positions cannot change the target's
    first = min(query, target) if causal and prefix else 0
    base = dec.head_out[layer, :, first:keep]  # (H, N, Dh): the rerun positions only
    heads = base.shape[0]
    # Row h: head h without the piece, the other heads as recorded. The reference reruns the recorded outputs
    # too, so that the rows differ by the piece alone (not by the fused kernel's rounding).
    source = base[None].repeat(heads + 1, 1, 1, 1)  # (H + 1, H, N, Dh)
    if query < keep:  # a decoder's query after the target changes nothing there: every row is the reference
        source[torch.arange(heads), torch.arange(heads), query - first] -= pieces
    edit = Edit()
    for h in range(heads):
        edit.patch_head(layer, h, source)
    q_pos = torch.arange(first, keep, device=base.device)
    k_pos = torch.arange(keep, device=base.device)
    mask = tm.model.mask_between(q_pos, k_pos)  # (N, keep) or None
    x = dec.residual[layer, first:keep][None].repeat(heads + 1, 1, 1)  # (H + 1, N, D)
    cache = _prefix_cache(tm, dec, layer, first, heads + 1)
    hidden = tm.model.hidden(x, mask, None, pos=q_pos, k_pos=k_pos, cache=cache, edit=edit, start=layer)
    return hidden[:, target - first]  # (H + 1, D)


@torch.no_grad()
def edge_heads(
    tm: TextModel,
    dec: Decomposition,
    layer: int,
    query: int,
    key: int,
    target: int = -1,
    *,
    token: int | None = None,
) -> EdgeHeads:
    """Attention weight, write norm and causal effect of key → query at ``layer``, per head.

    Causal effect: the piece ``a_ij · v_j`` is taken out of head h's output at query i (nothing renormalised, the
    other keys' pieces kept) and the model reruns from ``layer``; the effect is the change of the logit of the
    token predicted at ``target`` (a decoder; ``token``: that prediction when the caller has it already), or of
    ‖final hidden state at ``target``‖ relative change (an encoder). One batched rerun, a row per head and the
    reference (:func:`rerun_without_pieces`)."""
    _check_edge(dec, layer, query, key)
    n = dec.num_tokens
    query, key, target = query % n, key % n, position(target, n)
    a = dec.weights[layer, :, query, key]  # (H,)
    pieces = a[:, None] * dec.values[layer, :, key]  # (H, Dh): what each head reads from the key
    writes = torch.einsum("hk,dhk->hd", pieces, head_projection(tm, layer)) * dec.attn_scale[layer, query]  # (H, D)
    y = dec.mid[layer, query]
    parts = torch.cat([dec.residual[layer, query][None], writes, dec.attn_bias[layer, query][None]])  # (H + 2, D)
    share = _shares(proximity(parts, y))
    final = rerun_without_pieces(tm, dec, layer, query, target, pieces)  # (H + 1, D): the last row is the reference
    if tm.kind == "causal":
        token = predicted(tm, dec, target) if token is None else token
        logit = token_logit(tm, final, token)  # (H + 1,): reruns, so the model's own (capped) logit
        effect, metric = logit[:-1] - logit[-1], f"Δ logit({tm.labels([token])[0]})"
    else:
        effect = (final[:-1] - final[-1]).norm(dim=-1) / final[-1].norm()
        metric = "‖Δh‖ / ‖h‖"
    views = {
        "weight": a.float().cpu().numpy(),
        "norm": writes.norm(dim=-1).float().cpu().numpy(),
        "effect": effect.float().cpu().numpy(),
    }
    pairs = (("weight", "norm"), ("weight", "effect"), ("norm", "effect"))
    return EdgeHeads(
        weight=views["weight"],
        norm=views["norm"],
        share=share[1:-1].float().cpu().numpy(),
        effect=views["effect"],
        correlations={f"{p}~{q}": rank_correlation(np.abs(views[p]), np.abs(views[q])) for p, q in pairs},
        metric=metric,
    )


# --- one node: the logit lens at its residual and what its heads and MLP write ------------------------------------
def frozen_norm(tm: TextModel, final: Tensor, parts: Tensor) -> Tensor:
    """The final norm as a linear map with the statistics of the final residual ``final [D]`` held fixed,
    applied to ``parts [..., D]`` (LayerNorm's β is left out: it is written whatever the parts are). Summed over
    every part of ``final`` it gives ``norm(final)`` minus β exactly."""
    norm = tm.model.norm
    if isinstance(norm, RMSNorm):
        return parts * frozen_scale(norm, final)
    if isinstance(norm, LayerNorm):
        centred = parts - parts.mean(dim=-1, keepdim=True)
        return centred * torch.rsqrt(final.var(unbiased=False) + norm.eps) * norm.weight
    return parts  # no final norm


def direct_logits(tm: TextModel, dec: Decomposition, parts: Tensor, pos: int) -> Tensor:
    """Direct logit attribution of writes ``parts [..., D]`` at position ``pos``: ``[..., V]``, what each adds
    to the logits there through the frozen final norm and the LM head (decoders).

    The attribution is of the *uncapped* logits: a final soft cap (Gemma 2's c·tanh(z/c)) is not linear, so the
    capped logit is no sum of per-part pieces. Summed over every part the pieces give the head's logit before the
    cap, which the cap only squeezes monotonically, so each token's ranking is the model's."""
    return tm.model.head(frozen_norm(tm, dec.residual[-1, pos], parts))


def node_residual(dec: Decomposition, node: Node) -> Tensor:
    """The residual stream at a node ``[D]``: entering block l ("x"), after its attention ("m"), after its MLP."""
    kind, layer, pos = node
    if kind == "x":
        return dec.residual[layer, pos]
    return dec.mid[layer, pos] if kind == "m" else dec.residual[layer + 1, pos]


@dataclass(frozen=True)
class NodeReadout:
    """The logit lens at a node's residual and the direct logit attribution of its block's heads and MLP."""

    lens_ids: np.ndarray  # [K] the most likely next tokens read from the node's residual
    lens_probs: np.ndarray  # [K]
    parts: tuple[str, ...]  # "H0" … "MLP": the writes of the node's block at its position (empty at the embeddings)
    up_ids: np.ndarray  # [P, K] tokens each part pushes up most
    up: np.ndarray  # [P, K] by how much (logits)
    down_ids: np.ndarray  # [P, K] tokens each part pushes down most
    down: np.ndarray  # [P, K]
    layer: int | None  # the block whose parts these are


@torch.no_grad()
def node_readout(tm: TextModel, dec: Decomposition, node: Node, k: int = hs.TOP_K) -> NodeReadout:
    """Logit lens (final norm and LM head on the node's residual) and, per head and MLP of the node's block at
    its position, the tokens it pushes up and down directly, against its mean over the vocabulary (decoders)."""
    if tm.kind != "causal":
        raise InputError("flow_decoder_only", model=tm.name)
    kind, layer, pos = node
    if kind not in ("x", "m", "mlp") or not 0 <= layer <= dec.num_layers - (kind != "x"):
        raise InputError("flow_layer_range", layer=layer, layers=dec.num_layers)
    pos = position(pos, dec.num_tokens)
    probs = tm.model.logits(tm.model.norm(node_residual(dec, (kind, layer, pos)))).softmax(-1)
    top = probs.topk(k)
    block = layer - 1 if kind == "x" else layer  # an input node shows the block below it
    names: tuple[str, ...] = ()
    up_ids = up = down_ids = down = np.zeros((0, k))
    if block >= 0:
        parts = torch.cat([dec.heads[block, :, pos], dec.mlp[block, pos][None]])  # (H + 1, D)
        dla = direct_logits(tm, dec, parts, pos)  # (H + 1, V)
        # Centred over the vocabulary: adding the same to every logit changes no probability, so a part pushes a
        # token up or down only against its own mean (SmolLM2's last MLP adds +2 or more to every token it
        # "pushed down" before)
        dla = dla - dla.mean(dim=-1, keepdim=True)
        hi, lo = dla.topk(k, dim=-1), (-dla).topk(k, dim=-1)
        names = (*(f"H{h}" for h in range(parts.shape[0] - 1)), "MLP")
        up_ids, up = hi.indices.cpu().numpy(), hi.values.float().cpu().numpy()
        down_ids, down = lo.indices.cpu().numpy(), -lo.values.float().cpu().numpy()
    return NodeReadout(
        lens_ids=top.indices.cpu().numpy(),
        lens_probs=top.values.float().cpu().numpy(),
        parts=names,
        up_ids=up_ids,
        up=up,
        down_ids=down_ids,
        down=down,
        layer=block if block >= 0 else None,
    )


def heaviest_edge(g: Graph) -> tuple[int, int, int] | None:
    """(layer, query, key) of the graph's attention edge between two different tokens with the largest share
    (the edge a page opens first), else its largest attention edge, else None."""
    attn = [e for e in g.edges if e.kind == "attn"]
    if not attn:
        return None
    best = max(attn, key=lambda e: (e.source[2] != e.target[2], e.weight))
    return best.target[1], best.target[2], best.source[2]
