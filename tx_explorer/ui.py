"""The one package module that imports Streamlit: language, device, figure display, errors, caching.

Pages are thin scripts over this module: widgets in, library calls out, figures shown.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import logging
import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from tx_explorer import jobs, locales, model_cache, models, paths
from tx_explorer.errors import InputError

log = logging.getLogger("tx_explorer")


def lang() -> str:
    """The language chosen in the sidebar ("en" or "zh")."""
    return st.session_state.get("lang", "en")


def texts(page: str) -> Callable[..., str]:
    """``T = texts("operator"); T("intro")`` gives the page's string in the chosen language."""
    current = lang()
    return lambda key, **fmt: locales.text(page, key, current, **fmt)


def page_title(page: str) -> str:
    """The one name of ``pages/<page>.py`` (sidebar, its own title, the Home map): ``page_<page>`` in common.json."""
    return locales.text("common", f"page_{page}", lang())


def words(defaults: Mapping[str, str], page: str = "common") -> dict[str, str]:
    """A figure module's ``WORDS`` in the chosen language (``fig_<key>`` in ``locales/<page>.json``)."""
    return locales.words(page, defaults, lang())


def model_description(name: str) -> str:
    """A registered model's description in the chosen language (``model_<name>`` in common.json, else English)."""
    key = f"model_{name}"
    return locales.text("common", key, lang()) if key in locales.table("common") else models.REGISTRY[name].description


def axes() -> dict[str, str]:
    """Translated axis titles of an attention map (rows = queries, columns = keys), as heatmap kwargs."""
    T = texts("common")
    return {"x_title": T("axis_keys"), "y_title": T("axis_queries")}


@st.cache_resource(show_spinner=False)
def device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def cached_model(name: str) -> Any:
    """A registered model by name, or a checkpoint folder by its path, loaded once per server process.

    Every session shares the object, so it is made read-only: each module in it in eval mode, no gradients.
    Registered models live in the process-wide :mod:`tx_explorer.model_cache` (every one fits, < 0.5 GB in
    all), which ``serve.py`` fills in the background at server start.
    """
    return model_cache.shared_model(name) if name in models.REGISTRY else _checkpoint(name)


@st.cache_resource(show_spinner=False, max_entries=2)  # a visitor's checkpoints may be gigabytes: keep the last two
def _checkpoint(folder: str) -> Any:
    """A checkpoint folder, checked against the allowed roots again, then loaded whole or not at all."""
    return model_cache.read_only(paths.open_checkpoint(folder))


FOLDER = "\0folder"  # the picker's "a checkpoint folder" choice: no registered name or path contains a NUL


@st.cache_data(ttl=30, show_spinner=False)  # a directory scan: cheap, but not on every rerun
def _cached_checkpoints(kind: str | None) -> dict[str, str]:
    return {str(c.folder): c.repo for c in paths.cached_checkpoints() if kind is None or c.kind == kind}


def text_model_picker(
    label: str,
    key: str,
    *,
    kind: str | None = None,
    help: str | None = None,
    where: Any = st,
    extra: Sequence[str] = (),
) -> str | None:
    """A text page's model choice: registered models, checkpoints in the local Hugging Face cache, or a folder.

    ``where`` holds the selectbox (a column); the folder's text box goes below. Returns a name for
    :func:`cached_model` (a registered name or a checkpoint folder), or None after a message while the chosen
    folder is not typed yet or lies outside the allowed roots (:mod:`tx_explorer.paths`).
    """
    T = texts("common")
    cached = _cached_checkpoints(kind)
    options = [*models.available_models("text", kind=kind), *extra, *cached, FOLDER]  # extra: e.g. tiny-moe

    labels = {folder: T("model_cached", repo=repo) for folder, repo in cached.items()}
    labels[FOLDER] = T("model_folder_option")
    choice = where.selectbox(label, options, key=key, help=help, format_func=lambda o: labels.get(o, o))
    if choice != FOLDER:
        return choice
    typed = st.text_input(
        T("model_folder"), key=f"{key}_folder", max_chars=4096, help=T("model_folder_help", variable=paths.ENV_ROOTS)
    )
    if not typed.strip():
        st.info(T("model_folder_empty"))
        return None
    try:
        return str(paths.allowed_folder(typed))
    except InputError as exc:
        st.error(T("error_input", message=escape_markdown(error_text(exc))))
        return None


def architecture_caption(cfg: Any) -> str:
    """How a text model's blocks are built, in words: positions, K/V sharing, window, norm and MLP kinds."""
    T = texts("common")
    heads, kv = cfg.num_heads, cfg.kv_heads
    sharing = "mha" if kv == heads else "mqa" if kv == 1 else "gqa"
    parts = [
        T(f"arch_positions_{cfg.positions}", theta=cfg.rope_theta),
        T(f"arch_{sharing}", heads=heads, kv=kv),
        *([T("arch_window", window=cfg.sliding_window)] if cfg.sliding_window else []),
        T(f"arch_norm_{cfg.norm}"),
        T(f"arch_mlp_{cfg.mlp}"),
    ]
    return " · ".join(parts)


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


def show_figure(
    fig: go.Figure, key: str, data: np.ndarray | Mapping[str, np.ndarray] | None = None, *, clickable: bool = False
) -> list[Any]:
    """Show a Plotly figure (PNG from its toolbar) with CSV and NPY downloads of the numbers behind it.

    ``clickable``: a click on a point reruns the page, and the clicked points' ``customdata`` are returned."""
    event = st.plotly_chart(
        fig,
        key=f"fig_{key}",
        theme=None,
        config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": key, "scale": 2}},
        **(dict(on_select="rerun", selection_mode="points") if clickable else {}),
    )
    picked = [_as_list(p["customdata"]) for p in event.selection.points if "customdata" in p] if clickable else []
    if data is not None:
        _downloads(key, data)
    return picked


def _as_list(custom: Any) -> Any:
    """A point's ``customdata`` as sent: an array arrives as {"0": …, "1": …} from the browser."""
    return [custom[k] for k in sorted(custom, key=int)] if isinstance(custom, Mapping) else custom


def show_clickable(*panels: Any) -> list[Any] | None:
    """Show panels whose figures carry clickable points; the ``customdata`` of the point last clicked, if any."""
    picked = None
    for panel in panels:
        points = show_figure(panel.figure, panel.key, panel.data, clickable=True)
        picked = points[0] if points else picked
    return picked


def _downloads(key: str, data: np.ndarray | Mapping[str, np.ndarray]) -> None:
    T = texts("common")
    arrays = data if isinstance(data, Mapping) else {key: data}
    cols = st.columns(2 * len(arrays))
    for i, (name, arr) in enumerate(arrays.items()):
        # Files are made on click (deferred), not on every rerun: a 6 × 12 × 512² grid is 200 MB of CSV.
        cols[2 * i].download_button(
            f"{T('download_csv')} · `{name}.csv`" if len(arrays) > 1 else T("download_csv"),  # names the file
            functools.partial(_csv, arr),
            file_name=f"{name}.csv",
            mime="text/csv",
            key=f"csv_{key}_{name}",
            on_click="ignore",
        )
        cols[2 * i + 1].download_button(
            f"{T('download_npy')} · `{name}.npy`" if len(arrays) > 1 else T("download_npy"),
            functools.partial(_npy, arr),
            file_name=f"{name}.npy",
            mime="application/octet-stream",
            key=f"npy_{key}_{name}",
            on_click="ignore",
        )


def show(*panels: Any) -> None:
    """Show :class:`tx_explorer.views.Panel` s (figure, key, the numbers behind it) one below the other."""
    for panel in panels:
        if panel is not None:
            show_figure(panel.figure, panel.key, panel.data)


def metrics(values: Mapping[str, str]) -> None:
    """A row of ``st.metric`` s, one column each: ``{label: value}``."""
    for col, (label, value) in zip(st.columns(len(values)), values.items()):
        col.metric(label, value)


def section(T: Callable[..., str], name: str, *formulas: str, intro: bool = True, level: str = "header") -> None:
    """A page section's start: the header ``T(f"{name}_header")``, its intro ``T(f"{name}_intro")``, formulas."""
    (st.subheader if level == "subheader" else st.header)(T(f"{name}_header"))
    if intro:
        st.markdown(T(f"{name}_intro"))
    for formula in formulas:
        st.latex(formula)


def lazy_section(T: Callable[..., str], name: str, *formulas: str, key: str, intro: bool = True) -> Any | None:
    """A section that opens on demand: an expander labelled ``T(f"{name}_header")``.

    Returns its container (intro and formulas drawn) while open, else None: a closed section computes and sends
    nothing. Inside an ``st.fragment``, opening or closing it reruns that fragment only."""
    keep_open(key)  # the label changes with the language: stay open (or closed) across the switch
    box = st.expander(T(f"{name}_header"), key=key, on_change="rerun")  # closed on a first visit
    if not box.open:
        return None
    with box:
        if intro:
            st.markdown(T(f"{name}_intro"))
        for formula in formulas:
            st.latex(formula)
    return box


def keep_open(*keys: str) -> None:
    """Keep lazy sections open through runs that do not draw them (e.g. after a blank text): Streamlit forgets
    the state of a widget or expander left out of a run unless the script writes it back."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def row(*panels: Any, headings: tuple[str, ...] = ()) -> None:
    """Panels side by side, one column each (a heading in Markdown above each when given)."""
    for i, (col, panel) in enumerate(zip(st.columns(len(panels)), panels)):
        with col:
            if i < len(headings):
                st.markdown(headings[i])
            show(panel)


def stop_unless(name: str | None, text: str, empty: str) -> None:
    """End the page's run here while no model is chosen (the picker said why) or the text is blank (``empty``)."""
    if name is None:
        st.stop()
    if not text.strip():
        st.warning(empty)
        st.stop()


def optional(load: Callable[[], Any], error: type[Exception], message: Callable[[Exception], str]) -> Any:
    """``load()``, or None after a warning ``message(exc)`` when it raises ``error`` (e.g. a bundle not built)."""
    try:
        return load()
    except error as exc:
        st.warning(message(exc))
        return None


_redraws = itertools.count()


def redraw(placeholder: Any, panel: Any) -> None:
    """Draw a panel's figure into an ``st.empty()`` placeholder, replacing what was there (a growing curve)."""
    placeholder.plotly_chart(panel.figure, key=f"{panel.key}_live_{next(_redraws)}", theme=None)


JOB_POLL_S = 0.2  # how often a waiting page looks at its job; each look is where Streamlit can stop the script


def run_job(
    fn: Callable[[jobs.Report], Any],
    *,
    label: str,
    key: Hashable | None = None,
    each: Callable[[], None] | None = None,
) -> Any:
    """``fn(report)`` on the process-wide job pool (:mod:`tx_explorer.jobs`), waited for here; its result.

    A bar appears if the job is not done at the first look: "queued (n ahead)" while it waits for a worker, then
    what it last reported (``label`` until then). ``key``: identical concurrent requests share one job. ``each``
    runs in this, the script's, thread at every look (e.g. to redraw curves the job fills in). A visitor who
    leaves or changes an input stops this run: Streamlit raises out of the bar's update, and the ``finally``
    cancels the job (queued, it never runs; running, it stops at its next report).
    """
    T = texts("common")
    # The bar's place exists whether or not the job is quick enough to need a bar: inside an st.fragment, an element
    # that comes and goes shifts the ones after it, and Streamlit then leaves their old copies on the page.
    slot = st.empty()
    job, bar = jobs.submit(fn, key=key), None
    try:
        while not job.wait(JOB_POLL_S):
            fraction, text = job.progress
            message = (text or label) if job.started else T("job_queued", n=job.ahead())
            bar = slot.progress(fraction, text=message) if bar is None else bar.progress(fraction, text=message)
            if each is not None:
                each()
        return job.result()
    finally:
        job.cancel()  # a no-op once done
        slot.empty()


_MARKDOWN_SPECIALS = "\\`*_{}[]<>#|~$"  # what Markdown, HTML or LaTeX would act on mid-line


def escape_markdown(text: str) -> str:
    """Show ``text`` literally inside Markdown elements (error messages may quote user input)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in text)


def error_text(exc: BaseException) -> str:
    """An exception's message for the user: an :class:`InputError` in the chosen language, others as they are."""
    return exc.message(lang()) if isinstance(exc, InputError) else str(exc)


@contextlib.contextmanager
def friendly_errors() -> Iterator[None]:
    """Turn exceptions inside a page section into a clear message; the app keeps serving.

    ``ValueError``/``TypeError``/``LookupError`` are input problems and their message is shown (in the chosen
    language for an :class:`~tx_explorer.errors.InputError`); anything else is logged server-side with its
    traceback and summarised for the user.
    """
    T = texts("common")
    try:
        yield
    except (ValueError, TypeError, LookupError) as exc:
        st.error(T("error_input", message=escape_markdown(error_text(exc))))
    except torch.OutOfMemoryError:
        log.exception("out of memory")
        st.error(T("error_internal", kind=T("out_of_memory")))
    except Exception as exc:
        log.exception("page error")
        st.error(T("error_internal", kind=type(exc).__name__))


DRAW_ALL = "TX_EXPLORER_DRAW_ALL"  # set to "1": every section is drawn at once (AppTests cannot scroll)
REACH = "10%"  # of the window's height: a section this close below the visible part is drawn already

# A section not drawn yet is this box, watched by an IntersectionObserver that reports while any of it is within
# ``REACH`` below the visible part of the page. Reports go out one at a time app-wide, the next only once the app has
# run: two boxes reporting in the same tick would share one message with one fragment id, and a report during a
# fragment's run interrupts that run, so the section it was drawing would stay a box. A box still shown and in view
# after the app has run (a busy server, an interrupted run) reports again, ever less often.
_PLACEHOLDER_CSS = """
.box { box-sizing: border-box; border: 1px solid rgba(128, 128, 128, 0.25); border-radius: 0.5rem; padding: 1rem;
       color: rgba(128, 128, 128, 0.9); font-family: sans-serif; font-size: 0.875rem; }
"""
_SENTINEL_JS = """
function settled() {  // the app has run (script state running → notRunning), or 5 s have passed
  return new Promise((done) => {
    const app = document.querySelector('[data-testid="stApp"]');
    let ran = false;
    const watch = new MutationObserver(() => {
      if (app.dataset.testScriptState !== "notRunning") ran = true;
      else if (ran) finish();
    });
    const timer = setTimeout(finish, 5000);
    function finish() { watch.disconnect(); clearTimeout(timer); done(); }
    if (app) watch.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
    else finish();
  });
}

export default function ({ setStateValue, parentElement, data }) {
  const target = parentElement.querySelector(".box");
  target.style.height = `${data.height}px`;  // about the section's own height: the page does not jump
  target.textContent = data.caption;
  // The page scrolls inside Streamlit's main area, which clips what is below it: that area is the root.
  let root = (parentElement.host || parentElement).parentElement;
  while (root && !/(auto|scroll)/.test(getComputedStyle(root).overflowY)) root = root.parentElement;
  let visible = false, mounted = true, waiting = false, reports = 0, retry = 1000;
  const report = () => {
    if (waiting) return;
    waiting = true;
    window.__txReached = (window.__txReached || Promise.resolve()).then(async () => {
      waiting = false;
      if (!mounted || !visible) return;
      try {
        setStateValue("reached", ++reports);
        await settled();
      } finally {
        // Still here: the run has not drawn the section yet (a busy server, an interrupted run). Ask again, ever
        // less often (1 s, 2 s, … 30 s) and for as long as the box is in view: a section must not stay a box.
        if (mounted && visible) setTimeout(report, retry);
        retry = Math.min(2 * retry, 30000);
      }
    }).catch(() => {});  // a report that failed must not stop the page's later ones (they wait on this chain)
  };
  const io = new IntersectionObserver((entries) => {
    visible = entries[entries.length - 1].isIntersecting;
    report();
  }, { root, rootMargin: `0px 0px ${data.margin} 0px` });
  io.observe(target);
  return () => { mounted = false; io.disconnect(); };
}
"""


@functools.cache
def _below_fold_box() -> Callable[..., Any]:
    """The placeholder-and-sentinel component, registered once per process."""
    return st.components.v2.component(
        "tx_below_fold", html='<div class="box"></div>', css=_PLACEHOLDER_CSS, js=_SENTINEL_JS
    )


def below_fold(key: str, *, height: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Use instead of ``@st.fragment`` on a page section below the first screen: a first visit does not pay for it.

    The section is a fragment. Until the visitor scrolls near it, it computes nothing and shows a box of about
    its usual ``height`` (px, so the page does not jump) saying so; once the box comes into view the section runs,
    and stays drawn for the rest of the session. ``key``: unique across the app (``<page>_<section>``). With
    ``TX_EXPLORER_DRAW_ALL=1`` every section is drawn at once."""
    reached = f"reached_{key}"

    def mark() -> None:
        st.session_state[reached] = True  # plain state, not the sentinel's: a widget not drawn is forgotten

    def decorate(section: Callable[..., None]) -> Callable[..., None]:
        @st.fragment
        @functools.wraps(section)
        def deferred(*args: Any, **kwargs: Any) -> None:
            if st.session_state.get(reached) or os.environ.get(DRAW_ALL) == "1":
                section(*args, **kwargs)
                return
            caption = texts("common")("below_fold")
            data = {"margin": REACH, "height": height, "caption": caption}
            _below_fold_box()(key=f"below_fold_{key}", data=data, default={"reached": 0}, on_reached_change=mark)

        return deferred

    return decorate


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
