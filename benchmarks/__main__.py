"""``python -m benchmarks`` runs every benchmark module with its defaults;
``python -m benchmarks attention --threads 1`` runs one with arguments."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from pathlib import Path


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    names = _modules()
    if argv and argv[0] in names:
        importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:])
        return
    if argv:
        raise SystemExit(f"unknown benchmark {argv[0]!r}; available: {', '.join(names)}")
    for name in names:
        importlib.import_module(f"benchmarks.{name}").main([])


if __name__ == "__main__":
    main()
