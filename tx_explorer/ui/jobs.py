"""A long job on the page: run on the process-wide pool (:mod:`tx_explorer.jobs`), waited for with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

from tx_explorer import jobs
from tx_explorer.ui.text import texts

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
