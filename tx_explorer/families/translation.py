"""A trained Seq2Seq model plus its vocabularies: text in, words and alignments out.

``load(folder)`` is the registry loader of the ``seq2seq-*`` bundles; ``Translator.translate(text)`` returns a
:class:`Translation` with the output words, the alignment matrix ``[T_out, T_in]`` (rows sum to 1), the
Transformer's cross-attention ``[L, H, T_out, T_in]`` and, for the RNNs, the annotations h_i and contexts c_t.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tx_explorer.bundle import read_bundle
from tx_explorer.data.translation import SourceCheck, Vocab, check_source
from tx_explorer.modules.seq2seq import beam_search, build, greedy_decode
from tx_explorer.trace import Trace

RETRAIN = "python -m tx_explorer.train seq2seq --model {kind}"  # kind: fixed, attention or transformer
MAX_WORDS = 40  # longest English input (the models were trained on 1–40 words)
MAX_TARGET = 60  # longest Italian output; the Transformer has 64 positions


@dataclass(frozen=True)
class Translation:
    """One translated sentence.

    alignment:   ``[T_out, T_in]`` a_{t,i} (Bahdanau weights, or head-averaged cross-attention), None for "fixed".
    cross:       ``[L, H, T_out, T_in]`` Transformer cross-attention per layer and head, else None.
    annotations: ``[T_in, C]`` encoder states h_i (RNN models), else None.
    contexts:    ``[T_out, C]`` context vectors c_t (RNN models; the same [→h_T; ←h_1] on every row for "fixed").
    eos_alignment, eos_cross: the same for the last step, the one that writes <eos> (``[T_in]``, ``[L, H, T_in]``);
    the arrays above stop before it, so that they line up with the output words and the gold alignment.
    """

    source: tuple[str, ...]
    tokens: tuple[str, ...]
    alignment: np.ndarray | None
    cross: np.ndarray | None
    annotations: np.ndarray | None
    contexts: np.ndarray | None
    trace: Trace
    eos_alignment: np.ndarray | None = None
    eos_cross: np.ndarray | None = None

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def source_message(check: SourceCheck) -> str:
    """An English sentence describing what is wrong with the input (pages use their own locale text)."""
    if check.problem == "empty":
        return "type an English sentence"
    if check.problem == "no_words":
        return "no words found: punctuation and symbols are dropped"
    if check.problem == "too_long":
        return f"{len(check.tokens)} words is longer than the {MAX_WORDS} the models were trained on"
    parts = [f"{w!r} (did you mean {', '.join(s)}?)" if s else repr(w) for w, s in check.unknown.items()]
    return "unknown words: " + "; ".join(parts)


class Translator:
    """A Seq2Seq model with its vocabularies and its shipped evaluation results."""

    def __init__(
        self,
        name: str,
        model: nn.Module,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        *,
        align_layer: int | None = None,
        results: dict[str, Any] | None = None,
    ) -> None:
        self.name, self.model = name, model.eval()
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.align_layer = align_layer  # Transformer layer whose head-averaged cross-attention is "the alignment"
        self.results = results or {}

    @property
    def is_transformer(self) -> bool:
        return self.model.architecture == "transformer"

    @property
    def has_alignment(self) -> bool:
        return self.is_transformer or self.model.cfg.context != "fixed"

    def check(self, text: str) -> SourceCheck:
        return check_source(text, self.src_vocab.words, MAX_WORDS)

    def _src(self, sources: Sequence[Sequence[str]]) -> tuple[Tensor, Tensor]:
        lengths = torch.tensor([len(s) for s in sources])
        src = torch.zeros(len(sources), int(lengths.max()), dtype=torch.long)
        for b, s in enumerate(sources):
            src[b, : len(s)] = torch.tensor(self.src_vocab.encode(s))
        return src, lengths

    def target_limit(self, sources: Sequence[Sequence[str]]) -> int:
        """The most words :meth:`decode` writes for a batch of ``sources`` when no <eos> comes first: 1.5 × the
        longest source + 5, at most :data:`MAX_TARGET`."""
        return min(MAX_TARGET, int(1.5 * max(len(s) for s in sources)) + 5)

    def decode(self, sources: Sequence[Sequence[str]], *, beam: int = 1, model: Any = None) -> list[list[str]]:
        """Greedy (``beam=1``, batched) or beam-search translations of tokenised sentences.

        ``model``: a stand-in for this translator's model with the same ``encode``/``start``/``step`` (a variant
        with one head ablated, or s₀ = 0); default the model itself."""
        model = self.model if model is None else model
        src, lengths = self._src(sources)
        ids = dict(bos=self.tgt_vocab.bos, eos=self.tgt_vocab.eos, max_len=self.target_limit(sources))
        if beam == 1:
            out = greedy_decode(model, src, lengths, **ids)
        else:
            out = [
                beam_search(model, src[b : b + 1, : lengths[b]], lengths[b : b + 1], beam_size=beam, **ids)
                for b in range(len(sources))
            ]
        return [self.tgt_vocab.decode(o) for o in out]

    @torch.no_grad()
    def force(
        self, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]]
    ) -> tuple[list[Translation], Trace]:
        """Teacher-force ``targets`` through the model and read its alignments (one batch)."""
        src, lengths = self._src(sources)
        n = max(len(t) for t in targets)
        tgt = torch.zeros(len(targets), n + 1, dtype=torch.long)
        tgt[:, 0] = self.tgt_vocab.bos
        for b, t in enumerate(targets):
            tgt[b, 1 : len(t) + 1] = torch.tensor(self.tgt_vocab.encode(t), dtype=torch.long)
        trace = Trace()
        self.model(src, lengths, tgt, trace=trace)
        memory = None if self.is_transformer else self.model.encode(src, lengths)
        out = []
        for b, (s, t) in enumerate(zip(sources, targets)):
            rows, cols = len(t), len(s)  # step j emits target word j; drop the <eos> step
            align = cross = ann = ctx = eos_align = eos_cross = None
            if self.is_transformer:
                full = trace.stack("cross")[:, b, :, : rows + 1, :cols].numpy()  # (L, H, T_out + 1, T_in)
                cross, eos_cross = full[:, :, :rows], full[:, :, rows]
                align, eos_align = cross[self.align_layer].mean(axis=0), eos_cross[self.align_layer].mean(axis=0)
            else:
                h = memory.states[b, :cols]
                ann = h.numpy()
                if self.has_alignment:
                    a = trace.records[0].weights[b, 0, : rows + 1, :cols]  # (T_out + 1, T_in)
                    align, ctx, eos_align = a[:rows].numpy(), (a[:rows] @ h).numpy(), a[rows].numpy()
                else:
                    ctx = memory.final[b].expand(rows, -1).numpy()
            out.append(Translation(tuple(s), tuple(t), align, cross, ann, ctx, trace, eos_align, eos_cross))
        return out, trace

    def translate(self, text: str, *, beam: int = 1) -> Translation:
        """Translate one English sentence; raises ``ValueError`` naming empty, over-long or unknown input."""
        check = self.check(text)
        if not check.ok:
            raise ValueError(source_message(check))
        tokens = self.decode([check.tokens], beam=beam)[0]
        (translation,), trace = self.force([check.tokens], [tokens])
        rows, src = ["→ " + w for w in (*tokens, "<eos>")], list(check.tokens)  # row j: the step that emits word j
        ins = ["<bos>", *tokens]  # decoder inputs y_{j−1}
        for kind, r, c in (("cross", rows, src), ("additive", rows, src), ("self", src, src), ("causal", ins, ins)):
            trace.label(r, c, kind=kind)
        return translation


def load(folder: Path) -> Translator:
    """Registry loader for ``tx_explorer/weights/seq2seq-<kind>`` (checksums verified first)."""
    folder = Path(folder)
    state, config = read_bundle(folder, RETRAIN.format(kind=folder.name.removeprefix("seq2seq-")))
    model = build(config)
    model.load_state_dict(state)
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    results_file = folder / "eval.json"
    results = json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else None
    return Translator(
        folder.name,
        model,
        Vocab(vocab["source"]),
        Vocab(vocab["target"]),
        align_layer=config.get("align_layer"),
        results=results,
    )
