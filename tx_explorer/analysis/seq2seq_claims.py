"""The lecture's remaining Seq2Seq claims, measured on the bundled translators (§1.1, §1.3, §2.1–2.2, §4.1).

- §1.1 the encoder is a recurrence h_t = f_W(x_t, h_{t−1}): :func:`encoder_recurrence` reruns the bidirectional
  GRU one word at a time from the GRU's written-out equations and compares the result with the annotations.
- §1.1 the decoder starts from s₀ computed from the encoder: :func:`zero_start` decodes with s₀ = 0 instead.
- §1.3 the scores e_{t,i} = f_att(s_{t−1}, h_i) before the softmax, and §2.1/§2.2 the decoder state as the query
  of the generic operator: :func:`decoder_steps` replays the decoder step by step and passes each step through
  :func:`tx_explorer.attention.attention_steps`. Bahdanau's score vᵀ tanh(W s + U h_i) is that operator's dot
  product with q = v, k_i = tanh(W s_{t−1} + U h_i) and scale 1 (the query state enters through the keys);
  Luong's scores are q = s_{t−1}, k_i = their keys. Its weights and output must equal the decoder's a_t and c_t.
- §4.1 heads that learn subject–verb relations: :func:`subject_verb_heads` reads every encoder head's weight from
  a verb to its subject (the grammar's own parse, :attr:`Example.agreement`) against the weight the same head
  puts at the same offset from other queries of the sentence; :func:`agreement_errors` counts translations whose
  verb takes the wrong person, with one head ablated (:class:`~tx_explorer.edit.Edit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tx_explorer.analysis.seq2seq_eval import token_matches
from tx_explorer.attention import attention_steps
from tx_explorer.data.translation import VERBS, Example, generate_examples
from tx_explorer.edit import Edit
from tx_explorer.trace import Trace

CLAIM_SEED = 1409  # held-out sentences of their own (Bahdanau et al.'s arXiv number), fixed so numbers repeat


def claim_set(n: int = 120, seed: int = CLAIM_SEED, *, min_words: int = 4, max_words: int = 24) -> list[Example]:
    """``n`` held-out sentences (never trained on) with at least one subject–verb pair."""
    pool = generate_examples(3 * n, seed, min_words=min_words, max_words=max_words, split="test")
    return [ex for ex in pool if ex.agreement][:n]


def _ids(translator: Any, words: tuple[str, ...] | list[str]) -> tuple[Tensor, Tensor]:
    return torch.tensor([translator.src_vocab.encode(words)]), torch.tensor([len(words)])  # (1, T), (1,)


# ---------------------------------------------------------------- §1.1 the encoder recurrence


def _gru_step(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    """One GRU step written out (Cho et al. 2014; PyTorch's gate order r, z, n): h_t = f_W(x_t, h_{t−1})."""
    ir, iz, i_n = (x @ w_ih.T + b_ih).chunk(3)
    hr, hz, h_n = (h @ w_hh.T + b_hh).chunk(3)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    return (1 - z) * torch.tanh(i_n + r * h_n) + z * h


@torch.no_grad()
def encoder_recurrence(translator: Any, source: list[str]) -> tuple[np.ndarray, float]:
    """The annotations rebuilt word by word (→h_t from →h_{t−1}, ←h_t from ←h_{t+1}) → (``[T, 2H]``, max |Δ|
    against the encoder's own annotations)."""
    enc = translator.model.encoder
    ids, lengths = _ids(translator, source)
    states, _ = enc(ids, lengths)  # (1, T, 2H)
    x = enc.embed(ids)[0]  # (T, E)
    gru, out = enc.rnn, []
    for suffix, order in (("l0", range(len(source))), ("l0_reverse", reversed(range(len(source))))):
        w = [getattr(gru, f"{name}_{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        h, rows = torch.zeros(gru.hidden_size), {}
        for t in order:
            h = rows[t] = _gru_step(x[t], h, *w)
        out.append(torch.stack([rows[t] for t in range(len(source))]))  # (T, H)
    rebuilt = torch.cat(out, dim=-1)  # (T, 2H): [→h_t; ←h_t]
    return rebuilt.numpy(), float((rebuilt - states[0]).abs().max())


# ---------------------------------------------------------------- §1.3, §2.1–2.2 one decoder step, opened


@dataclass(frozen=True)
class DecoderSteps:
    """The attention decoder replayed on (source, target), one row per step t = 1 … T_out + 1 (the last writes
    <eos>); ``op_*`` are the generic operator's results for the same query and annotations."""

    states: np.ndarray  # [T_out + 1, Dh] s_{t−1}, the query of step t (row 0 is s₀)
    scores: np.ndarray  # [T_out + 1, T_in] e_{t,i} before the softmax
    weights: np.ndarray  # [T_out + 1, T_in] a_{t,i}: the decoder's own
    contexts: np.ndarray  # [T_out + 1, C] c_t: the decoder's own
    op_weights: np.ndarray  # [T_out + 1, T_in] attention_steps(...).weights
    op_contexts: np.ndarray  # [T_out + 1, C] attention_steps(...).out
    state_gap: float  # §1.1: max |s_t − GRU equations(y_{t−1}, s_{t−1}, c_t) written out| over the steps

    @property
    def operator_gap(self) -> tuple[float, float]:
        """max |Δa| and max |Δc| between the generic operator and the decoder."""
        return float(np.abs(self.op_weights - self.weights).max()), float(
            np.abs(self.op_contexts - self.contexts).max()
        )


def _as_operator(score: Any, s: Tensor, keys: Tensor) -> tuple[Tensor, Tensor]:
    """(q ``[1, 1, A]``, k ``[1, T, A]``) whose dot product at scale 1 is the decoder's score f_att(s, h_i)."""
    if score.kind == "additive":  # vᵀ tanh(W s + U h_i) = ⟨v, tanh(W s + U h_i)⟩
        return score.v.weight[None], torch.tanh(score.W(s)[:, None, :] + keys)
    return s[:, None, :], keys  # Luong: sᵀ h_i or sᵀ W h_i (keys = W h_i)


@torch.no_grad()
def decoder_steps(translator: Any, source: list[str], target: list[str]) -> DecoderSteps:
    """Replay the attention decoder with teacher forcing on ``target``, keeping every step's query, scores,
    weights and context, and pass each step through the generic operator."""
    model = translator.model
    dec = model.decoder
    if not hasattr(dec, "attend"):
        raise TypeError(f"{translator.name} has no attention: every step reads the same context")
    memory = model.encode(*_ids(translator, source))
    s = model.start(memory)  # s₀ = tanh(W_s [→h_T; ←h_1])
    ys = [translator.tgt_vocab.bos, *translator.tgt_vocab.encode(target)]
    rows: dict[str, list[Tensor]] = {k: [] for k in ("s", "e", "a", "c", "op_a", "op_c")}
    cell = [getattr(dec.cell, name) for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    state_gap = 0.0
    for y in ys:
        e = dec.score(s, memory.keys).masked_fill(~memory.mask, float("-inf"))  # (1, T_in)
        a, c = dec.attend(s, memory)  # the decoder's own a_t (1, T_in) and c_t (1, C)
        q, k = _as_operator(dec.score, s, memory.keys)
        op = attention_steps(q, k, memory.states, mask=memory.mask[:, None, :], scale=1.0)  # (1, 1, ·)
        for key, value in zip(rows, (s, e, a, c, op.weights[:, 0], op.out[:, 0]), strict=True):
            rows[key].append(value[0])
        # s_t = g_U(y_{t−1}, s_{t−1}, c_t): the GRU's equations on [embedding of y_{t−1}; c_t] and s_{t−1}
        rebuilt = _gru_step(torch.cat([dec.embed(torch.tensor(y)), c[0]]), s[0], *cell)
        _, s, _ = model.step(memory, s, torch.tensor([y]))
        state_gap = max(state_gap, float((rebuilt - s[0]).abs().max()))
    out = {k: torch.stack(v).numpy() for k, v in rows.items()}
    return DecoderSteps(out["s"], out["e"], out["a"], out["c"], out["op_a"], out["op_c"], state_gap)


# ---------------------------------------------------------------- §1.1 s₀ from the encoder, or zero


class Variant:
    """A translator's model as greedy decoding sees it (``encode``/``start``/``step``), changed in one way:
    ``edit`` inside the encoder (a Transformer's heads) or ``zero_start`` (the RNN decoder starts from s₀ = 0)."""

    def __init__(self, model: Any, *, edit: Edit | None = None, zero_start: bool = False) -> None:
        self.model, self.edit, self.zero_start = model, edit, zero_start

    def encode(self, src: Tensor, lengths: Tensor) -> Any:
        return self.model.encode(src, lengths) if self.edit is None else self.model.encode(src, lengths, edit=self.edit)

    def start(self, memory: Any) -> Tensor:
        s0 = self.model.start(memory)
        return torch.zeros_like(s0) if self.zero_start else s0

    def step(self, memory: Any, state: Tensor, y_prev: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        return self.model.step(memory, state, y_prev)


def accuracy(hyps: list[list[str]], examples: list[Example]) -> tuple[float, float]:
    """(token accuracy, exact match) of ``hyps`` against the references, as the bottleneck curves score them."""
    matches = [token_matches(h, ex.target) for h, ex in zip(hyps, examples, strict=True)]
    exact = sum(list(h) == list(ex.target) for h, ex in zip(hyps, examples, strict=True))
    return sum(m for m, _ in matches) / max(1, sum(t for _, t in matches)), exact / max(1, len(examples))


@dataclass(frozen=True)
class ZeroStart:
    sentences: int
    token_accuracy: tuple[float, float]  # s₀ from the encoder, s₀ = 0
    exact_match: tuple[float, float]


def zero_start(translator: Any, examples: list[Example]) -> ZeroStart:
    """Greedy translations with the decoder's usual s₀ and with s₀ = 0, scored against the references."""
    sources = [ex.source for ex in examples]
    usual = accuracy(translator.decode(sources), examples)
    zero = accuracy(translator.decode(sources, model=Variant(translator.model, zero_start=True)), examples)
    return ZeroStart(len(examples), (usual[0], zero[0]), (usual[1], zero[1]))


# ---------------------------------------------------------------- §1.1 from <bos> until <eos>; T and T′


@dataclass(frozen=True)
class Ends:
    """Greedy decoding of held-out pairs: does it end because the model writes <eos>, and how long are the
    source (T words), the reference (T′) and the decode."""

    sentences: int
    ended: int  # decodes that wrote <eos> before the length limit (the rest were cut at it)
    limit: int  # words the decoder may write for this batch before it is cut
    same_length: int  # decodes exactly as long as their reference
    length_gap: float  # mean |decoded length − T′|
    differ: int  # pairs whose T and T′ differ
    source_lengths: tuple[int, int]  # smallest and largest T
    target_lengths: tuple[int, int]  # smallest and largest T′


def decoding_ends(translator: Any, examples: list[Example]) -> Ends:
    """Decode ``examples`` greedily in one batch. A decode is returned without its <eos>, so one shorter than the
    batch's limit is one the model ended itself; one as long as the limit was cut."""
    sources = [ex.source for ex in examples]
    hyps, limit = translator.decode(sources), translator.target_limit(sources)
    t, t2 = [len(ex.source) for ex in examples], [len(ex.target) for ex in examples]
    return Ends(
        len(examples),
        sum(len(h) < limit for h in hyps),
        limit,
        sum(len(h) == n for h, n in zip(hyps, t2, strict=True)),
        sum(abs(len(h) - n) for h, n in zip(hyps, t2, strict=True)) / max(1, len(examples)),
        sum(a != b for a, b in zip(t, t2, strict=True)),
        (min(t), max(t)),
        (min(t2), max(t2)),
    )


# ---------------------------------------------------------------- §4.1 subject–verb heads


@dataclass(frozen=True)
class SubjectVerbHeads:
    pairs: int  # subject–verb pairs scored
    subject: np.ndarray  # [L, H] mean weight from a verb to its subject
    baseline: np.ndarray  # [L, H] mean weight the head puts at the same offset from the sentence's other queries

    @property
    def best(self) -> tuple[int, int]:
        """(layer, head) whose verb → subject weight most exceeds its distance-matched baseline."""
        return tuple(int(i) for i in np.unravel_index(np.argmax(self.subject - self.baseline), self.subject.shape))


@torch.no_grad()
def subject_verb_heads(translator: Any, examples: list[Example]) -> SubjectVerbHeads:
    """Every encoder head of a Transformer translator: verb → subject weight against a distance-matched baseline."""
    subject, baseline, pairs = 0.0, 0.0, 0
    for ex in examples:
        trace = Trace()
        translator.model.encode(*_ids(translator, ex.source), trace=trace)
        maps = trace.stack()[:, 0].numpy()  # (L, H, T, T)
        n = len(ex.source)
        for verb, subj in ex.agreement:
            d = subj - verb  # the subject's offset from the verb (negative: it comes before)
            others = [q for q in range(n) if q != verb and 0 <= q + d < n]
            if not others:
                continue
            subject = subject + maps[:, :, verb, subj]
            baseline = baseline + maps[:, :, others, [q + d for q in others]].mean(axis=-1)
            pairs += 1
    if not pairs:
        raise ValueError("no subject–verb pair to score")
    return SubjectVerbHeads(pairs, np.asarray(subject) / pairs, np.asarray(baseline) / pairs)


FORMS = {form: frozenset(v.it) for v in VERBS for form in v.it}  # an Italian verb form → every person of its verb


def agreement_errors(hyps: list[list[str]], examples: list[Example]) -> tuple[int, int]:
    """(errors, pairs): a pair is an error when the translation lacks the reference's verb form but has the same
    verb in another person — the subject's person did not reach the verb ending."""
    errors = pairs = 0
    for hyp, ex in zip(hyps, examples, strict=True):
        words = set(hyp)
        links = dict(ex.alignment)  # English position → Italian position (a verb links to one word)
        for verb, _ in ex.agreement:
            right = ex.target[links[verb]]
            pairs += 1
            errors += right not in words and bool(words & (FORMS.get(right, frozenset()) - {right}))
    return errors, pairs


def ablation_errors(translator: Any, examples: list[Example], heads: list[tuple[int, int]]) -> dict:
    """Agreement errors of the greedy translations with nothing ablated (key None) and with each head of
    ``heads`` zero-ablated in the encoder."""
    sources = [ex.source for ex in examples]
    out = {None: agreement_errors(translator.decode(sources), examples)}
    for layer, head in heads:
        variant = Variant(translator.model, edit=Edit().ablate(layer, head))
        out[(layer, head)] = agreement_errors(translator.decode(sources, model=variant), examples)
    return out
