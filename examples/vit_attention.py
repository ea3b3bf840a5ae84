"""The bundled Vision Transformer on a generated star (or your own image): patches, heads, rollout, positions.

python -m examples.vit_attention [out_dir] [image.png]
"""

import sys
from pathlib import Path

from tx_explorer import explore


def main(out: str = str(Path(__file__).parent / "out"), image: str | None = None) -> Path:
    figures = explore.vit("vit-shapes", image, label=3, seed=11, query="cls")
    return figures.save(Path(out) / "vit_attention.html", title="ViT attention")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
