"""Translation quality by source length — the bottleneck of lecture §1.2 (Bahdanau et al. 2015, Figure 2).

Metrics per source-length bucket on the held-out split of :mod:`tx_explorer.data.translation`:

- exact match: the whole greedy translation equals the reference;
- token accuracy: 1 − word edit distance / max(len(hypothesis), len(reference)); every wrong, missing
  or extra word counts once;
- BLEU-4 (Papineni et al. 2002), corpus level within the bucket;
- AER (Och & Ney 2003) of the model's attention against the gold word alignment, reading the attention
  while the model is teacher-forced on the reference (the usual protocol, e.g. Koehn & Knowles 2017).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tx_explorer.data.translation import Example, generate_examples
from tx_explorer.errors import positive_int

BUCKETS: tuple[tuple[int, int], ...] = tuple((lo, lo + 4) for lo in range(1, 41, 5))  # 1–5, 6–10, …, 36–40
EVAL_SEED = 2015
METRICS = ("token_accuracy", "exact_match", "bleu", "aer")


def eval_set(per_bucket: int = 50, seed: int = EVAL_SEED) -> list[list[Example]]:
    """``per_bucket`` distinct held-out pairs for each bucket in :data:`BUCKETS` (never seen in training)."""
    positive_int("per_bucket", per_bucket, key="per_bucket_positive")  # 0 would "evaluate" nothing, report zeros
    out = []
    for k, (lo, hi) in enumerate(BUCKETS):
        unique = {
            ex.source: ex
            for ex in generate_examples(2 * per_bucket, seed + k, min_words=lo, max_words=hi, split="test")
        }
        out.append(list(unique.values())[:per_bucket])
    return out


def edit_distance(hyp: Sequence[str], ref: Sequence[str]) -> int:
    """Word-level Levenshtein distance: fewest insertions, deletions and substitutions."""
    prev = list(range(len(ref) + 1))
    for i, h in enumerate(hyp, start=1):
        cur = [i]
        for j, r in enumerate(ref, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (h != r)))
        prev = cur
    return prev[-1]


def token_matches(hyp: Sequence[str], ref: Sequence[str]) -> tuple[int, int]:
    """(correct words, max of the two lengths), correct = max length − edit distance.

    Counting through the edit distance, not position by position, makes one dropped word cost one word
    instead of every word after it.
    """
    n = max(len(hyp), len(ref))
    return n - edit_distance(hyp, ref), n


def _ngrams(words: Sequence[str], n: int) -> Counter:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def bleu(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]], max_n: int = 4) -> float:
    """Corpus BLEU in [0, 100] with one reference per sentence.

    BLEU = BP · exp(mean_n log p_n), p_n = clipped n-gram matches / hypothesis n-grams,
    BP = exp(1 − r/c) when the hypotheses are shorter (c) than the references (r). Orders for which the
    hypotheses hold no n-gram at all (every sentence shorter than n) are left out of the mean.
    """
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    logs = []
    for n in range(1, max_n + 1):
        match = total = 0
        for h, r in zip(hyps, refs):
            hc, rc = _ngrams(h, n), _ngrams(r, n)
            match += sum(min(c, rc[g]) for g, c in hc.items())
            total += sum(hc.values())
        if total:
            if match == 0:
                return 0.0
            logs.append(math.log(match / total))
    c, r = sum(len(h) for h in hyps), sum(len(x) for x in refs)
    if c == 0 or not logs:
        return 0.0
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    return 100.0 * bp * math.exp(sum(logs) / len(logs))


def hard_alignment(weights: np.ndarray) -> set[tuple[int, int]]:
    """Links (source i, target j): each target row's most attended source word."""
    return {(int(i), j) for j, i in enumerate(np.asarray(weights).argmax(axis=1))}


def aer_counts(predicted: Iterable[tuple[int, int]], gold: Iterable[tuple[int, int]]) -> tuple[int, int, int]:
    """(|A∩S|, |A|, |S|) for summing over a corpus."""
    a, s = set(predicted), set(gold)
    return len(a & s), len(a), len(s)


def aer(
    predicted: Iterable[tuple[int, int]],
    sure: Iterable[tuple[int, int]],
    possible: Iterable[tuple[int, int]] | None = None,
) -> float:
    """Alignment error rate: 1 − (|A∩S| + |A∩P|) / (|A| + |S|), with P ⊇ S (P = S when omitted)."""
    a, s = set(predicted), set(sure)
    p = s | set(possible or ())
    if not a and not s:
        return 0.0
    return 1.0 - (len(a & s) + len(a & p)) / (len(a) + len(s))


def sentence_aer(translator: Any, example: Example) -> float:
    """AER of one gold-aligned sentence, reading the attention while teacher-forcing its reference."""
    (forced,), _ = translator.force([example.source], [example.target])
    return aer(hard_alignment(forced.alignment), example.alignment)


DETERMINERS = frozenset({"the", "a", "an"})


def article_weights(weights: np.ndarray, example: Example) -> tuple[float, float, int]:
    """Where the articles of ``example``'s target look, ``weights`` ``[T_out, T_in]`` read while writing that
    target: the mean weight on the article's own English determiner (the, a, an) and on its noun, over its
    articles, and how many there are ((0, 0, 0): none). An article is a target word linked to a determiner; its
    noun is the source of the next target word, since the grammar writes the noun right after its article (adjectives
    follow the noun)."""
    w = np.asarray(weights)
    sources: dict[int, list[int]] = {}
    for i, j in example.alignment:
        sources.setdefault(j, []).append(i)
    own, noun = [], []
    for j, links in sorted(sources.items()):
        dets = [i for i in links if example.source[i] in DETERMINERS]
        if dets and j + 1 in sources:
            own.append(w[j, dets].sum())
            noun.append(w[j, sources[j + 1]].sum())
    if not own:
        return 0.0, 0.0, 0
    return float(np.mean(own)), float(np.mean(noun)), len(own)


def head_sharpness(cross: np.ndarray) -> np.ndarray:
    """Each head's sharpness, ``cross`` ``[L, H, T_out, T_in]``: the weight of its top source word, averaged over
    the output steps (1: one word per step, 1/T_in: spread evenly) → ``[L, H]``."""
    return np.asarray(cross).max(axis=-1).mean(axis=-1)


def context_terms(weights_row: np.ndarray, annotations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weighted sum c_t = Σ_i a_{t,i} h_i, term by term: (``[T_in, C]`` terms a_{t,i}·h_i, ``[C]`` c_t)."""
    terms = np.asarray(weights_row)[:, None] * np.asarray(annotations)
    return terms, terms.sum(axis=0)


def evaluate(
    translator: Any,
    buckets: Sequence[Sequence[Example]],
    progress: Callable[[float], None] | None = None,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Greedy-decode every bucket and score it; ``progress(fraction)`` is called after each batch.

    Returns a JSON-ready dict: ``buckets`` labels, ``n`` sentences, one list per metric in :data:`METRICS`
    (``aer`` is None for a model without attention) and ``aer_floor``, the lowest AER any one-link-per-word
    alignment can reach on these sentences.
    """
    out: dict[str, Any] = {
        "model": translator.name,
        "buckets": [],
        "n": [],
        **{m: [] for m in METRICS},
        "aer_floor": [],
    }
    total, done = sum(len(b) for b in buckets), 0
    for bucket in buckets:
        hyps: list[list[str]] = []
        inter = n_pred = n_gold = 0
        for start in range(0, len(bucket), batch_size):
            batch = bucket[start : start + batch_size]
            sources, refs = [ex.source for ex in batch], [ex.target for ex in batch]
            hyps += translator.decode(sources)
            if translator.has_alignment:
                forced, _ = translator.force(sources, refs)
                for ex, tr in zip(batch, forced):
                    i, a, s = aer_counts(hard_alignment(tr.alignment), ex.alignment)
                    inter, n_pred, n_gold = inter + i, n_pred + a, n_gold + s
            done += len(batch)
            if progress is not None:
                progress(done / total)
        refs = [ex.target for ex in bucket]
        matches = [token_matches(h, r) for h, r in zip(hyps, refs)]
        lengths = [len(ex.source) for ex in bucket]
        out["buckets"].append(f"{min(lengths)}–{max(lengths)}" if bucket else "")
        out["n"].append(len(bucket))
        out["token_accuracy"].append(sum(m for m, _ in matches) / max(1, sum(t for _, t in matches)))
        out["exact_match"].append(sum(list(h) == list(r) for h, r in zip(hyps, refs)) / max(1, len(bucket)))
        out["bleu"].append(bleu(hyps, refs))
        out["aer"].append(1.0 - 2 * inter / (n_pred + n_gold) if translator.has_alignment and n_pred + n_gold else None)
        # One link per output word cannot cover many-to-one gold links (we + see → vediamo): AER's floor here.
        n_out, n_links = sum(len(ex.target) for ex in bucket), sum(len(ex.alignment) for ex in bucket)
        out["aer_floor"].append(1.0 - 2 * n_out / (n_out + n_links) if bucket else None)
    if not translator.has_alignment:
        out["aer"] = None
    return out


@dataclass(frozen=True)
class LengthTrend:
    """One model's scores in the shortest and the longest bucket of :func:`evaluate`'s result."""

    buckets: tuple[str, str]  # their labels, e.g. "3–5", "36–40"
    sentences: tuple[int, int]
    token_accuracy: tuple[float, float]
    exact_match: tuple[float, float]
    exact_se: float  # standard error of the exact-match drop, the two buckets being independent samples

    @property
    def falls(self) -> bool:
        """Exact match is lower in the longest bucket by more than twice the drop's standard error."""
        drop = self.exact_match[0] - self.exact_match[1]
        return drop > 0 and drop > 2 * self.exact_se


def length_trend(result: Mapping[str, Any]) -> LengthTrend:
    """The first and last bucket of ``result`` (:func:`evaluate`'s), and whether exact match falls between them
    by more than sampling noise: p(1 − p)/n per bucket, summed, is the variance of the difference."""
    (p0, p1), (n0, n1) = (result["exact_match"][i] for i in (0, -1)), (result["n"][i] for i in (0, -1))
    return LengthTrend(
        (result["buckets"][0], result["buckets"][-1]),
        (n0, n1),
        (result["token_accuracy"][0], result["token_accuracy"][-1]),
        (p0, p1),
        math.sqrt(p0 * (1 - p0) / n0 + p1 * (1 - p1) / n1),
    )
