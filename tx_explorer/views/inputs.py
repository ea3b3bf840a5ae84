"""A section's inputs declared once, beside its compute: the page lays them out (:func:`tx_explorer.ui.inputs`),
the notebook API and the page benchmark call the section with their defaults, and the bad-input tests drive each
declared number to its bounds and each declared text through hostile strings (``tests/test_bad_input.py``), so a new
input is tested where it is born.

    SIZES = Section("model_sizes", "sizes", (Number("layers", 1, 256, 12), Switch("tie", True)), compute=custom)
    SIZES(lang="zh", layers=24)       # compute(**defaults | overrides, lang="zh")

A widget's key is ``<prefix>_<name>`` (or the input's own ``key``: one the tests addressed before it was declared)
and its label the page's text ``<label>`` (default: the name); a choice's options read ``<option_prefix><option>``.
Sections whose inputs are not a fixed set (a live training run, a map that is clicked) stay plain Streamlit on their
page. No Streamlit here.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal

from tx_explorer.views import Panel


@dataclass(frozen=True)
class _Input:
    name: str  # the compute's keyword argument, and the widget key's suffix
    _: KW_ONLY
    label: str = ""  # text key of the label (default: the name)
    help: str = ""  # text key of the help, if any
    key: str = ""  # the widget key, when not <prefix>_<name>: a key older than the declaration that tests address


@dataclass(frozen=True)
class _Bounded(_Input):
    def __post_init__(self) -> None:
        if not self.low <= self.default <= self.high:
            raise ValueError(f"{self.name}: default {self.default} outside [{self.low}, {self.high}]")


@dataclass(frozen=True)
class Number(_Bounded):
    """A whole number in ``[low, high]`` (a number box, or a slider)."""

    low: int
    high: int
    default: int
    step: int = 1
    widget: Literal["number", "slider"] = "number"


@dataclass(frozen=True)
class Real(_Bounded):
    """A real number in ``[low, high]`` by ``step`` (a slider, or a number box shown in ``format``)."""

    low: float
    high: float
    default: float
    step: float
    widget: Literal["number", "slider"] = "slider"
    format: str | None = None  # printf-style, e.g. "%.0e" for ε


@dataclass(frozen=True)
class Choice(_Input):
    """One of a few named options (a select box, or a row of radio buttons)."""

    options: tuple[str, ...]
    default: str
    option_prefix: str = ""  # an option's text key is option_prefix + option (default: "<name>_")
    widget: Literal["select", "radio"] = "select"

    def __post_init__(self) -> None:
        if self.default not in self.options:
            raise ValueError(f"{self.name}: default {self.default!r} is not one of {self.options}")


@dataclass(frozen=True)
class Switch(_Input):
    """On or off (a toggle, or a checkbox)."""

    default: bool
    widget: Literal["toggle", "checkbox"] = "toggle"


@dataclass(frozen=True)
class Text(_Input):
    """One line of text, at most ``max_chars`` long (the browser cuts it there, and so does Streamlit's server)."""

    default: str
    max_chars: int
    placeholder: str = ""  # text key of the placeholder, if any
    localized: str = ""  # text key of the default in the visitor's language, where it has its own (狗咬人, not
    # "dog bites man"); ``default`` stays the compute's and the tests' default


Input = Number | Real | Choice | Switch | Text


def label_key(inp: Input) -> str:
    return inp.label or inp.name


def option_key(inp: Choice, option: str) -> str:
    return f"{inp.option_prefix or inp.name + '_'}{option}"


@dataclass(frozen=True)
class Section:
    """A page section with a fixed set of inputs: ``compute(**values, lang=...)`` is all it computes."""

    page: str  # pages/<page>.py, and its locale file
    prefix: str  # the widget keys' prefix, unique in the app
    inputs: tuple[Input, ...]
    compute: Callable[..., Any]

    def key(self, inp: Input) -> str:
        """The widget key of ``inp`` (what AppTest, the browser tests and the classroom address)."""
        return inp.key or f"{self.prefix}_{inp.name}"

    def defaults(self) -> dict[str, Any]:
        return {inp.name: inp.default for inp in self.inputs}

    def __call__(self, *, lang: str = "en", given: Mapping[str, Any] | None = None, **values: Any) -> Any:
        """The section's result on its defaults, ``values`` overriding some (unknown names are refused); ``given``:
        what the page hands the compute beyond the inputs (its model, another section's values)."""
        unknown = set(values) - {inp.name for inp in self.inputs}
        if unknown:
            raise TypeError(f"{self.prefix}: no input named {', '.join(sorted(unknown))}")
        return self.compute(**(self.defaults() | values), **(given or {}), lang=lang)


def panels(result: Any) -> list[Panel]:
    """The panels a compute returned, in order: one, in a tuple, or fields of a dataclass (for the notebook and the
    benchmark, which take every figure a section draws without knowing its result's shape)."""
    if isinstance(result, Panel):
        return [result]
    if isinstance(result, tuple | list):
        return [p for r in result for p in panels(r)]
    if dataclasses.is_dataclass(result):
        return [p for f in dataclasses.fields(result) for p in panels(getattr(result, f.name))]
    return []


def declared() -> list[Section]:
    """Every :class:`Section` declared at the top level of a module of :mod:`tx_explorer.views`, once each."""
    from tx_explorer import views

    found: dict[int, Section] = {}
    for info in pkgutil.iter_modules(views.__path__):
        module = importlib.import_module(f"{views.__name__}.{info.name}")
        found |= {id(v): v for v in vars(module).values() if isinstance(v, Section)}
    return list(found.values())
