"""Run a callable with a real deadline, without ever blocking the caller past it.

A call that overruns is abandoned on its daemon thread (Python cannot kill a thread); the worker
is replaced, so the next call starts promptly, and an abandoned call never keeps the interpreter
from exiting. Used for tool calls inside ``ToolEnv`` and for guarding ``reset``/``step`` of
environments under scan.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any


class DeadlineExceeded(Exception):
    """The call did not return within its deadline; it may still be running, abandoned."""

    def __init__(self, deadline_s: float, what: str = "call") -> None:
        super().__init__(f"{what} did not return within {deadline_s:g} s")
        self.deadline_s = deadline_s


class _Job:
    __slots__ = ("fn", "done", "value", "error")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            job.value = job.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who decides
            job.error = exc
        job.done.set()


class DeadlineWorker:
    """One daemon thread that runs calls one at a time, each with its own deadline."""

    def __init__(self, name: str = "envaudit-deadline") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue | None = None

    def _start(self) -> queue.SimpleQueue:
        jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(jobs,), name=self._name, daemon=True).start()
        # A worker dropped without close() (a runner that went out of scope) ends its thread too;
        # the thread holds only the queue, so the worker can be collected.
        weakref.finalize(self, jobs.put, None)
        self._jobs = jobs
        return jobs

    def call(self, fn: Callable[[], Any], deadline_s: float | None, what: str = "call") -> Any:
        """Return ``fn()``, re-raise what it raised, or raise ``DeadlineExceeded``.

        ``deadline_s=None`` runs ``fn`` inline on the caller's thread.
        """
        if deadline_s is None:
            return fn()
        jobs = self._jobs or self._start()
        job = _Job(fn)
        jobs.put(job)
        if not job.done.wait(deadline_s):
            # Abandon the stuck thread: it exits after the call if it ever returns.
            jobs.put(None)
            self._jobs = None
            raise DeadlineExceeded(deadline_s, what)
        if job.error is not None:
            raise job.error
        return job.value

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None
