"""Run a callable with a real deadline, without ever blocking the caller past it.

A call that overruns is abandoned on its daemon thread (Python cannot kill a thread); the worker
is replaced, so the next call starts promptly, and an abandoned call never keeps the interpreter
from exiting. Used for tool calls inside ``ToolEnv`` and for guarding ``reset``/``step`` of
environments under scan.

A deadline measures the time the call had, not the time the machine took to give it: where Linux
reports per-thread scheduler statistics (``/proc/<pid>/task/<tid>/schedstat``), the time the
call's thread sat runnable but waiting for a CPU (and the time before it was first scheduled)
is not counted, nor that of the nested calls it is waiting on (a tool call inside a step). A call
that hangs (blocks, sleeps, waits on I/O) is abandoned after its deadline as before, idle or
loaded; a call that merely ran slowly because other processes held both cores is not a hang. So
whether a step "hung" does not depend on machine load (issue 10: same seed, same report, idle or
under load). A call is abandoned after ``MAX_STRETCH`` times its deadline of wall time whatever
the statistics say, so a starved machine still ends every call.

``watch`` runs a whole work item (an episode: making the env, reset, the policy and every step)
on the worker thread in one handoff; the item's env calls, each inside ``marked``, are held to
their own deadlines from the caller's thread exactly as ``call`` holds one call. A handoff costs
two context switches (about 100 microseconds here), more than a simulated env's whole step: one
per episode instead of one per env call makes a scan's episodes several times cheaper.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any


class DeadlineExceeded(Exception):
    """The call did not return within its deadline; it may still be running, abandoned."""

    def __init__(self, deadline_s: float, what: str = "call", call: str | None = None,
                 step: int | None = None) -> None:
        super().__init__(f"{what} did not return within {deadline_s:g} s")
        self.deadline_s = deadline_s
        self.call, self.step = call, step  # which call of a watched item (``marked``) overran


MAX_STRETCH = 10.0
"""Wall time, in deadlines, after which a call is abandoned however long it waited for a CPU."""

MAIN_THREAD_SLICE_S = 0.25
"""The longest the main thread sleeps at once while it waits on a call. A signal the kernel hands
to another thread (Ctrl-C, or a ``kill`` sent from inside a probe) sets Python's flag, but its
handler, the ``KeyboardInterrupt``, only runs when the main thread next runs bytecode: a wait of
a whole probe's deadline would sit on it that long."""


def _slice(timeout: float | None) -> float | None:
    if threading.current_thread() is threading.main_thread():
        return MAIN_THREAD_SLICE_S if timeout is None else min(timeout, MAIN_THREAD_SLICE_S)
    return timeout


def _read_delay_s(fd: int) -> float | None:
    """Seconds a thread has spent runnable but not running, from its open ``schedstat``."""
    try:
        return int(os.pread(fd, 128, 0).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _delay_at(task: str) -> float | None:
    """Seconds the thread at ``task`` (a ``/proc/<pid>/task/<tid>`` folder) has waited for a CPU;
    None where not reported or the thread has ended."""
    try:
        fd = os.open(f"{task}/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read_delay_s(fd)
    finally:
        os.close(fd)


def _run_delay_s(tid: int) -> float | None:
    """Seconds thread ``tid`` of this process has waited for a CPU; None where not reported."""
    return _delay_at(f"/proc/self/task/{tid}")


_local = threading.local()  # the job a deadline thread is running, so nested calls can report to it


def guarded() -> bool:
    """Whether this thread is running a call under a ``DeadlineWorker`` deadline (an env step a
    runner guards): a hang of anything it calls already ends at that deadline."""
    return getattr(_local, "job", None) is not None


class _Job:
    __slots__ = ("fn", "done", "value", "error", "submitted", "started", "tid", "delay0", "nested_s", "child",
                 "owner", "mark", "abandoned")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.tid: int | None = None
        self.delay0: float | None = None
        self.nested_s = 0.0  # waiting for a CPU in nested calls that have returned
        self.child: _Job | None = None  # the nested call running now
        self.owner: DeadlineWorker | None = None  # set for a watched item: the worker watching it
        self.mark: _Mark | None = None  # the marked call a watched item is in now
        self.abandoned = False  # its caller gave up on it: the item stops at its next marked call

    def waited_s(self) -> float:
        """Seconds of this call's wall time spent waiting for a CPU, by its thread and by the
        nested calls it waited on; 0 where the platform does not report it."""
        if self.started is None:  # not yet picked up: the thread has not been scheduled since
            return time.monotonic() - self.submitted if _SCHEDSTAT else 0.0
        now = _run_delay_s(self.tid) if self.delay0 is not None else None
        if now is None:
            return 0.0
        child = self.child
        return (self.started - self.submitted) + (now - self.delay0) + self.nested_s + (
            child.waited_s() if child is not None else 0.0)


class _Mark:
    """One env call of a watched item: its deadline, and where its clock started."""

    __slots__ = ("deadline_s", "what", "call", "step", "started", "delay0", "nested0")

    def __init__(self, job: _Job, deadline_s: float | None, what: str, call: str | None, step: int | None) -> None:
        self.deadline_s, self.what, self.call, self.step = deadline_s, what, call, step
        fd = getattr(_local, "fd", None)
        self.delay0 = _read_delay_s(fd) if fd is not None else None
        self.nested0 = job.nested_s
        self.started = time.monotonic()

    def remaining_s(self, job: _Job) -> float:
        """Seconds of its deadline left, not counting time its thread (and the nested calls it
        waited on) spent waiting for a CPU; at most ``MAX_STRETCH`` deadlines of wall time."""
        elapsed = time.monotonic() - self.started
        waited = job.nested_s - self.nested0 + (job.child.waited_s() if job.child is not None else 0.0)
        if self.delay0 is not None:
            now = _run_delay_s(job.tid)
            waited += (now - self.delay0) if now is not None else 0.0
        return min(self.deadline_s - (elapsed - waited), MAX_STRETCH * self.deadline_s - elapsed)


class _Abandoned(BaseException):
    """Raised on an abandoned item's thread at its next marked call, so it stops there (a
    ``BaseException``: the item's own ``except Exception`` handlers must not swallow it)."""


def _serve(jobs: queue.SimpleQueue) -> None:
    tid = threading.get_native_id()
    try:
        fd = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
    except OSError:
        fd = None
    try:
        while True:
            job = jobs.get()
            if job is None:
                return
            job.tid, job.delay0 = tid, _read_delay_s(fd) if fd is not None else None
            job.started = time.monotonic()
            _local.job, _local.fd = job, fd
            try:
                job.value = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who decides
                job.error = exc
            _local.job = None
            job.done.set()
    finally:
        if fd is not None:
            os.close(fd)


_SCHEDSTAT = _run_delay_s(threading.get_native_id()) is not None


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
        parent = getattr(_local, "job", None)  # a call made from inside another deadline call
        if parent is not None:
            parent.child = job
        jobs.put(job)
        try:
            returned = _wait(job, deadline_s)
        finally:
            if parent is not None:
                parent.child = None
                parent.nested_s += job.waited_s()
        if not returned:
            # Abandon the stuck thread: it exits after the call if it ever returns.
            jobs.put(None)
            self._jobs = None
            raise DeadlineExceeded(deadline_s, what)
        if job.error is not None:
            raise job.error
        return job.value

    def watching(self) -> bool:
        """True on this worker's thread while it runs an item given to ``watch``."""
        job = getattr(_local, "job", None)
        return job is not None and job.owner is self

    @contextlib.contextmanager
    def marked(self, deadline_s: float | None, what: str, call: str | None = None, step: int | None = None):
        """Inside a watched item: the call in this block must return within ``deadline_s`` (None:
        no deadline); past it, ``watch`` abandons the item and raises ``DeadlineExceeded`` with
        ``call`` and ``step``. An item abandoned meanwhile stops when the block ends."""
        job = _local.job
        job.mark = _Mark(job, deadline_s, what, call, step)
        try:
            yield
        finally:
            job.mark = None
            if job.abandoned:
                raise _Abandoned()

    def watch(self, fn: Callable[[], Any], poll_s: float | None) -> Any:
        """Return ``fn()`` run on this worker's thread, re-raise what it raised, or raise
        ``DeadlineExceeded`` (with ``call`` and ``step``) when a ``marked`` call in it overran.

        ``poll_s``: how often to look for a new marked call while none is running; at most the
        shortest deadline of the calls, so an overrun is seen when its deadline passes.
        """
        jobs = self._jobs or self._start()
        job = _Job(fn)
        job.owner = self
        jobs.put(job)
        try:
            while not job.done.is_set():
                mark = job.mark
                if mark is None or mark.deadline_s is None:
                    job.done.wait(_slice(poll_s))
                    continue
                remaining = mark.remaining_s(job)
                if remaining > 0:
                    job.done.wait(_slice(max(remaining, 0.001)))  # waiting stays a wait, never a spin
                elif job.mark is mark and not job.done.is_set():
                    job.abandoned = True
                    jobs.put(None)  # the stuck thread exits if its call ever returns
                    self._jobs = None
                    raise DeadlineExceeded(mark.deadline_s, mark.what, mark.call, mark.step)
        except BaseException:
            job.abandoned = True  # interrupted (or overran): the item stops at its next call
            raise
        if job.error is not None:
            raise job.error
        return job.value

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None


def _wait(job: _Job, deadline_s: float) -> bool:
    """Whether ``job`` returned before it had ``deadline_s`` of time not spent waiting for a CPU
    (and before ``MAX_STRETCH`` deadlines of wall time)."""
    remaining = deadline_s
    while not job.done.wait(_slice(remaining)):
        elapsed = time.monotonic() - job.submitted
        cap = MAX_STRETCH * deadline_s - elapsed
        remaining = min(deadline_s - (elapsed - job.waited_s()), cap)
        if remaining <= 0:
            return job.done.is_set()
        remaining = max(remaining, 0.001)  # waiting stays a wait, never a spin
    return True


def process_run_delay_s(pid: int | None = None) -> float | None:
    """Seconds the threads of process ``pid`` (this one by default) have waited for a CPU, summed;
    None where the platform does not report it."""
    base = f"/proc/{pid or 'self'}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    delays = [d for d in (_delay_at(f"{base}/{tid}") for tid in tids) if d is not None]  # ended: None
    return sum(delays) if delays else None


class CallWatch:
    """The backstop of a call watched from outside its thread (a worker process's env call, seen
    by the pool or an actor's watchdog): the call is over its deadline when its wall time, less the
    time its process's threads waited for a CPU since the call was first seen, passes
    ``deadline + grace`` (and whatever the statistics say after ``MAX_STRETCH`` deadlines). So a
    worker starved by a loaded machine is not killed as hung, as ``DeadlineWorker`` does inside it."""

    def __init__(self) -> None:
        self._seen: dict[object, tuple[float, float | None]] = {}

    def over(self, key: object, pid: int | None, started: float, deadline: float, grace: float, now: float) -> bool:
        first = self._seen.get(key)
        if first is None or first[0] != started:  # a new call: note its process's waiting so far
            first = self._seen[key] = (started, process_run_delay_s(pid))
        if now <= started + deadline + grace:
            return False
        if now > started + MAX_STRETCH * deadline + grace or first[1] is None:
            return True
        waited = (process_run_delay_s(pid) or first[1]) - first[1]
        return now - waited > started + deadline + grace
