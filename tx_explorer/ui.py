"""The one package module that imports Streamlit: language, device, figure display, errors, caching.

Pages are thin scripts over this module: widgets in, library calls out, figures shown.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterator, Mapping

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


@st.cache_resource(show_spinner=False)
def device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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
        cols[2 * i].download_button(
            f"{T('download_csv')} · {name}" if len(arrays) > 1 else T("download_csv"),
            _csv(arr),
            file_name=f"{name}.csv",
            mime="text/csv",
            key=f"csv_{key}_{name}",
            on_click="ignore",
        )
        cols[2 * i + 1].download_button(
            f"{T('download_npy')} · {name}" if len(arrays) > 1 else T("download_npy"),
            _npy(arr),
            file_name=f"{name}.npy",
            mime="application/octet-stream",
            key=f"npy_{key}_{name}",
            on_click="ignore",
        )


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
        st.error(T("error_input", message=str(exc)))
    except torch.OutOfMemoryError:
        log.exception("out of memory")
        st.error(T("error_internal", kind="out of memory"))
    except Exception as exc:  # noqa: BLE001 — the last line of defence for a page
        log.exception("page error")
        st.error(T("error_internal", kind=type(exc).__name__))
