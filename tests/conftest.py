"""Shared fixtures: AppTest over the real navigation, and a live server for the browser tests."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TIMM_FUSED_ATTN", "0")
# AppTests cannot scroll: every page section is drawn at once (ui.below_fold). The browser suite's servers drop it.
os.environ.setdefault("TX_EXPLORER_DRAW_ALL", "1")
# `make test` runs the tests without a browser in two pytest-xdist workers, one per core: a torch thread pool in each
# would spin against the other's (torch reads this when it is first imported, after this file).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from streamlit.testing.v1 import AppTest

from tx_explorer.viz.style import CJK


def open_page(page: str, timeout: float = 120, **state: object) -> AppTest:
    """Run ``app.py`` and switch to ``pages/<page>.py``, the way a user's click does; ``state`` (widget key → value)
    is set before the page's first run, e.g. ``hs_model="tiny-gpt"`` to test a page's mechanics on a tiny model
    rather than its default, SmolLM2."""
    # AppTest resolves relative paths against the calling file (tests/), so give it the absolute path.
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=timeout)
    at.run()
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(f"pages/{page}.py")
    at.run()
    return at


def lazy_sections(page: str) -> list[str]:
    """The keys of the sections ``pages/<page>.py`` opens on demand (expanders keyed ``<prefix>_open_<name>``, named
    in the page: as a ``key=`` or kept open by ``ui.keep_open``, as the language model's chat drawn by ``ui.chat``),
    so that tests open them without a table to keep in step with the pages."""
    source = (Path(__file__).resolve().parent.parent / "pages" / f"{page}.py").read_text(encoding="utf-8")
    return list(dict.fromkeys(re.findall(r'"(\w+_open_\w+)"', source)))


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


def plotly_titles(at: AppTest) -> list[str]:
    """The figures' titles as written, the line breaks :func:`tx_explorer.viz.style.wrap` put in to fit the narrowest
    window taken out: a break between words stood for a space, one inside Chinese text for nothing."""
    joined = lambda m: "" if CJK.match(m.group(1)) and CJK.match(m.group(2)) else " "  # noqa: E731
    titles = [spec["layout"].get("title", {}).get("text", "") for spec in plotly_specs(at)]
    return [re.sub(r"(?<=(.))<br>(?=(.))", joined, t) for t in titles]


@pytest.fixture
def page():
    return open_page


# ---- tiers: every test gets one marker (pytest.ini): unit, model, app, browser or load ---------------------------
TESTS = Path(__file__).resolve().parent
# a class of browsers or of protocol sessions (test_burst), or replicas behind a proxy
LOAD_MODULES = ("test_classroom", "test_scaleout", "test_burst")
APP_CALLS = frozenset({"open_page", "AppTest"})  # what an AppTest is reached through (or the ``page`` fixture)
# The real LLMs (SmolLM2-135M, Gemma 3 270M: seconds to load, and transformers' own loader for the parity tests tens
# of seconds): a test that loads one names it in its own name (parameters included), its module's or a fixture's.
REAL_LLMS = ("smollm2", "gemma3_270m", "gemma3-270m")  # a name in code, a registry name in a test id
# Tests that load no large model but take minutes alone (file name :: test name).
MODEL_TESTS = frozenset({"test_lm.py::test_corpus_is_the_one_the_model_was_trained_on"})  # parses the stdlib


def _code_names(code) -> set[str]:
    """Every global or attribute name a code object, and the lambdas and comprehensions inside it, refer to, and
    the words of its strings (a script run in a subprocess)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _code_names(const)
        elif isinstance(const, str):
            names |= set(re.findall(r"\w+", const))
    return names


def _helpers(obj: object) -> list[Callable]:
    """The functions of tests/ behind a name a test uses: a helper function, or a helper class's methods."""
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return []
    try:
        if Path(inspect.getsourcefile(obj) or "/").resolve().parent != TESTS:
            return []  # the library's or pytest's own
    except TypeError:  # a built-in
        return []
    return [obj] if inspect.isfunction(obj) else [f for f in vars(obj).values() if inspect.isfunction(f)]


def _reaches(func: Callable, names: frozenset[str], seen: set[Callable]) -> bool:
    """Whether ``func``, or a function of tests/ that it uses (transitively), names one of ``names``."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None or func in seen:
        return False
    seen.add(func)
    found = _code_names(code)
    if found & names:
        return True
    return any(_reaches(h, names, seen) for n in found for h in _helpers(func.__globals__.get(n)))


def tier(item: pytest.Item) -> str:
    """``load`` (classroom, scale-out), ``browser`` (marked), ``app`` (an AppTest: through ``open_page``, the
    ``page`` fixture or ``AppTest``, in the test, a fixture it uses or a helper in tests/), ``model`` (the real
    LLM, or one of :data:`MODEL_TESTS`) or ``unit``."""
    if item.module.__name__.split(".")[-1] in LOAD_MODULES:
        return "load"
    if item.get_closest_marker("browser"):
        return "browser"
    if "page" in item.fixturenames:
        return "app"
    fixtures = [defs[-1].func for defs in item._fixtureinfo.name2fixturedefs.values() if defs]
    seen: set[Callable] = set()
    if any(_reaches(f, APP_CALLS, seen) for f in [item.function, *fixtures]):
        return "app"
    named = (item.module.__name__.split(".")[-1], item.name, *item.fixturenames)
    real = any(llm in name.lower() for name in named for llm in REAL_LLMS)
    if real or f"{item.path.name}::{item.name}" in MODEL_TESTS:
        return "model"
    return "unit"


# ---- the order the files are handed out in ------------------------------------------------------------------------
# pytest-xdist hands a file to a worker as one frees up, by default the files with the most tests first. A file of
# few slow tests (transformers' reference loads, Gemma 3's pages) then started near the end and ran on alone while
# the other worker waited. The slowest files go first instead, longest first (as a scheduler of jobs of known length
# does): their seconds in one run of the tests without a browser and one of the browser tests (--durations=0, summed
# per file, 2 workers on a quiet machine, 2026-12-06): an order, not a budget, so a number that drifts costs a little
# balance, never a failure. The other files follow, most tests first, as before.
SLOW_FILES_S = {
    "test_bad_input.py": 233,
    "test_browser.py": 223,
    "test_gemma_pages.py": 70,
    "test_page_lm.py": 62,
    "test_browser_heads.py": 48,
    "test_lm.py": 46,
    "test_gemma3.py": 46,
    "test_zh_interface.py": 39,
    "test_serve.py": 28,
    "test_browser_url.py": 27,
    "test_gguf.py": 25,
    "test_browser_chat.py": 24,
    "test_atlas.py": 20,
    "test_layout.py": 17,  # each of its tests alone (SPREAD): about 17 s a page
    "test_review_heads.py": 14,
    "test_kv_past_window.py": 11,
    "test_pages_foundation.py": 10,
    "test_page_atlas.py": 9,
    "test_head_science.py": 9,
    "test_page_vit.py": 8,
    "test_layering.py": 8,
}


def slowest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with their files in the order of :data:`SLOW_FILES_S`, then the others by their test count (most
    first); each file's tests keep their order."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    return sorted(items, key=lambda item: (-SLOW_FILES_S.get(item.path.name, 0), -counts[item.path.name]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier, so ``-m unit`` (``make check``) or ``-m "not load"`` picks a tier; put the
    slowest files first (:func:`slowest_first`)."""
    for item in items:
        item.add_marker(tier(item))
    items[:] = slowest_first(items)


# make test runs the load tier on its own, and it needs a few modules, named in LOAD_MODULES. Collecting the others
# would import torch, transformers and timm (15 s a process) only to deselect all their tests.
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """For ``-m load``, leave out the test modules that hold none of its tests."""
    if config.getoption("markexpr") != "load" or collection_path.suffix != ".py":
        return None
    return (collection_path.name.startswith("test_") and collection_path.stem not in LOAD_MODULES) or None


@pytest.fixture
def roots(folders, monkeypatch):
    """The parent of a module's ``folders`` fixture (``folders["roots"]``) as the only allowed checkpoint root, for
    the pages' folder pickers; no operator config, an empty hub cache."""
    from tx_explorer import paths
    from tx_explorer.ui import pickers

    monkeypatch.setenv(paths.ENV_ROOTS, str(folders["roots"]))
    monkeypatch.setenv(paths.ENV_CONFIG, str(folders["roots"] / "absent.toml"))
    monkeypatch.setenv("HF_HUB_CACHE", str(folders["roots"] / "hf"))
    pickers._cached_checkpoints.clear()  # the picker's directory scan is cached for 30 s


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of small tensors: a thread pool costs more than the work (and stalls badly
    on a busy machine). Results do not depend on the thread count; the previous setting is restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---- how the tests are spread over pytest-xdist's workers ------------------------------------------------------
# `make test` runs each file whole in one worker (--dist loadfile): a module's tests may share one AppTest session or
# one server and run in order. The files here are the exception: each test opens its own browser tab on the module's
# server and depends on no other, so their tests are handed out one by one. The layout check (19 pages, about a third
# of the browser tier) would otherwise keep one worker busy while the other waits.
SPREAD = frozenset({"tests/test_layout.py"})


# tryfirst: pytest-xdist's own hook would answer first with its LoadFileScheduling (optional: no xdist, no hook).
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # the collection's order (slowest_first), not xdist's by test count

    class SpreadScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return nodeid if file in SPREAD else file

    return SpreadScheduling(config, log)


@pytest.fixture(scope="module")
def kv_decoding():
    """The KV cache page's model and its default prompt decoded 3 tokens with and without the cache (the page's
    verdicts are read from it)."""
    from tx_explorer import model_cache
    from tx_explorer.views import kv_cache as kv_view

    tm = model_cache.shared_model(kv_view.MODEL)
    return tm, kv_view.decoding(tm, kv_view.PROMPT, 3)
