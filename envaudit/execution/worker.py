"""The body of one worker process: it receives work items, runs them, and sends the results back.

Env code runs here, outside the scanning process, so what kills a process (a segfault in a C
extension, ``os._exit``, the kernel's OOM killer) kills only this worker. Before each env call the
worker writes which call it is in, the step and when it started into a small shared array: the
parent reads it to kill a call that overran its deadline and, after a death, to say which call of
which episode died. The worker's address space is capped so an allocation far past the memory cap
fails in the env (a ``MemoryError``) instead of taking the machine down.

A work item may also ask the scanning process for something mid-way (``ProcessSlot.ask``): a probe
run in a worker process has its episodes played on the scan's episode pool that way. Code that
calls env code outside a guarded call (a probe's own stepping loop) says which call it is in with
``slots.note``, so a death there is reported with its call, step and seed too.
"""

from __future__ import annotations

import math
import os
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

import cloudpickle

from envaudit.execution import slots
from envaudit.execution.slots import CALL_CODES, Slot

# marker layout (doubles): [call code, step (-1: none), started (time.monotonic), deadline_s,
# reset seed (-1: none), the worker's resident bytes when it started, lockstep lane (-1: none)]
CALL, STEP, STARTED, DEADLINE, SEED, BASE, LANE = range(7)
MARKER_SIZE = 7


def rss_bytes(pid: int | str = "self") -> int | None:
    """Resident memory of a process (Linux ``/proc``); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _virtual_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _cap_address_space(cap_bytes: int) -> None:
    """Let the env allocate about ``cap_bytes`` beyond what the worker holds after start-up."""
    try:
        import resource
    except ImportError:  # not on this OS: the parent's RSS watch is the only cap
        return
    base = _virtual_bytes()
    if base is None:
        return
    # Virtual size counts reservations (thread stacks, allocator arenas) that are never touched,
    # so the cap on it is looser than the RSS cap the parent watches: a backstop, not the rule.
    limit = base + 2 * cap_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


class ProcessSlot(Slot):
    """A slot inside a worker process: env calls run on the main thread, the parent keeps time."""

    def __init__(self, marker: Any, conn: Any = None) -> None:
        self.state: dict[str, Any] = {}
        self.shares_objects = False
        self._at_end: list[Callable[[], None]] = []
        self.marker = marker
        self._conn = conn
        self._index: int | None = None
        self._seed: int | None = None

    def run(self, fn: Callable[[], Any], poll_s: float | None) -> Any:
        return fn()  # on the worker's main thread: the parent keeps time from the marker

    def guard(self, fn: Callable[[], Any], deadline_s: float | None, call: str, step: int | None = None) -> Any:
        self._mark(call, step, self._seed, deadline_s)
        try:
            return fn()
        finally:
            self.marker[CALL] = 0

    def _mark(self, call: str, step: int | None, seed: int | None, deadline_s: float | None) -> None:
        m = self.marker
        m[STEP] = -1 if step is None else step
        m[SEED] = -1 if seed is None else seed
        m[DEADLINE] = math.inf if deadline_s is None else deadline_s
        m[STARTED] = time.monotonic()
        m[CALL] = CALL_CODES[call]

    def label(self, lane: int | None, seed: int | None = None) -> None:
        self.marker[LANE] = -1 if lane is None else lane
        self._seed = seed

    def rebase(self, now: bool = True) -> None:
        """Count this worker's memory from here on; ``now=False``: not at all until the next
        ``rebase()`` (while the work item does its own heavy imports)."""
        self.marker[BASE] = (rss_bytes() or 0) if now else math.inf

    def ask(self, request: Any) -> Any:
        """Send ``request`` to the scanning process and wait for its answer (the work item's
        ``calls`` handler there); raises ``RuntimeError`` with the handler's error when it failed."""
        self._conn.send(("call", self._index, request, None))
        ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(value)
        return value

    def close(self) -> None:
        self.end()


def in_worker() -> bool:
    """True inside a worker process of ``ProcessExecutor``."""
    return slots.current is not None


def serve(conn: Any, marker: Any, memory_cap_bytes: int | None, cap_address_space: bool = True) -> None:
    """Answer ``("run", key, blob, index, item)`` with ``("ok", index, result, rss)``.

    ``blob`` is the cloudpickled ``(fn, shared)`` of a run, sent once per worker per run (``None``
    when this worker already has run ``key``); ``("end",)`` ends the run (its env is closed);
    ``None`` or a closed pipe ends the worker.
    """
    # Ctrl-C is the scan's to handle: the parent ends its workers, they must not die mid-reply.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    marker[STEP] = marker[SEED] = marker[LANE] = -1
    marker[BASE] = rss_bytes() or 0  # the memory cap counts what the worker gains after this
    if memory_cap_bytes and cap_address_space:
        _cap_address_space(memory_cap_bytes)
    slot = ProcessSlot(marker, conn)
    slots.current = slot  # where ``slots.note`` writes
    key, fn, shared = None, None, None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        if msg[0] == "end":
            slot.end()
            key = None
            continue
        _, run_key, blob, index, item = msg
        if run_key != key:
            slot.end()
            try:
                fn, shared = cloudpickle.loads(blob)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
                conn.send(("load-error", index, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
                key = None
                continue
            key = run_key
        slot._index = index
        slot.label(None)
        try:
            result = fn(slot, shared, item)
        except BaseException as exc:  # noqa: BLE001 - a bug in the work function, not the env
            conn.send(("error", index, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
            continue
        conn.send(("ok", index, result, rss_bytes()))
    slot.end()
