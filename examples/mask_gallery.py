"""Five masks on one sentence: scores with −∞ where hidden, weights exactly 0 there after the softmax.

python -m examples.mask_gallery [out_dir]
"""

import sys
from pathlib import Path

from tx_explorer import explore

SENTENCE = "the cat sat on the mat because it was tired"
MASKS = {
    "causal": {},
    "padding": {"length": 6},
    "sliding_window": {"window": 3},
    "prefix_lm": {"prefix": 4},
    "block_diagonal": {"sizes": [3, 3, 4]},
}


def main(out: str = str(Path(__file__).parent / "out")) -> Path:
    figures = explore.Figures()
    for kind, options in MASKS.items():
        figures.update(explore.masks(SENTENCE, kind, **options))
    return figures.save(Path(out) / "mask_gallery.html", title="Masks")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
