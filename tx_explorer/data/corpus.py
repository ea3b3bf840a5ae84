"""English prose that exists on every machine running this app: the documentation inside installed code.

Why this corpus: the language model must train without downloads. The standard library ships with every
Python, and the packages pinned in ``requirements.txt`` are installed wherever the app runs. Their docstrings,
comment blocks and the ``pydoc`` help topics (``pydoc_data.topics``, the Language Reference's prose) are
plain technical English written by many people over 30 years.

Sources (:data:`SOURCES`): ``"stdlib"`` is the standard library alone; ``"full"`` adds the pinned packages
in :data:`PACKAGES` (pinned versions: the same text on every install).

How it is built (deterministic — the same Python version gives byte-identical text on every machine):

1. Every ``*.py`` file under the standard library folder, in sorted order of its *relative* path (so the
   install prefix does not matter), skipping tests and ``site-packages``; for ``"full"``, then every package
   of :data:`PACKAGES` in that order, the same way. Files are parsed with :mod:`ast`
   (never imported: no side effects). Docstrings of modules, classes and functions are read in source
   order, then the file's ``#`` comment blocks.
2. The ``pydoc`` help topics, in sorted order of their names.
3. Each text is split into paragraphs (blank lines); a paragraph's lines are joined with spaces. A paragraph
   is kept when it reads like prose (:func:`is_prose`: starts with a capital, ends with punctuation, at
   least six words, ASCII, mostly letters, few code symbols, no doctest).
4. Paragraphs are de-duplicated (first occurrence wins: licence headers appear once). The kept paragraphs
   of one docstring / comment block / topic form one *document*.
5. :func:`split` assigns a document to validation when the first byte of its SHA-256 is below
   ``val_fraction · 256`` — stable under any change elsewhere in the corpus.

With Python 3.11.7, ``"stdlib"`` yields 1.56 MB of text in 8 571 documents (about 450 000 tokens of our
BPE) and ``"full"`` 6.5 MB (torch alone adds 3.6 MB).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

SKIP_PARTS = frozenset({"test", "tests", "testing", "idle_test", "site-packages", "__pycache__", "lib2to3"})
PACKAGES = ("torch", "numpy", "streamlit", "timm", "plotly")  # pinned in requirements.txt, largest first
SOURCES = {"stdlib": (), "full": PACKAGES}  # name → packages read after the standard library
_CODE_CHARS = frozenset("{}[]=<>|\\#@$%^~`")
_CODE_PATTERN = re.compile(r"\w\(|==|->|::|\w_\w")


def is_prose(paragraph: str) -> bool:
    """True for a paragraph that reads like English prose rather than code, a list or a table."""
    p = paragraph
    words = p.split()
    if len(p) < 40 or len(words) < 6 or ">>>" in p or not p.isascii():
        return False
    if not (p[0].isupper() or p[0] in "\"'(") or p[-1] not in ".!?:)\"'":
        return False
    if sum(c.isalpha() for c in p) < 0.72 * len(p):
        return False
    if sum(c in _CODE_CHARS for c in p) > 0.02 * len(p):
        return False
    return len(_CODE_PATTERN.findall(p)) <= len(words) / 8


def paragraphs(text: str) -> Iterator[str]:
    """Blank-line separated blocks with their lines joined; blocks that look like lists are skipped."""
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines()]
        if any(line.startswith(("-", "*", ">>>", "..", ":")) for line in lines):
            continue
        joined = " ".join(line for line in lines if line)
        if joined:
            yield joined


# Where a definition can sit: statements, and the except clauses and match cases that hold statements. Expressions
# never hold one (a lambda has no docstring), so the walk skips them: the same documents, a tenth of the nodes.
_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def _docstrings(tree: ast.AST) -> Iterator[str]:
    """Docstrings of the module, classes and functions, in source order (depth first)."""
    if isinstance(tree, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        doc = ast.get_docstring(tree)
        if doc:
            yield doc
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, _HOLDERS):
            yield from _docstrings(child)


def _comment_blocks(source: str) -> Iterator[str]:
    """Runs of consecutive ``#`` comment lines, joined (shebangs and coding lines excluded)."""
    block: list[str] = []
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("#") and not s.startswith(("#!", "# -*-")) and s.lstrip("#").strip():
            block.append(s.lstrip("#").strip())
            continue
        if block:
            yield " ".join(block)
            block = []
    if block:
        yield " ".join(block)


def stdlib_files(root: Path | None = None) -> list[Path]:
    """The standard library's Python files (no tests), sorted by path relative to ``root``."""
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    rel = [p.relative_to(root) for p in root.rglob("*.py")]
    keep = [r for r in rel if not any(part in SKIP_PARTS or part.startswith("test_") for part in r.parts)]
    return [root / r for r in sorted(keep, key=lambda r: r.as_posix())]


def package_root(name: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"package {name!r} is not installed (it is pinned in requirements.txt: run make run)")
    return Path(spec.submodule_search_locations[0])


@cache
def _file_texts(root: Path | None = None) -> tuple[str, ...]:
    """The docstrings and comment blocks of :func:`stdlib_files` under ``root``, parsed once per process: every
    corpus begins with the standard library's, and parsing it is most of a corpus's cost."""
    texts: list[str] = []
    for path in stdlib_files(root):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # a handful of files are deliberately invalid or not UTF-8
        texts += _docstrings(tree)
        texts += _comment_blocks(source)
    return tuple(texts)


def _raw_texts(packages: tuple[str, ...]) -> Iterator[str]:
    yield from _file_texts()
    from pydoc_data.topics import topics

    for name in sorted(topics):
        yield topics[name]
    for package in packages:
        yield from _file_texts(package_root(package))


@cache
def documents(source: str = "full") -> tuple[str, ...]:
    """Every document of the corpus ``source`` (paragraphs joined by newlines), in a fixed order."""
    if source not in SOURCES:
        raise ValueError(f"unknown corpus {source!r}; choose one of {sorted(SOURCES)}")
    seen: set[str] = set()
    docs = []
    for text in _raw_texts(SOURCES[source]):
        kept = []
        for par in paragraphs(text):
            if par not in seen and is_prose(par):
                seen.add(par)
                kept.append(par)
        if kept:
            docs.append("\n".join(kept))
    return tuple(docs)


@dataclass(frozen=True)
class Split:
    train: tuple[str, ...]
    val: tuple[str, ...]


def split(docs: tuple[str, ...], val_fraction: float = 0.05) -> Split:
    """Assign each document to train or validation by its SHA-256 (stable, order-independent)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    threshold = round(val_fraction * 256)
    is_val = [hashlib.sha256(d.encode()).digest()[0] < threshold for d in docs]
    return Split(train=tuple(d for d, v in zip(docs, is_val) if not v), val=tuple(d for d, v in zip(docs, is_val) if v))


def fingerprint(docs: tuple[str, ...]) -> str:
    """SHA-256 of the corpus text: equal on two machines iff the corpora are identical."""
    h = hashlib.sha256()
    for d in docs:
        h.update(d.encode())
        h.update(b"\0")
    return h.hexdigest()


SOURCE_WORDS = "Python standard library docstrings, comment blocks and pydoc topics"  # a record's "source" begins so


def describe(docs: tuple[str, ...], source: str = "full") -> dict[str, object]:
    """Size and provenance, stored with the trained model."""
    return {
        "source": SOURCE_WORDS + "".join(f", {p} {metadata.version(p)}" for p in SOURCES[source]),
        "python": sys.version.split()[0],
        "documents": len(docs),
        "characters": sum(len(d) for d in docs),
        "sha256": fingerprint(docs),
    }
