"""Shared fixtures: AppTest over the real navigation, and a live server for the browser tests."""

from __future__ import annotations

import os
import re
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TIMM_FUSED_ATTN", "0")
# AppTests cannot scroll: every page section is drawn at once (ui.below_fold). The browser suite's servers drop it.
os.environ.setdefault("TX_EXPLORER_DRAW_ALL", "1")

import pytest
from streamlit.testing.v1 import AppTest


def open_page(page: str, timeout: float = 120) -> AppTest:
    """Run ``app.py`` and switch to ``pages/<page>.py``, the way a user's click does."""
    # AppTest resolves relative paths against the calling file (tests/), so give it the absolute path.
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=timeout)
    at.run()
    at.switch_page(f"pages/{page}.py")
    at.run()
    return at


def lazy_sections(page: str) -> list[str]:
    """The keys of the sections ``pages/<page>.py`` opens on demand (expanders keyed ``<prefix>_open_<name>``), so
    that tests open them without a table to keep in step with the pages."""
    source = (Path(__file__).resolve().parent.parent / "pages" / f"{page}.py").read_text(encoding="utf-8")
    return list(dict.fromkeys(re.findall(r'key="(\w+_open_\w+)"', source)))


def open_sections(at: AppTest, page: str) -> AppTest:
    """Mark every lazy section of ``page`` open for ``at``'s next run."""
    for key in lazy_sections(page):
        at.session_state[key] = True
    return at


def assert_clean(at: AppTest) -> None:
    """No exception element and no error box on the page."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def plotly_specs(at: AppTest) -> list[dict]:
    """The Plotly figures on the page, as the JSON the browser receives."""
    import json

    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


@pytest.fixture
def page():
    return open_page


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of small tensors: a thread pool costs more than the work (and stalls badly
    on a busy machine). Results do not depend on the thread count; the previous setting is restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
