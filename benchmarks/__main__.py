"""``python -m benchmarks`` runs every benchmark module with its defaults;
``python -m benchmarks attention --threads 1`` runs one with arguments;
``python -m benchmarks --repeats 1`` runs every one with the same options (each module has ``--repeats``).

Set ``BENCHMARKS_FILE=/tmp/scratch.md`` to write the sections somewhere other than BENCHMARKS.md (smoke runs).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from pathlib import Path

log = logging.getLogger("benchmarks")


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    names = _modules()
    if argv and argv[0] in names:
        importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:])
        return
    if argv and not argv[0].startswith("-"):
        raise SystemExit(f"unknown benchmark {argv[0]!r}; available: {', '.join(names)}")
    failed = []
    for name in names:  # one failing benchmark must not cost the others' numbers
        try:
            importlib.import_module(f"benchmarks.{name}").main(list(argv))
        except Exception:
            log.exception("benchmark %s failed", name)
            failed.append(name)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
