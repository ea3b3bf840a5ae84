"""A small bounded pool for the long jobs (MiniLM at 512 tokens, the cost page's measurements, live training,
all-head ablation): a class's sessions queue for a few workers instead of piling threads onto the cores.

A job is ``fn(report)``: it calls ``report(fraction, text)`` now and then, which is both its progress and the
point where a cancelled job stops (``report`` raises :class:`Cancelled`). No Streamlit here: ``ui.run_job`` shows
a job's place in the queue and its progress, and cancels it when the visitor leaves.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

Report = Callable[[float, str], None]  # report(fraction done in [0, 1], what is being done)
ENV_WORKERS = "TX_EXPLORER_JOB_WORKERS"


class Cancelled(Exception):
    """Raised by a cancelled job's ``report`` (it unwinds the job) and by ``result()`` of a cancelled handle."""


@dataclass(eq=False)  # identity: two tasks with equal fields are still two jobs
class _Task:
    """The work behind one or more :class:`Job` handles (identical requests, same ``key``, share one task)."""

    fn: Callable[[Report], Any]
    key: Hashable | None
    tag: Hashable = None  # what its report texts are written for (the page's language): a joiner may need others
    holders: int = 1  # handles not cancelled: the work is cancelled only when the last one lets go
    fraction: float = 0.0  # the last report
    text: str = ""
    started: bool = False
    cancelled: bool = False  # read without the lock by report(): a bool flip is atomic
    value: Any = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)

    def report(self, fraction: float, text: str = "") -> None:
        if self.cancelled:  # cooperative: a running job stops at its next report, never mid-kernel
            raise Cancelled
        self.fraction, self.text = min(max(float(fraction), 0.0), 1.0), text


@dataclass(eq=False)
class Job:
    """One caller's handle on a submitted job."""

    _task: _Task
    _pool: Pool
    _let_go: bool = False  # this handle was cancelled

    def ahead(self) -> int:
        """How many jobs are running or queued before this one (0 once it runs)."""
        return self._pool._ahead(self._task)

    @property
    def started(self) -> bool:
        return self._task.started

    @property
    def progress(self) -> tuple[float, str]:
        """The fraction and text the job last reported."""
        return self._task.fraction, self._task.text

    @property
    def tag(self) -> Hashable:
        """The tag of the request that started the job (an identical later request joins it, tag and all)."""
        return self._task.tag

    @property
    def done(self) -> bool:
        return self._task.finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is done or ``timeout`` seconds passed; whether it is done."""
        return self._task.finished.wait(timeout)

    def result(self, timeout: float | None = None) -> Any:
        """The job's return value; its exception re-raised; :class:`Cancelled` if this handle was cancelled."""
        if self._let_go:
            raise Cancelled
        if not self._task.finished.wait(timeout):
            raise TimeoutError("the job is not done")
        if self._task.error is not None:
            raise self._task.error
        return self._task.value

    def cancel(self) -> None:
        """Let go of the job (a no-op once done): queued, it is dropped; running, it stops at its next report."""
        self._pool._let_go(self)


class Pool:
    """``workers`` threads taking jobs in FIFO order. Threads suffice: torch releases the GIL in its kernels."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a job pool needs at least 1 worker, not {workers}")
        self.workers = workers
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # a worker waits here for a job
        self._queue: collections.deque[_Task] = collections.deque()
        self._running: list[_Task] = []
        self._shared: dict[Hashable, _Task] = {}  # keyed tasks not done: an identical request joins them
        for i in range(workers):  # daemons: a server stopping does not wait for a half-done job
            threading.Thread(target=self._work, name=f"tx-job-{i}", daemon=True).start()

    def submit(self, fn: Callable[[Report], Any], *, key: Hashable | None = None, tag: Hashable = None) -> Job:
        """Queue ``fn(report)``; with ``key``, join a queued or running job of the same key instead. ``tag``: what
        its reports' texts are written for (:attr:`Job.tag`)."""
        with self._lock:
            task = self._shared.get(key) if key is not None else None
            if task is not None:
                task.holders += 1
            else:
                task = _Task(fn, key, tag)
                self._queue.append(task)
                if key is not None:
                    self._shared[key] = task
                self._wake.notify()
            return Job(task, self)

    def _ahead(self, task: _Task) -> int:
        with self._lock:
            return len(self._running) + self._queue.index(task) if task in self._queue else 0

    def _let_go(self, job: Job) -> None:
        with self._lock:
            task = job._task
            if job._let_go or task.finished.is_set():
                return
            job._let_go, task.holders = True, task.holders - 1
            if task.holders:  # another session still waits for the same result
                return
            task.cancelled = True
            self._forget(task)  # a later identical request starts afresh
            if task in self._queue:  # never ran, never will
                self._queue.remove(task)
                task.error = Cancelled()
                task.finished.set()

    def _forget(self, task: _Task) -> None:
        if task.key is not None and self._shared.get(task.key) is task:
            del self._shared[task.key]

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self._queue:
                    self._wake.wait()
                task = self._queue.popleft()
                task.started = True
                self._running.append(task)
            try:
                task.value = task.fn(task.report)
            except BaseException as exc:  # any error belongs to the job's caller, re-raised by result()
                task.error = exc
            with self._lock:
                self._running.remove(task)
                self._forget(task)
            task.finished.set()


def cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def sizes(env: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """(workers, torch threads): ``$TX_EXPLORER_JOB_WORKERS`` or half the cores, at least 1, and as many threads
    as leave workers × threads ≤ half the cores (never more than torch was already given, e.g. by OMP_NUM_THREADS).

    Half the cores: the other half serves every session's light work (small models, tokenising, figures), which
    runs in the same process and so with the same thread count. On 2 cores that is 1 thread: a 19-step tiny-llama
    decode took 210 ms with 1 thread and 1.9 s with 2 (medians) while other work held the cores, because a kernel
    split over 2 threads waits for the slower one."""
    n, typed = cores(), env.get(ENV_WORKERS, "").strip()
    if typed and not (typed.isdigit() and int(typed) >= 1):
        raise ValueError(f"{ENV_WORKERS} must be a positive integer, not {typed!r}")
    workers = int(typed) if typed else max(1, n // 2)
    return workers, max(1, min(torch.get_num_threads(), (n // 2) // workers))


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """The process-wide pool, made on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers, threads = sizes()
            # torch.set_num_threads is process-global (every thread's kernels share it), so it is set once, here,
            # not per job. With more threads than cores, OpenMP threads spin-wait for cores that other jobs hold:
            # every job gets slower, not faster.
            torch.set_num_threads(threads)
            _pool = Pool(workers)
        return _pool


def submit(fn: Callable[[Report], Any], *, key: Hashable | None = None, tag: Hashable = None) -> Job:
    """:meth:`Pool.submit` on the process-wide pool."""
    return pool().submit(fn, key=key, tag=tag)
