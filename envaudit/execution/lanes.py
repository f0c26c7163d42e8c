"""Lockstep lanes: env instances pinned to the executor's workers, stepped one turn at a time.

The GRPO probe steps all rollouts of an iteration together (Gymnasium's vector API does the same):
its policy stays in the probe's process and answers every live rollout of a turn in one batch,
while the envs live on the executor's workers. A *lane* is one env instance's place: lane ``i``
lives on worker ``i % W`` for the whole session (``W``: the executor's workers, at most one per
lane), so its env keeps its state from one turn to the next. A turn sends each worker the
requests of its lanes in one message (``fn(slot, shared, lane, request)`` answers each, in lane
order) and puts the answers back in the order asked; nothing in the answers depends on ``W``.

What comes back for a request: ``fn``'s answer, or

- ``Lost``: the worker died or was killed in this lane's call (a crash, memory past the cap, a
  hang killed past its deadline; process executor);
- ``Hung``: this lane's call overran its deadline in an in-process executor (the worker's thread
  is abandoned, as ``Slot.run`` does);
- ``Evicted``: this lane's env went with a worker that another lane's env killed (or it was not
  run after another lane of its worker hung): not its doing, so the caller replays it on a
  fresh worker (reset with the same seed, the same actions) and the result stays the same.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envaudit.deadline import DeadlineExceeded
from envaudit.execution.places import Places
from envaudit.execution.slots import Lost, Slot

LaneFn = Callable[[Slot, Any, int, Any], Any]


@dataclass(frozen=True)
class Hung:
    """A lane's call that overran its deadline in an in-process executor."""

    call: str
    step: int | None
    detail: str


@dataclass(frozen=True)
class Evicted:
    """A lane whose env was lost through no fault of its own; the caller replays it."""

    detail: str


def _batch(slot: Slot, shared: tuple[LaneFn, Any], batch: Sequence[tuple[int, Any]]) -> list[Any]:
    """One worker's share of a turn: its lanes' requests, in order (the work item of a turn)."""
    fn, inner = shared
    out = []
    for lane, request in batch:
        slot.label(lane)
        out.append(fn(slot, inner, lane, request))
    slot.label(None)
    return out


def _in_process(slot: Slot, shared: tuple[LaneFn, Any], batch: Sequence[tuple[int, Any]],
                poll_s: float | None) -> list[Any]:
    """A worker's share of a turn on an in-process slot, in one hand-off to its deadline thread."""
    done: list[Any] = []
    fn, inner = shared

    def job() -> None:
        for lane, request in batch:
            slot.label(lane)
            done.append(fn(slot, inner, lane, request))

    try:
        slot.run(job, poll_s)
    except DeadlineExceeded as exc:
        slot.abandon()
        hung = Hung(exc.call or "step", exc.step, str(exc))
        rest = [Evicted("not run: another lane of its worker hung")] * (len(batch) - len(done) - 1)
        return [*done, hung, *rest]
    return done


class InlineLanes:
    """Every lane on one slot in the caller's process (the sequential path)."""

    def __init__(self, fn: LaneFn, shared: Any, lanes: int, poll_s: float | None, *, shares_objects: bool = False,
                 workers: int = 1, places: Places | None = None) -> None:
        self.shared = (fn, shared)
        self.lanes = lanes
        self.poll_s = poll_s
        self.workers = max(1, min(workers, lanes))
        # A lane's calls take the executor's free places first: a turn waits on its slowest lane.
        self.slots = [Slot(f"envaudit-lane-{k}", shares_objects=shares_objects, places=places, urgent=True)
                      for k in range(self.workers)]

    def _split(self, requests: Sequence[tuple[int, Any]]) -> dict[int, list[int]]:
        by_worker: dict[int, list[int]] = {}
        for j, (lane, _) in enumerate(requests):
            by_worker.setdefault(lane % self.workers, []).append(j)
        return by_worker

    def turn(self, requests: Sequence[tuple[int, Any]]) -> list[Any]:
        """The answer to each ``(lane, request)``, in the order given."""
        out: list[Any] = [None] * len(requests)
        for k, js in self._split(requests).items():
            for j, answer in zip(js, _in_process(self.slots[k], self.shared, [requests[j] for j in js], self.poll_s),
                                 strict=True):
                out[j] = answer
        return out

    def close(self) -> None:
        for slot in self.slots:
            slot.close()


class ThreadLanes(InlineLanes):
    """Lanes on ``workers`` threads of the caller's process, each with its own slot."""

    def __init__(self, fn: LaneFn, shared: Any, lanes: int, poll_s: float | None, workers: int,
                 places: Places | None = None) -> None:
        super().__init__(fn, shared, lanes, poll_s, shares_objects=True, workers=workers, places=places)
        self._inbox: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in self.slots]
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        # Worker 0's share runs on the caller's thread (it would only wait otherwise): one thread
        # hand-off less per turn, so one worker costs what inline does.
        self._threads = [threading.Thread(target=self._serve, args=(k,), name=f"envaudit-lanes-{k}", daemon=True)
                         for k in range(1, self.workers)]
        for t in self._threads:
            t.start()

    def _serve(self, k: int) -> None:
        while (batch := self._inbox[k].get()) is not None:
            try:
                self._outbox.put((k, _in_process(self.slots[k], self.shared, batch, self.poll_s), None))
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                self._outbox.put((k, None, exc))

    def turn(self, requests: Sequence[tuple[int, Any]]) -> list[Any]:
        out: list[Any] = [None] * len(requests)
        split = self._split(requests)
        for k, js in split.items():
            if k:
                self._inbox[k].put([requests[j] for j in js])
        error: BaseException | None = None
        if 0 in split:
            js = split[0]
            try:  # the other workers' answers are still read below, so none is left for the next turn
                mine = _in_process(self.slots[0], self.shared, [requests[j] for j in js], self.poll_s)
                for j, answer in zip(js, mine, strict=True):
                    out[j] = answer
            except Exception as exc:  # noqa: BLE001 - re-raised once the turn is over
                error = exc
        for _ in range(len(split) - (0 in split)):
            k, answers, exc = self._outbox.get()
            if exc is not None:
                error = exc
                continue
            for j, answer in zip(split[k], answers, strict=True):
                out[j] = answer
        if error is not None:
            raise error
        return out

    def close(self) -> None:
        for box in self._inbox:
            box.put(None)
        for t in self._threads:
            t.join(timeout=5.0)
        super().close()


class ProcessLanes:
    """Lanes on a ``ProcessExecutor``'s worker processes (a pinned run of the pool)."""

    def __init__(self, pool: Any, fn: LaneFn, shared: Any, lanes: int) -> None:
        self.pool = pool
        self.lanes = lanes
        self.workers = max(1, min(pool.workers, lanes))
        self.key = pool.pin(_batch, (fn, shared))

    def turn(self, requests: Sequence[tuple[int, Any]]) -> list[Any]:
        split: dict[int, list[int]] = {}
        for j, (lane, _) in enumerate(requests):
            split.setdefault(lane % self.workers, []).append(j)
        workers = list(split)
        batches = [[requests[j] for j in split[k]] for k in workers]
        out: list[Any] = [None] * len(requests)
        for i, answers in self.pool.map(None, None, batches, key=self.key, affinity=workers):
            js = split[workers[i]]
            if isinstance(answers, Lost):
                lanes = [requests[j][0] for j in js]
                culprit = answers.lane if answers.lane in lanes else None
                for j in js:
                    out[j] = answers if requests[j][0] == culprit or culprit is None and j == js[0] else \
                        Evicted(f"its worker process was lost in another lane's call: {answers.detail}")
                continue
            for j, answer in zip(js, answers, strict=True):
                out[j] = answer
        return out

    def close(self) -> None:
        self.pool.unpin(self.key)


def open_lanes(executor: Any, fn: LaneFn, shared: Any, lanes: int, poll_s: float | None) -> Any:
    """Lanes on ``executor``'s workers (threads, processes, a probe worker's remote pool; inline
    for anything else, Ray included). ``poll_s``: the shortest deadline of the lanes' calls."""
    kind = getattr(executor, "kind", "inline")
    if kind in ("threads", "asyncio"):
        return ThreadLanes(fn, shared, lanes, poll_s, executor.workers, getattr(executor, "places", None))
    if kind == "processes":
        return ProcessLanes(executor, fn, shared, lanes)
    if kind == "remote":
        return executor.lanes(fn, shared, lanes, poll_s)
    return InlineLanes(fn, shared, lanes, poll_s)


__all__ = ["Evicted", "Hung", "InlineLanes", "ProcessLanes", "ThreadLanes", "open_lanes"]
