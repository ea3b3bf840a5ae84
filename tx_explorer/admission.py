"""First visits drawn in order of arrival: when a whole class opens the app at once, a few first runs
go at a time and every visitor waiting is told their place, instead of 30 runs sharing two cores so that nobody's
page appears for a minute.

No Streamlit here: :func:`tx_explorer.ui.first_visit` holds a :class:`Ticket` around a session's first page run
and shows "busy, you are n-th" while it waits.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

ENV_SLOTS = "TX_EXPLORER_FIRST_VISITS"  # how many first runs go at once (default: one per core)


@dataclass(eq=False)  # identity: two visitors are two tickets
class Ticket:
    """One first run's place in a :class:`Gate`."""

    _gate: Gate

    def ahead(self) -> int:
        """How many visitors must be let in before this one (0: it may run)."""
        return self._gate._ahead(self)

    def wait(self, timeout: float) -> bool:
        """Block until this ticket may run or ``timeout`` seconds passed; whether it may run."""
        with self._gate._changed:
            return self._gate._changed.wait_for(lambda: self._gate._ahead(self) == 0, timeout)

    def leave(self) -> None:
        """Give the place up (run done, interrupted or abandoned); the next visitor in line may go. Idempotent."""
        self._gate._leave(self)


class Gate:
    """A first-come, first-served line in which the first ``slots`` tickets run."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a gate needs at least one slot, got {slots}")
        self.slots = slots
        self._line: list[Ticket] = []  # in order of arrival: the first `slots` run, the rest wait
        self._changed = threading.Condition()

    def enter(self) -> Ticket:
        ticket = Ticket(self)
        with self._changed:
            self._line.append(ticket)
        return ticket

    def waiting(self) -> int:
        """How many tickets are waiting (not running)."""
        with self._changed:
            return max(0, len(self._line) - self.slots)

    def _ahead(self, ticket: Ticket) -> int:
        with self._changed:
            if ticket not in self._line:
                return 0  # left already: nothing to wait for
            return max(0, self._line.index(ticket) - self.slots + 1)

    def _leave(self, ticket: Ticket) -> None:
        with self._changed:
            if ticket in self._line:
                self._line.remove(ticket)
                self._changed.notify_all()


def slots_from_env(environ: dict[str, str] | os._Environ = os.environ) -> int:
    """``TX_EXPLORER_FIRST_VISITS`` if set, else one first run per core: more only share the same cores (and the
    interpreter), so each visitor's page would take longer and the last one's no sooner."""
    value = environ.get(ENV_SLOTS, "").strip()
    return max(1, int(value)) if value else max(1, os.cpu_count() or 1)


_gate: Gate | None = None
_gate_lock = threading.Lock()


def gate() -> Gate:
    """The process-wide gate every session's first run goes through."""
    global _gate
    with _gate_lock:
        if _gate is None:
            _gate = Gate(slots_from_env())
        return _gate
