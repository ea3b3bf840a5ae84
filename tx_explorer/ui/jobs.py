"""A long job on the page: run on the process-wide pool (:mod:`tx_explorer.jobs`), waited for with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import streamlit as st

from tx_explorer import jobs
from tx_explorer.ui import compat
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

    ``key``: identical concurrent requests share one job. ``label`` and ``each``: see :func:`wait`. A visitor who
    leaves or changes an input stops this run, and with it the job (queued, it never runs; running, it stops at its
    next report).
    """
    return wait(jobs.submit(fn, key=key, tag=lang()), label=label, each=each)


def wait(job: jobs.Job, *, label: str, each: Callable[[], None] | None = None, detach: bool = False) -> Any:
    """``job``'s result, waited for here. A bar appears if it is not done at the first look: "queued (n ahead)"
    while it waits for a worker, then what it last reported (``label`` until then). ``each`` runs in this, the
    script's, thread at every look (e.g. to redraw curves the job fills in).

    Streamlit ends the run by raising out of the bar's update; the ``finally`` then cancels the job, unless
    ``detach``: the caller cancels it when it should end (:func:`live_training`)."""
    T = texts("common")
    # The bar's place exists whether or not the job is quick enough to need a bar: inside an st.fragment, an element
    # that comes and goes shifts the ones after it, and Streamlit then leaves their old copies on the page.
    slot, bar = st.empty(), None
    try:
        while not job.wait(JOB_POLL_S):
            fraction = job.progress[0]
            message = progress_text(job, label, lang()) if job.started else T("job_queued", n=job.ahead())
            bar = slot.progress(fraction, text=message) if bar is None else bar.progress(fraction, text=message)
            if each is not None:
                each()
        return job.result()
    finally:
        if not detach:
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
    leaving its latest curves for the page's thread to draw (Streamlit draws only from the page's thread), in the
    language ``lang`` holds when it draws them (a visitor may switch during the run)."""

    records: Any
    lang: str

    def __call__(self, report: jobs.Report) -> Any: ...

    def draw_latest(self, draw: Callable[[Any], None]) -> None: ...


LIVE = "live_runs"  # session state: a live run's key → (page, run, job), while the run goes on


def _live() -> dict[str, tuple[str, LiveJob, jobs.Job]]:
    return st.session_state.setdefault(LIVE, {})


def stop_live(key: str) -> None:
    """Cancel this session's live run ``key``, if one goes on (Stop's click; a new Train)."""
    if (going := _live().pop(key, None)) is not None:
        going[2].cancel()


def leave_live_runs(page: str) -> None:
    """This session's live runs started on another page than ``page`` (this run's) are cancelled: a run goes on
    through its own page's reruns (a language switch, another input) and stops when its visitor leaves the page."""
    st.session_state["live_page"] = page
    for key in [key for key, (started_on, _, _) in _live().items() if started_on != page]:
        stop_live(key)


def while_connected(run: LiveJob, session: str | None) -> Callable[[jobs.Report], Any]:
    """``run`` as a job that stops at its next report once the visitor's session has gone (a closed tab): a live
    run outlives its script runs (:func:`live_training`), so the end of a run is no sign that its visitor left."""

    def job(report: jobs.Report) -> Any:
        def checked(fraction: float, text: str = "") -> None:
            if not compat.session_alive(session):
                raise jobs.Cancelled
            report(fraction, text)

        return run(checked)

    return job


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
    under ``key``, so a stop keeps what was trained.

    The run goes on through the page's reruns: a language switch or another input ends this script run (Streamlit
    stops it and starts the next at once), not the job, and the next run waits on the same job, in its language.
    Stop cancels it (its click's callback runs before the page's next run), as leaving the page
    (:func:`leave_live_runs`) or closing it (:func:`while_connected`) does. (No fragment around this: a click in one
    would wait for the run, and Stop must not.)"""
    start = cells[0].button(T("train"), type="primary", icon=":material/play_arrow:")
    cells[1].button(T("stop"), icon=":material/stop:", help=T("stop_help"), on_click=stop_live, args=(key,))
    if start:
        stop_live(key)  # one run at a time: a second Train starts afresh
        run = make()
        st.session_state[key] = run.records
        job = jobs.submit(while_connected(run, compat.session_id()), tag=lang())
        _live()[key] = (st.session_state.get("live_page", ""), run, job)
    if (going := _live().get(key)) is not None:
        _, run, job = going
        run.lang, chart = lang(), st.empty()  # the worker's next curves in this run's language
        with friendly_errors():
            draw = lambda: run.draw_latest(lambda panel: redraw(chart, panel))  # noqa: E731
            try:
                wait(job, label=T("training"), each=draw, detach=True)
            finally:
                if job.done:  # over (trained, failed or stopped); else this script run was stopped, not the job
                    _live().pop(key, None)
        chart.empty()
    if (records := st.session_state.get(key)) is not None:
        panel, caption = curves(records)
        st.caption(caption)
        show(panel)
