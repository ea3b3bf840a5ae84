"""What a head does, measured: ablation, activation patching, a sub-layer logit lens, a head taxonomy and
attribution beside attention. Every function takes a :class:`~tx_explorer.families.text.TextModel` (decoder or
encoder) and changes the computation only through the :class:`~tx_explorer.edit.Edit` contract.

Decoders are scored by their next-token loss and logits; encoders (MiniLM) by their mean-pooled sentence
embedding, the quantity sentence-transformers uses. Long jobs take ``progress(fraction, what)``.
Definitions: induction, previous- and duplicate-token scores as in Olsson et al. 2022 (and TransformerLens);
integrated gradients and their completeness, Sundararajan et al. 2017; attention sinks, Xiao et al. 2023;
logit difference recovered by activation patching, (patched − corrupted) / (clean − corrupted).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from tx_explorer import masks
from tx_explorer.analysis.heads import pattern_scores, top_heads
from tx_explorer.analysis.rollout import rollout
from tx_explorer.edit import Edit, HeadMeans, head_means
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.trace import Trace

Progress = Callable[[float, str], None]
HELDOUT_FILE = Path(__file__).resolve().parents[1] / "data" / "heldout_text.json"
SINK_THRESHOLD = 0.5  # a head putting at least half of its attention on the first token is flagged as a sink
# An induction score is the mean weight a query of the second copy puts on one key, the token after its earlier
# occurrence, among the ~1.5 n keys it sees: uniform attention gives about 1 / (1.5 n), 0.028 at n = 24. A head is
# called an induction head from 0.3 on, over ten times that (the circuit page counts heads at the same 0.3).
INDUCTION_THRESHOLD = 0.3
TOP_K = 5  # tokens shown per logit-lens cell
SCORES = ("previous", "duplicate", "induction", "distance", "sink", "entropy")
REPEAT_SCORES = ("induction", "previous", "duplicate")  # analysis.heads.pattern_scores: one place per formula


def no_progress(fraction: float, what: str) -> None:
    """The default progress callback: says nothing."""


def text_model(obj: object) -> TextModel:
    """The :class:`TextModel` inside a registry object (``tiny-moe`` loads as a bundle holding one)."""
    return obj if isinstance(obj, TextModel) else obj.text


def _device(tm: TextModel) -> torch.device:
    return next(tm.model.parameters()).device


def _ids(tm: TextModel, ids: Sequence[int] | Tensor) -> Tensor:
    """``[B, N]`` long on the model's device; a flat list is one sequence."""
    t = torch.as_tensor(ids, dtype=torch.long)
    return (t[None] if t.dim() == 1 else t).to(_device(tm))


def encode(tm: TextModel, text: str, limit: int = 64) -> list[int]:
    """Token ids of ``text`` (at most ``limit``); a decoder needs two tokens (one prediction)."""
    ids = tm.encode(text, limit=limit).ids
    if tm.kind == "causal" and len(ids) < 2:
        raise InputError("hs_too_short", count=len(ids))
    return ids


def check_head(tm: TextModel, layer: int, head: int) -> None:
    layers, heads = len(tm.model.blocks), tm.config.num_heads
    if not (0 <= layer < layers and 0 <= head < heads):
        raise InputError("hs_head_range", layer=layer, head=head, layers=layers, heads=heads)


def forward(tm: TextModel, ids: Tensor, edit: Edit | None = None, trace: Trace | None = None) -> Tensor:
    """Logits ``[B, N, V]`` (decoder) or hidden states ``[B, N, D]`` (encoder)."""
    return tm.model(ids, trace=trace, edit=edit)


def rerun(
    tm: TextModel, layer: int, x: Tensor, edit: Edit | None = None, *, last_only: bool = False, hidden: bool = False
) -> Tensor:
    """The model's output from ``x [B, N, D]``, the residual entering block ``layer`` (earlier blocks skipped):
    logits ``[B, N, V]`` (``[B, 1, V]`` with ``last_only``) or an encoder's hidden states (a decoder's too, before
    its LM head, with ``hidden``)."""
    states = tm.model.hidden(x, tm.mask(x.shape[1]), None, edit=edit, start=layer)
    if tm.kind == "encoder" or hidden:
        return states
    return tm.model.logits(states[:, -1:] if last_only else states)


def one_head_per_block(layer: int, base: Tensor, replace: Tensor) -> Edit:
    """An edit for ``H·B`` rows: from one run's head outputs ``base [B, H, N, Dh]`` at ``layer``, block h of B
    rows gets head h's output replaced by ``replace[h]`` (broadcast to ``[B, N, Dh]``), the other heads as in
    ``base``. Rerunning from ``layer`` then changes one head per block in a single batched pass."""
    b, heads = base.shape[:2]
    source = base.repeat(heads, 1, 1, 1)  # (H·B, H, N, Dh): block h = rows h·B … h·B + B − 1
    for h in range(heads):
        source[h * b : (h + 1) * b, h] = replace[h]
    edit = Edit()
    for h in range(heads):
        edit.patch_head(layer, h, source)
    return edit


def sentence_embedding(hidden: Tensor) -> Tensor:
    """Mean pooling over tokens, ``[B, N, D] → [B, D]`` (sentence-transformers' pooling for MiniLM)."""
    return hidden.mean(dim=1)


@dataclass(frozen=True)
class Scores:
    """Per-sequence outcome of one run: decoder loss and target logit, or encoder sentence embedding."""

    loss: Tensor | None  # [B] mean next-token cross-entropy
    target_logit: Tensor | None  # [B] logit of the last token given the ones before it
    embedding: Tensor | None  # [B, D]


def score(tm: TextModel, ids: Tensor, out: Tensor) -> Scores:
    if tm.kind == "encoder":
        return Scores(None, None, sentence_embedding(out))
    ce = F.cross_entropy(out[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none").mean(dim=1)  # (B,)
    target = out[:, -2].gather(1, ids[:, -1:])[:, 0]  # (B,)
    return Scores(ce, target, None)


def _rescore(tm: TextModel, ids: Tensor, hidden: Tensor) -> Scores:
    """:func:`score` of a rerun's final hidden states ``[B, N, D]``, a decoder's logits one sequence at a time:
    Gemma 3's held-out ablation held 4 heads × 8 windows × 64 tokens × 262 144 logits at once (over 6 GB)."""
    if tm.kind == "encoder":
        return score(tm, ids, hidden)
    rows = [score(tm, ids[i : i + 1], tm.model.logits(hidden[i : i + 1])) for i in range(hidden.shape[0])]
    return Scores(torch.cat([r.loss for r in rows]), torch.cat([r.target_logit for r in rows]), None)


# --- held-out reference windows ---------------------------------------------------------------------------------
def heldout_windows(tm: TextModel, *, length: int = 64, count: int = 8) -> tuple[Tensor, str]:
    """``count`` windows of ``length`` tokens from the training corpus's validation documents, and their name.

    The documents are text (``data/heldout_text.json``), so every tokenizer cuts its own windows."""
    data = json.loads(HELDOUT_FILE.read_text(encoding="utf-8"))
    length = min(length, tm.max_len)
    head, tail = framing(tm)
    body = length - len(head) - len(tail)
    ids: list[int] = []
    for doc in data["documents"]:
        ids += tm.tokenizer.encode(doc, add_special_tokens=False).ids
    count = min(count, len(ids) // body)
    cut = torch.tensor(ids[: count * body], dtype=torch.long).view(count, body)  # (S, body)
    framed = [torch.tensor([t], dtype=torch.long).expand(count, len(t)) for t in (head, tail)]  # (S, n) each
    windows = torch.cat([framed[0], cut, framed[1]], dim=1)  # (S, T)
    return windows, f"{count} held-out windows × {length} tokens"


def framing(tm: TextModel) -> tuple[list[int], list[int]]:
    """The special tokens ``tm``'s tokenizer puts before and after a text (Gemma 3: ``<bos>`` and none; MiniLM:
    ``[CLS]`` and ``[SEP]``; SmolLM2: none): a window read without them is not what the model was trained on
    (Gemma 3's held-out loss: 5.62 nats without its ``<bos>``, 3.72 with it)."""
    plain = tm.tokenizer.encode("text", add_special_tokens=False).ids
    full = tm.tokenizer.encode("text").ids
    start = next(i for i in range(len(full) - len(plain) + 1) if full[i : i + len(plain)] == plain)
    return full[:start], full[start + len(plain) :]


def reference_means(tm: TextModel, *, length: int = 64, count: int = 8) -> HeadMeans:
    """Per-head mean outputs over the held-out windows: the stated reference set of mean ablation."""
    windows, source = heldout_windows(tm, length=length, count=count)
    return head_means(lambda ids, e: forward(tm, ids.to(_device(tm)), e), windows, source=source)


# --- head importance ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HeadImportance:
    """Effect of ablating each head alone, ``[L, H]`` arrays (decoder: loss and logit; encoder: cosine)."""

    delta_loss: np.ndarray | None  # ablated − clean mean loss (positive: the head helped)
    delta_logit: np.ndarray | None  # ablated − clean target logit
    cosine_change: np.ndarray | None  # 1 − cos(clean, ablated sentence embedding)
    base_loss: float | None
    base_logit: float | None
    mode: str
    source: str  # "the text (N tokens)" or the held-out windows' description


@torch.no_grad()
def head_importance(
    tm: TextModel,
    ids: Sequence[int] | Tensor,
    *,
    mode: str = "zero",
    reference: HeadMeans | None = None,
    source: str = "",
    progress: Progress = no_progress,
) -> HeadImportance:
    """Ablate every layer × head in turn on ``ids`` (one sequence or ``[S, T]`` windows) and measure the change.

    Each layer is one batched pass from its input (recorded once): block h of the batch has head h ablated."""
    x = _ids(tm, ids)
    b = x.shape[0]
    layers, heads = len(tm.model.blocks), tm.config.num_heads
    rec = Edit().record()
    clean = score(tm, x, forward(tm, x, rec))
    delta_loss, delta_logit, cosine = (np.zeros((layers, heads)) for _ in range(3))
    for layer in range(layers):
        progress(layer / layers, f"L{layer}")
        base = rec.captured.get_site("head", layer)  # (B, H, N, Dh)
        if mode == "mean":
            if reference is None:
                raise ValueError("mean ablation needs a reference: the per-head means over a stated set (HeadMeans)")
            replace = reference.values[layer].to(base)[:, None, :]  # (H, 1, Dh): each head's mean, every position
        elif mode == "zero":
            replace = torch.zeros(heads, 1, base.shape[-1], dtype=base.dtype, device=base.device)
        else:
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}")
        edit = one_head_per_block(layer, base, replace)
        xs = x.repeat(heads, 1)  # (H·B, N)
        s = _rescore(
            tm, xs, rerun(tm, layer, rec.captured.get_site("pre", layer).repeat(heads, 1, 1), edit, hidden=True)
        )
        if tm.kind == "encoder":
            change = 1 - F.cosine_similarity(s.embedding, clean.embedding.repeat(heads, 1), dim=-1)  # (H·B,)
            cosine[layer] = change.view(heads, b).mean(1).cpu().numpy()
        else:
            delta_loss[layer] = (s.loss - clean.loss.repeat(heads)).view(heads, b).mean(1).cpu().numpy()
            delta_logit[layer] = (
                (s.target_logit - clean.target_logit.repeat(heads)).view(heads, b).mean(1).cpu().numpy()
            )
    progress(1.0, "")
    encoder = tm.kind == "encoder"
    return HeadImportance(
        delta_loss=None if encoder else delta_loss,
        delta_logit=None if encoder else delta_logit,
        cosine_change=cosine if encoder else None,
        base_loss=None if encoder else clean.loss.mean().item(),
        base_logit=None if encoder else clean.target_logit.mean().item(),
        mode=mode,
        source=source or f"{x.shape[0]} × {x.shape[1]} tokens",
    )


# --- activation patching ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PatchPair:
    """A clean and a corrupted prompt of equal token length, and optionally the two answers to compare."""

    clean: str
    corrupt: str
    answers: tuple[str, str] | None = None  # (clean answer, corrupted answer); None: each prompt's top prediction


# Measured on the bundled models (benchmarks/head_science.py): the clean − corrupted difference is large and
# patching localises it. Token lengths depend on the tokenizer, so each model has its own; others use "*".
EXAMPLE_PAIRS: dict[str, tuple[PatchPair, ...]] = {
    "tiny-gpt": (
        PatchPair("The name of the", "The name is the"),
        PatchPair("If the file is missing, the", "If the path is missing, the", (" file", " path")),
        PatchPair("A string is returned. The string", "A number is returned. The number"),
    ),
    "tiny-llama": (
        PatchPair("The name of the", "The name is the"),
        PatchPair("The thread is alive while the", "The process is alive while the", (" thread", " process")),
        PatchPair("The result is a", "The result of a"),
    ),
    "tiny-moe": (PatchPair("It is not", "It is a"),),
    "smollm2-135m-instruct": (  # indirect-object identification (Wang et al. 2022) and a fact recalled
        PatchPair(
            "When Mary and John went to the store, John gave a drink to",
            "When Mary and John went to the store, Mary gave a drink to",
            (" Mary", " John"),
        ),
        PatchPair("The capital of France is", "The capital of Italy is", (" Paris", " Rome")),
    ),
    "minilm-l6": (
        PatchPair("The cat sat on the mat.", "The dog sat on the mat."),
        PatchPair("A man is playing a guitar.", "A woman is slicing an onion."),
    ),
    "*": (  # a checkpoint's: one word changed, words most BPE vocabularies hold whole
        PatchPair("It is not", "It is a"),
        PatchPair("The name of the", "The name is the"),
        PatchPair("The cat sat on the", "The dog sat on the"),
        PatchPair("I went to the house", "I went to the river"),
        PatchPair("Step 1 comes before step", "Step 2 comes before step"),  # a digit is one token nearly everywhere
    ),
}


def example_pairs(name: str, tm: TextModel | None = None) -> tuple[PatchPair, ...]:
    """The patching view's example pairs for model ``name``; a model with none of its own (a checkpoint) gets the
    generic ones, those whose two prompts are as many tokens under ``tm``'s tokenizer first: patching needs equal
    lengths, and the first pair is the view's first answer (a random checkpoint's tokenizer split the first in 8
    and 5, so an error box opened the view)."""
    if name in EXAMPLE_PAIRS or tm is None:
        return EXAMPLE_PAIRS.get(name, EXAMPLE_PAIRS["*"])
    unequal = lambda p: len(tm.encode(p.clean).ids) != len(tm.encode(p.corrupt).ids)  # noqa: E731
    return tuple(sorted(EXAMPLE_PAIRS["*"], key=unequal))  # stable: the listed order among the equal ones


def answer_ids(tm: TextModel, answers: tuple[str, str]) -> tuple[int, int]:
    """The token ids of two answer words; each must be one token of this model."""
    out = []
    for word in answers:
        ids = tm.tokenizer.encode(word, add_special_tokens=False).ids
        if len(ids) != 1:
            raise InputError("hs_answer_token", text=word)
        out.append(ids[0])
    return out[0], out[1]


@dataclass(frozen=True)
class Patching:
    """Logit difference recovered, ``(patched − corrupted) / (clean − corrupted)``: 0 = corrupted, 1 = clean."""

    residual: np.ndarray  # [L, N]: the residual stream entering layer l at position p, from the clean run
    heads: np.ndarray  # [L, H]: head h's output at every position, from the clean run
    clean_metric: float
    corrupt_metric: float
    metric: str  # what was compared, e.g. "logit(▁the) − logit(▁a)"


def _patch_metric(tm: TextModel, out: Tensor, clean: Tensor | None, answers: tuple[int, int] | None) -> Tensor:
    """Per batch row: the logit difference of the two answers at the last position, or (encoder) the cosine
    similarity of the sentence embedding to the clean run's."""
    if tm.kind == "encoder":
        return F.cosine_similarity(sentence_embedding(out), clean, dim=-1)
    return out[:, -1, answers[0]] - out[:, -1, answers[1]]


@torch.no_grad()
def activation_patching(
    tm: TextModel,
    clean_ids: Sequence[int],
    corrupt_ids: Sequence[int],
    *,
    answers: tuple[int, int] | None = None,
    progress: Progress = no_progress,
) -> Patching:
    """Patch the clean run's activations into the corrupted run, one site at a time.

    ``answers`` = (clean answer, corrupted answer) token ids; by default each prompt's top prediction.
    """
    if len(clean_ids) != len(corrupt_ids):
        raise InputError("hs_unequal_lengths", clean=len(clean_ids), corrupt=len(corrupt_ids))
    clean, corrupt = _ids(tm, clean_ids), _ids(tm, corrupt_ids)
    rec_clean, rec_corrupt = Edit().record(), Edit().record()
    out_clean, out_corrupt = forward(tm, clean, rec_clean), forward(tm, corrupt, rec_corrupt)
    ref = sentence_embedding(out_clean) if tm.kind == "encoder" else None
    if tm.kind == "causal":
        answers = answers or (int(out_clean[0, -1].argmax()), int(out_corrupt[0, -1].argmax()))
        if answers[0] == answers[1]:
            raise InputError("hs_same_answer", token=tm.labels([answers[0]])[0])
        metric = "logit(“{}”) − logit(“{}”)".format(*tm.labels(list(answers)))
    else:
        metric = "cos(sentence embedding, clean)"
    hi = _patch_metric(tm, out_clean, ref, answers).item()
    lo = _patch_metric(tm, out_corrupt, ref, answers).item()
    if abs(hi - lo) < 1e-6:
        raise InputError("hs_no_difference")
    layers, heads, n = len(tm.model.blocks), tm.config.num_heads, clean.shape[1]
    residual, head_map = np.zeros((layers, n)), np.zeros((layers, heads))
    last = tm.kind == "causal"  # a decoder's metric reads the last position only
    for layer in range(layers):
        progress(layer / layers, f"L{layer}")
        # One batch row per position where the runs differ (elsewhere patching writes the same numbers: 0 exactly,
        # e.g. a decoder's positions before the first changed token): row p is the corrupted residual with
        # position p taken from the clean run.
        pre_clean, pre_corrupt = rec_clean.captured.get_site("pre", layer), rec_corrupt.captured.get_site("pre", layer)
        differ = torch.nonzero((pre_clean != pre_corrupt).any(dim=-1)[0])[:, 0]  # (P,)
        if differ.numel():
            rows = pre_corrupt.repeat(differ.numel(), 1, 1)  # (P, N, D)
            rows[torch.arange(differ.numel()), differ] = pre_clean[0, differ]
            out = rerun(tm, layer, rows, last_only=last)
            residual[layer, differ.cpu().numpy()] = (
                ((_patch_metric(tm, out, ref, answers) - lo) / (hi - lo)).cpu().numpy()
            )
        # One batch row per head: row h has head h's output from the clean run, the others from the corrupted.
        clean_heads = rec_clean.captured.get_site("head", layer)[0]  # (H, N, Dh)
        edit = one_head_per_block(layer, rec_corrupt.captured.get_site("head", layer), clean_heads)
        start = rec_corrupt.captured.get_site("pre", layer).repeat(heads, 1, 1)  # (H, N, D)
        out = rerun(tm, layer, start, edit, last_only=last)
        head_map[layer] = ((_patch_metric(tm, out, ref, answers) - lo) / (hi - lo)).cpu().numpy()
    progress(1.0, "")
    return Patching(residual=residual, heads=head_map, clean_metric=hi, corrupt_metric=lo, metric=metric)


# --- logit lens below layer level -------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogitLens:
    """Read-outs after the attention ("attn") and after the MLP ("mlp") of every layer, ``[2L, N, …]``."""

    rows: list[str]  # "L0 attn", "L0 mlp", …
    top_ids: np.ndarray  # [2L, N, 5] (decoder); empty for an encoder
    top_probs: np.ndarray  # [2L, N, 5]
    entropy: np.ndarray  # [2L, N] nats (decoder)
    kl_to_final: np.ndarray  # [2L, N] KL(final ‖ read-out) in nats (decoder)
    cosine_to_final: np.ndarray  # [2L, N] each token's read-out vs its final hidden state (both kinds)
    final_max_diff: float  # max |last read-out − the model's output|: 0 up to float rounding


@torch.no_grad()
def logit_lens(tm: TextModel, ids: Sequence[int]) -> LogitLens:
    """Final norm (+ LM head for a decoder) applied to the residual stream after every sub-layer."""
    x = _ids(tm, ids)
    rec = Edit().record()
    out = forward(tm, x, rec)
    layers = len(tm.model.blocks)
    rows = [f"L{layer} {part}" for layer in range(layers) for part in ("attn", "mlp")]
    resid = torch.cat([rec.captured.get_site(s, layer) for layer in range(layers) for s in ("mid", "post")])
    normed = tm.model.norm(resid)  # (2L, N, D)
    final_hidden = tm.model.norm(rec.captured.get_site("post", layers - 1))[0]  # (N, D)
    cosine = F.cosine_similarity(normed, final_hidden[None], dim=-1).cpu().numpy()
    if tm.kind == "encoder":
        none, top = np.zeros((2 * layers, x.shape[1])), np.zeros((2 * layers, x.shape[1], 0))
        diff = (normed[-1] - out[0]).abs().max().item()
        return LogitLens(rows, top.astype(int), top, none, none, cosine, diff)
    final_logp = out[0].log_softmax(dim=-1)  # (N, V)
    final_p = final_logp.exp()
    entropy, kl, top_ids, top_probs = [], [], [], []
    # One read-out [N, V] at a time: all 2L at once held several [2L, N, V] tensors, 18 GB for Gemma 3's 262 144
    # tokens × 36 read-outs × 128 positions (the server was killed)
    for row in normed:
        logits = tm.model.logits(row)  # (N, V): capped as the output is, so the last row is the output
        logp = logits.log_softmax(dim=-1)
        p = logp.exp()
        entropy.append(-(p * logp).sum(dim=-1))
        kl.append((final_p * (final_logp - logp)).sum(dim=-1))
        top = p.topk(TOP_K, dim=-1)
        top_ids.append(top.indices)
        top_probs.append(top.values)
    return LogitLens(
        rows=rows,
        top_ids=torch.stack(top_ids).cpu().numpy(),
        top_probs=torch.stack(top_probs).cpu().numpy(),
        entropy=torch.stack(entropy).cpu().numpy(),
        kl_to_final=torch.stack(kl).clamp_min(0).cpu().numpy(),
        cosine_to_final=cosine,
        final_max_diff=(logits - out[0]).abs().max().item(),
    )


# --- head taxonomy ---------------------------------------------------------------------------------------------
def repeated_random_tokens(tm: TextModel, length: int = 24, seed: int = 0) -> list[int]:
    """A first token (the model's special token if it has one), then ``length`` random ordinary tokens twice."""
    gen = torch.Generator().manual_seed(seed)
    ordinary = torch.tensor(sorted(set(range(tm.config.vocab_size)) - set(tm.special_ids)))
    seq = ordinary[torch.randint(len(ordinary), (length,), generator=gen)].tolist()
    first = min(tm.special_ids) if tm.special_ids else seq[0]
    if tm.kind == "encoder":  # [CLS] … [SEP]: the ids of the tokenizer's own specials
        wrapped = tm.tokenizer.encode("x").ids
        return [wrapped[0], *seq, *seq, wrapped[-1]]
    return [first, *seq, *seq]


def repeat_scores(maps: Tensor, n: int) -> dict[str, Tensor]:
    """Induction, previous- and duplicate-token scores ``[L, H]`` from maps ``[L, H, M, M]`` of one first token
    followed by n tokens twice (second copy at n+1…2n): the mean attention of its queries t on t − n + 1, t − 1
    and t − n."""
    m = maps.shape[-1]
    ids = [-1, *range(n), *range(n), *range(-2, -1 - (m - 2 * n), -1)]  # n distinct ids twice; the rest unique
    scores = pattern_scores(maps, ids, queries=range(n + 1, 2 * n + 1))  # the second copy's queries
    return {k: torch.as_tensor(scores[k], dtype=maps.dtype, device=maps.device) for k in REPEAT_SCORES}


def _maps(tm: TextModel, ids: Tensor) -> Tensor:
    """The maps of the first sequence of ``ids [B, N]`` (no LM head: :meth:`TextModel.maps`)."""
    return tm.maps(ids[0].tolist()).stack(name_contains="attn")[:, 0]  # (L, H, N, N)


@dataclass(frozen=True)
class Taxonomy:
    """Per head ``[L, H]`` scores (see :data:`SCORES`), sink flags, the 2-D map and the sink ablation effect."""

    scores: dict[str, np.ndarray]
    sinks: np.ndarray  # [L, H] bool: sink share ≥ SINK_THRESHOLD
    coords: np.ndarray  # [L·H, 2]: the heads' standardised scores projected on their two principal axes
    loadings: np.ndarray  # [2, 6]: each axis's unit weights on the standardised scores, in SCORES order
    explained: np.ndarray  # [2]: each axis's share of the standardised scores' variance
    sink_effect: float | None  # loss change (decoder) / 1 − cosine (encoder) with every sink head renormalised
    base_loss: float | None
    repeat_length: int


@torch.no_grad()
def taxonomy(tm: TextModel, ids: Sequence[int], *, repeat_length: int = 24, seed: int = 0) -> Taxonomy:
    """Induction, previous- and duplicate-token scores on a repeated random sequence (first copy at 1…n,
    second at n+1…2n; query t scores its attention on t − n + 1, t − 1 and t − n); distance, sink share and
    entropy on ``ids``."""
    scores = repeat_scores(_maps(tm, _ids(tm, repeated_random_tokens(tm, repeat_length, seed))), repeat_length)
    x = _ids(tm, ids)
    w = _maps(tm, x)  # (L, H, N, N)
    i = torch.arange(x.shape[1])
    dist = (i[:, None] - i[None, :]).abs().float()  # (N, N)
    scores["distance"] = (w * dist).sum(-1).mean(-1)
    scores["sink"] = w[..., 1:, 0].mean(-1)  # query 0 sees only itself in a decoder: left out
    scores["entropy"] = -(w * w.clamp_min(1e-12).log()).sum(-1).mean(-1)
    scores = {k: scores[k].numpy() for k in SCORES}
    sinks = scores["sink"] >= SINK_THRESHOLD
    stacked = np.stack([scores[k].ravel() for k in SCORES], axis=1)  # (L·H, 6)
    z = (stacked - stacked.mean(0)) / np.where(stacked.std(0) > 0, stacked.std(0), 1.0)
    _, s, vt = np.linalg.svd(z, full_matrices=False)
    coords = z @ vt[:2].T
    explained = s[:2] ** 2 / max(float((s**2).sum()), 1e-12)  # every score constant: no variance to share
    effect, base = None, None
    if sinks.any():
        edit = Edit()
        for layer, head in zip(*np.nonzero(sinks)):
            edit.drop_keys(int(layer), [0], heads=[int(head)])
        clean, dropped = score(tm, x, forward(tm, x)), score(tm, x, forward(tm, x, edit))
        if tm.kind == "encoder":
            effect = (1 - F.cosine_similarity(clean.embedding, dropped.embedding, dim=-1)).item()
        else:
            effect, base = (dropped.loss - clean.loss).item(), clean.loss.item()
    return Taxonomy(scores, sinks, coords, vt[:2], explained, effect, base, repeat_length)


def uniform_induction(n: int, encoder: bool = False) -> float:
    """The induction score of uniform attention on :func:`repeated_random_tokens` of ``n`` tokens twice: each query
    t = n + 1 … 2n of the second copy sees keys 0 … t (an encoder: all 2n + 2)."""
    if encoder:
        return 1.0 / (2 * n + 2)
    return float(np.mean(1.0 / (np.arange(n + 1, 2 * n + 1) + 1)))


def strongest(scores: np.ndarray, k: int = 3) -> list[tuple[int, int, float]]:
    """The ``k`` heads with the largest ``scores [L, H]``, as (layer, head, score), best first."""
    return top_heads(scores, k)


@dataclass(frozen=True)
class SinkWindows:
    """The attention sink seen three ways on one text (Xiao et al. 2024, StreamingLLM):

    - ``share`` [L]: each layer's mean attention on the first token (queries 1…N−1, every head), and
      ``share_dropped`` [L] the same after the first token is removed from the text: the new first token;
    - ``losses``: mean next-token loss of the queries past ``window`` with every key visible (``full``), with a
      sliding window that evicts the first token (``window``), and with the window plus the first token kept
      (``window_sink``). Positions stay absolute in all three, so only which keys are seen differs."""

    share: np.ndarray
    share_dropped: np.ndarray
    window: int
    losses: dict[str, float]
    scored: int  # queries scored (those whose window no longer reaches the first token)


def _first_share(tm: TextModel, ids: Tensor) -> np.ndarray:
    return _maps(tm, ids)[..., 1:, 0].mean(dim=(-1, -2)).numpy()  # (L,): over heads and queries 1…N−1


@torch.no_grad()
def sink_windows(tm: TextModel, ids: Sequence[int], window: int) -> SinkWindows:
    """See :class:`SinkWindows`; a causal model and a text longer than ``window + 1`` tokens.

    Raises:
        InputError: ``hs_sink_window`` when the text leaves no query past the window.
    """
    x = _ids(tm, ids)
    n = x.shape[1]
    if not 1 <= window < n - 1:
        raise InputError("hs_sink_window", window=window, count=n)
    pos = torch.arange(n, device=x.device)
    causal = tm.model.mask(n, x.device)  # (N, N): the model's own mask
    windowed = causal & masks.causal_between(pos, pos, window)  # the first token falls out once i ≥ window
    sink = windowed | (causal & (pos[None, :] == 0))  # …unless it is always kept
    embedded = tm.model.embed(x)
    targets = x[0, window + 1 :]
    losses = {}
    for name, mask in (("full", causal), ("window", windowed), ("window_sink", sink)):
        logits = tm.model.logits(tm.model.hidden(embedded, mask, None))[0, window:-1]  # queries past the window
        losses[name] = F.cross_entropy(logits, targets).item()
    return SinkWindows(_first_share(tm, x), _first_share(tm, x[:, 1:]), window, losses, n - window - 1)


# --- attribution beside attention --------------------------------------------------------------------------------
ATTRIBUTION_METHODS = ("grad_input", "integrated_gradients", "attention", "rollout")
# Integrated gradients count as converged when the magnitudes of the path's pieces' completeness errors add to at
# most this share of |f(x) − f(0)|. SmolLM2's f is not smooth along the path: it swings between 0.0001 and 0.11 within
# α = 0.030…0.037, where the token vectors' RMS (≈ 0.1) crosses its first RMSNorm's √ε, so a fixed midpoint rule
# missed by more than f(x) − f(0) itself at 16, 64 and 256 steps (gaps 0.34, 0.23, 0.33 of f(x) = 0.30).
IG_TOLERANCE = 0.05
IG_BUDGET = 20  # gradients at most: about 0.3 s each for SmolLM2 on 33 tokens at one thread


@dataclass(frozen=True)
class Attribution:
    """Per-token scores of each method, their deletion curves and faithfulness (lower deletion AUC = better)."""

    scores: dict[str, np.ndarray]  # method → [N]
    removed: np.ndarray  # [P] fraction of the tokens removed at each point of the deletion curves
    deletion: dict[str, np.ndarray]  # method → [P] target value after removing that fraction, top-scored first
    faithfulness: dict[str, float]  # method → area under its deletion curve (mean of the curve)
    random_auc: float  # the same area for random orders: the level a useless method reaches
    completeness_gap: float  # |Σ IG − (f(x) − f(baseline))|
    f_input: float
    f_baseline: float
    target: str  # what f is: "p(▁the | …)" or "⟨sentence embedding, its direction⟩"
    path: np.ndarray  # [K + 1] α at the ends of the pieces the path α · x was cut into
    # [K] Σ IG − (f(b · x) − f(a · x)) of each piece [a, b], signed: they add to the whole path's error, where
    # pieces that overshoot and undershoot cancel, so only their magnitudes' sum bounds every piece's error
    piece_errors: np.ndarray
    gradients: int  # gradients taken along the path
    converged: bool  # the piece errors' magnitudes add to at most IG_TOLERANCE · |f(x) − f(0)|


def _objective(tm: TextModel, x: Tensor, emb: Tensor, target: int | Tensor) -> Tensor:
    """f per batch row of token vectors ``emb [B, N, D]`` (positions added as usual): the target token's
    probability at the last position (decoder; the LM head runs on that position only) or the sentence
    embedding's projection on the clean embedding's direction (encoder)."""
    x0 = tm.model.embed(x.expand(emb.shape[0], -1), edit=Edit().patch_tokens(emb))  # (B, N, D)
    hidden = tm.model.hidden(x0, tm.mask(emb.shape[1]), None)  # (B, N, D)
    if tm.kind == "encoder":
        return sentence_embedding(hidden) @ target
    return tm.model.logits(hidden[:, -1]).softmax(dim=-1)[:, target]


def _gradient_input(
    tm: TextModel, x: Tensor, emb: Tensor, alphas: Tensor, target: int | Tensor
) -> tuple[Tensor, Tensor]:
    """Gradient × input ``[S, N]`` (per token, the input being ``emb``) and f ``[S]`` at ``alphas [S]`` · ``emb``."""
    scaled = (alphas[:, None, None].to(emb.device) * emb).requires_grad_(True)
    with torch.enable_grad():
        f = _objective(tm, x, scaled, target)
        (grad,) = torch.autograd.grad(f.sum(), scaled)
    return (emb * grad).sum(-1).cpu(), f.detach().cpu()


class _Path(NamedTuple):
    ig: Tensor  # [N]
    ends: Tensor  # [K + 1] α at the ends of the pieces
    f: Tensor  # [K + 1] f there
    errors: Tensor  # [K] each piece's completeness error, signed
    gradients: int
    converged: bool


def _integrated_gradients(
    tm: TextModel, x: Tensor, emb: Tensor, target: int | Tensor, pieces: int, budget: int
) -> _Path:
    """Integrated gradients along α · ``emb``, α from 0 to 1, by the midpoint rule on ``pieces`` pieces of the path,
    the worst piece halved until the errors' magnitudes add to at most :data:`IG_TOLERANCE` · |f(x) − f(0)| or
    ``budget`` gradients are spent. Completeness holds on every piece [a, b] (Σ IG = f(b) − f(a)), so its mismatch
    is that piece's error; a halved piece's midpoint, whose f is known, becomes an end and two gradients read its
    halves."""
    ends = torch.linspace(0, 1, pieces + 1, dtype=emb.dtype)
    f_ends = _objective(tm, x, ends[:, None, None].to(emb.device) * emb, target).cpu()
    mids = (ends[:-1] + ends[1:]) / 2  # never α = 0, where a model's gradient may be NaN (a norm of zero)
    per_token, f_mids = _gradient_input(tm, x, emb, mids, target)  # (K, N), (K,)
    taken = pieces
    while True:
        ig = ends.diff()[:, None] * per_token  # (K, N): each piece's share
        errors = ig.sum(-1) - f_ends.diff()
        converged = bool(errors.abs().sum() <= IG_TOLERANCE * abs(f_ends[-1] - f_ends[0]))
        if converged or taken + 2 > budget:
            return _Path(ig.sum(0), ends, f_ends, errors, taken, converged)
        k = int(errors.abs().argmax())
        halves = torch.stack([(ends[k] + mids[k]) / 2, (mids[k] + ends[k + 1]) / 2])
        new_per_token, new_f = _gradient_input(tm, x, emb, halves, target)
        taken += 2
        ends, f_ends = (torch.cat([t[: k + 1], m[k : k + 1], t[k + 1 :]]) for t, m in ((ends, mids), (f_ends, f_mids)))
        mids, per_token, f_mids = (
            torch.cat([t[:k], new, t[k + 1 :]])
            for t, new in ((mids, halves), (per_token, new_per_token), (f_mids, new_f))
        )


@torch.no_grad()
def attribution(
    tm: TextModel,
    ids: Sequence[int],
    *,
    steps: int = 4,
    budget: int = IG_BUDGET,
    points: int = 11,
    random_orders: int = 2,
    seed: int = 0,
) -> Attribution:
    """Gradient × input and integrated gradients on the token vectors (baseline: zero token vectors, positions
    kept, as BERT attributions do; ``steps`` pieces of the path at first, refined up to ``budget`` gradients, see
    :func:`_integrated_gradients`), raw attention (last layer, head mean, row of the last token) and rollout (its
    row), compared by deletion: tokens removed (token vector zeroed) in each method's order, highest score first,
    read at ``points`` evenly spaced fractions of the tokens; ``random_orders`` random orders give the chance
    level. An MoE's routing is piecewise constant along the path, so its completeness error stays larger than a
    dense model's."""
    x = _ids(tm, ids)
    n = x.shape[1]
    rec = Edit().record()
    trace = Trace()
    out = forward(tm, x, rec, trace)
    emb = rec.captured.get_site("tokens", None)  # (1, N, D)
    if tm.kind == "encoder":
        e = sentence_embedding(out)[0]
        target, label = e / e.norm(), "⟨sentence embedding, its direction⟩"
    else:
        # The most likely next *word*: after a full stop the most likely token is often <|endoftext|>, where
        # every method ties (nothing in the sentence argues for the end of the text more than another token).
        last = out[0, -1].clone()
        last[list(tm.special_ids)] = -torch.inf
        target = int(last.argmax())
        label = f"p(“{tm.labels([target])[0]}” | …)"
    grad_input, _ = _gradient_input(tm, x, emb, torch.ones(1, dtype=emb.dtype), target)
    path = _integrated_gradients(tm, x, emb, target, steps, budget)
    f_x, f_0 = path.f[-1].item(), path.f[0].item()
    maps = trace.stack(name_contains="attn")  # (L, 1, H, N, N)
    scores = {
        "grad_input": grad_input[0],
        "integrated_gradients": path.ig,
        "attention": maps[-1, 0].mean(0)[-1],
        "rollout": rollout(maps)[0, -1],
    }

    removed = torch.linspace(0, n, min(points, n + 1)).round().long()  # tokens removed at each point

    def curve(order: Tensor) -> Tensor:  # row r: the first removed[r] tokens of ``order`` zeroed
        keep = (torch.arange(n)[None, :] >= removed[:, None]).to(emb.dtype)  # (P, N) in ``order``'s ranks
        keep = keep[:, order.argsort()]  # (P, N) by token position
        return _objective(tm, x, keep[..., None].to(emb.device) * emb, target).cpu()

    deletion = {m: curve(s.argsort(descending=True)) for m, s in scores.items()}
    gen = torch.Generator().manual_seed(seed)
    randoms = [curve(torch.randperm(n, generator=gen)).mean() for _ in range(random_orders)]
    random_auc = torch.stack(randoms).mean().item()
    return Attribution(
        scores={m: s.numpy() for m, s in scores.items()},
        removed=(removed.float() / n).numpy(),
        deletion={m: d.numpy() for m, d in deletion.items()},
        faithfulness={m: d.mean().item() for m, d in deletion.items()},
        random_auc=random_auc,
        completeness_gap=abs(path.ig.sum().item() - (f_x - f_0)),
        f_input=f_x,
        f_baseline=f_0,
        target=label,
        path=path.ends.numpy(),
        piece_errors=path.errors.numpy(),
        gradients=path.gradients,
        converged=path.converged,
    )
