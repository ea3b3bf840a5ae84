"""What the Multi-head page costs for MiniLM-L6 (6 × 12 heads) at 32, 128 and 512 tokens: the time of a rerun
after typing (compute + figures, through Streamlit's AppTest) and the bytes of chart data sent to the browser.

``python -m benchmarks heads_payload [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from benchmarks import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
SIZES = (32, 128, 512)


def text_of(tokens: int) -> str:
    """About ``tokens`` WordPiece tokens ([CLS] and [SEP] included) of varied English."""
    words = "the model reads every word and each head decides where to look next".split()
    return " ".join(words[i % len(words)] for i in range(tokens - 2))


def measure(repeats: int) -> list[tuple[int, float, int, int]]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.run()
    at.switch_page("pages/multihead.py").run()
    at.selectbox(key="mh_model").set_value("minilm-l6").run()
    rows = []
    for n in SIZES:
        times = []
        for r in range(repeats):
            text = text_of(n) + ("" if r % 2 == 0 else " again")  # a new input each time: no cache hit
            t0 = time.perf_counter()
            at.text_area(key="mh_text_example_code").set_value(text).run()
            times.append(time.perf_counter() - t0)
        if at.exception or at.error:
            raise RuntimeError(f"the page failed at {n} tokens: {[e.value for e in at.error]}")
        specs = [el.proto.spec for el in at.get("plotly_chart")]
        rows.append((n, statistics.median(times), sum(len(s.encode()) for s in specs), len(specs)))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    rows = measure(args.repeats)
    lines = [
        "## Multi-head page: MiniLM-L6 heads grid, time and bytes to the browser",
        "",
        f"{machine(torch.device('cpu'))}. Command: `python -m benchmarks heads_payload --repeats {args.repeats}`; "
        "time = median rerun after typing a new text (tokenise, forward with trace, metrics, every figure on the "
        "page), bytes = all Plotly chart JSON on the page. BertViz `model_view` for the same model, measured by "
        "the issue's author with bertviz 1.4.1: 3.3 MB at 32 tokens, 53 MB at 128, 870 MB at 512 (it also needs "
        "require.js from a CDN, so it renders nothing offline).",
        "",
        "| tokens | rerun (median) | charts | chart bytes | BertViz model_view bytes | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    bertviz = {32: 3.3e6, 128: 53e6, 512: 870e6}
    for n, t, size, charts in rows:
        lines.append(f"| {n} | {t:.2f} s | {charts} | {size / 1e6:.2f} MB | {bertviz[n] / 1e6:.0f} MB | {bertviz[n] / size:.0f}× smaller |")
    write_section("heads-payload", "\n".join(lines))


if __name__ == "__main__":
    main()
