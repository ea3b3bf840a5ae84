"""A long job on the page: run on the process-wide pool (:mod:`tx_explorer.jobs`), waited for with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import streamlit as st

from tx_explorer import jobs
from tx_explorer.ui.figures import redraw, show
from tx_explorer.ui.text import friendly_errors, lang, texts
from tx_explorer.views import Panel

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
    job, bar = jobs.submit(fn, key=key, tag=lang()), None
    try:
        while not job.wait(JOB_POLL_S):
            fraction = job.progress[0]
            message = progress_text(job, label, lang()) if job.started else T("job_queued", n=job.ahead())
            bar = slot.progress(fraction, text=message) if bar is None else bar.progress(fraction, text=message)
            if each is not None:
                each()
        return job.result()
    finally:
        job.cancel()  # a no-op once done
        slot.empty()


def progress_text(job: jobs.Job, label: str, language: str) -> str:
    """What a bar says of a running job: its last report, where written in the page's language; else ``label``
    (a visitor in 中文 who joined a job an English visitor started saw its English reports)."""
    text = job.progress[1]
    return text if text and job.tag == language else label


@st.cache_resource(show_spinner=False)
def _server_results() -> dict:
    """Results kept for every session of this server (st.cache_data would replay the progress bar on a hit)."""
    return {}


def once_per_server(fn: Callable[[jobs.Report], Any], *, label: str, key: Hashable) -> Any:
    """``fn(report)`` computed once per server, behind :func:`run_job`'s progress bar for the visitor who asks
    first (others asking meanwhile share the job), then returned at once to every session. For a few results
    that depend on nothing a visitor types: one per ``key``, never evicted."""
    store = _server_results()
    with st.empty():  # the bar's place whether or not it is needed (see run_job): later elements keep theirs
        if key not in store:
            store[key] = run_job(fn, label=label, key=key)
    return store[key]


def job_on_click(
    button: str, fn: Callable[[jobs.Report], Any], label: str, *, key: tuple, widget: str, where: Any = st
) -> Any | None:
    """A primary button (``widget``: its key; drawn in ``where``, e.g. a column) that runs ``fn(report)`` through
    :func:`run_job` when clicked: seconds of work done only when asked. Returns the result this session last got
    for ``key`` (the inputs it was computed for), or None before. Sessions asking for the same at the same time
    share one job."""
    found = st.session_state.setdefault(f"{widget}_found", {})
    if where.button(button, type="primary", key=widget):
        found[key] = run_job(fn, label=label, key=(widget, *key))
    return found.get(key)


def remembered_job(fn: Callable[[jobs.Report], Any], *, label: str, key: tuple) -> Any:
    """:func:`run_job`, its result remembered in this session for the latest ``key`` (``key[0]`` names the view):
    reruns that change only what is drawn from the result (a slider over it) neither queue nor wait for the pool."""
    name = f"{key[0]}_last"
    with st.empty():  # the bar's place whether or not it is needed (see run_job): later elements keep theirs
        if (last := st.session_state.get(name)) is None or last[0] != key:
            st.session_state[name] = last = (key, run_job(fn, label=label, key=key))
    return last[1]


class LiveJob(Protocol):
    """A training run as a job (e.g. ``views.norms.LiveRun``): a worker trains, filling ``records`` in place and
    leaving its latest curves for the page's thread to draw (Streamlit draws only from the page's thread)."""

    records: Any

    def __call__(self, report: jobs.Report) -> Any: ...

    def draw_latest(self, draw: Callable[[Any], None]) -> None: ...


def live_training(
    cells: Sequence[Any],
    make: Callable[[], LiveJob],
    curves: Callable[[Any], tuple[Panel, str]],
    *,
    key: str,
    T: Callable[..., str],
) -> None:
    """A live training run's Train and Stop buttons (in ``cells``), the run (``make()``) once Train is clicked, its
    curves redrawn as they grow, then what it trained: ``curves(records)`` → (panel, caption). The records are kept
    under ``key``, so a stop keeps what was trained. Stop needs no handler: its click reruns the page, which cancels
    the running job. (No fragment around this: a click in one would wait for the run, and Stop must not.)"""
    start = cells[0].button(T("train"), type="primary", icon=":material/play_arrow:")
    cells[1].button(T("stop"), icon=":material/stop:", help=T("stop_help"))
    if start:
        run = make()
        st.session_state[key], chart = run.records, st.empty()
        with friendly_errors():
            run_job(run, label=T("training"), each=lambda: run.draw_latest(lambda panel: redraw(chart, panel)))
        chart.empty()
    if (records := st.session_state.get(key)) is not None:
        panel, caption = curves(records)
        st.caption(caption)
        show(panel)
