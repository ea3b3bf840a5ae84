"""Dispatch ``python -m tx_explorer.train <command> …`` to ``tx_explorer.train.<command>.main``."""

import importlib
import pkgutil
import sys

import tx_explorer.train as package


def main() -> None:
    commands = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: python -m tx_explorer.train {{{','.join(commands)}}} [options]")
    importlib.import_module(f"tx_explorer.train.{sys.argv[1]}").main(sys.argv[2:])


if __name__ == "__main__":
    main()
