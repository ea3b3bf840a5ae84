"""One visual language for every figure: colour scales, axis conventions, safe labels."""

import html
from collections.abc import Sequence

import plotly.graph_objects as go
import plotly.io as pio

WEIGHTS = "Viridis"  # attention weights in [0, 1]: one scale everywhere so maps compare at a glance
DIVERGING = "RdBu_r"  # signed values (scores, differences), centred on 0
SEQUENTIAL = "Blues"  # counts and magnitudes
QUERY_AXIS = "queries (rows)"
KEY_AXIS = "keys (columns)"
FONT = dict(size=12)

# Plotly's default template also carries per-trace-type defaults, which every new figure deep-copies: a third of a
# small figure's build time and 4 kB of its JSON. This template keeps the default look (its layout) only.
pio.templates["tx_explorer"] = go.layout.Template(layout=pio.templates["plotly"].layout)
# Unless overflow is allowed, Plotly checks every tick label against every other one to hide those past the
# figure's edge: quadratic in the labels, about 1 s of the browser's time per input for the 64 columns of the KV
# cache maps on 2 cores. Labels past the edge are clipped by the figure's own box either way.
pio.templates["tx_explorer"].layout.xaxis.ticklabeloverflow = "allow"
pio.templates["tx_explorer"].layout.yaxis.ticklabeloverflow = "allow"
pio.templates.default = "tx_explorer"


def safe_labels(labels: Sequence[object]) -> list[str]:
    """Token labels for Plotly text: it reads ``<…>`` as markup, so ``<b>`` typed by a user is escaped and shows
    literally (Plotly decodes the entities back when drawing)."""
    return [html.escape(str(t), quote=False) for t in labels]
