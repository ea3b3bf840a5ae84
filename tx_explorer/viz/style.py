"""One visual language for every figure: colour scales, axis conventions, safe labels."""

import html
from collections.abc import Sequence

WEIGHTS = "Viridis"  # attention weights in [0, 1]: one scale everywhere so maps compare at a glance
DIVERGING = "RdBu_r"  # signed values (scores, differences), centred on 0
SEQUENTIAL = "Blues"  # counts and magnitudes
QUERY_AXIS = "queries (rows)"
KEY_AXIS = "keys (columns)"
FONT = dict(size=12)


def safe_labels(labels: Sequence[object]) -> list[str]:
    """Token labels for Plotly text: it reads ``<…>`` as markup, so ``<b>`` typed by a user is escaped and shows
    literally (Plotly decodes the entities back when drawing)."""
    return [html.escape(str(t), quote=False) for t in labels]
