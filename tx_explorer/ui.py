"""The one package module that imports Streamlit: language, device, figure display, errors, caching.

Pages are thin scripts over this module: widgets in, library calls out, figures shown.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from tx_explorer import locales

log = logging.getLogger("tx_explorer")


def lang() -> str:
    """The language chosen in the sidebar ("en" or "zh")."""
    return st.session_state.get("lang", "en")


def texts(page: str) -> Callable[..., str]:
    """``T = texts("operator"); T("intro")`` gives the page's string in the chosen language."""
    current = lang()
    return lambda key, **fmt: locales.text(page, key, current, **fmt)


def nav_title(key: str) -> str:
    return locales.text("common", key, lang())


def axes() -> dict[str, str]:
    """Translated axis titles of an attention map (rows = queries, columns = keys), as heatmap kwargs."""
    T = texts("common")
    return {"x_title": T("axis_keys"), "y_title": T("axis_queries")}


@st.cache_resource(show_spinner=False)
def device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@st.cache_resource(show_spinner=False, max_entries=16)  # every registered model fits (< 0.5 GB in all)
def cached_model(name: str) -> Any:
    """``models.load_model(name)``, loaded (and checksum-verified) once per server process.

    Every session shares the object, so it is made read-only: each module in it in eval mode, no gradients.
    """
    from tx_explorer import models

    loaded = models.load_model(name)
    for module in _modules(loaded):
        module.eval().requires_grad_(False)
    return loaded


def _modules(obj: Any, depth: int = 2) -> Iterator[torch.nn.Module]:
    """The torch modules in a loaded model: the object itself, or its attributes (e.g. ``bundle.text.model``)."""
    if isinstance(obj, torch.nn.Module):
        yield obj
    elif depth and hasattr(obj, "__dict__"):
        for value in vars(obj).values():
            yield from _modules(value, depth - 1)


def sidebar() -> None:
    """Language switch, compute device and torch version (shown on every page)."""
    T = texts("common")
    with st.sidebar:
        st.radio(
            T("language"),
            options=list(locales.LANGUAGES),
            format_func=locales.LANGUAGES.get,
            key="lang",
            horizontal=True,
        )
        dev = device()
        name = f"CUDA ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "CPU"
        st.caption(T("device", device=name) + " · " + T("torch", version=torch.__version__))


def _csv(data: np.ndarray) -> bytes:
    buf = io.StringIO()
    arr = np.asarray(data)
    np.savetxt(buf, arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr[None], delimiter=",", fmt="%.6g")
    return buf.getvalue().encode()


def _npy(data: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(data), allow_pickle=False)
    return buf.getvalue()


def show_figure(fig: go.Figure, key: str, data: np.ndarray | Mapping[str, np.ndarray] | None = None) -> None:
    """Show a Plotly figure (PNG from its toolbar) with CSV and NPY downloads of the numbers behind it."""
    st.plotly_chart(
        fig,
        key=f"fig_{key}",
        theme=None,
        config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": key, "scale": 2}},
    )
    if data is None:
        return
    T = texts("common")
    arrays = data if isinstance(data, Mapping) else {key: data}
    cols = st.columns(2 * len(arrays))
    for i, (name, arr) in enumerate(arrays.items()):
        # Files are made on click (deferred), not on every rerun: a 6 × 12 × 512² grid is 200 MB of CSV.
        cols[2 * i].download_button(
            f"{T('download_csv')} · {name}" if len(arrays) > 1 else T("download_csv"),
            functools.partial(_csv, arr),
            file_name=f"{name}.csv",
            mime="text/csv",
            key=f"csv_{key}_{name}",
            on_click="ignore",
        )
        cols[2 * i + 1].download_button(
            f"{T('download_npy')} · {name}" if len(arrays) > 1 else T("download_npy"),
            functools.partial(_npy, arr),
            file_name=f"{name}.npy",
            mime="application/octet-stream",
            key=f"npy_{key}_{name}",
            on_click="ignore",
        )


_MARKDOWN_SPECIALS = "\\`*_{}[]<>#|~$"  # what Markdown, HTML or LaTeX would act on mid-line


def escape_markdown(text: str) -> str:
    """Show ``text`` literally inside Markdown elements (error messages may quote user input)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in text)


@contextlib.contextmanager
def friendly_errors() -> Iterator[None]:
    """Turn exceptions inside a page section into a clear message; the app keeps serving.

    ``ValueError``/``TypeError``/``LookupError`` are input problems and their message is shown as is;
    anything else is logged server-side with its traceback and summarised for the user.
    """
    T = texts("common")
    try:
        yield
    except (ValueError, TypeError, LookupError) as exc:
        st.error(T("error_input", message=escape_markdown(str(exc))))
    except torch.OutOfMemoryError:
        log.exception("out of memory")
        st.error(T("error_internal", kind="out of memory"))
    except Exception as exc:
        log.exception("page error")
        st.error(T("error_internal", kind=type(exc).__name__))


def _leave_legacy_multipage_mode() -> None:
    """Make sure every session runs through app.py's ``st.navigation``.

    With a ``pages/`` folder beside app.py, Streamlit starts in its legacy multipage mode and leaves it only
    when app.py first calls ``st.navigation``; until then a visitor arriving on a deep link (``/masks``) would
    get the bare page without the sidebar. The first import of this module happens inside such a run, so
    switching the mode here and rerunning serves that visitor the whole app on the page they asked for.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory and st.runtime.exists():
        PagesManager.uses_pages_directory = False
        st.rerun()


_leave_legacy_multipage_mode()
