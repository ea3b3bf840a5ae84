"""Every script in examples/ runs and writes a real figure file (in-process, into a temporary folder)."""

from __future__ import annotations

import importlib
import runpy
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "examples"
EXAMPLES = sorted(p.stem for p in FOLDER.glob("*.py"))


def test_there_are_four_to_six_short_examples():
    assert 4 <= len(EXAMPLES) <= 6, EXAMPLES
    for name in EXAMPLES:
        lines = (FOLDER / f"{name}.py").read_text().splitlines()
        assert len(lines) <= 30, f"{name}: {len(lines)} lines"


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_writes_an_html_file_of_figures(name, tmp_path, one_thread):
    out = importlib.import_module(f"examples.{name}").main(str(tmp_path))
    assert out.parent == tmp_path and out.suffix == ".html" and out.is_file()
    html = out.read_text(encoding="utf-8")
    assert len(html) > 1_000_000  # Plotly's JavaScript is embedded once: the file opens offline
    assert html.count("Plotly.newPlot") >= 2 and html.count("plotly.js v") == 1


def test_an_example_runs_as_a_script(tmp_path, monkeypatch, capsys):
    """``python -m examples.mask_gallery OUT`` (run in-process: a fresh interpreter costs seconds of imports)."""
    monkeypatch.setattr(sys, "argv", ["mask_gallery", str(tmp_path)])
    runpy.run_path(str(FOLDER / "mask_gallery.py"), run_name="__main__")
    assert capsys.readouterr().out.strip() == str(tmp_path / "mask_gallery.html")
    assert (tmp_path / "mask_gallery.html").stat().st_size > 1_000_000
