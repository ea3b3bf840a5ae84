"""First visits in order of arrival: the gate's line, and a page's first run that waits its turn shows
its place and is drawn once a place frees."""

from __future__ import annotations

import threading

import pytest

from tx_explorer import admission


def test_the_first_slots_run_and_the_rest_wait_in_order_of_arrival():
    gate = admission.Gate(2)
    a, b, c, d = (gate.enter() for _ in range(4))
    assert [t.ahead() for t in (a, b, c, d)] == [0, 0, 1, 2]
    assert a.wait(0) and b.wait(0) and not c.wait(0) and not d.wait(0)
    assert gate.waiting() == 2
    b.leave()  # a run done: the next in line goes, the others move up
    assert [t.ahead() for t in (a, c, d)] == [0, 0, 1]
    assert c.wait(0) and not d.wait(0)
    d.leave()  # an abandoned wait frees its place too
    d.leave()  # idempotent
    assert d.ahead() == 0 and gate.waiting() == 0


def test_a_waiting_visitor_is_let_in_when_a_place_frees():
    gate = admission.Gate(1)
    first, second = gate.enter(), gate.enter()
    let_in = threading.Event()
    waiter = threading.Thread(target=lambda: second.wait(60) and let_in.set())
    waiter.start()
    assert not let_in.is_set()
    first.leave()
    waiter.join(60)
    assert let_in.is_set()


def test_slots_one_per_core_unless_set(monkeypatch):
    monkeypatch.setattr(admission.os, "cpu_count", lambda: 2)
    assert admission.slots_from_env({}) == 2
    assert admission.slots_from_env({admission.ENV_SLOTS: "5"}) == 5
    assert admission.slots_from_env({admission.ENV_SLOTS: "0"}) == 1
    with pytest.raises(ValueError):
        admission.Gate(0)


def test_a_first_run_waiting_its_turn_shows_its_place_then_draws_the_page(monkeypatch):
    """The first run while another visitor's holds the only slot: "busy, you are n-th" is drawn (its text asked of
    common.json with n = 1, redrawn while it waits), then, once the place frees, the app and the page are drawn
    and the place is given up; the next run goes straight through."""
    from tests.conftest import open_page
    from tx_explorer.ui import visits

    gate = admission.Gate(1)
    monkeypatch.setattr(admission, "_gate", gate)
    asked = []
    real = visits.texts
    monkeypatch.setattr(
        visits, "texts", lambda page: lambda key, **kw: asked.append((key, kw)) or real(page)(key, **kw)
    )
    other = gate.enter()  # another visitor's first run holds the only slot …
    threading.Timer(2.0, other.leave).start()  # … and ends while this one waits
    at = open_page("masks")
    assert not at.exception
    assert asked and set(map(str, asked)) == {str(("busy_first_visit", {"n": 1}))}
    assert at.get("text_input"), "the page was drawn after its wait"
    assert gate.waiting() == 0 and not gate._line, "the place was given up"
    asked.clear()
    gate.enter()  # a new visitor holds the slot now: this session's later runs do not queue again
    at.run()
    assert not at.exception and not asked
