"""Helpers shared by the checkpoint importers."""

from __future__ import annotations

import math


def mlp_ratio(hidden: int, dim: int) -> float:
    """The ``mlp_ratio`` whose ``int(ratio · dim)`` (as :func:`make_mlp` computes it) is exactly ``hidden``.

    ``hidden / dim · dim`` can land one ulp below ``hidden`` and truncate to ``hidden − 1``; stepping the ratio
    up by one ulp fixes that without changing any width that already comes out right.
    """
    ratio = hidden / dim
    if int(ratio * dim) != hidden:
        ratio = math.nextafter(ratio, math.inf)
    return ratio
