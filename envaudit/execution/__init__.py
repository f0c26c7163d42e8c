"""Where rollouts run: in the scanning process, on threads, or in isolated worker processes.

``envaudit.rollout`` is the one place that plays episodes; it hands them to an executor from here.
An executor runs work items ``fn(slot, shared, item)`` on its slots and yields ``(index, result)``
as they complete; the caller puts results back in index order, so what a run returns never
depends on how many workers ran it or in which order they finished. The process pool turns a
worker that died or had to be killed into a ``Lost`` outcome for that item; the Ray executor
(``ray_exec``, imported only when asked for) does the same with Ray actors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from envaudit.execution.aio import DEFAULT_WORKERS, AsyncioExecutor
from envaudit.execution.local import InlineExecutor, ThreadExecutor
from envaudit.execution.pool import ProcessExecutor, WorkerError, default_workers
from envaudit.execution.slots import Lost, Slot

if TYPE_CHECKING:
    from envaudit.execution.ray_exec import RayExecutor

EXECUTORS = ("processes", "threads", "asyncio", "inline", "ray")


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ExecutionConfig:
    """How a scan runs its rollouts. It never changes what the scan finds: the same seed gives the
    same report with any executor and any number of workers."""

    executor: str = _opt("processes", "Where env code runs: processes (isolated worker processes; a crash "
                         "in the env becomes an env-error finding), threads (in the scanning process; for "
                         "I/O-bound envs), asyncio (many episodes at once in the scanning process; an env with "
                         "async reset/step is awaited on one event loop: for clients of a server), inline (one env at a time in the scanning process), ray (Ray "
                         "actors, isolated like processes; a local Ray instance or --ray-address).")
    workers: int = _opt(0, "Env instances stepped at once (0: one per core of this machine; with asyncio, "
                         f"{DEFAULT_WORKERS}; with ray, one per CPU of the cluster).")
    memory_cap_mb: float | None = _opt(4096.0, "A worker process that grows by more than this (MiB) past "
                                       "what it held at start is killed and its episode (or, under processes, "
                                       "its probe) reported as env-error (processes and ray).")
    recycle_episodes: int | None = _opt(1000, "A worker process is replaced after this many episodes, "
                                        "so slow leaks never add up (processes and ray).")
    recycle_mb: float | None = _opt(None, "A worker process is replaced after an episode that leaves it holding "
                                    "more than this (MiB) past what it held at start; default: half the memory "
                                    "cap (processes and ray).")
    ray_address: str | None = _opt(None, "The Ray cluster of --executor ray (default: start a local instance).")

    def __post_init__(self) -> None:
        checks = [
            (self.executor in EXECUTORS, f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}"),
            (self.workers >= 0, f"workers must be 0 (one per core) or more, got {self.workers}"),
            (self.memory_cap_mb is None or self.memory_cap_mb > 0,
             f"memory_cap_mb must be positive, got {self.memory_cap_mb}"),
            (self.recycle_episodes is None or self.recycle_episodes >= 1,
             f"recycle_episodes must be at least 1, got {self.recycle_episodes}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def n_workers(self) -> int:
        if not self.workers and self.executor == "asyncio":
            return DEFAULT_WORKERS
        return self.workers or default_workers()


def execution_help() -> dict[str, str]:
    return {f.name: f.metadata["help"] for f in fields(ExecutionConfig)}


def make_executor(config: ExecutionConfig | None, *, preload: Sequence[str] = ()
                  ) -> InlineExecutor | ThreadExecutor | AsyncioExecutor | ProcessExecutor | RayExecutor:
    """The executor ``config`` asks for (``None``: inline, one episode at a time in this process).
    ``preload``: modules worker processes import once, up front (those the runs' policies live in)."""
    if config is None or config.executor == "inline":
        return InlineExecutor()
    if config.executor == "threads":
        return ThreadExecutor(config.n_workers)
    if config.executor == "asyncio":
        return AsyncioExecutor(config.n_workers)
    cap = None if config.memory_cap_mb is None else int(config.memory_cap_mb * 2**20)
    recycle = config.recycle_mb * 2**20 if config.recycle_mb is not None else (cap // 2 if cap else None)
    if config.executor == "ray":
        from envaudit.execution.ray_exec import RayExecutor  # ray is an optional extra

        return RayExecutor(config.workers, address=config.ray_address, memory_cap_bytes=cap,
                           recycle_items=config.recycle_episodes, recycle_rss_bytes=int(recycle) if recycle else None)
    return ProcessExecutor(config.n_workers, memory_cap_bytes=cap, recycle_items=config.recycle_episodes,
                           recycle_rss_bytes=int(recycle) if recycle else None, preload=preload)


__all__ = ["EXECUTORS", "AsyncioExecutor", "ExecutionConfig", "InlineExecutor", "Lost", "ProcessExecutor", "Slot",
           "ThreadExecutor", "WorkerError", "default_workers", "execution_help", "make_executor"]
