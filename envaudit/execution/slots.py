"""What a unit of work sees where it runs: a ``Slot`` (one env instance's home) and how ending a
run there is reported when the worker itself is lost.

A slot keeps ``state`` between the work items of one run (the env built for it, the policy copy)
and offers ``guard``: every call into env code goes through it, so a call that overruns its deadline
is caught the same way in every executor (a ``DeadlineExceeded`` in-process, a killed worker process
reported as ``Lost`` in the process pool).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from envaudit.deadline import DeadlineWorker
from envaudit.execution.places import Places, Token

# Codes of the env call a process worker is in, shared with the parent through shared memory so a
# worker that dies says what it was doing (the parent cannot ask a dead process).
CALLS = {0: "", 1: "make", 2: "reset", 3: "step", 4: "close"}
CALL_CODES = {name: code for code, name in CALLS.items() if name}

current: Any = None
"""The worker process's own slot (``worker.ProcessSlot``), set when this process is a worker."""


@contextlib.contextmanager
def note(call: str, step: int | None = None, seed: int | None = None) -> Iterator[None]:
    """Tell the scanning process which env call this worker process is in (``make``, ``reset``,
    ``step``, ``close``), so a death in code that steps the env itself (a probe run in a worker,
    the GRPO lockstep groups) is reported with its call, step and seed. No deadline: the caller
    keeps time. Outside a worker process it does nothing."""
    slot = current
    if slot is None:
        yield
        return
    slot._mark(call, step, seed, None)
    try:
        yield
    finally:
        slot.marker[0] = 0  # no call


@dataclass(frozen=True)
class Lost:
    """A work item whose worker process was lost: it died, or the parent killed it.

    ``kind``: ``"crash"`` (a signal or an exit of the worker: a segfault, ``os._exit``, the kernel's
    OOM killer), ``"hang"`` (the parent killed it past the call's deadline) or ``"memory"`` (killed
    past the memory cap). ``call`` is the env call it was in (``make``, ``reset``, ``step``,
    ``close``; empty when it was in none), ``step`` the step index of a ``step()`` call.
    """

    kind: str
    call: str
    step: int | None
    detail: str
    seed: int | None = None
    """The reset seed of the episode, when the code that called the env said it (``worker.note``)."""
    lane: int | None = None
    """The lockstep lane (``execution.lanes``) whose env call the worker was in, if any."""


def _noted(fn: Callable[[], Any], call: str, step: int | None) -> Any:
    """``fn()``, told to the scanning process when this is a worker process (an in-process slot
    there runs a probe's ordered runs); in the scanning process there is nobody to tell."""
    if current is None:
        return fn()
    with note(call, step):
        return fn()


class Slot:
    """One env instance's home in an in-process executor (the caller's thread or a pool thread)."""

    def __init__(self, name: str, *, shares_objects: bool = True, places: Places | None = None,
                 urgent: bool = False) -> None:
        self.state: dict[str, Any] = {}
        self.shares_objects = shares_objects
        """True when other slots see the same objects (pool threads): a slot copies the stateful
        ones (the policy) before using them. False inline, where the caller's own objects are
        wanted, and in a worker process, whose objects are its own unpickled copies."""
        self._deadline = DeadlineWorker(name)
        self._closer = DeadlineWorker(f"{name}-close")
        self._at_end: list[Callable[[], None]] = []
        self.places, self.urgent = places, urgent
        """The executor's workers, shared with whatever else plays on it at once: each env call
        holds a place while it runs (``execution.places``); None: this slot's calls are not bounded.
        ``urgent``: its calls take free places first (a lockstep lane's)."""
        self._token: Token | None = None

    def run(self, fn: Callable[[], Any], poll_s: float | None) -> Any:
        """Run one work item (an episode) on the slot's deadline thread, in one handoff: its env
        calls go through ``guard`` there, each held to its deadline. A call that overruns raises
        ``DeadlineExceeded`` here, with the ``call`` and ``step`` it was; the item is abandoned.
        ``poll_s``: the shortest deadline of its calls."""
        return self._deadline.watch(fn, poll_s)

    def guard(self, fn: Callable[[], Any], deadline_s: float | None, call: str, step: int | None = None) -> Any:
        """``fn()`` under a deadline; raises ``DeadlineExceeded`` past it (the call is abandoned).

        Inside ``run`` the call runs on the item's thread and ``run`` keeps its time, except
        ``close``: closing an env is best effort wherever it happens, so a hang there is caught
        and the item goes on (on a thread of its own, as outside ``run``)."""
        if self.places is None or self._token is not None:
            return self._guarded(fn, deadline_s, call, step)
        self._token = token = self.places.take(self.urgent)  # waiting here is not the call's time
        try:
            return self._guarded(fn, deadline_s, call, step)
        finally:
            if self._token is token:  # an abandoned call that returns late leaves a newer call's alone
                self._token = None
            self.places.give(token)

    def _guarded(self, fn: Callable[[], Any], deadline_s: float | None, call: str, step: int | None) -> Any:
        what = f"{call}()" if call != "make" else "making the env"
        worker = self._deadline
        if worker.watching() and call != "close":
            with worker.marked(deadline_s, what, call, step):
                return _noted(fn, call, step)
        if worker.watching():
            worker = self._closer
        return _noted(lambda: worker.call(fn, deadline_s, what=what), call, step)

    def label(self, lane: int | None, seed: int | None = None) -> None:
        """Say which lockstep lane (and reset seed) the next env calls are for; only a worker
        process writes it down (for the parent to read after a death); here the caller knows."""

    def at_end(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the run that uses this slot ends (closing its env)."""
        self._at_end.append(fn)

    def end(self) -> None:
        for fn in reversed(self._at_end):
            try:
                fn()
            except Exception:  # closing is best effort; the run's data is already kept
                pass
        self._at_end.clear()
        self.state.clear()

    def abandon(self) -> None:
        """The slot's env hung: drop it without calling into it again (the deadline worker has
        already left its stuck thread behind and starts a fresh one for the next call); the stuck
        call's place is given back."""
        token, self._token = self._token, None
        if token is not None:  # only a slot with places takes tokens
            self.places.give(token)
        self._at_end.clear()
        self.state.clear()

    def close(self) -> None:
        self.end()
        self._deadline.close()
        self._closer.close()
