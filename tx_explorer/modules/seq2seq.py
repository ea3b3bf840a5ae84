"""Encoder–decoder translation models (lecture §1, §2.5): the fixed-context bottleneck, Bahdanau attention,
and a small Transformer whose cross-attention plays the same role.

- Cho et al. 2014 (arXiv 1406.1078): the decoder sees one vector c = h_T at every step.
- Bahdanau, Cho & Bengio 2015 (arXiv 1409.0473): e_{t,i} = vᵀ tanh(W s_{t−1} + U h_i), a_t = softmax(e_t),
  c_t = Σ_i a_{t,i} h_i, s_t = GRU([y_{t−1}; c_t], s_{t−1}); h_i = [→h_i; ←h_i] from a bidirectional GRU.
- Luong, Pham & Manning 2015 (arXiv 1508.04025): "dot" sᵀh and "general" sᵀW h scores; here they score the
  *previous* state s_{t−1} like Bahdanau, so only the score function changes between variants.
- Vaswani et al. 2017: decoder blocks with cross-attention (queries from the decoder, keys/values from the
  encoder), built from :class:`~tx_explorer.modules.block.TransformerBlock`.

Every model exposes the same decoding interface — ``encode``, ``start``, ``step`` — so :func:`greedy_decode`
and :func:`beam_search` are written once. ``forward`` (teacher forcing) takes ``trace`` and records the
alignment ``[B, 1, T_out, T_in]`` (RNN) or cross-attention ``[B, H, T_out, T_in]`` per layer (Transformer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tx_explorer import masks
from tx_explorer.config import Serialisable, TransformerConfig
from tx_explorer.edit import Edit
from tx_explorer.errors import positive_int
from tx_explorer.modules.block import TransformerBlock, make_norm
from tx_explorer.modules.transformer import Embeddings, Encoder, _init_weights
from tx_explorer.trace import Trace, scoped


@dataclass(frozen=True)
class RNNConfig(Serialisable):
    src_vocab: int  # English words + 4 specials
    tgt_vocab: int  # Italian words + 4 specials
    context: Literal["fixed", "additive", "dot", "general"] = "additive"  # how c_t is formed
    embed_dim: int = 64  # word embeddings (m in Bahdanau et al.)
    hidden: int = 64  # encoder GRU per direction; annotations h_i have 2·hidden
    dec_hidden: int = 128  # decoder state s_t (n); "dot" needs dec_hidden == 2·hidden
    attn_dim: int = 64  # n′: width of the additive score's tanh layer
    dropout: float = 0.0  # the generator never repeats itself much: no overfitting to fight


@dataclass(frozen=True)
class Memory:
    """What the decoder reads: annotations ``states [B, T, C]``, ``mask [B, T]`` (True = real word),
    the final encoder state ``final [B, C]`` and precomputed score keys ``keys [B, T, A]``."""

    states: Tensor
    mask: Tensor
    final: Tensor | None = None
    keys: Tensor | None = None

    def select(self, idx: Tensor) -> Memory:
        """Rows ``idx`` of every tensor (beam search repeats and reorders sentences)."""
        return Memory(*(None if t is None else t[idx] for t in (self.states, self.mask, self.final, self.keys)))


# ---------------------------------------------------------------- RNN encoder and score functions


class BiGRUEncoder(nn.Module):
    """Embedding + bidirectional GRU: annotations h_i = [→h_i; ←h_i]."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.rnn = nn.GRU(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(dropout)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """src ``[B, T]``, lengths ``[B]`` → annotations ``[B, T, 2H]`` and ``[→h_T; ←h_1]`` ``[B, 2H]``."""
        # Packing makes the backward GRU start at each sentence's last real word, not at the padding.
        packed = pack_padded_sequence(self.drop(self.embed(src)), lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.rnn(packed)  # h_n: (2, B, H)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B, T, 2H)
        return out, torch.cat([h_n[0], h_n[1]], dim=-1)


class AdditiveScore(nn.Module):
    """Bahdanau: e_i = vᵀ tanh(W s + U h_i); U h_i does not depend on t, so it is computed once."""

    kind, name = "additive", "bahdanau"

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.W = nn.Linear(query_dim, attn_dim, bias=False)
        self.U = nn.Linear(key_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)
        nn.init.zeros_(self.v.weight)  # v = 0: uniform attention at the start of training, as in the paper

    def keys(self, h: Tensor) -> Tensor:
        return self.U(h)  # (B, T, A)

    def forward(self, s: Tensor, keys: Tensor) -> Tensor:
        """s ``[B, Dq]``, keys ``[B, T, A]`` → scores ``[B, T]``."""
        return self.v(torch.tanh(self.W(s)[:, None, :] + keys)).squeeze(-1)


class DotScore(nn.Module):
    """Luong "dot": e_i = sᵀ h_i (needs equal widths, no parameters)."""

    kind, name = "cross", "luong_dot"

    def keys(self, h: Tensor) -> Tensor:
        return h

    def forward(self, s: Tensor, keys: Tensor) -> Tensor:
        return (keys @ s[:, :, None]).squeeze(-1)  # (B, T)


class GeneralScore(DotScore):
    """Luong "general": e_i = sᵀ W h_i."""

    name = "luong_general"

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)

    def keys(self, h: Tensor) -> Tensor:
        return self.W(h)  # (B, T, Dq)


def make_score(cfg: RNNConfig) -> nn.Module:
    if cfg.context == "dot":
        if cfg.dec_hidden != 2 * cfg.hidden:
            raise ValueError(f"dot scores need dec_hidden == 2·hidden, got {cfg.dec_hidden} and {2 * cfg.hidden}")
        return DotScore()
    if cfg.context == "general":
        return GeneralScore(cfg.dec_hidden, 2 * cfg.hidden)
    return AdditiveScore(cfg.dec_hidden, 2 * cfg.hidden, cfg.attn_dim)


# ---------------------------------------------------------------- RNN decoders


class _Readout(nn.Module):
    """Shared by both decoders: embedding in, logits from [s_t; c_t; y_{t−1}] out."""

    def __init__(self, cfg: RNNConfig) -> None:
        super().__init__()
        ctx = 2 * cfg.hidden
        self.embed = nn.Embedding(cfg.tgt_vocab, cfg.embed_dim, padding_idx=0)
        self.out = nn.Linear(cfg.dec_hidden + ctx + cfg.embed_dim, cfg.tgt_vocab)
        self.drop = nn.Dropout(cfg.dropout)

    def logits(self, s: Tensor, c: Tensor, e: Tensor) -> Tensor:
        return self.out(self.drop(torch.cat([s, c, e], dim=-1)))


class FixedContextDecoder(_Readout):
    """Cho et al. 2014: s_t = GRU([y_{t−1}; c], s_{t−1}) with the same c = h_T at every step (the bottleneck)."""

    def __init__(self, cfg: RNNConfig) -> None:
        super().__init__(cfg)
        self.rnn = nn.GRU(cfg.embed_dim + 2 * cfg.hidden, cfg.dec_hidden, batch_first=True)

    def forward(self, y_in: Tensor, memory: Memory, s0: Tensor, trace: Trace | None = None) -> Tensor:
        """y_in ``[B, N]`` → logits ``[B, N, V]``; c never changes, so one GRU call covers all steps."""
        e = self.drop(self.embed(y_in))  # (B, N, E)
        c = memory.final[:, None, :].expand(-1, y_in.shape[1], -1)  # (B, N, C)
        s, _ = self.rnn(torch.cat([e, c], dim=-1), s0[None].contiguous())
        return self.logits(s, c, e)

    def step(self, y_prev: Tensor, s_prev: Tensor, memory: Memory) -> tuple[Tensor, Tensor, None]:
        """One step: y_prev ``[B]``, s_prev ``[B, Dh]`` → logits ``[B, V]``, s_t, no weights."""
        e = self.drop(self.embed(y_prev))
        _, s = self.rnn(torch.cat([e, memory.final], dim=-1)[:, None], s_prev[None].contiguous())  # s: (1, B, Dh)
        return self.logits(s[0], memory.final, e), s[0], None


class AttentionDecoder(_Readout):
    """Bahdanau et al. 2015: a fresh context c_t = Σ_i a_{t,i} h_i for every output word."""

    def __init__(self, cfg: RNNConfig, score: nn.Module) -> None:
        super().__init__(cfg)
        self.score = score
        self.cell = nn.GRUCell(cfg.embed_dim + 2 * cfg.hidden, cfg.dec_hidden)

    def attend(self, s_prev: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """Weights a_t ``[B, T]`` over the source and context c_t ``[B, C]``."""
        e = self.score(s_prev, memory.keys).masked_fill(~memory.mask, float("-inf"))
        a = torch.softmax(e, dim=-1)
        return a, (a[:, None, :] @ memory.states).squeeze(1)  # (B, C)

    def step(self, y_prev: Tensor, s_prev: Tensor, memory: Memory) -> tuple[Tensor, Tensor, Tensor]:
        """y_prev ``[B]``, s_prev ``[B, Dh]`` → logits ``[B, V]``, s_t ``[B, Dh]``, a_t ``[B, T]``."""
        e = self.drop(self.embed(y_prev))
        a, c = self.attend(s_prev, memory)
        s = self.cell(torch.cat([e, c], dim=-1), s_prev)
        return self.logits(s, c, e), s, a

    def forward(self, y_in: Tensor, memory: Memory, s0: Tensor, trace: Trace | None = None) -> Tensor:
        """Teacher forcing: y_in ``[B, N]`` → logits ``[B, N, V]``; records a ``[B, 1, N, T]``.

        Only attention and the GRU cell have to run step by step; embeddings and the read-out are batched.
        """
        e = self.drop(self.embed(y_in))  # (B, N, E)
        s, states, contexts, weights = s0, [], [], []
        for e_t in e.unbind(dim=1):  # unbind, not e[:, t]: its backward is one stack, not N zero-filled copies
            a, c = self.attend(s, memory)
            s = self.cell(torch.cat([e_t, c], dim=-1), s)
            states.append(s)
            contexts.append(c)
            weights.append(a)
        if trace is not None:
            trace.add(self.score.kind, torch.stack(weights, dim=1)[:, None], name=self.score.name)
        return self.logits(torch.stack(states, dim=1), torch.stack(contexts, dim=1), e)


class RNNSeq2Seq(nn.Module):
    """BiGRU encoder → (fixed or attention) GRU decoder; s_0 = tanh(W_s [→h_T; ←h_1])."""

    architecture: ClassVar[str] = "rnn"  # what a Translator asks to know how to read the alignment

    def __init__(self, cfg: RNNConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = BiGRUEncoder(cfg.src_vocab, cfg.embed_dim, cfg.hidden, cfg.dropout)
        self.bridge = nn.Linear(2 * cfg.hidden, cfg.dec_hidden)
        self.decoder = FixedContextDecoder(cfg) if cfg.context == "fixed" else AttentionDecoder(cfg, make_score(cfg))

    def encode(self, src: Tensor, lengths: Tensor) -> Memory:
        states, final = self.encoder(src, lengths)
        score = getattr(self.decoder, "score", None)
        keys = score.keys(states) if score is not None else None
        return Memory(states, src != 0, final, keys)

    def start(self, memory: Memory) -> Tensor:
        return torch.tanh(self.bridge(memory.final))  # (B, Dh)

    def step(self, memory: Memory, state: Tensor, y_prev: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        return self.decoder.step(y_prev, state, memory)

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, trace: Trace | None = None) -> Tensor:
        """src ``[B, T]``, src_len ``[B]``, tgt_in ``[B, N]`` (starting with <bos>) → logits ``[B, N, V]``."""
        memory = self.encode(src, src_len)
        return self.decoder(tgt_in, memory, self.start(memory), trace=trace)


# ---------------------------------------------------------------- Transformer encoder–decoder


class TransformerSeq2Seq(nn.Module):
    """Bidirectional encoder + causal decoder whose blocks cross-attend to the encoder output (§2.5)."""

    architecture: ClassVar[str] = "transformer"

    def __init__(self, cfg: TransformerConfig, src_vocab: int, tgt_vocab: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg.replace(vocab_size=src_vocab))
        dec = cfg.replace(vocab_size=tgt_vocab)
        self.embed = Embeddings(dec)
        self.blocks = nn.ModuleList(TransformerBlock(dec, cross=True) for _ in range(cfg.num_layers))
        self.norm = make_norm(dec)
        self.head = nn.Linear(cfg.dim, tgt_vocab, bias=False)
        self.apply(_init_weights)

    def encode(self, src: Tensor, lengths: Tensor, trace: Trace | None = None, *, edit: Edit | None = None) -> Memory:
        """``edit`` changes the encoder's heads (ablating one, as the seq2seq page's subject–verb check does)."""
        mask = src != 0
        states = self.encoder(src, attention_mask=mask, trace=scoped(trace, "encoder"), edit=edit)
        return Memory(states, mask)

    def decode(self, tgt_in: Tensor, memory: Memory, trace: Trace | None = None) -> Tensor:
        """tgt_in ``[B, N]`` → logits ``[B, N, V]``; cross-attention is recorded as ``decoder.blocks.i.cross``."""
        self_mask = masks.causal(tgt_in.shape[1]).to(tgt_in.device)
        ctx_mask = memory.mask[:, None, None, :]  # (B, 1, 1, T): hide source padding
        x = self.embed(tgt_in)
        for i, block in enumerate(self.blocks):
            t = scoped(trace, f"decoder.blocks.{i}", layer=i)
            x = block(x, self_mask, context=memory.states, context_mask=ctx_mask, trace=t, kind="causal")
        return self.head(self.norm(x))

    def start(self, memory: Memory) -> Tensor:
        return torch.zeros(memory.states.shape[0], 0, dtype=torch.long, device=memory.states.device)

    def step(self, memory: Memory, state: Tensor, y_prev: Tensor) -> tuple[Tensor, Tensor, None]:
        """The state is the prefix so far; the whole prefix is re-run (fine for ≤ 64 tokens)."""
        prefix = torch.cat([state, y_prev[:, None]], dim=1)  # (B, t)
        return self.decode(prefix, memory)[:, -1], prefix, None

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, trace: Trace | None = None) -> Tensor:
        return self.decode(tgt_in, self.encode(src, src_len, trace), trace)


# ---------------------------------------------------------------- decoding


@torch.no_grad()
def greedy_decode(
    model: nn.Module, src: Tensor, src_len: Tensor, *, bos: int, eos: int, max_len: int
) -> list[list[int]]:
    """Most likely word at each step, for a batch; each list stops before <eos> (or at ``max_len``)."""
    memory = model.encode(src, src_len)
    state = model.start(memory)
    y = torch.full((src.shape[0],), bos, dtype=torch.long, device=src.device)
    steps, done = [], torch.zeros_like(y, dtype=torch.bool)
    for _ in range(max_len):
        logits, state, _ = model.step(memory, state, y)
        y = logits.argmax(dim=-1)
        steps.append(y)
        done |= y == eos
        if done.all():
            break
    out = []
    for row in torch.stack(steps, dim=1).tolist():
        out.append(row[: row.index(eos)] if eos in row else row)
    return out


@torch.no_grad()
def beam_search(
    model: nn.Module,
    src: Tensor,
    src_len: Tensor,
    *,
    bos: int,
    eos: int,
    max_len: int,
    beam_size: int = 4,
    alpha: float = 1.0,
) -> list[int]:
    """Beam search for one sentence (``src [1, T]``); finished hypotheses rank by log p / length^alpha.

    As in fairseq, <eos> ends a hypothesis only when it is among the ``beam_size`` best candidates, and the
    search stops once ``beam_size`` hypotheses have ended — so ``beam_size=1`` is exactly greedy decoding.
    """
    if src.shape[0] != 1:
        raise ValueError("beam_search translates one sentence at a time")
    positive_int("beam_size", beam_size)
    memory = model.encode(src, src_len)
    state = model.start(memory)
    seqs = [[bos]]
    scores = torch.zeros(1, device=src.device)
    finished: list[tuple[float, list[int]]] = []
    for t in range(max_len):
        mem = memory.select(torch.zeros(len(seqs), dtype=torch.long, device=src.device))
        logits, state, _ = model.step(mem, state, torch.tensor([s[-1] for s in seqs], device=src.device))
        total = (F.log_softmax(logits, dim=-1) + scores[:, None]).flatten()  # (k·V,)
        keep_rows, keep_seqs, keep_scores = [], [], []
        for rank, (value, flat) in enumerate(zip(*total.topk(min(2 * beam_size, total.numel())))):
            row, tok = divmod(int(flat), logits.shape[-1])
            if tok == eos or t == max_len - 1:
                if rank < beam_size and len(finished) < beam_size:
                    body = seqs[row][1:] + ([] if tok == eos else [tok])
                    finished.append((float(value) / (len(body) + 1) ** alpha, body))
            elif len(keep_seqs) < beam_size:
                keep_rows.append(row)
                keep_seqs.append(seqs[row] + [tok])
                keep_scores.append(value)
        if len(finished) >= beam_size or not keep_seqs:
            break
        state = state[torch.tensor(keep_rows, device=src.device)]
        seqs, scores = keep_seqs, torch.stack(keep_scores)
    return max(finished, key=lambda f: f[0])[1]


def build(config: dict[str, Any]) -> nn.Module:
    """A model from the ``config.json`` of a bundle (``family`` picks the class)."""
    if config["family"] == "rnn":
        return RNNSeq2Seq(RNNConfig.from_dict(config["model"]))
    cfg = TransformerConfig.from_dict(config["model"])
    return TransformerSeq2Seq(cfg, config["src_vocab"], config["tgt_vocab"])
