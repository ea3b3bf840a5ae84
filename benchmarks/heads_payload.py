"""What the Multi-head page costs for MiniLM-L6 (6 × 12 heads) at 32, 128 and 512 tokens: the time of a rerun
after typing (compute + figures, through Streamlit's AppTest) and the bytes of chart data sent to the browser,
side by side, in the same run, with BertViz's ``model_view`` HTML for the same model and texts.

``python -m benchmarks heads_payload [--repeats 3] [--no-bertviz]``

BertViz 1.4.1 and IPython (which it imports) are installed on first use into ``.bench-deps/`` (git-ignored),
never into the app's environment, and run in a subprocess with that folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time

from benchmarks import ROOT, machine, parse, parser, publish, verdict

log = logging.getLogger("benchmarks.heads_payload")
SIZES = (32, 128, 512)
TARGETS = {128: (1.0, 2e6), 512: (2.0, 8e6)}  # seconds to figures, bytes to the browser
# BertViz's HTML bytes measured when the targets were set, bertviz 1.4.1 (0.95 s at 128, 22 s at 512)
AUTHOR_BERTVIZ = {32: 3.3e6, 128: 53e6, 512: 870e6}
BENCH_DEPS = ROOT / ".bench-deps"
# bertviz's own requirements beyond the app's (torch, transformers, tqdm, regex are there; boto3, requests and
# sentencepiece serve only its neuron view, which `import bertviz` does not load): IPython and its dependencies.
BERTVIZ = (
    "bertviz==1.4.1",
    "ipython==9.18.1",
    "ipython-pygments-lexers==1.1.1",
    "jedi==0.20.1",
    "parso==0.8.7",
    "matplotlib-inline==0.2.2",
    "traitlets==5.16.1",
    "pexpect==4.9.0",
    "ptyprocess==0.7.0",
    "prompt-toolkit==3.0.53",
    "wcwidth==0.9.4",
    "stack-data==0.6.3",
    "executing==2.3.0",
    "asttokens==3.0.2",
    "pure-eval==0.2.4",
    "psutil==7.2.2",
)


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


def install_bertviz() -> None:
    """``pip install --target .bench-deps --no-deps`` of :data:`BERTVIZ`, once (a stamp file records the set)."""
    stamp = BENCH_DEPS / ".installed"
    if stamp.is_file() and stamp.read_text() == "\n".join(BERTVIZ):
        return
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--upgrade",
            "--target",
            str(BENCH_DEPS),
            *BERTVIZ,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    stamp.write_text("\n".join(BERTVIZ))


def measure_bertviz(repeats: int, large_repeats: int) -> dict:
    """Run :mod:`benchmarks._bertviz` with ``.bench-deps`` on the path; its JSON result."""
    install_bertviz()
    path = os.pathsep.join(p for p in (str(BENCH_DEPS), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "PYTHONPATH": path,
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks._bertviz",
            "--sizes",
            *map(str, SIZES),
            "--repeats",
            str(repeats),
            "--large-repeats",
            str(large_repeats),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _targets(n: int, seconds: float, size: int) -> str:
    if n not in TARGETS:
        return "—"
    t, b = TARGETS[n]
    mb = b / 1e6
    return f"time ≤ {t:.0f} s: {verdict(seconds, t, 's')}; bytes ≤ {mb:.0f} MB: {verdict(size / 1e6, mb, 'MB')}"


def table(ours: list[tuple[int, float, int, int]], bertviz: dict | None) -> list[str]:
    """Markdown rows: our page and BertViz side by side (the issue author's recorded bytes when ``bertviz`` is None)."""
    theirs = {n: r for n, r in zip(SIZES, bertviz["rows"])} if bertviz else {}
    lines = [
        "| tokens | our rerun (median) | charts | our chart bytes | BertViz forward + model_view | BertViz HTML bytes "
        "| ours smaller by | targets (ours) |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n, seconds, size, charts in ours:
        if n in theirs:
            r = theirs[n]
            build, other = f"{r['forward_s']:.2f} + {r['build_s']:.2f} s", r["bytes"]
        else:
            build, other = "—", AUTHOR_BERTVIZ[n]
        lines.append(
            f"| {n} | {seconds:.2f} s | {charts} | {size / 1e6:.2f} MB | {build} | {other / 1e6:,.1f} MB "
            f"| {other / size:,.0f}× | {_targets(n, seconds, size)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    p = parser("heads_payload", __doc__)
    p.add_argument("--repeats", type=int, default=3, help="reruns per size (BertViz: runs below 512 tokens)")
    p.add_argument("--bertviz-large-repeats", type=int, default=1, help="BertViz runs at 512 tokens (22 s each)")
    p.add_argument("--no-bertviz", action="store_true", help="use the issue author's recorded BertViz bytes")
    args, command = parse(p, argv)
    import torch

    header = machine(torch.device("cpu"))
    ours = measure(args.repeats)
    bertviz, why = None, "skipped (--no-bertviz)"
    if not args.no_bertviz:
        try:
            bertviz = measure_bertviz(args.repeats, args.bertviz_large_repeats)
        except (subprocess.SubprocessError, RuntimeError, OSError, ValueError) as exc:
            why = f"could not run here ({type(exc).__name__}: {exc})"
            log.warning("BertViz %s", why)
    if bertviz:
        about = (
            f'BertViz {bertviz["bertviz"]} `model_view(attentions, tokens, html_action="return")` measured in the '
            "same run, in a subprocess with bertviz and IPython from `.bench-deps/`, on the same texts and tokens: "
            'MiniLM through `transformers.BertModel` (`attn_implementation="eager"`, `output_attentions=True`) from '
            f"the local package; time = median forward + HTML build ({args.repeats} runs, "
            f"{args.bertviz_large_repeats} at 512 tokens); peak memory of that process {bertviz['peak_mb']:,.0f} MB. "
            "Its HTML also loads require.js from a CDN, so it renders nothing offline."
        )
    else:
        about = (
            f"BertViz {why}: its bytes are the issue author's figures for bertviz 1.4.1 on the same model "
            "(3.3 MB at 32 tokens, 53 MB at 128 with 0.95 s to build, 870 MB at 512 with 22 s); it also needs "
            "require.js from a CDN, so it renders nothing offline."
        )
    lines = [
        "## Multi-head page: MiniLM-L6 heads grid, time and bytes to the browser, beside BertViz",
        "",
        f"Command: `{command.strip()}` (from the repository root; `make bench` runs every benchmark).",
        "",
        f"Machine: {header}.",
        "",
        "Ours: median rerun after typing a new text into the page through Streamlit's AppTest (tokenise, forward "
        "with trace, every figure of the shown view); bytes = all Plotly chart JSON on the page. " + about,
        "",
        *table(ours, bertviz),
    ]
    text = "\n".join(lines)
    publish("heads-payload", text, no_write=args.no_write)


if __name__ == "__main__":
    main()
