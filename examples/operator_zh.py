"""The attention operator step by step (E = QKᵀ/√D, A = softmax(E), Y = AV) with the page's 中文 labels.

python -m examples.operator_zh [out_dir]
"""

import sys
from pathlib import Path

from tx_explorer import explore


def main(out: str = str(Path(__file__).parent / "out")) -> Path:
    figures = explore.operator(nq=3, nk=5, d=16, dv=4, seed=1, lang="zh")
    return figures.save(Path(out) / "operator_zh.html", title="注意力算子")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
