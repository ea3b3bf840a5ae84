"""Self-attention and word order (lecture §3.1–3.3, §9.3): equivariance, positions and what they fix."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from tx_explorer import models
from tx_explorer.analysis.seeding import generator, randn, seeded_mha
from tx_explorer.bundle import BundleError, read_bundle
from tx_explorer.errors import InputError, checked_words, positive_int
from tx_explorer.modules.positional import sinusoidal_table
from tx_explorer.trace import Trace

PositionKind = Literal["none", "sinusoidal", "learned"]
POSITION_KINDS: tuple[str, ...] = ("none", "sinusoidal", "learned")
MAX_WORDS = 16
MAX_WORD_CHARS = 32  # longer "words" would only stretch the axis labels
EQUIVARIANCE_TOL = 1e-5  # float32 rounding of a reordered sum stays orders of magnitude below this
# Chinese is written without spaces, so a run of Han characters is a phrase, not a word: each Han character counts as
# one word (狗咬人 and 人咬狗 hold the same three), while a Latin, Cyrillic … word stays whole.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_TOKEN = re.compile(rf"[{_HAN}]|[^\W{_HAN}]+|[^\w\s]")


def position_table(kind: PositionKind, n: int, dim: int, seed: int = 0) -> Tensor:
    """Positional encodings ``[n, dim]`` added to the token vectors (x̃_i = x_i + p_i, §3.3).

    ``"none"`` is all zeros; ``"sinusoidal"`` is Vaswani et al.'s fixed table; ``"learned"`` is a trainable
    table *before training*: independent N(0, 1) rows, on the scale of the token vectors used here.
    """
    positive_int("n", n, key="positions_positive")
    if kind == "none":
        return torch.zeros(n, dim)
    if kind == "sinusoidal":
        if dim % 2:  # refused here in the page's words (width D), not the table's (n, dim)
            raise InputError("sinusoidal_odd_width", dim=dim)
        return sinusoidal_table(n, dim)
    if kind == "learned":
        return randn(n, dim, seed=seed)
    raise ValueError(f"unknown position encoding {kind!r}; expected one of {POSITION_KINDS}")


def position_similarity(table: Tensor) -> Tensor:
    """Cosine similarity of every pair of position vectors: ``[n, dim]`` → ``[n, n]`` (1 on the diagonal)."""
    if table.dim() != 2:
        raise ValueError(f"a position table is [n, dim], got shape {tuple(table.shape)}")
    return F.cosine_similarity(table[:, None, :], table[None, :, :], dim=-1)


NEAR = 2  # "nearby": positions 1 or 2 apart
BAND_MARGIN = 0.1  # a band along the diagonal: nearby pairs more alike than far ones by at least this (cosine)
TOEPLITZ_TOL = 1e-4  # float32 rounding of the sinusoidal table's cosines stays far below this


@dataclass(frozen=True)
class DistanceProfile:
    """How alike a table's positions are near and far apart: its similarity map measured (§3.3, §9.3)."""

    n: int  # positions
    near: float | None  # mean cosine similarity of the pairs 1 … NEAR apart; None for one position
    far: float | None  # of the pairs at least ``far_from`` apart; None when no pair lies that far
    far_from: int  # max(NEAR + 1, ⌈n / 2⌉): far pairs never overlap the near ones
    diagonal_spread: float  # the largest max − min along one diagonal: 0 when the similarity depends on i − j alone

    @property
    def band(self) -> str:
        """``"band"``: nearby positions more alike than far ones by at least :data:`BAND_MARGIN`; ``"inverse"``: less
        alike by that much; ``"none"``: within it; ``"short"``: too few positions for a far pair."""
        if self.near is None or self.far is None:
            return "short"
        diff = self.near - self.far
        return "band" if diff >= BAND_MARGIN else "inverse" if diff <= -BAND_MARGIN else "none"


def distance_profile(similarity: Tensor) -> DistanceProfile:
    """Nearby against distant pairs of a cosine-similarity map ``[n, n]`` (:func:`position_similarity`)."""
    sim = torch.as_tensor(similarity, dtype=torch.float64)
    if sim.dim() != 2 or sim.shape[0] != sim.shape[1]:
        raise ValueError(f"a similarity map is [n, n], got shape {tuple(sim.shape)}")
    n = sim.shape[0]
    i = torch.arange(n)
    apart = (i[:, None] - i[None, :]).abs()
    far_from = max(NEAR + 1, -(-n // 2))
    near, far = (apart >= 1) & (apart <= NEAR), apart >= far_from
    spread = max((float(d.max() - d.min()) for k in range(1, n) for d in (torch.diagonal(sim, k),)), default=0.0)
    return DistanceProfile(
        n=n,
        near=float(sim[near].mean()) if near.any() else None,
        far=float(sim[far].mean()) if far.any() else None,
        far_from=far_from,
        diagonal_spread=spread,
    )


def bundled_position_tables() -> tuple[dict[str, Tensor], dict[str, str]]:
    """Trained learned-position tables of the bundled models that have one (``*pos_embed.weight``, ``[n, D]``).

    Returns ``(tables, problems)``: tables by model name, and for bundles that could not be read the
    reason (with the command that rebuilds them).
    """
    tables: dict[str, Tensor] = {}
    problems: dict[str, str] = {}
    for name in models.available_models():
        entry = models.REGISTRY[name]
        if not entry.bundled:
            continue
        try:
            state, _ = read_bundle(models.WEIGHTS_DIR / name, entry.retrain)
        except BundleError as exc:
            problems[name] = str(exc)
            continue
        found = [t for key, t in state.items() if key.endswith("pos_embed.weight") and t.dim() == 2]
        if found:
            tables[name] = found[0].float()
    return tables, problems


@dataclass(frozen=True)
class PermutationCheck:
    """F(σ(X)) against σ(F(X)) for one self-attention layer F (§3.2)."""

    perm: Tensor  # [N]: row i of the shuffled input is row perm[i] of the original
    out: Tensor  # F(X + P)            [N, D]
    out_shuffled: Tensor  # F(σ(X) + P)  [N, D]
    weights: Tensor  # [H, N, N] for X
    weights_shuffled: Tensor  # [H, N, N] for σ(X)
    max_diff: float  # max |F(σ(X) + P) − σ(F(X + P))|; ~1e-7 without positions


@torch.no_grad()
def permutation_check(
    n: int, dim: int, num_heads: int, seed: int, perm_seed: int, positions: PositionKind = "none"
) -> PermutationCheck:
    """Shuffle the token vectors of a random input and compare outputs.

    Positions ``P`` stay attached to the *slots* (position 0 is position 0 whatever token sits there), so
    with ``positions="none"`` the outputs are the same rows shuffled, and with positions they are not.
    """
    positive_int("n", n, key="tokens_positive")
    mha = seeded_mha(dim, num_heads, seed)
    x = randn(n, dim, seed=seed + 1)
    perm = torch.randperm(n, generator=generator(perm_seed))
    pos = position_table(positions, n, dim, seed=seed + 2)
    traces = Trace(), Trace()
    out = mha((x + pos)[None], trace=traces[0])[0]  # (N, D)
    out_shuffled = mha((x[perm] + pos)[None], trace=traces[1])[0]
    return PermutationCheck(
        perm=perm,
        out=out,
        out_shuffled=out_shuffled,
        weights=traces[0].records[0].weights[0],
        weights_shuffled=traces[1].records[0].weights[0],
        max_diff=(out_shuffled - out[perm]).abs().max().item(),
    )


def tokenize_words(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Lower-cased words and punctuation marks of ``text``; each Han character is a word of its own.

    Raises:
        ValueError: when there are none, more than ``max_words``, or one longer than ``MAX_WORD_CHARS``.
    """
    return checked_words(_TOKEN.findall(str(text).lower()), limit=max_words, max_chars=MAX_WORD_CHARS, unit="word")


@dataclass(frozen=True)
class WordOrder:
    """The same words in two orders through one self-attention layer (§3.3)."""

    words_a: list[str]
    words_b: list[str]
    out_a: Tensor  # [N, D]
    out_b: Tensor  # [N, D]
    word_diff: Tensor  # [N]: max |y_a(word i) − y_b(same word)| per word of sentence A
    max_diff: float  # max of word_diff: 0 means the two output *sets* are identical
    pooled_diff: float  # max |mean(y_a) − mean(y_b)|: a mean-pooled sentence vector


def _match(words_a: list[str], words_b: list[str]) -> list[int]:
    """For each word of A, the index of the same word in B (repeated words matched in order)."""
    slots: dict[str, list[int]] = defaultdict(list)
    for j, w in enumerate(words_b):
        slots[w].append(j)
    return [slots[w].pop(0) for w in words_a]


@torch.no_grad()
def word_order(
    sentence_a: str, sentence_b: str, dim: int, num_heads: int, positions: PositionKind, seed: int
) -> WordOrder:
    """Run "dog bites man" and "man bites dog" (or any two orderings of the same words) through one layer.

    Every word gets one random vector (shared by both sentences) plus, optionally, the encoding of its
    position. Without positions each word's output is the same in both sentences — the layer sees a set.
    """
    words_a, words_b = tokenize_words(sentence_a), tokenize_words(sentence_b)
    if sorted(words_a) != sorted(words_b):
        raise InputError("not_a_permutation")
    vocab = {w: i for i, w in enumerate(sorted(set(words_a)))}
    table = randn(len(vocab), dim, seed=seed + 1)  # one vector per word, the same in both sentences
    mha = seeded_mha(dim, num_heads, seed)
    pos = position_table(positions, len(words_a), dim, seed=seed + 2)

    def run(words: list[str]) -> Tensor:
        x = table[torch.tensor([vocab[w] for w in words])] + pos  # (N, D)
        return mha(x[None])[0]

    out_a, out_b = run(words_a), run(words_b)
    word_diff = (out_a - out_b[_match(words_a, words_b)]).abs().amax(-1)
    return WordOrder(
        words_a=words_a,
        words_b=words_b,
        out_a=out_a,
        out_b=out_b,
        word_diff=word_diff,
        max_diff=word_diff.max().item(),
        pooled_diff=(out_a.mean(0) - out_b.mean(0)).abs().max().item(),
    )
