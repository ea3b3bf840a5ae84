"""Building modules without drawing their initial weights: for loaders and record-rebuilders that overwrite every
weight next (a checkpoint's 135M numbers, a bundled run's record), and for parameter counts on the meta device."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class _SkipInitialisers(TorchFunctionMode):
    """Leaves tensors as allocated where an initialiser would fill them."""

    TENSOR_INITIALISERS = frozenset(
        {torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.zero_, torch.Tensor.fill_}
    )

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        # torch.nn.init's functions (what modules' reset_parameters call) return the tensor they fill, which they
        # pass on by keyword.
        if getattr(func, "__module__", None) == "torch.nn.init" or func in self.TENSOR_INITIALISERS:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def skip_init() -> Iterator[None]:
    """Modules built inside keep their tensors as allocated (``torch.empty``): the default initialisers, which
    draw from the global RNG, do not run, and the caller fills what it uses.

    Not the usual ``meta`` device + ``to_empty``: torch's meta kernels for ``normal_``, ``randn`` and
    ``empty_like`` are Python code whose first call imports TorchDynamo or SymPy (hundreds of modules, seconds),
    and a visitor's run doing that under a class's load once held every other session up for minutes."""
    with _SkipInitialisers():
        yield
