"""Where attention's FLOPs and memory go as N grows, and the tiled kernel's online softmax tile by tile.

python -m examples.cost_curves [out_dir]
"""

import sys
from pathlib import Path

from tx_explorer import explore


def main(out: str = str(Path(__file__).parent / "out")) -> Path:
    figures = explore.cost(n=4096, d=768, h=12, heads=12, head_dim=64, tile_n=16, tile_block=4)
    return figures.save(Path(out) / "cost_curves.html", title="The cost of attention")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
