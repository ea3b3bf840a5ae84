"""One visual language for every figure: colour scales and axis conventions."""

WEIGHTS = "Viridis"  # attention weights in [0, 1]: one scale everywhere so maps compare at a glance
DIVERGING = "RdBu_r"  # signed values (scores, differences), centred on 0
SEQUENTIAL = "Blues"  # counts and magnitudes
QUERY_AXIS = "queries (rows)"
KEY_AXIS = "keys (columns)"
FONT = dict(size=12)
