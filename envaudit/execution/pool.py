"""A pool of worker processes that survives what env code does to them.

The parent hands out work items, one per idle worker, and watches each busy worker: a worker that
died (a signal, an exit) or that the parent had to kill (a call past its deadline, memory past the
cap) turns its item into a ``Lost`` outcome, and a fresh worker takes the next item. Workers are
recycled after a number of items or once their resident memory passes the recycle limit, so a slow
leak never grows into a crash. Results are yielded as they complete; the caller puts them in order.
Memory is counted from what a worker holds when it starts (it forks from a server that has the
imports done), so the cap is on what the work adds, however heavy the imports.

A work item may ask the scanning process for something while it runs (``calls``: a probe run in a
worker process plays its episodes on the scan's episode pool that way); the parent answers between
its checks of the other workers.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from typing import Any

import cloudpickle

from envaudit.deadline import CallWatch
from envaudit.execution.slots import CALLS, Lost
from envaudit.execution.worker import (
    BASE,
    CALL,
    DEADLINE,
    LANE,
    MARKER_SIZE,
    SEED,
    STARTED,
    STEP,
    rss_bytes,
    serve,
)

GRACE_S = 0.25
"""Slack past a call's deadline before its worker is killed (the message has to cross a pipe)."""
POLL_S = 0.05
"""How often busy workers are checked for overrun calls and memory, when no result arrives sooner."""


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


PRELOAD = ("envaudit.execution.worker", "envaudit.rollout", "envaudit.resolve", "envaudit.policies",
           "envaudit.stats")


class WorkerError(RuntimeError):
    """The work function itself failed inside a worker (a bug, or a run that cannot be loaded there)."""


def describe_exit(code: int | None) -> str:
    """A dead worker's exit code in words (the local pool's and the Ray executor's lost-run message)."""
    if code is None:
        return "the worker process vanished"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (most likely the kernel's OOM killer)" if -code == signal.SIGKILL else ""
        return f"the env's worker process was killed by {name} (signal {-code}){hint}"
    return f"the env's worker process exited with code {code} (os._exit or sys.exit in env code)"


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def _main_not_imported() -> Iterator[None]:
    """Start workers without re-importing the caller's ``__main__`` in them.

    multiprocessing imports the parent's main module in every child it starts; a worker never needs
    it (cloudpickle sends what ``__main__`` defines by value), a script without an
    ``if __name__ == "__main__"`` guard would start a scan in every worker, and a heavy one (pytest)
    costs every fresh worker its import time.
    """
    main = sys.modules.get("__main__")
    with _MAIN_LOCK:
        saved = {k: main.__dict__[k] for k in ("__spec__", "__file__") if main is not None and k in main.__dict__}
        try:
            if main is not None:
                main.__dict__.pop("__file__", None)
                main.__spec__ = None
            yield
        finally:
            if main is not None:
                main.__dict__.update(saved)
                if "__spec__" not in saved:
                    main.__dict__.pop("__spec__", None)


_BUSY = object()  # a message that was not the item's result (a call the parent answered)


class _Worker:
    def __init__(self, ctx: Any, name: str, memory_cap_bytes: int | None, cap_address_space: bool) -> None:
        self.marker = ctx.RawArray("d", MARKER_SIZE)
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=serve, args=(child, self.marker, memory_cap_bytes, cap_address_space),
                                   name=name, daemon=True)
        with _main_not_imported():
            self.process.start()
        child.close()
        self.key: int | None = None  # the run whose objects this worker holds
        self.items = 0
        self.rss = 0
        self.retired = False

    def send(self, msg: Any) -> bool:
        try:
            self.conn.send(msg)
            return True
        except (BrokenPipeError, OSError, EOFError):
            return False

    def kill(self) -> int | None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        try:
            self.conn.close()
        except OSError:
            pass
        return self.process.exitcode

    def stop(self) -> None:
        self.send(None)
        self.retired = True


class ProcessExecutor:
    """Run work items on ``workers`` worker processes, each holding one env instance at a time."""

    kind = "processes"

    def __init__(self, workers: int, *, memory_cap_bytes: int | None = None, recycle_items: int | None = None,
                 recycle_rss_bytes: int | None = None, start_method: str | None = None,
                 preload: Sequence[str] = (), cap_address_space: bool = True) -> None:
        """``cap_address_space``: also cap each worker's address space (a backstop for the RSS
        watch); off for workers that run threaded libraries whose reservations it would trip."""
        assert workers >= 1, f"a process pool needs at least one worker, got {workers}"
        self.cap_address_space = cap_address_space
        self.workers = workers
        self.memory_cap_bytes = memory_cap_bytes
        self.recycle_items = recycle_items
        self.recycle_rss_bytes = recycle_rss_bytes
        self._watch = CallWatch()  # an env call's deadline, less the time its worker waited for a CPU
        method = start_method or ("forkserver" if sys.platform.startswith("linux") else "spawn")
        self._ctx = mp.get_context(method)
        if method == "forkserver":
            # Workers fork from a server that has the heavy imports done once: a fresh worker (after
            # a crash) is ready in milliseconds, not after seconds of importing scipy for a probe's
            # policy class. ``preload`` names the modules the runs' policies come from.
            self._ctx.set_forkserver_preload(list(dict.fromkeys([*PRELOAD, *preload])))
        self._method = method
        self._slots: list[_Worker | None] = [None] * workers
        self._keys = itertools.count(1)
        self._blobs: dict[int, bytes] = {}  # a pinned run's (fn, shared), pickled once
        self._names = itertools.count()
        self.started = 0  # worker processes started so far (tests read it)

    def warm(self) -> None:
        """Start the fork server now, so it imports ``preload`` while the caller goes on with its
        own work; the first worker otherwise waits for those imports (seconds, with torch)."""
        if self._method == "forkserver":
            from multiprocessing import forkserver

            with _main_not_imported():
                forkserver.ensure_running()

    def retire(self) -> None:
        """Replace every worker before its next item (one whose process state may have changed)."""
        for w in self._slots:
            if w is not None:
                w.stop()

    def _worker(self, k: int) -> _Worker:
        w = self._slots[k]
        if w is None or w.retired or not w.process.is_alive():
            if w is not None:
                if w.retired:
                    w.process.join(2.0)  # let it close its env on the way out
                w.kill()
            w = _Worker(self._ctx, f"envaudit-worker-{next(self._names)}", self.memory_cap_bytes,
                        self.cap_address_space)
            self._slots[k] = w
            self.started += 1
        return w

    def _lost(self, w: _Worker, k: int, kind: str, detail: str) -> Lost:
        code = int(w.marker[CALL])
        step, seed, lane = int(w.marker[STEP]), int(w.marker[SEED]), int(w.marker[LANE])
        lost = Lost(kind, CALLS.get(code, ""), step if step >= 0 and code == 3 else None, detail,
                    seed if seed >= 0 and code else None, lane if lane >= 0 else None)
        w.kill()
        self._slots[k] = None
        return lost

    def pin(self, fn: Callable[[Any, Any, Any], Any], shared: Any) -> int:
        """A run whose workers keep their slot's state from one ``map(..., key=)`` to the next
        (lockstep lanes, ``execution.lanes``); ``unpin(key)`` ends it. Workers are not recycled
        while a pinned run is open (their state would go with them)."""
        key = next(self._keys)
        self._blobs[key] = cloudpickle.dumps((fn, shared))
        return key

    def unpin(self, key: int) -> None:
        self._blobs.pop(key, None)
        for w in self._slots:
            if w is not None and w.key == key:
                w.send(("end",))
                w.key = None

    def map(self, fn: Callable[[Any, Any, Any], Any], shared: Any, items: Sequence[Any],
            keep_going: Callable[[int], bool] = lambda _i: True,
            calls: Callable[[Any], Any] | None = None, *, key: int | None = None,
            affinity: Sequence[int] | None = None) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(slot, shared, item))`` or ``(index, Lost)`` as items complete.

        ``keep_going(i)`` is asked before item ``i`` is handed out; items are handed out in order.
        ``calls(request)`` answers an item's ``slot.ask(request)``. ``key``: a pinned run
        (``pin``; ``fn`` and ``shared`` are then ignored), whose workers keep their state after
        this map; ``affinity[i]``: the worker that must run item ``i``.
        Raises ``TypeError`` when ``(fn, shared)`` cannot be pickled for the workers.
        """
        pinned = key is not None
        if pinned:
            blob = self._blobs[key]
        else:
            blob = cloudpickle.dumps((fn, shared))
            key = next(self._keys)
        todo = list(range(len(items)))[::-1]  # a stack: pop() gives the lowest index
        busy: dict[int, int] = {}  # slot -> item index
        last_memory_check = 0.0
        try:
            while True:
                for k in range(self.workers):
                    if k in busy or not todo:
                        continue
                    if affinity is not None:
                        mine = [j for j in todo if affinity[j] == k]
                        if not mine:
                            continue
                        i = mine[-1]
                        todo.remove(i)
                    elif not keep_going(todo[-1]):
                        continue
                    else:
                        i = todo.pop()
                    w = self._worker(k)
                    if not w.send(("run", key, blob if w.key != key else None, i, items[i])):
                        w = self._worker(k)  # it died between items: a fresh one takes the item
                        w.send(("run", key, blob, i, items[i]))
                    w.key = key
                    busy[k] = i
                if not busy:
                    return
                by_conn = {self._slots[k].conn: k for k in busy}
                sentinels = {self._slots[k].process.sentinel: k for k in busy}
                ready = wait([*by_conn, *sentinels], timeout=POLL_S)
                now = time.monotonic()
                check_memory = self.memory_cap_bytes is not None and now - last_memory_check >= POLL_S
                if check_memory:
                    last_memory_check = now
                done: list[tuple[int, Any]] = []
                for k, i in list(busy.items()):
                    w = self._slots[k]
                    outcome: Any = None
                    if w.conn in ready or w.process.sentinel in ready:
                        outcome = self._receive(w, k, calls)
                        if outcome is _BUSY:
                            continue
                    elif w.marker[CALL] and self._watch.over((k, w.process.pid), w.process.pid, w.marker[STARTED],
                                                             w.marker[DEADLINE], GRACE_S, now):
                        what = CALLS.get(int(w.marker[CALL]), "a call")
                        what = "making the env" if what == "make" else f"{what}()"
                        outcome = self._lost(w, k, "hang", f"{what} did not return within {w.marker[DEADLINE]:g} s")
                    elif check_memory:
                        rss = rss_bytes(w.process.pid)
                        if rss is not None and rss - w.marker[BASE] > self.memory_cap_bytes:
                            outcome = self._lost(w, k, "memory", f"the env's worker process grew by "
                                                 f"{(rss - w.marker[BASE]) / 2**20:.0f} MiB, past the memory cap "
                                                 f"of {self.memory_cap_bytes / 2**20:.0f} MiB")
                    if outcome is None:
                        continue
                    del busy[k]
                    if isinstance(outcome, Lost) and outcome.call == "close":
                        todo.append(i)  # the previous run's env failed to close: not this item's doing
                        continue
                    done.append((i, outcome))
                yield from sorted(done, key=lambda pair: pair[0])
        finally:
            for k in busy:  # results nobody will read: their workers are replaced
                self._slots[k].kill()
                self._slots[k] = None
            if not pinned:
                for w in self._slots:
                    if w is not None and w.key == key:
                        w.send(("end",))
                        w.key = None

    def _receive(self, w: _Worker, k: int, calls: Callable[[Any], Any] | None = None) -> Any:
        try:
            msg = w.conn.recv()
        except (EOFError, OSError):
            w.process.join(5)
            return self._lost(w, k, "crash", describe_exit(w.process.exitcode))
        status, _index, payload, extra = msg
        if status == "call":
            try:
                if calls is None:
                    raise RuntimeError("this run answers no calls from its work items")
                answer = (True, calls(payload))
            except Exception as exc:  # the item decides what a failed call means
                answer = (False, f"{type(exc).__name__}: {exc}")
            w.send(answer)  # a worker that died meanwhile is seen at the next wait
            return _BUSY
        if status == "load-error":
            raise WorkerError(f"a worker process could not load this run's env factory and policy: {payload}; "
                              "make the factory importable (a module-level function), scan a spec string, "
                              "or use the threads executor")
        if status == "error":
            raise WorkerError(f"{payload}\n--- in the worker process ---\n{extra}")
        w.items += 1
        w.rss = max(0, (extra or 0) - int(w.marker[BASE]))
        if not self._blobs and ((self.recycle_items and w.items >= self.recycle_items) or (
                self.recycle_rss_bytes and w.rss > self.recycle_rss_bytes)):
            w.stop()  # replaced before its next item; its env is closed on the way out
        return payload

    def close(self) -> None:
        for w in self._slots:
            if w is not None:
                w.send(None)
        deadline = time.monotonic() + 2.0
        for w in self._slots:
            if w is not None:
                w.process.join(max(0.0, deadline - time.monotonic()))
                w.kill()
        self._slots = [None] * self.workers
