"""The workers of an in-process executor, shared by everything that plays on it at once.

``--workers N`` under threads or asyncio means at most N env calls in flight. When two probes play
at the same time (``envaudit.scan``: a probe that plays beside the others) both use the executor's
slots; ``Places`` holds the bound across them: every env call (make, reset, step, close) takes a
place for as long as it runs, and gives it back when it returns, so the two share the workers
call by call instead of doubling them, and a probe between its env calls (choosing actions,
updating a policy) holds none.

Lockstep lanes (``execution.lanes``) take free places first (``urgent``): a lockstep turn waits on
its slowest lane, so a lane call kept waiting holds up every rollout of its turn, while an episode
of a run kept waiting holds up only itself.

A call whose env hung is abandoned on its thread (Python cannot kill a thread); the slot gives its
place back then (``give`` of an abandoned call's token), so a hang does not cost a worker for the
rest of the scan.
"""

from __future__ import annotations

import threading


class Token:
    """One place taken; giving it back twice gives it back once."""

    __slots__ = ("given",)

    def __init__(self) -> None:
        self.given = False


class Places:
    """At most ``n`` places taken at once, across threads; ``urgent`` takers go first."""

    def __init__(self, n: int) -> None:
        assert n >= 1, f"an executor needs at least one place, got {n}"
        self._free = n
        self._lock = threading.Lock()
        self._urgent = threading.Condition(self._lock)
        self._normal = threading.Condition(self._lock)
        self._waiting = {True: 0, False: 0}

    def take(self, urgent: bool = False) -> Token:
        """Wait for a free place (after every urgent taker waiting, unless urgent) and take it."""
        cv = self._urgent if urgent else self._normal
        with self._lock:
            self._waiting[urgent] += 1
            try:
                while self._free == 0 or (not urgent and self._waiting[True]):
                    cv.wait()
            finally:
                self._waiting[urgent] -= 1
            self._free -= 1
            self._wake()
        return Token()

    def give(self, token: Token) -> None:
        """Give the place back (once, however often it is called with the same token)."""
        with self._lock:
            if token.given:
                return
            token.given = True
            self._free += 1
            self._wake()

    @property
    def free(self) -> int:
        """Places not taken now."""
        with self._lock:
            return self._free

    def _wake(self) -> None:
        # Under the lock, after any change: a free place goes to an urgent waiter, else a normal one.
        if self._free > 0:
            if self._waiting[True]:
                self._urgent.notify()
            elif self._waiting[False]:
                self._normal.notify()


__all__ = ["Places", "Token"]
