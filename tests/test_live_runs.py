"""A live training run (ui.live_training: the norms and circuit pages) goes on through its page's reruns — a language
switch or another input ends the script run, not the job — and stops on Stop, on leaving the page, or when the
session closes. Before, any rerun cancelled it: switching to 中文 mid-run lost the run."""

from __future__ import annotations

import threading

import pytest
from streamlit.testing.v1 import AppTest

from tx_explorer import jobs

WAIT = 60  # seconds: a safety bound on waits that succeed at once when the pool works


class Run:
    """A LiveJob that trains ``steps`` steps, reporting each (where a cancelled job stops) and recording the language
    it would draw in; after ``hold`` steps it waits for ``go``, so that a test decides when it may end. ``act(step,
    session_state)`` runs in the page's thread at each look at the job: the test's visitor acts there."""

    def __init__(self, act, steps: int = 40, hold: int = 5) -> None:
        self.records: list[int] = []
        self.lang, self.langs, self.latest, self.act = "en", [], None, act
        self.steps, self.hold, self.go = steps, hold, threading.Event()
        self.started, self.ended = threading.Event(), threading.Event()

    def __call__(self, report: jobs.Report) -> list[int]:
        try:
            for step in range(self.steps):
                report(step / self.steps, f"step {step}")
                if step >= self.hold:
                    self.started.set()
                    assert self.go.wait(WAIT)
                self.records.append(step)
                self.langs.append(self.lang)
                self.latest = step
            return self.records
        finally:
            self.ended.set()

    def draw_latest(self, draw) -> None:
        import streamlit as st

        self.act(len(self.records), st.session_state)


def _page(run) -> None:  # run as a script by AppTest: no names from this module (a Run)
    import plotly.graph_objects as go
    import streamlit as st

    from tx_explorer import ui
    from tx_explorer.views import Panel

    T = {"train": "Train", "stop": "Stop", "stop_help": "", "training": "training"}.__getitem__
    st.session_state["runs"] = st.session_state.get("runs", 0) + 1
    ui.leave_live_runs(st.session_state.get("page", "here"))
    ui.live_training(
        st.columns(2), lambda: run, lambda records: (Panel("live", go.Figure()), "trained"), key="t_live", T=T
    )
    st.write(f"records {len(st.session_state.get('t_live') or [])}")


def _started(run: Run) -> AppTest:
    """The page opened and Train clicked (the click's run not run yet)."""
    at = AppTest.from_function(_page, args=(run,), default_timeout=WAIT)
    at.run()
    at.button[0].click()
    return at


def test_a_rerun_during_the_run_keeps_the_job_and_the_next_run_waits_on_it_in_its_language() -> None:
    """A rerun mid-run (Streamlit raises it in the page's thread, as for a language switch) did cancel the job."""
    import streamlit as st

    def act(steps, state) -> None:
        if steps == run.hold and not state.get("switched"):  # the worker waits: switch, rerun, then let it go on
            state["switched"] = True
            state["lang"] = "zh"  # what the sidebar's switch writes
            st.rerun()
        if state.get("switched"):
            run.go.set()

    run = Run(act)
    at = _started(run)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert run.ended.wait(WAIT) and run.records == list(range(run.steps))  # trained to its end, not cancelled
    assert run.langs[0] == "en" and run.langs[-1] == "zh"  # its curves in the language read after the switch
    assert at.session_state["runs"] == 3  # opened, Train's run (ended by the rerun), the run that waited on the job
    assert "records 40" in at.markdown[-1].value
    assert not at.session_state["live_runs"]  # over: nothing left to wait on


def test_stop_cancels_the_run_and_keeps_what_it_trained() -> None:
    import streamlit as st

    from tx_explorer.ui.jobs import stop_live

    def act(steps, state) -> None:
        if steps == run.hold:
            stop_live("t_live")  # Stop's click: its callback, before the page's next run
            run.go.set()
            assert run.ended.wait(WAIT)  # stopped at its next report: the page then draws all it trained
            st.rerun()

    run = Run(act)
    at = _started(run)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert run.ended.wait(WAIT) and len(run.records) < run.steps  # cancelled at its next report
    assert f"records {len(run.records)}" in at.markdown[-1].value


def test_leaving_the_page_cancels_its_run() -> None:
    import streamlit as st

    def act(steps, state) -> None:
        if steps == run.hold:
            state["page"] = "another page"  # the next run is another page's: app.py calls leave_live_runs
            st.rerun()

    run = Run(act)
    at = _started(run)
    at.run()
    run.go.set()
    assert run.ended.wait(WAIT) and len(run.records) < run.steps
    assert not at.session_state["live_runs"]


def test_a_stopped_script_run_leaves_the_job_and_a_closed_session_ends_it(monkeypatch) -> None:
    """Streamlit stops a script run to start the next at once (its fast reruns: a language switch raised a stop, not
    a rerun, and the job was cancelled) and when its session closes; AppTest stops a run past its timeout. The job
    goes on until its visitor's session is gone, then stops at its next report."""
    from tx_explorer.ui import compat

    def stopped() -> Run:
        run = Run(lambda steps, state: None, hold=1)
        with pytest.raises(RuntimeError, match="timed out"):
            _started(run).run(timeout=1.5)
        assert run.started.wait(WAIT)  # then it waits for go
        return run

    run = stopped()
    run.go.set()
    assert run.ended.wait(WAIT) and run.records == list(range(run.steps))  # the stop left it running to its end
    run = stopped()
    monkeypatch.setattr(compat, "session_alive", lambda session: False)  # the tab closed
    run.go.set()
    assert run.ended.wait(WAIT) and len(run.records) < run.steps


def test_the_norms_live_curves_are_drawn_in_the_language_read_when_drawn(monkeypatch) -> None:
    """The worker drew the norms run's curves in the language of Train's click for the whole run."""
    from tx_explorer.views import norms

    drawn = []
    monkeypatch.setattr(norms, "_live_panel", lambda res, records, lang: drawn.append(lang))
    run = norms.LiveRun(None, ["pre_ln"])  # no shipped results needed: only the drawing is asked
    run._keep({})
    run.lang = "zh"  # the page's next run, after a switch
    run._keep({})
    assert drawn == ["en", "zh"]
