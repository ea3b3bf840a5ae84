"""Claims checked over seeds: a trained comparison holds only when its gap exceeds the spread.

The bundles that check claims on trained models (the position lab, the block variants) train every model at
several seeds. A claim compares two quantities, ``left < right`` (one loss below another, a shuffle's harm below a
tenth of the others', a parameter count within 1 %), each measured once per seed. Its **gap** is the difference
of the two means over the seeds, its **spread** the sum of the two standard deviations over the seeds (sample
deviation, n − 1; 0 for a number that does not depend on the seed, such as a threshold). The claim

* ``"holds"`` when the gap goes its way and is larger than the spread,
* ``"not_holds"`` when the gap goes against it and is larger than the spread,
* ``"noise"`` (within noise) otherwise, including when a seed-dependent number was measured at one seed only.

A run that diverged counts as an infinite loss: its mean is infinite and the gap decides alone.

Timed calls (:func:`faster`) are judged by the same rule on robust numbers: the gap between the **medians** of the
calls against the sum of **half their interquartile ranges**. On a shared CPU (a class on one server) a call now and
then is slowed by another job; one such call in five makes a standard deviation as large as the mean, and every size
"within noise", while the median and the quartiles do not move.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

State = Literal["holds", "not_holds", "noise"]
STATES: tuple[State, ...] = ("holds", "not_holds", "noise")


@dataclass(frozen=True)
class Stat:
    """One quantity over seeds: the per-seed values, their mean and their sample standard deviation."""

    values: tuple[float, ...]
    mean: float
    std: float  # 0 for an exact number; NaN when a seed-dependent number has one value only

    def plus_minus(self, digits: int = 3) -> str:
        """``mean ± std`` with ``digits`` decimals (the bare mean when no spread was measured: one seed)."""
        if math.isnan(self.std):
            return fixed(self.mean, digits)
        return f"{fixed(self.mean, digits)} ± {fixed(self.std, digits)}"


def fixed(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, a value that rounds to zero written 0 whatever its sign (not "-0.0000": a rise
    of −0.00001 is no fall)."""
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def stat(values: float | Iterable[float | None]) -> Stat:
    """A :class:`Stat` of per-seed ``values`` (None = diverged = +∞); a bare number is exact (spread 0)."""
    if isinstance(values, int | float):
        return Stat((float(values),), float(values), 0.0)
    vals = tuple(math.inf if v is None else float(v) for v in values)
    if not vals:
        raise ValueError("a quantity over seeds needs at least one value")
    if not all(math.isfinite(v) for v in vals):
        # inf (a diverged run) or NaN (a scheme that cannot run there) is the mean itself; no spread to measure
        return Stat(vals, math.inf if any(v == math.inf for v in vals) else math.nan, 0.0)
    return Stat(vals, statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else math.nan)


@dataclass(frozen=True)
class Calls:
    """Timed calls of one function: their median and, as their spread, half their interquartile range (inclusive
    quartiles: numpy's default); NaN from a single call, whose spread was not measured."""

    values: tuple[float, ...]
    median: float
    half_iqr: float


def calls(values: Iterable[float]) -> Calls:
    """A :class:`Calls` of the seconds ``values`` of timed calls."""
    vals = tuple(float(v) for v in values)
    if not vals:
        raise ValueError("a timing needs at least one call")
    if len(vals) == 1:
        return Calls(vals, vals[0], math.nan)
    q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    return Calls(vals, statistics.median(vals), (q3 - q1) / 2)


@dataclass(frozen=True)
class Comparison:
    """``left < right``: over seeds (:class:`Stat`), or over timed calls (:class:`Calls`)."""

    left: Stat | Calls
    right: Stat | Calls
    gap: float  # right − left of the means (the medians of calls): positive when the claim goes its way
    spread: float  # left.std + right.std (the calls' half interquartile ranges)
    state: State


def _judged(left: Stat | Calls, right: Stat | Calls, gap: float, spread: float) -> Comparison:
    """The rule of this module: the gap decides when it exceeds the spread; inf − inf or a NaN gives noise."""
    if math.isnan(gap) or math.isnan(spread) or abs(gap) <= spread:
        state: State = "noise"
    else:
        state = "holds" if gap > 0 else "not_holds"
    return Comparison(left, right, gap, spread, state)


def less(left: float | Iterable[float | None], right: float | Iterable[float | None]) -> Comparison:
    """Check ``left < right`` on per-seed values (or exact numbers): holds, does not hold, or within noise."""
    a, b = stat(left), stat(right)
    return _judged(a, b, b.mean - a.mean, a.std + b.std)


def faster(left: Iterable[float], right: Iterable[float]) -> Comparison:
    """Check that the calls timed in ``left`` take less time than those in ``right`` (seconds per call)."""
    a, b = calls(left), calls(right)
    return _judged(a, b, b.median - a.median, a.half_iqr + b.half_iqr)


def overall(states: Sequence[State]) -> State:
    """A claim made of several comparisons: holds if all hold, does not hold if any does not, else noise."""
    if all(s == "holds" for s in states):
        return "holds"
    return "not_holds" if "not_holds" in states else "noise"
