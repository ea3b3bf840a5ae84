"""Reading a causal language model (§6): embeddings, next-token distributions, per-token loss, generation.

Every function takes logits or a :class:`~tx_explorer.families.text.TextModel` and returns numbers; nothing
here draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from tx_explorer.analysis.heads import max_tokens
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.trace import Trace


def embedding_rows(tm: TextModel, ids: list[int]) -> np.ndarray:
    """The embedding lookup (§6.1): row ``id`` of the ``[V, D]`` token matrix for each token → ``[N, D]``."""
    return tm.model.embed.tok_embed.weight[torch.as_tensor(ids)].detach().cpu().numpy()


def tied_output(tm: TextModel) -> bool:
    """Whether the output layer's ``[V, D]`` matrix is the token embedding matrix (weight tying, GPT-2; Llama and
    Mistral keep two), read from the tensors rather than the config."""
    head, embed = tm.model.head.weight, tm.model.embed.tok_embed.weight
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
    limit = min(tm.max_len, max_tokens(tm))  # every step's map is kept: the context, or the maps' budget
    if not 1 <= max_new_tokens < limit:
        raise InputError("new_tokens_range", limit=limit - 1, value=max_new_tokens)
    kept = prompt[-(limit - max_new_tokens) :]
    sampling = dict(greedy=greedy, temperature=temperature, top_k=top_k, seed=seed)
    ids = [*kept, *tm.stream(kept, max_new_tokens, **sampling)]
    trace = Trace()
    tm.run(ids, trace=trace)
    return Generation(
        ids=ids,
        tokens=tm.labels(ids),
        prompt_len=len(kept),
        prompt_cut=len(kept) < len(prompt),
        limit=limit,
        maps=trace.stack()[:, 0].numpy(),
    )


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


def prefix_invariance(tm: TextModel, ids: list[int], logits: Tensor, cut: int) -> float:
    """Largest |Δ| between the logits of the first ``cut`` positions computed from those tokens alone and
    ``logits [1, N, V]`` computed from all of ``ids``: zero under the causal mask (training and inference agree,
    §6). Both runs take the same materialised path; float32 products of different lengths may still round
    differently (a few ulps of the largest logit), never by what the later tokens say."""
    alone = tm.run(ids[:cut], trace=Trace())  # (1, cut, V)
    return float((alone[0] - logits[0, :cut]).abs().max())


def read(tm: TextModel, text: str, k: int = 10) -> Reading:
    """Everything the language-model page shows about ``text`` (truncated to the context)."""
    if tm.kind != "causal":
        raise TypeError(f"{tm.name} is an encoder: it does not predict next tokens")
    enc = tm.encode(text, max_tokens(tm))
    logits, trace = tm.attention(enc)
    top = torch.topk(logits[0], min(k, logits.shape[-1]), dim=-1)  # (N, k): the softmax keeps the order
    probs = torch.exp(top.values.double() - torch.logsumexp(logits[0].float(), dim=-1, keepdim=True).double())
    top_ids = top.indices.numpy()
    return Reading(
        ids=list(enc.ids),
        tokens=list(enc.tokens),
        truncated=enc.truncated,
        num_tokens=enc.num_tokens,
        embeddings=embedding_rows(tm, list(enc.ids)),
        maps=trace.stack()[:, 0].numpy(),
        top_ids=top_ids,
        top_probs=probs.numpy(),
        top_labels=[tm.labels(row) for row in top_ids.tolist()],
        losses=token_losses(logits, list(enc.ids)) if len(enc.ids) > 1 else np.zeros(0),
        prefix_len=(cut := (len(enc.ids) + 1) // 2),
        prefix_delta=prefix_invariance(tm, list(enc.ids), logits, cut),
        prefix_scale=float(logits[0, :cut].abs().max()),
    )
