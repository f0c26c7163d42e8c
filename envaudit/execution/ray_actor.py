"""The body of one Ray actor of ``--executor ray``: it holds one env instance and plays batches of
work items on it.

Env code runs in the actor's own worker process, so a crash kills only the actor. Like a worker of
the process executor it writes which env call it is in (call, step, start, deadline) and which item
of its batch it is playing into a small shared marker, here a file on its node, memory-mapped; and
it points ``faulthandler`` at a second file, so a fatal signal leaves its name behind. The driver
reads both after a death when the actor ran on its own node (the local instance always does).

A watchdog thread in the actor enforces the call deadline and the memory cap by killing its own
process, after writing why into the marker: the Ray worker survives nothing else that env code can
do (a call stuck for good, memory without bound), and on a remote node there is no parent process
to do it. The address-space cap of the process executor is not applied: a Ray worker maps its
object store and threads of its own, so a virtual-size limit would fail Ray before the env.
"""

from __future__ import annotations

import contextlib
import faulthandler
import mmap
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Any

import cloudpickle

from envaudit.deadline import CallWatch
from envaudit.execution.worker import (
    BASE,
    CALL,
    DEADLINE,
    MARKER_SIZE,
    STARTED,
    ProcessSlot,
    rss_bytes,
)

POS, KIND, VALUE = MARKER_SIZE, MARKER_SIZE + 1, MARKER_SIZE + 2
"""Marker cells after the worker's own: the batch position being played, why the watchdog killed
the process (``KILLED``), and the number that made it (resident bytes for ``memory``)."""
CELLS = MARKER_SIZE + 3
KILLED = {1.0: "hang", 2.0: "memory"}
GRACE_S = 0.25
"""Slack past a call's deadline before the watchdog kills it, as in the process executor."""
WATCH_S = 0.05
"""How often the watchdog looks at the current call and the process's memory."""


class _Watchdog(threading.Thread):
    def __init__(self, marker: memoryview, memory_cap_bytes: int | None) -> None:
        super().__init__(name="envaudit-ray-watchdog", daemon=True)
        self.marker = marker
        self.cap = memory_cap_bytes

    def _die(self, why: float, value: float = 0.0) -> None:
        self.marker[VALUE] = value
        self.marker[KIND] = why
        os.kill(os.getpid(), signal.SIGKILL)

    def run(self) -> None:
        m = self.marker
        watch = CallWatch()
        while True:
            time.sleep(WATCH_S)
            if m[CALL] and watch.over(None, None, m[STARTED], m[DEADLINE], GRACE_S, time.monotonic()):
                self._die(1.0)
            if self.cap is not None:
                rss = rss_bytes()
                if rss is not None and rss - m[BASE] > self.cap:  # what it gained, as in the process pool
                    self._die(2.0, float(rss))


class EnvActor:
    """Made remote by ``RayExecutor`` (``ray.remote(num_cpus=1, max_restarts=0)``); one env instance."""

    def __init__(self, memory_cap_bytes: int | None) -> None:
        # Ctrl-C is the driver's to handle (it ends the actors); the actor must not die mid-reply.
        with contextlib.suppress(ValueError):  # not on the main thread: nothing to ignore
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        fd, self.marker_path = tempfile.mkstemp(prefix="envaudit-ray-", suffix=".marker")
        os.write(fd, bytes(8 * CELLS))
        self._map = mmap.mmap(fd, 8 * CELLS)
        os.close(fd)
        self.marker = memoryview(self._map).cast("d")
        self.marker[POS] = -1
        self.marker[BASE] = rss_bytes() or 0
        fd, self.fault_path = tempfile.mkstemp(prefix="envaudit-ray-", suffix=".fault")
        self._fault = os.fdopen(fd, "w")
        faulthandler.enable(self._fault, all_threads=False)
        self.slot = ProcessSlot(self.marker)
        self.key: int | None = None
        self.fn: Any = None
        self.shared: Any = None
        _Watchdog(self.marker, memory_cap_bytes).start()

    def where(self) -> tuple[str, int, str, str]:
        """(node id, pid, marker file, fault file): the driver reads the files after a death on its node."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid(), self.marker_path, self.fault_path

    def _load(self, key: int, box: list, where: tuple[str, list[str]]) -> str | None:
        """Take up run ``key``: the driver's folder and import paths (where they exist on this node),
        then its work function and shared objects. An error message when they cannot be loaded."""
        import ray

        self.end()
        cwd, paths = where
        if os.path.isdir(cwd) and os.getcwd() != cwd:
            os.chdir(cwd)
        # After the worker's own paths: the driver's folders never shadow what this node installed.
        sys.path.extend(p for p in paths if p not in sys.path)
        try:
            self.fn, self.shared = cloudpickle.loads(ray.get(box[0]))
        except BaseException as exc:  # noqa: BLE001 - reported to the driver, which decides
            return f"{type(exc).__name__}: {exc}"
        self.key = key
        return None

    def play(self, key: int, box: list, where: tuple[str, list[str]], batch: list[tuple[int, Any]]) -> tuple:
        """``("ok", [result per item], rss)``, or ``("load-error" | "error", index, message, traceback)``.

        ``box`` holds the run's blob as an object reference, fetched only when this actor takes up
        the run (a reference inside a list is not resolved by Ray before the call).
        """
        import traceback

        if key != self.key:
            problem = self._load(key, box, where)
            if problem is not None:
                return ("load-error", batch[0][0], problem, traceback.format_exc())
        results = []
        for pos, (index, item) in enumerate(batch):
            self.marker[POS] = pos
            try:
                results.append(self.fn(self.slot, self.shared, item))
            except BaseException as exc:  # noqa: BLE001 - a bug in the work function, not the env
                return ("error", index, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        self.marker[POS] = -1
        return ("ok", results, rss_bytes() or 0)

    def end(self) -> None:
        """End the current run: its env is closed (under the marker, so a crash there is told apart)."""
        self.marker[POS] = -1
        self.slot.end()
        self.key, self.fn, self.shared = None, None, None

    def close(self) -> None:
        """End the run, remove this actor's files and exit (the driver kills what does not)."""
        import ray

        self.end()
        faulthandler.disable()
        for path in (self.marker_path, self.fault_path):
            with contextlib.suppress(OSError):
                os.remove(path)
        ray.actor.exit_actor()
