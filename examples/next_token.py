"""What the bundled language model predicts after a prompt, its loss per token, and 12 greedy tokens.

python -m examples.next_token [out_dir] ["your prompt"]
"""

import sys
from pathlib import Path

from tx_explorer import explore


def main(out: str = str(Path(__file__).parent / "out"), prompt: str = "Return the number of items in") -> Path:
    figures = explore.next_token("tiny-gpt", prompt, new=12)
    bars = figures["lm_next"].data[0]  # most likely first: the token is each bar's customdata
    print("most likely next:", ", ".join(f"{t!r} {p:.2f}" for t, p in zip(bars.customdata[:3], bars.x[:3])))
    return figures.save(Path(out) / "next_token.html", title="tiny-gpt: next token")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
