"""An induction circuit measured (Elhage et al. 2021; Olsson et al. 2022, lecture §4.1: heads learn relations).

On repeated random sequences (a first token, then n random tokens twice) a model with an induction circuit predicts
the second copy: a previous-token head of layer 0 writes "my previous token was A" into each position, and an
induction head of a later layer, at a query holding A, finds that position through its keys (K-composition) and
copies the token there. Measured here, from the model's own attention (``Trace``) and loss:

- each head's induction and previous-token scores, by
  :func:`~tx_explorer.analysis.head_science.repeat_scores` (the one place of their formulas);
- the next-token loss on the first copy (nothing to copy: about log V) and on the second;
- K-composition tested by ablation: the previous-token head zeroed through :class:`~tx_explorer.edit.Edit`, the
  induction head's score and the second-copy loss measured again;
- the phase change of a training record: the first logged step where the second copy's loss is below
  :data:`PHASE_RATIO` of the first copy's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer.analysis.head_science import repeat_scores
from tx_explorer.edit import Edit
from tx_explorer.families.circuit import CircuitBundle
from tx_explorer.trace import Trace

PHASE_RATIO = 0.5  # the phase change: second-copy loss below half of the first copy's


def random_repeats(vocab_size: int, special_ids: Collection[int], *, length: int, count: int, seed: int) -> Tensor:
    """``count`` sequences ``[count, 1 + 2·length]``: a first token (the smallest special id, as a document would
    start; else the first random token), then ``length`` random ordinary tokens twice. The batched form of
    :func:`~tx_explorer.analysis.head_science.repeated_random_tokens`, for models without a tokenizer (training)."""
    gen = torch.Generator().manual_seed(seed)
    ordinary = torch.tensor(sorted(set(range(vocab_size)) - set(special_ids)))
    seq = ordinary[torch.randint(len(ordinary), (count, length), generator=gen)]  # (S, n)
    first = torch.full((count, 1), min(special_ids)) if special_ids else seq[:, :1]  # (S, 1)
    return torch.cat([first, seq, seq], dim=1)  # (S, 1 + 2n)


@dataclass(frozen=True)
class Circuit:
    """One model on repeated random sequences of ``length`` tokens twice."""

    induction: np.ndarray  # [L, H] mean attention of second-copy queries t on t − n + 1 (the token after A's twin)
    previous: np.ndarray  # [L, H] mean attention of second-copy queries on t − 1
    loss_first: float  # nats per token on the first copy, its 2nd…nth tokens (random: about log V)
    loss_second: float  # nats per token on the second copy, its 2nd…nth tokens (what induction can predict)
    length: int
    # [L, H] mean attention of first-copy queries (2…n) on t − 1: the previous token written where the induction
    # head's keys are. A previous-token head may work only there (induction-2l trained with learned positions had
    # two, 0.50 on the first copy and 0.001 on the second, where ``previous`` looks).
    previous_first: np.ndarray | None = None

    @property
    def loss_ratio(self) -> float:
        """Second-copy over first-copy loss: 1 without induction, near 0 with a perfect circuit."""
        return self.loss_second / self.loss_first

    def best(self, score: str, layer: int | None = None) -> tuple[int, int]:
        """(layer, head) with the highest ``score`` ("induction" or "previous"), within ``layer`` if given."""
        values = getattr(self, score)
        if layer is None:
            return tuple(int(i) for i in np.unravel_index(values.argmax(), values.shape))
        return layer, int(values[layer].argmax())


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def measure(model: nn.Module, batch: Tensor, *, edit: Edit | None = None) -> Circuit:
    """Scores and copy losses of a causal ``model`` on ``batch [S, 1 + 2n]`` (:func:`random_repeats`), with an
    optional ``edit`` (an ablation). The model's train/eval mode is left as it was."""
    n = (batch.shape[1] - 1) // 2
    trace = Trace()
    x = batch.to(_device(model))
    logits = model(x, trace=trace, edit=edit)  # (S, 1 + 2n, V)
    maps = trace.stack(name_contains="attn").float().mean(dim=1)  # (L, H, M, M): averaged over the sequences
    scores = repeat_scores(maps, n)
    t = torch.arange(2, n + 1)  # first-copy queries with a random previous token
    ce = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), x[:, 1:], reduction="none")  # (S, 2n): ce[i] → i+1
    return Circuit(
        induction=scores["induction"].cpu().numpy(),
        previous=scores["previous"].cpu().numpy(),
        loss_first=ce[:, 1:n].mean().item(),  # targets 2…n
        loss_second=ce[:, n + 1 :].mean().item(),  # targets n+2…2n
        length=n,
        previous_first=maps[..., t, t - 1].mean(-1).cpu().numpy(),
    )


@torch.no_grad()
def attention_maps(model: nn.Module, batch: Tensor) -> np.ndarray:
    """The first sequence's post-softmax maps ``[L, H, M, M]``."""
    trace = Trace()
    model(batch[:1].to(_device(model)), trace=trace)
    return trace.stack(name_contains="attn")[:, 0].float().numpy()


@dataclass(frozen=True)
class KComposition:
    """The circuit with and without its previous-token head (zero ablation of that head's output)."""

    previous_head: tuple[int, int]  # (0, h): the layer-0 head with the highest previous-token score
    induction_head: tuple[int, int]  # (L − 1, h): the last layer's head with the highest induction score
    clean: Circuit
    ablated: Circuit

    @property
    def induction_before(self) -> float:
        return float(self.clean.induction[self.induction_head])

    @property
    def induction_after(self) -> float:
        return float(self.ablated.induction[self.induction_head])

    @property
    def induction_drop(self) -> float:
        """Fraction of the induction head's score lost by the ablation (1 = gone)."""
        return 1 - self.induction_after / self.induction_before if self.induction_before > 0 else 0.0


def k_composition(model: nn.Module, batch: Tensor) -> KComposition:
    """Ablate the layer-0 previous-token head and measure the last layer's induction head again."""
    clean = measure(model, batch)
    prev = clean.best("previous", layer=0)
    ind = clean.best("induction", layer=len(clean.induction) - 1)
    return KComposition(prev, ind, clean, measure(model, batch, edit=Edit().ablate(*prev)))


def phase_change(steps: Sequence[int], first: Sequence[float], second: Sequence[float]) -> int | None:
    """The first logged step whose second-copy loss is below :data:`PHASE_RATIO` of its first-copy loss."""
    for step, a, b in zip(steps, first, second, strict=True):
        if b < PHASE_RATIO * a:
            return int(step)
    return None


RISE_SHARE = 0.8  # the middle share of a score's rise that :func:`rise_span` brackets


def rise_span(steps: Sequence[int], scores: Sequence[float], share: float = RISE_SHARE) -> tuple[int, int] | None:
    """The logged steps that bracket the middle ``share`` of a score's rise from its first logged value to its last:
    the first step at which it had made (1 − share)/2 of that rise and the first at which it had made (1 + share)/2.
    None for a score that did not rise. One interval of the record around the phase change shows only its slope
    there; the bracket says over how many steps the rise was spread."""
    start, end = scores[0], scores[-1]
    if end <= start:
        return None
    low, high = (start + (end - start) * (1 + sign * share) / 2 for sign in (-1, 1))
    first = next(int(s) for s, x in zip(steps, scores, strict=True) if x >= low)
    return first, next(int(s) for s, x in zip(steps, scores, strict=True) if x >= high)


# --- the shipped run (tx_explorer.families.circuit) ------------------------------------------------------------------
def recorded_phase_change(bundle: CircuitBundle) -> int | None:
    """:func:`phase_change` recomputed from the bundle's training record."""
    r = bundle.record
    return phase_change(r["step"], r["loss_first"], r["loss_second"])


def held_out(bundle: CircuitBundle, count: int | None = None, length: int | None = None) -> Tensor:
    """The held-out repeated random sequences of the bundle's record, ``[S, 1 + 2n]`` (the first ``count``; shorter
    ones of the same generator with ``length``)."""
    s = bundle.training["settings"]
    return random_repeats(
        bundle.text.config.vocab_size,
        bundle.text.special_ids,
        length=length or s["eval_length"],
        count=count or s["eval_count"],
        seed=s["eval_seed"],
    )


def bundle_k_composition(bundle: CircuitBundle, step: int | None = None) -> KComposition:
    """The K-composition test on the held-out sequences: the final model, or the checkpoint at ``step``."""
    tm = bundle.text if step is None else bundle.checkpoint(step)
    return k_composition(tm.model, held_out(bundle))
