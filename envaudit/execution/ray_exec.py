"""``--executor ray``: one scan's episodes on Ray actors, each holding an env instance.

The executor owns ``workers`` actors (``envaudit.execution.ray_actor.EnvActor``, one CPU each) and
hands each idle one the next batch of work items, in index order; an actor plays its batch on its
env and returns the results, which the caller puts back in index order, so a report does not
depend on the executor, the batch size or which actor played what. Placement, start-up and the
object transfer are Ray's: nothing here but handing batches to actors and reading results back.

An actor that dies (a segfault or ``os._exit`` in env code, its watchdog's kill past the call
deadline or the memory cap, its node lost) turns the item it was playing into a ``Lost`` outcome,
as a dead worker process does in the process executor, and a fresh actor takes its place. Which
item, which call and which signal are read from the files the actor keeps on its node, so an actor
on another node (only with ``--ray-address``) gets batches of one item: its death then names the
item without them, and Ray's own words stand for the rest.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import struct
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import cloudpickle

from envaudit.errors import UsageError
from envaudit.execution.pool import WorkerError, default_workers, describe_exit
from envaudit.execution.ray_actor import CELLS, GRACE_S, KILLED, KIND, POS, VALUE, EnvActor
from envaudit.execution.slots import CALLS, Lost
from envaudit.execution.worker import CALL, DEADLINE, STARTED, STEP

RAY_OBJECT_STORE = 256 * 2**20
"""Object store of a local Ray instance: it carries run blobs and episode rows, a few MB at most."""
MAX_BATCH = 16
"""Most items in one actor call. Batches amortise Ray's per-call cost (about a millisecond) over
short episodes; a crash costs the replay of the batch's other items (they are deterministic)."""
POLL_S = 0.25
"""How often the driver looks at its local actors' calls while none returns (the backstop below)."""
BACKSTOP_S = 1.0 + 4 * GRACE_S
"""Past a call's deadline plus this, the driver kills a local actor whose own watchdog did not:
env code that holds the GIL starves the watchdog thread, not the driver."""
SIGNALS = {"Segmentation fault": "SIGSEGV", "Floating-point exception": "SIGFPE", "Aborted": "SIGABRT",
           "Bus error": "SIGBUS", "Illegal instruction": "SIGILL"}
"""How ``faulthandler`` names the fatal signals it reports."""


def ray_module() -> Any:
    from envaudit.adapters import require

    return require("ray", package="ray", extra="ray")


def start_ray(address: str | None, num_cpus: int) -> bool:
    """Connect to Ray: the running instance if this process already joined one, the cluster at
    ``address``, or a new local instance of ``num_cpus`` CPUs. True when this call started it."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR,
                               "log_to_driver": False}
    if address is None:
        options.update(num_cpus=num_cpus, object_store_memory=RAY_OBJECT_STORE)
    try:
        ray.init(address=address, **options)
    except ConnectionError as exc:
        raise UsageError(f"--ray-address {address!r}: no Ray cluster answered ({exc}); start one with "
                         "`ray start --head` or drop --ray-address for a local instance") from None
    return True


def _signal_named(fault_text: str) -> int | None:
    import signal

    for words, name in SIGNALS.items():
        if f"Fatal Python error: {words}" in fault_text:
            return int(getattr(signal, name))
    return None


class _Actor:
    """The driver's view of one actor: its handle, where it runs, the run it holds."""

    def __init__(self, handle: Any, info: Any, local: bool | None) -> None:
        self.handle = handle
        self.info_ref = info
        self.info: tuple[str, int, str, str] | None = None
        self.local = local  # None until the actor says which node it runs on
        self.key: int | None = None
        self.items = 0
        self.killed_for: str | None = None  # the driver's own kill (the backstop), if any
        self.failed: Exception | None = None  # it died before it could say where it runs

    def resolve(self, ray: Any, node: str) -> None:
        """Learn where the actor runs once it has started (never waits for it)."""
        if self.info is None and self.failed is None and ray.wait([self.info_ref], timeout=0)[0]:
            try:
                self.info = ray.get(self.info_ref)
            except ray.exceptions.RayActorError as exc:
                self.failed = exc
        if self.info is not None and self.local is None:
            self.local = self.info[0] == node

    def read_marker(self) -> list[float] | None:
        if not self.local or self.info is None:
            return None
        try:
            with open(self.info[2], "rb") as f:
                return list(struct.unpack(f"{CELLS}d", f.read(8 * CELLS)))
        except (OSError, struct.error):
            return None

    def read_fault(self) -> str:
        try:
            with open(self.info[3], errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def remove_files(self) -> None:
        if self.local and self.info is not None:
            for path in self.info[2:]:
                with contextlib.suppress(OSError):
                    os.remove(path)


class RayExecutor:
    """Run work items on ``workers`` Ray actors (0: one per CPU of the Ray instance or cluster)."""

    kind = "ray"

    def __init__(self, workers: int = 0, *, address: str | None = None, memory_cap_bytes: int | None = None,
                 recycle_items: int | None = None, recycle_rss_bytes: int | None = None,
                 max_batch: int = MAX_BATCH) -> None:

        self._ray = ray = ray_module()
        self._started_ray = start_ray(address, workers or default_workers())
        # Never more actors than the cluster has CPUs: one that can never be placed would hold its
        # batch for good (an instance this process joined may be smaller than --workers).
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.workers = min(workers, cpus) if workers else cpus
        self.memory_cap_bytes = memory_cap_bytes
        self.recycle_items = recycle_items
        self.recycle_rss_bytes = recycle_rss_bytes
        self.max_batch = max_batch
        self._node = ray.get_runtime_context().get_node_id()
        # One node: every actor is local (no need to wait for it to say so before batching).
        self._one_node = sum(1 for n in ray.nodes() if n.get("Alive")) == 1
        self._cls = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(EnvActor)
        self._actors: list[_Actor | None] = [None] * self.workers
        self._keys = itertools.count(1)
        self.started = 0  # actors started so far (tests read it)

    def _actor(self, k: int) -> _Actor:
        a = self._actors[k]
        if a is None:
            handle = self._cls.remote(self.memory_cap_bytes)
            a = _Actor(handle, handle.where.remote(), True if self._one_node else None)
            self._actors[k] = a
            self.started += 1
        return a

    def _retire(self, k: int, *, gracefully: bool) -> None:
        a = self._actors[k]
        self._actors[k] = None
        if a is None:
            return
        if gracefully:
            a.handle.close.remote()  # closes its env and files, then exits; the handle is dropped
        else:
            self._ray.kill(a.handle, no_restart=True)
            a.resolve(self._ray, self._node)
            a.remove_files()

    def _batch_size(self, n: int) -> int:
        # Several batches per actor, so the last ones to finish are short and the actors stay busy.
        return max(1, min(self.max_batch, n // (4 * self.workers)))

    def map(self, fn: Callable[[Any, Any, Any], Any], shared: Any, items: Sequence[Any],
            keep_going: Callable[[int], bool] = lambda _i: True) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(slot, shared, item))`` or ``(index, Lost)`` as batches complete.

        ``keep_going(i)`` is asked before item ``i`` is handed out; items are handed out in order.
        Raises ``TypeError`` when ``(fn, shared)`` cannot be pickled for the actors.
        """
        ray = self._ray
        blob = cloudpickle.dumps((fn, shared))
        key = next(self._keys)
        box = [ray.put(blob)]
        where = (os.getcwd(), [p for p in sys.path if p])
        size = self._batch_size(len(items))
        todo: deque[int] = deque(range(len(items)))
        alone: set[int] = set()  # items to replay one per call (a batch died where it could not say which)
        inflight: dict[Any, tuple[int, list[int]]] = {}
        busy: set[int] = set()
        last_look = time.monotonic()

        def take(a: _Actor) -> list[int]:
            batch: list[int] = []
            limit = size if a.local else 1
            while todo and len(batch) < limit and not (batch and todo[0] in alone):
                if not keep_going(todo[0]):
                    break
                batch.append(todo.popleft())
                if batch[-1] in alone:
                    break
            return batch

        try:
            while True:
                for k in range(self.workers):
                    if k in busy or not todo:
                        continue
                    a = self._actor(k)
                    a.resolve(ray, self._node)
                    if a.failed is not None and a.key is None:
                        raise WorkerError(f"a Ray actor for the env could not start: {a.failed}")
                    if a.info is None:  # not placed or not started yet: work goes to those that are
                        continue
                    batch = take(a)
                    if not batch:
                        continue
                    ref = a.handle.play.remote(key, box, where, [(i, items[i]) for i in batch])
                    a.key = key
                    inflight[ref] = (k, batch)
                    busy.add(k)
                starting = [a.info_ref for a in self._actors if a is not None and a.info is None]
                if not inflight:
                    if not todo or not keep_going(todo[0]):
                        return
                    if starting:  # nothing runs yet: wait for an actor to start
                        ray.wait(starting, num_returns=1)
                    continue
                ready, _ = ray.wait([*inflight, *starting], num_returns=1, timeout=POLL_S)
                ready = [ref for ref in ready if ref in inflight]
                if time.monotonic() - last_look >= POLL_S:  # also while other actors keep answering
                    last_look = time.monotonic()
                    self._backstop(busy)
                if not ready:
                    continue
                done: list[tuple[int, Any]] = []
                for ref in ready:
                    k, batch = inflight.pop(ref)
                    busy.discard(k)
                    try:
                        reply = ray.get(ref)
                    except ray.exceptions.RayActorError as exc:
                        done += self._death(k, batch, exc, todo, alone)
                        continue
                    done += self._receive(k, batch, reply)
                yield from sorted(done, key=lambda pair: pair[0])
        finally:
            for k, _batch in inflight.values():  # results nobody will read: their actors are replaced
                self._retire(k, gracefully=False)
            for a in self._actors:
                if a is not None and a.key == key:
                    a.handle.end.remote()
                    a.key = None

    def _receive(self, k: int, batch: list[int], reply: tuple) -> list[tuple[int, Any]]:
        status = reply[0]
        if status == "load-error":
            raise WorkerError(f"a Ray actor could not load this run's env factory and policy: {reply[2]}; "
                              "make the factory importable on every node (a module-level function), scan a "
                              "spec string, or use the threads executor")
        if status == "error":
            raise WorkerError(f"{reply[2]}\n--- in the Ray actor ---\n{reply[3]}")
        _, results, rss = reply
        a = self._actors[k]
        a.items += len(batch)
        if (self.recycle_items and a.items >= self.recycle_items) or (
                self.recycle_rss_bytes and rss > self.recycle_rss_bytes):
            self._retire(k, gracefully=True)  # replaced before its next batch; its env is closed on the way out
        return list(zip(batch, results, strict=True))

    def _backstop(self, busy: set[int]) -> None:
        """Kill a local actor whose call is far past its deadline (its watchdog could not act)."""
        now = time.monotonic()
        for k in busy:
            a = self._actors[k]
            m = a.read_marker() if a is not None else None
            if m and m[CALL] and now > m[STARTED] + m[DEADLINE] + BACKSTOP_S and a.killed_for is None:
                a.killed_for = "hang"
                self._ray.kill(a.handle, no_restart=True)

    def _death(self, k: int, batch: list[int], exc: Exception, todo: deque[int],
               alone: set[int]) -> list[tuple[int, Any]]:
        """The outcome of a batch whose actor died: the item it died in is ``Lost``, the others are
        played again (their results died with the actor)."""
        a = self._actors[k]
        self._actors[k] = None
        a.resolve(self._ray, self._node)
        marker = a.read_marker()
        fault = a.read_fault() if a.local else ""
        a.remove_files()
        code = int(marker[CALL]) if marker is not None else 0
        step = int(marker[STEP]) if marker is not None else -1
        pos = int(marker[POS]) if marker is not None else (0 if len(batch) == 1 else -1)
        if marker is not None and pos < 0:
            pos = 0  # between items (taking up the run, closing the last one's env): the first item's
        if not 0 <= pos < len(batch):
            alone.update(batch)  # it cannot say which item: replay each alone, the culprit dies again
            todo.extendleft(reversed(batch))
            return []
        lost = self._lost(a, marker, fault, exc, code, step)
        again = [i for j, i in enumerate(batch) if j != pos or lost.call == "close"]
        todo.extendleft(reversed(again))  # the previous run's env failing to close is no item's doing
        return [] if lost.call == "close" else [(batch[pos], lost)]

    def _lost(self, a: _Actor, marker: list[float] | None, fault: str, exc: Exception, code: int,
              step: int) -> Lost:
        call = CALLS.get(code, "")
        why = a.killed_for or (KILLED.get(marker[KIND]) if marker is not None else None)
        if why == "hang":
            what = "making the env" if call == "make" else f"{call or 'a call'}()"
            detail = f"{what} did not return within {marker[DEADLINE]:g} s" if marker else "a call hung"
        elif why == "memory":
            detail = (f"the env's worker process used {marker[VALUE] / 2**20:.0f} MiB, past the memory cap of "
                      f"{(self.memory_cap_bytes or 0) / 2**20:.0f} MiB")
        elif (signum := _signal_named(fault)) is not None:
            why, detail = "crash", describe_exit(-signum)
        elif a.local:
            why, detail = "crash", ("the env's worker process ended without a fatal signal (os._exit or "
                                    "sys.exit in env code, or killed from outside: the kernel's OOM killer)")
        else:
            said = str(exc).splitlines()
            why, detail = "crash", f"the env's Ray actor on another node died ({said[0] if said else type(exc).__name__})"
        return Lost(why, call, step if step >= 0 and code == 3 else None, detail)

    def close(self) -> None:
        """Close every actor's env and end the actors; shut Ray down when this executor started it."""
        ray = self._ray
        actors = [a for a in self._actors if a is not None]
        self._actors = [None] * self.workers
        # close() ends in exit_actor: its reference is ready (with an error) once the actor is gone.
        closing = [a.handle.close.remote() for a in actors]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=2.0)
        for a in actors:
            ray.kill(a.handle, no_restart=True)
            a.resolve(ray, self._node)
            a.remove_files()
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False


__all__ = ["RayExecutor", "ray_module", "start_ray"]
