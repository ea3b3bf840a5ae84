"""Training CLIs: ``python -m tx_explorer.train <command> [options]`` (each command is a module here)."""
