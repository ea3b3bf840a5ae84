"""Every layer × head of a text model on one sentence, one head up close, head metrics and similarity.

python -m examples.heads_grid                     # tiny-gpt, into examples/out/heads_grid.html
python -m examples.heads_grid /tmp/figs minilm-l6  # another folder and model
"""

import sys
from pathlib import Path

from tx_explorer import explore

TEXT = "The cat sat on the mat because the mat was warm."


def main(out: str = str(Path(__file__).parent / "out"), model: str = "tiny-gpt") -> Path:
    figures = explore.heads(model, TEXT, layer=0, head=1)
    print("figures:", ", ".join(figures))
    return figures.save(Path(out) / "heads_grid.html", title=f"{model}: every head")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
