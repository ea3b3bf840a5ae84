"""The layers, read off the import graph: every module's imports parsed with ``ast``, checked against the rules.

- the core (``tx_explorer.modules``, the building blocks, and the modules they stand on: the operator, masks,
  the ``Trace`` and ``Edit`` contracts, configs, localised errors) imports only torch, the standard library and
  the core;
- ``tx_explorer.viz`` (figures from arrays) imports only numpy, plotly, the standard library, itself and locales;
- ``tx_explorer.analysis`` (numbers) never imports figures, the UI, Streamlit or Plotly;
- ``tx_explorer.bundle`` imports nothing from the project; the registry (``tx_explorer.models``) imports no model
  code (loaders are resolved by name); a family never reaches up to the registry, the UI or the trainers;
- pages never import building blocks, data, interop or trainers directly (they go through the registry,
  families, ``views``, analysis and viz);
- ``tx_explorer.views`` (what each page section draws) and ``tx_explorer.explore`` never import the UI;
- in the library only the ``tx_explorer.ui`` package imports Streamlit,
  and only ``tx_explorer.ui.compat`` reaches into Streamlit's internals (anywhere: library, pages, app.py,
  serve.py);
- the library's import graph has no cycle, counting imports inside functions (where one would only hide it).
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Set
from pathlib import Path

import pytest

import tx_explorer

ROOT = Path(tx_explorer.__file__).parent
PAGES = ROOT.parent / "pages"
STDLIB = frozenset(sys.stdlib_module_names)
# The core: the operator, masks, the Trace and Edit contracts, configs, building blocks, and the localised
# errors (with the locale tables they read) that configs and blocks raise on bad input.
CORE = (
    "tx_explorer.attention",
    "tx_explorer.masks",
    "tx_explorer.trace",
    "tx_explorer.edit",
    "tx_explorer.config",
    "tx_explorer.errors",
    "tx_explorer.locales",
    "tx_explorer.modules",
)


def _within(name: str, prefixes: tuple[str, ...] | str) -> bool:
    """``name`` is one of ``prefixes`` or a submodule of one."""
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _is_module(name: str) -> bool:
    """A module or package of the project (``tx_explorer.x.y`` → ``tx_explorer/x/y.py`` or ``…/y/``)."""
    path = ROOT.parent / Path(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(source: str) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for every import statement of ``source``, in functions too.

    ``from tx_explorer import models`` imports ``tx_explorer.models``; ``from tx_explorer.bundle import sha256``
    imports ``tx_explorer.bundle``.
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"line {node.lineno}: relative import (the project spells imports in full)"
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield (sub if _is_module(sub) else node.module), node.lineno


def violations(importer: str, source: str) -> list[str]:
    """Every rule ``importer`` (``tx_explorer.x.y`` or ``pages.z``) breaks with ``source``, one line each."""
    out = []
    for name, line in imports(source):
        root = name.split(".")[0]
        project = root == "tx_explorer"

        def bad(rule: str) -> None:
            out.append(f"{importer}:{line} imports {name}: {rule}")  # noqa: B023 (used at once)

        if _within(importer, CORE) and not (root in STDLIB or root == "torch" or _within(name, CORE)):
            bad("the core and the building blocks import only torch, the standard library and the core")
        if _within(importer, "tx_explorer.viz") and not (
            root in STDLIB or root in ("numpy", "plotly") or _within(name, ("tx_explorer.viz", "tx_explorer.locales"))
        ):
            bad("figures import only numpy, plotly, the standard library, tx_explorer.viz and locales")
        if _within(importer, "tx_explorer.analysis") and (
            root in ("streamlit", "plotly") or _within(name, ("tx_explorer.viz", "tx_explorer.ui"))
        ):
            bad("analysis is numbers: no figures, no UI")
        if importer == "tx_explorer.bundle" and project:
            bad("the bundle format imports nothing else from the project")
        if importer == "tx_explorer.models" and _within(
            name, ("tx_explorer.modules", "tx_explorer.families", "tx_explorer.train", "tx_explorer.analysis")
        ):
            bad("the registry names its loaders as strings and imports no model code")
        if _within(importer, "tx_explorer.families") and _within(
            name,
            (
                "tx_explorer.models",
                "tx_explorer.ui",
                "tx_explorer.train",
                "tx_explorer.views",
                "tx_explorer.viz",
                "tx_explorer.analysis",
            ),
        ):
            bad("a family loads its own bundles and never reaches up to the registry, analyses, UI or trainers")
        if _within(importer, "pages") and _within(
            name, ("tx_explorer.modules", "tx_explorer.data", "tx_explorer.interop", "tx_explorer.train")
        ):
            bad("pages are glue: building blocks, data, interop and trainers are reached through the library")
        if _within(importer, ("tx_explorer.views", "tx_explorer.explore")) and _within(name, "tx_explorer.ui"):
            bad("views and the notebook API run without Streamlit: never the UI")
        if _within(importer, "tx_explorer") and not _within(importer, STREAMLIT_USERS) and root == "streamlit":
            bad("only tx_explorer.ui imports Streamlit")
    return out


STREAMLIT_USERS = ("tx_explorer.ui",)
# Streamlit's documented modules; everything else in it is internal and may change in any release.
STREAMLIT_PUBLIC = ("streamlit", "streamlit.errors", "streamlit.components.v1", "streamlit.components.v2")


def streamlit_internals(source: str) -> list[str]:
    """Streamlit's internals ``source`` reaches: modules beyond :data:`STREAMLIT_PUBLIC` it imports (or names
    imported from ``streamlit`` that are modules or private), and ``st.runtime`` or ``st._…`` attributes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("streamlit.") and a.name not in STREAMLIT_PUBLIC]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "streamlit":
            if node.module not in STREAMLIT_PUBLIC:
                found.append(node.module)
            elif node.module == "streamlit":
                found += [
                    f"streamlit.{a.name}" for a in node.names if a.name.startswith("_") or a.name.islower()
                ]  # st's public names are functions used as st.x; a lowercase import is a module or private
        elif isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("st", "streamlit"):
            if node.attr.startswith("_") or node.attr == "runtime":
                found.append(ast.unparse(node))
    return found


def _library() -> dict[str, Path]:
    """Module name → file, for every module of the library."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _pages() -> dict[str, Path]:
    return {f"pages.{p.stem}": p for p in sorted(PAGES.glob("*.py"))}


@pytest.mark.parametrize("importer, path", sorted({**_library(), **_pages()}.items()))
def test_each_module_keeps_to_its_layer(importer: str, path: Path) -> None:
    broken = violations(importer, path.read_text(encoding="utf-8"))
    assert not broken, "\n".join(broken)


def test_only_ui_compat_reaches_into_streamlits_internals() -> None:
    """One module, checked against the Streamlit release it was written for, holds every use of Streamlit's
    private API: an upgrade that changes one fails there, loudly, instead of somewhere silently."""
    scripts = {p.stem: p for p in (ROOT.parent / "app.py", ROOT.parent / "serve.py")}
    offenders = {
        name: found
        for name, path in {**_library(), **_pages(), **scripts}.items()
        if name != "tx_explorer.ui.compat" and (found := streamlit_internals(path.read_text(encoding="utf-8")))
    }
    assert not offenders, offenders
    assert streamlit_internals((ROOT / "ui" / "compat.py").read_text(encoding="utf-8"))  # the check sees them
    assert streamlit_internals("from streamlit import delta_generator") == ["streamlit.delta_generator"]
    assert streamlit_internals("import streamlit as st\nst.runtime.exists()") == ["st.runtime"]
    assert streamlit_internals("from streamlit.errors import StreamlitAPIException") == []


def test_pages_stay_glue_of_at_most_150_lines() -> None:
    """A page lays out widgets and what ``tx_explorer.views`` returns; anything longer is orchestration to move."""
    long = {
        name: n for name, path in _pages().items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 150
    }
    assert not long, long


def find_cycle(graph: Mapping[str, Set[str]]) -> list[str]:
    """One cycle of ``graph`` (module → the modules it imports) as ``[a, b, …, a]``, or ``[]`` when there is none."""
    done: set[str] = set()

    def visit(path: list[str]) -> list[str]:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt in path:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in done:
                found = visit([*path, nxt])
                if found:
                    return found
        done.add(path[-1])
        return []

    for name in sorted(graph):
        found = [] if name in done else visit([name])
        if found:
            return found
    return []


def test_the_library_import_graph_has_no_cycle() -> None:
    modules = _library()
    graph = {
        name: {imp for imp, _ in imports(path.read_text(encoding="utf-8")) if imp in modules and imp != name}
        for name, path in modules.items()
    }
    assert find_cycle(graph) == [], "import cycle: " + " → ".join(find_cycle(graph))


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycle({"cost": {"memory"}, "memory": {"cost"}}) == ["cost", "memory", "cost"]
    assert find_cycle({"x": {"a"}, "a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize(
    "importer, source, rule",
    [
        ("tx_explorer.modules.vit", "from tx_explorer.models import read_bundle", "building blocks"),
        ("tx_explorer.modules.vit", "from PIL import Image", "building blocks"),
        ("tx_explorer.modules.vit", "def load():\n    from tx_explorer.families import images\n", "building blocks"),
        ("tx_explorer.viz.heads", "import torch", "figures import only"),
        ("tx_explorer.viz.heads", "from tx_explorer.analysis import heads", "figures import only"),
        ("tx_explorer.analysis.cost", "from tx_explorer.viz import cost", "analysis is numbers"),
        ("tx_explorer.analysis.cost", "import plotly.graph_objects as go", "analysis is numbers"),
        ("tx_explorer.bundle", "from tx_explorer import config", "bundle format"),
        ("tx_explorer.models", "from tx_explorer.families.text import TextModel", "registry"),
        ("tx_explorer.families.images", "from tx_explorer import models", "never reaches up"),
        ("tx_explorer.families.circuit", "from tx_explorer.analysis import induction", "never reaches up"),
        ("pages.norms", "from tx_explorer.train import variants", "pages are glue"),
        ("pages.vit", "from tx_explorer.modules.vit import sincos_2d_table", "pages are glue"),
        ("pages.lm", "from tx_explorer import data", "pages are glue"),
        ("tx_explorer.analysis.lm", "import streamlit as st", "only tx_explorer.ui"),
        ("tx_explorer.masks", "from tx_explorer.analysis import seeding", "the core"),
        ("tx_explorer.views.moe", "from tx_explorer import ui", "without Streamlit"),
        ("tx_explorer.explore", "from tx_explorer.ui import show", "without Streamlit"),
    ],
)
def test_the_rules_catch_what_they_forbid(importer: str, source: str, rule: str) -> None:
    broken = violations(importer, source)
    assert any(rule in b for b in broken), broken


def test_the_rules_let_the_layers_do_their_work() -> None:
    allowed = {
        "tx_explorer.modules.block": "import math\nimport torch\nfrom tx_explorer.modules import attention",
        "tx_explorer.viz.heads": "import numpy as np\nimport plotly\nfrom tx_explorer.viz import style",
        "tx_explorer.families.text": "from tx_explorer.bundle import read_bundle\nfrom tx_explorer import masks",
        "pages.multihead": "import streamlit as st\nfrom tx_explorer import models, ui, viz",
        "tx_explorer.ui": "import streamlit as st",
        "tx_explorer.ui.figures": "import streamlit as st\nfrom tx_explorer.ui.text import texts",
        "tx_explorer.ui.compat": "import streamlit as st\nfrom streamlit.web import cli",
    }
    for importer, source in allowed.items():
        assert violations(importer, source) == [], importer


def test_importing_the_library_never_imports_streamlit() -> None:
    names = [m.name for m in pkgutil.walk_packages([str(ROOT)], prefix="tx_explorer.")]
    names = [n for n in names if not _within(n, STREAMLIT_USERS) and not n.endswith(".__main__")]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = [m for m in ('streamlit',) if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT.parent)


def test_tests_and_benchmarks_share_the_harness_not_each_other() -> None:
    """The browser helpers both need live in ``harness/``: a benchmark never imports a test module, a test imports
    the benchmarks only to test them (the suite's own tests), and the harness imports neither."""
    top = ROOT.parent
    suite_tests = {
        "tests.test_bench_suite",
        "tests.test_bench_sections",
        "tests.test_gpu_bundle",
        "tests.test_gpu_check",
        "tests.test_load_replicas",
    }
    offenders = []
    rules = (("tests", "benchmarks"), ("benchmarks", "tests"), ("harness", "tests"), ("harness", "benchmarks"))
    for folder, other in rules:
        for path in sorted((top / folder).glob("*.py")):
            name = f"{folder}.{path.stem}"
            if name in suite_tests:
                continue
            found = [imp for imp, _ in imports(path.read_text(encoding="utf-8")) if _within(imp, other)]
            offenders += [f"{name} imports {imp}" for imp in found]
    assert not offenders, offenders


def seeds_the_global_rng(source: str) -> bool:
    """Whether code calls ``torch.manual_seed`` (or ``torch.random.manual_seed``)."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "manual_seed"
        and ast.unparse(node.func.value) in ("torch", "torch.random")
        for node in ast.walk(ast.parse(source))
    )


def test_the_server_never_seeds_the_global_rng() -> None:
    """Sessions share one process: a page's ``torch.manual_seed`` would reseed every other user's draws. Served code
    draws from private generators (analysis.seeding); only the trainers, run from the command line, seed globally."""
    served = {n: p for n, p in _library().items() if not _within(n, "tx_explorer.train")} | _pages()
    offenders = [n for n, p in served.items() if seeds_the_global_rng(p.read_text(encoding="utf-8"))]
    assert not offenders, offenders
    assert seeds_the_global_rng("import torch\ntorch.manual_seed(0)")
    assert not seeds_the_global_rng("import torch\ng = torch.Generator().manual_seed(0)")


def magic_lines(source: str) -> list[int]:
    """Lines of ``source`` that Streamlit's "magic" would write to the page: expression statements that are neither
    calls nor the module's docstring (``st.info(a) if x else st.markdown(b)`` shows its own source and the
    returned element's documentation to the visitor)."""
    tree = ast.parse(source)
    exprs = [n for n in ast.walk(tree) if isinstance(n, ast.Expr)]
    docstring = tree.body[0] if tree.body and isinstance(tree.body[0], ast.Expr) else None
    kept = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)
    return [
        n.lineno
        for n in exprs
        if n is not docstring and not isinstance(n.value, kept) and not _is_docstring_of_def(n, tree)
    ]


def _is_docstring_of_def(node: ast.Expr, tree: ast.Module) -> bool:
    return any(
        isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and d.body and d.body[0] is node
        for d in ast.walk(tree)
    )


def test_no_page_leaves_a_value_for_streamlits_magic_to_write() -> None:
    scripts = {**_pages(), "app": ROOT.parent / "app.py"}
    found = {name: lines for name, path in scripts.items() if (lines := magic_lines(path.read_text(encoding="utf-8")))}
    assert not found, found
    assert magic_lines('"""doc"""\nst.info(a) if x else st.markdown(b)\nst.write(c)\nx\n') == [2, 4]
