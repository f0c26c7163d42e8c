"""Executors inside the scanning process: the caller's own thread, or a pool of threads.

``InlineExecutor`` is the sequential path: one slot, the caller's objects (a policy or wrapper that
reports back through shared state keeps working), items in order. ``ThreadExecutor`` steps several
env instances at once for I/O-bound envs (a tool call that waits on HTTP or a subprocess releases
the GIL); each thread has its own slot, env and copy of the policy. Neither isolates: env code
that kills the process kills the scan. A ``ThreadExecutor``'s workers bound the env calls in flight
over everything playing on it at once (``execution.places``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from envaudit.execution.places import Places
from envaudit.execution.slots import Slot


class InlineExecutor:
    """Run items one after another on the caller's thread, on one env instance."""

    kind = "inline"
    workers = 1

    def map(self, fn: Callable[[Slot, Any, Any], Any], shared: Any, items: Sequence[Any],
            keep_going: Callable[[int], bool] = lambda _i: True) -> Iterator[tuple[int, Any]]:
        slot = Slot("envaudit-env", shares_objects=False)
        try:
            for i, item in enumerate(items):
                if not keep_going(i):
                    return
                yield i, fn(slot, shared, item)
        finally:
            slot.end()

    def close(self) -> None:
        pass


_DONE = object()


class ThreadExecutor:
    """Run items on ``workers`` threads, each with its own env instance."""

    kind = "threads"

    def __init__(self, workers: int) -> None:
        assert workers >= 1, f"a thread pool needs at least one worker, got {workers}"
        self.workers = workers
        self.places = Places(workers)
        """At most ``workers`` env calls in flight over every run and lane set playing on this
        executor at once (``execution.places``)."""

    def map(self, fn: Callable[[Slot, Any, Any], Any], shared: Any, items: Sequence[Any],
            keep_going: Callable[[int], bool] = lambda _i: True) -> Iterator[tuple[int, Any]]:
        n = len(items)
        lock = threading.Lock()
        cursor = [0]
        closed = threading.Event()
        results: queue.SimpleQueue = queue.SimpleQueue()

        def take() -> int | None:
            with lock:  # items go out in index order, so keep_going sees them in order
                i = cursor[0]
                if closed.is_set() or i >= n or not keep_going(i):
                    return None
                cursor[0] = i + 1
                return i

        def serve(slot: Slot) -> None:
            try:
                while (i := take()) is not None:
                    try:
                        results.put((i, fn(slot, shared, items[i]), None))
                    except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                        results.put((i, None, exc))
                        return
            finally:
                slot.end()
                results.put(_DONE)

        slots = [Slot(f"envaudit-env-{k}", places=self.places) for k in range(min(self.workers, n))]
        threads = [threading.Thread(target=serve, args=(s,), name=f"envaudit-rollout-{k}", daemon=True)
                   for k, s in enumerate(slots)]
        for t in threads:
            t.start()
        running = len(threads)
        try:
            while running:
                msg = results.get()
                if msg is _DONE:
                    running -= 1
                    continue
                i, value, error = msg
                if error is not None:
                    raise error
                yield i, value
        finally:
            closed.set()
            for t in threads:
                t.join()

    def close(self) -> None:
        pass
