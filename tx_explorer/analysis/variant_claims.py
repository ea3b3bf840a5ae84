"""The lecture's claims on the block variants' shipped numbers (§5, §8; :mod:`tx_explorer.families.variants`):
each decided over every seed by :mod:`tx_explorer.analysis.spread`, so a gap within the seeds' noise says so."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tx_explorer.analysis import spread

RMS_TOLERANCE = 0.02  # nats: "still works" = no worse than LayerNorm by more than this
PARAM_TOLERANCE = 0.01  # "the same parameters" = within 1 %


def losses(run: dict) -> list[float]:
    """A variant's final validation loss at every seed; a diverged run (None) counts as infinitely bad."""
    return [math.inf if r["final_val_loss"] is None else r["final_val_loss"] for r in run["seeds"]]


def _gap(runs: dict, pre: str, post: str) -> list[float]:
    """Post-Norm's loss minus Pre-Norm's, seed by seed (the runs of one seed share data and initialisation)."""
    return [b - a for a, b in zip(losses(runs[pre]), losses(runs[post]), strict=True)]


def _same_params(runs: dict) -> spread.Comparison:
    swiglu, mlp = (runs[n]["non_embedding_parameters"] for n in ("pre-rms-swiglu", "pre-rms"))
    return spread.less(abs(swiglu - mlp), PARAM_TOLERANCE * mlp)  # counts do not depend on the seed: no spread


# claim → its allowance, for claims that compare a difference with one: their gap is the room left (tolerance −
# difference), not the difference itself, so the page names both.
TOLERANCES: dict[str, Callable[[dict], float]] = {
    "rms_matches_ln": lambda r: RMS_TOLERANCE,
    "swiglu_same_params": lambda r: PARAM_TOLERANCE * r["pre-rms"]["non_embedding_parameters"],
}


# claim → (the variants it reads, the comparison ``left < right`` over seeds that decides it).
CLAIMS: dict[str, tuple[tuple[str, ...], Callable[[dict], spread.Comparison]]] = {
    "pre_beats_post": (("pre-ln", "post-ln"), lambda r: spread.less(losses(r["pre-ln"]), losses(r["post-ln"]))),
    "deep_pre_beats_post": (
        ("deep-pre-ln", "deep-post-ln"),
        lambda r: spread.less(losses(r["deep-pre-ln"]), losses(r["deep-post-ln"])),
    ),
    "gap_grows_with_depth": (
        ("pre-ln", "post-ln", "deep-pre-ln", "deep-post-ln"),
        lambda r: spread.less(_gap(r, "pre-ln", "post-ln"), _gap(r, "deep-pre-ln", "deep-post-ln")),
    ),
    "rms_matches_ln": (
        ("pre-rms", "pre-ln"),
        lambda r: spread.less(losses(r["pre-rms"]), [v + RMS_TOLERANCE for v in losses(r["pre-ln"])]),
    ),
    "swiglu_same_params": (("pre-rms-swiglu", "pre-rms"), _same_params),
    "swiglu_beats_mlp": (
        ("pre-rms-swiglu", "pre-rms"),
        lambda r: spread.less(losses(r["pre-rms-swiglu"]), losses(r["pre-rms"])),
    ),
}


def claims(summary: dict) -> list[dict[str, Any]]:
    """Check the lecture's claims on every seed's numbers: ``{key, state, holds, comparison, variants, losses,
    params, tolerance, difference}`` with ``state`` "holds", "not_holds" or "noise"
    (:mod:`tx_explorer.analysis.spread`) and ``losses`` each variant's final validation loss over the seeds.
    ``tolerance`` is a claim's allowance (None for a plain comparison) and ``difference`` what is held against it,
    tolerance − gap: the first variant's mean loss minus the second's, or the distance of the parameter counts.

    Claims whose variants were not all trained are left out.
    """
    runs = summary["variants"]
    out = []
    for key, (names, compare) in CLAIMS.items():
        if not all(n in runs for n in names):
            continue
        c = compare(runs)
        tolerance = TOLERANCES[key](runs) if key in TOLERANCES else None
        out.append(
            {
                "key": key,
                "state": c.state,
                "holds": c.state == "holds",
                "comparison": c,
                "variants": list(names),
                "losses": {n: spread.stat(losses(runs[n])) for n in names},
                "params": {n: runs[n]["non_embedding_parameters"] for n in names},
                "tolerance": tolerance,
                "difference": None if tolerance is None else tolerance - c.gap,
            }
        )
    return out
