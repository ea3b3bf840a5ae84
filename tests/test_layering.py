"""Compute never imports Streamlit or Plotly; only tx_explorer.ui imports Streamlit."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import tx_explorer

ROOT = Path(tx_explorer.__file__).parent


def _modules():
    for m in pkgutil.walk_packages([str(ROOT)], prefix="tx_explorer."):
        if m.name != "tx_explorer.ui" and ".train.__main__" not in m.name:
            yield m.name


def test_importing_the_library_never_imports_streamlit():
    code = (
        "import importlib, sys\n"
        f"for name in {list(_modules())!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = [m for m in ('streamlit',) if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT.parent)


def test_compute_packages_never_import_plotly_or_streamlit():
    offenders = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("viz/") or rel == "ui.py":
            continue
        text = path.read_text(encoding="utf-8")
        if any(s in text for s in ("import streamlit", "from streamlit", "import plotly", "from plotly")):
            offenders.append(rel)
    assert not offenders, offenders


def test_pages_do_no_model_maths():
    import re

    pattern = re.compile(r"(\.|F\.|torch\.)softmax\(|torch\.(matmul|bmm|einsum)\(|F\.linear\(|[a-z_\])] @ [a-z_(]")
    pages = list((ROOT.parent / "pages").glob("*.py"))
    assert pages
    offenders = [p.name for p in pages if pattern.search(p.read_text(encoding="utf-8"))]
    assert not offenders, offenders
