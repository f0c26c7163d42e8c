"""Where a suite's env scans run: in this process, in local worker processes, or as Ray tasks.

Each env's scan is one unit of work (``scan_entry``): resolve the env, ``run_scan`` it exactly as
``envaudit scan`` would, and hand back the report folder's files. Scans never share state, so the
executor changes only where and when a scan runs, never what it finds. The executors are the
standard library's ``ProcessPoolExecutor`` and Ray: nothing here schedules work itself, it only
hands jobs over and collects results and progress messages as they come.

Inside a Ray task a scan runs its rollouts inline (its entry's config names no executor): the
task holds one of Ray's CPUs, and the suite's parallelism is its envs. ``--executor ray`` on a
single env runs that env's rollouts on Ray actors instead (``envaudit.execution.ray_exec``).

Only the suite runner (``envaudit.suite``) writes files: a scan renders its report folder into a
temporary folder on whichever machine runs it and returns the bytes, so a Ray worker on another
node never needs the driver's disk.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envaudit.errors import UsageError
from envaudit.execution.ray_exec import ray_module, start_ray  # noqa: F401 - this module's API too
from envaudit.suite_file import SuiteEntry

EXECUTORS = ("local", "ray")
OnProgress = Callable[[str, str, float], None]
"""(env name, message, fraction of that env's scan done)."""
POLL_S = 0.2
"""How long the runner waits for a result before it shows the progress messages that came meanwhile;
a display interval, it decides nothing about the work."""
RAY_DEFAULT_CPUS = min(4, os.cpu_count() or 1)
"""CPUs of a local Ray instance when --workers does not say: a few, so a suite on a laptop leaves
the machine usable."""


@dataclass(frozen=True)
class Job:
    """One env to scan, and where the user's command ran: its folder (file targets are relative to
    it) and its import paths (module targets may need them), for the process that scans it."""

    entry: SuiteEntry
    identity: str
    cwd: str | None = None
    paths: tuple[str, ...] = ()

    @classmethod
    def here(cls, entry: SuiteEntry, identity: str) -> Job:
        return cls(entry, identity, os.getcwd(), tuple(p for p in sys.path if p))


@dataclass
class Outcome:
    """A finished scan: the report folder's files (``report.json`` among them), or why it could not run."""

    name: str
    identity: str
    files: dict[str, bytes] = field(default_factory=dict)
    error: str | None = None
    crashed: bool = False
    """The process scanning it died: the env could not be audited (exit code 3), not a usage error."""


def scan_entry(job: Job, progress: Callable[[str, float], None] | None = None) -> Outcome:
    """Scan one env as ``envaudit scan`` does, render its report folder, return the files."""
    from envaudit.reporting import write_folder
    from envaudit.resolve import resolve_env
    from envaudit.scan import run_scan

    # After the worker's own paths: the user's folders never shadow what the worker has installed.
    sys.path.extend(p for p in job.paths if p not in sys.path)
    entry = job.entry
    previous = os.getcwd()
    moved = job.cwd is not None and job.cwd != previous and os.path.isdir(job.cwd)
    try:
        if moved:
            os.chdir(job.cwd)
        env_id, make_env = resolve_env(entry.target, dict(entry.env_args))
        report = run_scan(make_env, entry.config, env_id=env_id, progress=progress)
    except UsageError as exc:
        return Outcome(entry.name, job.identity, error=str(exc))
    finally:
        if moved:
            os.chdir(previous)
    with tempfile.TemporaryDirectory(prefix="envaudit-suite-") as tmp:
        folder = write_folder(report, Path(tmp) / "report")
        files = {p.relative_to(folder).as_posix(): p.read_bytes()
                 for p in sorted(folder.rglob("*")) if p.is_file()}
    return Outcome(entry.name, job.identity, files)


def run_jobs(jobs: Sequence[Job], *, executor: str = "local", workers: int | None = None,
             ray_address: str | None = None,
             on_progress: OnProgress, on_done: Callable[[Outcome], None]) -> None:
    """Scan every job and call ``on_done`` with each outcome as it finishes (in this thread)."""
    if not jobs:
        return
    if executor == "ray":
        _run_ray(jobs, workers, ray_address, on_progress, on_done)
    elif workers is None or workers <= 1:
        for job in jobs:
            name = job.entry.name
            on_progress(name, "starting", 0.0)
            on_done(scan_entry(job, lambda msg, frac, name=name: on_progress(name, msg, frac)))
    else:
        _run_processes(jobs, workers, on_progress, on_done)


def _drain(source: Any, on_progress: OnProgress, timeout: float) -> None:
    """Show every progress message waiting in ``source`` (a multiprocessing queue), waiting up to
    ``timeout`` for the first."""
    try:
        message = source.get(timeout=timeout)
        while True:
            on_progress(*message)
            message = source.get_nowait()
    except queue_module.Empty:
        return


# -- local worker processes ----------------------------------------------------------------------
_QUEUE: Any = None


def _init_worker(progress_queue: Any) -> None:
    # Ctrl-C reaches the whole process group; the runner alone handles it (and ends the workers),
    # so a worker never reports an interrupted scan as a result.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _QUEUE
    _QUEUE = progress_queue


def _pool_job(job: Job) -> Outcome:
    name = job.entry.name
    _QUEUE.put((name, "starting", 0.0))
    return scan_entry(job, lambda msg, frac: _QUEUE.put((name, msg, frac)))


def _run_processes(jobs: Sequence[Job], workers: int, on_progress: OnProgress,
                   on_done: Callable[[Outcome], None]) -> None:
    # spawn, not fork: the runner may hold torch's thread pool and probe threads, which a forked
    # child would inherit half-locked.
    ctx = multiprocessing.get_context("spawn")
    progress_queue = ctx.Queue()
    pool = ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx, initializer=_init_worker,
                               initargs=(progress_queue,))
    futures = {pool.submit(_pool_job, job): job for job in jobs}
    try:
        while futures:
            done, _ = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
            _drain(progress_queue, on_progress, 0.0)
            for future in done:
                job = futures.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    # A worker died (killed for memory, or a crash in native code): every scan that
                    # was still running fails with it. They are not finished, so a rerun retries them.
                    outcome = Outcome(job.entry.name, job.identity, crashed=True,
                                      error="the worker process scanning this env (or one beside it) died "
                                            "before the scan finished, most likely killed for memory or a "
                                            "crash in native code; rerun the suite with --resume to "
                                            "retry it, or scan the env alone to see which")
                on_done(outcome)
    finally:
        if futures:  # interrupted or failed: end the scans still running instead of waiting for them
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()
        pool.shutdown(wait=not futures, cancel_futures=True)
        progress_queue.close()


# -- Ray -----------------------------------------------------------------------------------------
def _ray_job(job: Job, progress_queue: Any) -> Outcome:
    name = job.entry.name
    progress_queue.put_nowait((name, "starting", 0.0))
    return scan_entry(job, lambda msg, frac: progress_queue.put_nowait((name, msg, frac)))


def _run_ray(jobs: Sequence[Job], workers: int | None, address: str | None, on_progress: OnProgress,
             on_done: Callable[[Outcome], None]) -> None:
    ray = ray_module()
    from ray.util.queue import Queue

    started = start_ray(address, workers or RAY_DEFAULT_CPUS)
    died = (ray.exceptions.WorkerCrashedError, ray.exceptions.OutOfMemoryError, ray.exceptions.NodeDiedError)
    refs: dict[Any, Job] = {}
    progress_queue = None
    try:
        progress_queue = Queue(actor_options={"num_cpus": 0})
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_job)
        refs = {task.remote(job, progress_queue): job for job in jobs}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=POLL_S)
            for message in progress_queue.get_nowait_batch(progress_queue.qsize()):
                on_progress(*message)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    outcome = ray.get(ref)
                except died as exc:  # the worker or its node died: not audited, retried by a rerun
                    outcome = Outcome(job.entry.name, job.identity, crashed=True,
                                      error=f"the Ray worker scanning this env died ({type(exc).__name__}); "
                                            "rerun the suite with --resume to retry it, or scan the env alone "
                                            "to see why")
                on_done(outcome)
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        if progress_queue is not None and not started:
            progress_queue.shutdown(force=True)  # a cluster that stays up keeps no actor of ours
        if started:
            ray.shutdown()


__all__ = ["EXECUTORS", "Job", "Outcome", "run_jobs", "scan_entry", "start_ray"]
