"""The job pool (tx_explorer.jobs): FIFO, places in the queue, bounded concurrency, cancellation, errors, shared
keyed jobs; and a page waiting behind a busy pool says so. Deterministic: jobs block on Events, never on sleeps
(the waits below have a timeout only so that a broken pool fails instead of hanging)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest

from tx_explorer import jobs

WAIT = 60  # seconds: a safety bound on waits that succeed at once when the pool works


class Gate:
    """A job that says it started, then blocks until opened; ``ran`` counts its runs."""

    def __init__(self, value: object = None) -> None:
        self.started, self.opened, self.value, self.ran = threading.Event(), threading.Event(), value, 0

    def __call__(self, report: jobs.Report) -> object:
        self.ran += 1
        self.started.set()
        assert self.opened.wait(WAIT)
        report(1.0, "finishing")  # where a cancelled job stops
        return self.value


def test_fifo_order_and_places_in_the_queue() -> None:
    pool, order = jobs.Pool(1), []
    first = Gate()
    running = pool.submit(first)
    assert first.started.wait(WAIT)
    queued = [pool.submit(lambda report, i=i: order.append(i)) for i in range(3)]
    assert running.ahead() == 0 and running.started
    assert [j.ahead() for j in queued] == [1, 2, 3]  # the running job, then those queued before
    assert not any(j.started for j in queued)
    first.opened.set()
    for j in queued:
        j.result(WAIT)
    assert order == [0, 1, 2] and all(j.ahead() == 0 and j.done for j in queued)


def test_at_most_workers_jobs_run_at_once() -> None:
    pool = jobs.Pool(2)
    gates = [Gate(i) for i in range(3)]
    handles = [pool.submit(g) for g in gates]
    assert gates[0].started.wait(WAIT) and gates[1].started.wait(WAIT)
    assert not gates[2].started.is_set() and handles[2].ahead() == 2  # both workers busy
    gates[0].opened.set()
    assert gates[2].started.wait(WAIT)  # the freed worker takes the next job
    for g in gates[1:]:
        g.opened.set()
    assert [h.result(WAIT) for h in handles] == [0, 1, 2]


def test_a_cancelled_queued_job_never_runs() -> None:
    pool = jobs.Pool(1)
    blocker, dropped, after = Gate(), Gate(), Gate("after")
    pool.submit(blocker)
    assert blocker.started.wait(WAIT)
    victim, next_one = pool.submit(dropped), pool.submit(after)
    victim.cancel()
    assert victim.done and next_one.ahead() == 1  # it left the queue at once
    with pytest.raises(jobs.Cancelled):
        victim.result()
    blocker.opened.set()
    after.opened.set()
    assert next_one.result(WAIT) == "after" and dropped.ran == 0


def test_a_cancelled_running_job_stops_at_its_next_report() -> None:
    pool, steps = jobs.Pool(1), []
    at_step, go_on = threading.Event(), threading.Event()

    def work(report: jobs.Report) -> str:
        report(0.5, "half")
        at_step.set()
        assert go_on.wait(WAIT)
        report(0.6, "more")  # raises Cancelled: the rest never runs
        steps.append("after the report")
        return "finished"

    job = pool.submit(work)
    assert at_step.wait(WAIT) and job.progress == (0.5, "half")
    job.cancel()
    go_on.set()
    assert job.wait(WAIT)
    assert steps == [] and isinstance(job._task.error, jobs.Cancelled)
    with pytest.raises(jobs.Cancelled):
        job.result()
    assert pool.submit(lambda report: "next").result(WAIT) == "next"  # the worker survives


def test_the_jobs_exception_is_reraised_by_result() -> None:
    def fail(report: jobs.Report) -> None:
        raise ValueError("bad input 42")

    pool = jobs.Pool(1)
    with pytest.raises(ValueError, match="bad input 42"):
        pool.submit(fail).result(WAIT)
    assert pool.submit(lambda report: 7).result(WAIT) == 7


def test_identical_keyed_requests_share_one_job_until_the_last_lets_go() -> None:
    pool = jobs.Pool(1)
    blocker, gate = Gate(), Gate("shared")
    pool.submit(blocker)
    assert blocker.started.wait(WAIT)
    a, b = pool.submit(gate, key="k"), pool.submit(gate, key="k")
    other = pool.submit(Gate(), key="other")
    assert a.ahead() == b.ahead() == 1 and other.ahead() == 2  # one queued job, not two
    other.cancel()
    a.cancel()  # b still waits for it: it stays
    blocker.opened.set()
    gate.opened.set()
    assert b.result(WAIT) == "shared" and gate.ran == 1
    with pytest.raises(jobs.Cancelled):
        a.result()
    c = pool.submit(Gate("fresh"), key="k")  # the first job is done: a new request starts afresh
    c._task.fn.opened.set()
    assert c.result(WAIT) == "fresh"


def test_a_job_cancelled_by_every_holder_is_cancelled_and_forgotten() -> None:
    pool = jobs.Pool(1)
    blocker = Gate()
    pool.submit(blocker)
    assert blocker.started.wait(WAIT)
    a, b = pool.submit(Gate(), key="k"), pool.submit(Gate(), key="k")
    a.cancel()
    b.cancel()
    assert a.done and b.done
    fresh = pool.submit(lambda report: "fresh", key="k")
    blocker.opened.set()
    assert fresh.result(WAIT) == "fresh"


@pytest.mark.parametrize(
    ("env", "cores", "torch_threads", "expected"),
    [
        ({}, 2, 2, (1, 1)),
        ({}, 16, 16, (8, 1)),
        ({"TX_EXPLORER_JOB_WORKERS": "1"}, 16, 16, (1, 8)),
        ({"TX_EXPLORER_JOB_WORKERS": "3"}, 16, 16, (3, 2)),
        ({"TX_EXPLORER_JOB_WORKERS": "1"}, 16, 4, (1, 4)),
    ],
)
def test_sizes_keep_jobs_within_half_the_cores(monkeypatch, env, cores, torch_threads, expected) -> None:
    monkeypatch.setattr(jobs, "cores", lambda: cores)
    monkeypatch.setattr(jobs.torch, "get_num_threads", lambda: torch_threads)
    workers, threads = jobs.sizes(env)
    assert (workers, threads) == expected and workers * threads <= max(cores // 2, workers)


@pytest.mark.parametrize("typed", ["0", "-1", "two", "1.5"])
def test_a_bad_worker_count_is_refused(typed: str) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        jobs.sizes({"TX_EXPLORER_JOB_WORKERS": typed})


def _page(work) -> None:  # run as a script by AppTest: no names from this module
    from tx_explorer import ui

    ui.run_job(work, label="working")


def _leave(work: Callable[[jobs.Report], object]) -> None:
    """Run a page that waits for ``work`` and stop it meanwhile, as Streamlit stops the run of a session that
    closed or reran: AppTest stops a run that outlasts its timeout."""
    at = AppTest.from_function(_page, args=(work,))
    with pytest.raises(RuntimeError, match="timed out"):
        at.run(timeout=2)


def test_a_page_that_stops_cancels_its_running_job() -> None:
    finished, steps = threading.Event(), []

    def work(report: jobs.Report) -> None:
        try:
            for step in range(100 * WAIT):  # far longer than the wait below, unless cancelled
                report(0.5, "busy")
                steps.append(step)
                time.sleep(0.01)
        finally:
            finished.set()

    _leave(work)
    assert finished.wait(WAIT) and len(steps) < 100 * WAIT


def test_a_page_that_stops_drops_its_queued_job() -> None:
    blockers, ran = [Gate() for _ in range(jobs.pool().workers)], []
    for gate in blockers:
        jobs.submit(gate)
        assert gate.started.wait(WAIT)
    _leave(lambda report: ran.append("the dropped job"))
    for gate in blockers:
        gate.opened.set()
    assert jobs.submit(lambda report: "after").result(WAIT) == "after"  # FIFO: the dropped job would run first
    assert ran == []


def _behind_a_busy_pool(monkeypatch, act) -> list[str]:
    """Run ``act()`` (an AppTest run) while every worker of the process-wide pool is blocked; they are released
    once the page shows that it is queued. The texts of the progress bars the page showed meanwhile."""
    shown, queued = [], threading.Event()
    progress = DeltaGenerator.progress

    def spy(self, value, text=None, **kwargs):
        shown.append(text or "")
        if text and text.startswith("Queued"):
            queued.set()
        return progress(self, value, text, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "progress", spy)
    blockers = [Gate() for _ in range(jobs.pool().workers)]
    for gate in blockers:
        jobs.submit(gate)
        assert gate.started.wait(WAIT)

    def release_once_queued() -> None:  # the page's script thread is polling meanwhile
        queued.wait(WAIT)
        for gate in blockers:
            gate.opened.set()

    threading.Thread(target=release_once_queued, daemon=True).start()
    act()
    assert any(f"Queued ({len(blockers)} ahead)" in t for t in shown), shown
    return shown


def test_a_measurement_behind_a_busy_pool_says_queued_then_shows_its_result(monkeypatch) -> None:
    from conftest import assert_clean, open_page

    at = open_page("cost_of_attention")
    at.selectbox(key="cost_max_n").set_value(256)
    at.number_input(key="cost_repeats").set_value(1)
    at.number_input(key="cost_heads").set_value(3)
    _behind_a_busy_pool(monkeypatch, lambda: at.button(key="cost_measure").click().run(timeout=120))
    assert_clean(at)
    assert not at.get("progress")  # the bar was removed
    assert any("method" in d.value.columns for d in at.dataframe)  # the measured runs' table


def test_a_long_text_is_analysed_on_the_pool_and_a_short_one_at_once(monkeypatch) -> None:
    from conftest import assert_clean, open_page, plotly_specs

    from tx_explorer.views import multihead

    at = open_page("multihead")
    monkeypatch.setattr(multihead, "HEAVY_TOKENS", 8)  # tiny-gpt's context is 128 tokens: make 9 tokens "long"
    text = "a text of well over eight tokens, new to this process, for the pool to take"
    _behind_a_busy_pool(monkeypatch, lambda: at.text_area(key="mh_text_example_code").set_value(text).run(timeout=120))
    assert_clean(at)
    assert len(plotly_specs(at)) == 1 and not at.get("progress")  # the grid drawn, the bar removed
    monkeypatch.setattr(DeltaGenerator, "progress", lambda *a, **k: pytest.fail("a short text must not queue"))
    at.text_area(key="mh_text_example_code").set_value("short one").run()
    assert_clean(at)


def test_a_joiner_in_another_language_reads_its_own_label_not_the_starters_reports() -> None:
    """A 中文 visitor who joined a job an English visitor started (same key) saw its English reports on the bar."""
    from tx_explorer.ui.jobs import progress_text

    pool, at_step, go_on = jobs.Pool(1), threading.Event(), threading.Event()

    def work(report: jobs.Report) -> str:
        report(0.5, "layer 3 of 30")
        at_step.set()
        assert go_on.wait(WAIT)
        return "done"

    first = pool.submit(work, key="atlas", tag="en")
    joined = pool.submit(work, key="atlas", tag="zh")  # the same task: its reports are in the starter's words
    assert at_step.wait(WAIT)
    assert joined.tag == first.tag == "en"
    assert progress_text(first, "working", "en") == "layer 3 of 30"
    assert progress_text(joined, "计算中", "zh") == "计算中"
    go_on.set()
    assert joined.result(WAIT) == first.result(WAIT) == "done"
