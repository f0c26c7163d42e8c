"""Each probe's run in a worker process, so env code anywhere in a scan is isolated.

Episodes played through ``ctx.run`` already run in the scan's episode pool. A probe also calls env
code of its own: the instance it inspects (``ctx.env``), Gymnasium's ``check_env``, its own raw
stepping loops, runs that report back through shared state (``Policy.ordered``) and the GRPO
probe's lockstep groups. Under the process executor the whole probe runs in a *host*: a fresh
worker process per probe, from the same machinery as the episode pool. Its ``ctx.run`` asks the
scanning process to play the episodes on the episode pool (so a run is as parallel as before);
everything else the probe does runs in the host. A host that dies (a segfault, ``os._exit``, the
OOM killer) or grows past the memory cap costs that probe: it is reported as ``crashed`` with an
``env-error`` finding naming the call, step and seed where the probe said them
(``execution.worker.note``), and the scan goes on with the next probe in a fresh worker.

One worker process hosts probe after probe while it stays fit: a fresh process per probe cost
each probe its start, its lazy imports and the first use of its libraries. Each probe still gets
its own env instances, its own env factory (resolved or unpickled anew) and its own copy of the
scan's records; the global random generators are reset before it, and after it the host checks
that nothing else in the process changed (``execution.reuse``: module state of the env and of
envaudit, process settings, leftover threads, memory): when something did, the next probe gets
a fresh worker, so what one probe leaves behind never reaches another's result.

What a probe hands back (findings, kept episodes, tables, notes, skipped work) and the scan's
shared state it updates (episode ids, hangs, lost episodes, the return tally) travel back with its
result, so a probe run in a host gives the report it gives in the scanning process: the same seed
gives the same report.json under every executor and any number of workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import cloudpickle
import gymnasium as gym

from envaudit.execution import Lost, ProcessExecutor, WorkerError
from envaudit.execution.aio import sync_factory
from envaudit.execution.lanes import ProcessLanes
from envaudit.execution.reuse import Randomness, Snapshot, watched_modules
from envaudit.execution.slots import Slot
from envaudit.execution.worker import rss_bytes
from envaudit.findings import Finding
from envaudit.probe import Probe, ProbeContext, ProbeInputs, ScanShared
from envaudit.probe_run import run_probe_here
from envaudit.rollout import Problem, Runner, RunResult


class IdCounter:
    """The scan's episode ids: an iterator whose position a probe run elsewhere can hand back."""

    def __init__(self, start: int = 0) -> None:
        self.value = start

    def __iter__(self) -> IdCounter:
        return self

    def __next__(self) -> int:
        value = self.value
        self.value += 1
        return value


@dataclasses.dataclass
class _Job:
    """What a host needs to run one probe: its context, less the scanning process's own objects."""

    probe: Probe
    inputs: ProbeInputs
    """``make_env`` None: the host resolves ``spec`` itself."""
    shared: dict[str, Any]
    """The scan-wide state the probe may update (``_SHARED``)."""
    deadline: float
    first_id: int
    where: tuple[str, list[str]]
    imports: list[str]
    recycle_bytes: int | None = None
    """Memory the worker may have gained since its first probe and still host the next one."""


class _Remote:
    """A host's ``ctx.executor``: ``ProbeContext.run`` sends its runs to the scanning process."""

    kind = "remote"

    def __init__(self, slot: Slot) -> None:
        self.slot = slot

    def run(self, request: bytes) -> RunResult:
        return self.slot.ask(request)

    def lanes(self, fn: Callable, shared: Any, lanes: int, poll_s: float | None) -> _RemoteLanes:
        """Lockstep lanes on the scan's episode pool (``execution.lanes``): the GRPO probe's envs
        step on the episode workers, its policy stays in this probe worker."""
        return _RemoteLanes(self.slot, cloudpickle.dumps((fn, shared)), lanes)


class _RemoteLanes:
    """A probe worker's handle on lanes that the scanning process keeps on its episode pool."""

    def __init__(self, slot: Slot, blob: bytes, lanes: int) -> None:
        self.slot = slot
        self.lanes = lanes
        self.session = slot.ask(("lanes-open", blob, lanes))

    def turn(self, requests: list) -> list:
        return self.slot.ask(("lanes-turn", self.session, requests))

    def close(self) -> None:
        self.slot.ask(("lanes-close", self.session, None))


_SHARED = ("hangs", "lost", "tally", "cost")
"""The scan-wide state a probe may update and the scan reads after it."""


class _Worker:
    """What a host process keeps from its first probe: its random state and its memory then."""

    randomness: Randomness | None = None
    rss = 0


def _host(slot: Slot, _shared: Any, blob: bytes) -> dict[str, Any] | bytes:
    """Run one probe in this worker process (the host side)."""
    from envaudit.resolve import resolve_env

    slot.rebase(now=False)  # the cap counts what the probe and its env add once it is loaded
    try:
        job: _Job = cloudpickle.loads(blob)
        cwd, path = job.where
        if os.getcwd() != cwd:
            os.chdir(cwd)
        sys.path[:] = path
        # Resolved anew for every probe, never from a cache: a factory may hold state of its own.
        make_env = job.inputs.make_env or sync_factory(resolve_env(job.inputs.spec)[1])
        for module in [*job.imports, *job.probe.preload]:
            with contextlib.suppress(Exception):  # a module the scanning process had: a head start only
                importlib.import_module(module)
        if _Worker.randomness is None:
            _Worker.randomness, _Worker.rss = Randomness(), rss_bytes() or 0
        _Worker.randomness.restore()
        before = Snapshot(watched_modules(job.imports))
        hangs = len(job.shared["hangs"])
        slot.rebase()
    except Exception as exc:  # noqa: BLE001 - the scanning process runs the probe itself
        return {"load_error": f"{type(exc).__name__}: {exc}"}
    ids = IdCounter(job.first_id)
    ctx = ProbeContext(dataclasses.replace(job.inputs, make_env=make_env),
                       ScanShared(deadline=job.deadline, ids=ids, executor=_Remote(slot), **job.shared))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        status, error, produced = run_probe_here(job.probe, ctx)
        ctx.close()
    out = {"status": status, "error": error, "findings": produced, "kept": ctx.kept, "tables": ctx.tables,
           "notes": ctx.notes, "skipped": ctx.skipped, "next_id": ids.value,
           "shared": {k: getattr(ctx.shared, k) for k in _SHARED},
           "warnings": [(w.category, str(w.message)) for w in caught],
           "unfit": _unfit(status, len(ctx.hangs) > hangs, before, job.recycle_bytes)}
    try:  # pickled here, so a result that cannot travel is the probe's failure, not a dead worker
        return cloudpickle.dumps(out)
    except Exception as exc:
        return {"result_error": f"its results could not be sent back from its worker process: "
                                f"{type(exc).__name__}: {exc}"}


def _unfit(status: str, hung: bool, before: Snapshot, recycle_bytes: int | None) -> str | None:
    """Why this worker must not host the next probe, or None."""
    if status != "ok":
        return f"the probe ended {status}"
    if hung:  # the abandoned call may still be running on its thread
        return "an env call hung"
    grown = (rss_bytes() or 0) - _Worker.rss
    if recycle_bytes is not None and grown > recycle_bytes:
        return f"it grew by {grown / 2**20:.0f} MiB since its first probe"
    return before.changed()


def env_modules(env: gym.Env, make_env: Callable) -> list[str]:
    """The modules an env is made of: its factory's, its classes' (wrappers included) and those of
    the objects it holds (a dataset, a simulator handle), as loaded in this process."""
    objects: list[Any] = [make_env, getattr(make_env, "func", None)]
    inner: Any = env
    while inner is not None:
        objects.append(type(inner))
        objects.extend(type(v) for v in getattr(inner, "__dict__", {}).values())
        inner = getattr(inner, "env", None)
    names = {getattr(o, "__module__", None) for o in objects}
    return sorted(n for n in names if isinstance(n, str) and n in sys.modules and n not in ("__main__", "builtins"))


def lost_problem(lost: Lost, probe: str) -> Problem:
    """A dead host as the scan reports lost episodes: the call, step and seed the probe noted."""
    during = {"": "its own work, between env calls", "make": "making the env"}.get(lost.call, f"{lost.call}()")
    at = f" at step {lost.step}" if lost.step is not None else ""
    seed = f" (reset seed {lost.seed})" if lost.seed is not None else ""
    message = f"{lost.detail}, in the {probe} probe, during {during}{at}{seed}"
    return Problem(lost.kind, lost.call, message, lost.seed, lost.step)


class ProbeHost:
    """Runs probes in a worker process (the same one while it stays fit, ``execution.reuse``);
    their episode runs go to ``episodes`` (the scan's pool)."""

    def __init__(self, episodes: ProcessExecutor, make_env: Callable, spec: str | None, *,
                 memory_cap_bytes: int | None, imports: list[str], preload: list[str],
                 recycle_bytes: int | None = None, reuse: bool = True) -> None:
        """``imports``: the modules the env is made of (``env_modules``), imported in each host
        before the probe starts, so the first make there is not slowed by them. ``recycle_bytes``:
        a host that gained more than this since its first probe is replaced (default: half the
        memory cap). ``reuse=False``: a fresh worker for every probe."""
        self.episodes = episodes
        self.make_env = make_env
        self.spec = spec
        self.imports = list(imports)
        self.reuse = reuse
        self.recycle_bytes = recycle_bytes if recycle_bytes is not None else (
            memory_cap_bytes // 2 if memory_cap_bytes else None)
        self.replaced: list[tuple[str, str]] = []
        """(probe, why) for each probe after which the worker was not reused (tests read it)."""
        # The address-space backstop stays off: the probe's own libraries (torch's thread pools)
        # reserve far more than they touch; the RSS watch is the cap.
        self.pool = ProcessExecutor(1, memory_cap_bytes=memory_cap_bytes, recycle_items=None if reuse else 1,
                                    preload=preload, cap_address_space=False)
        self._lanes: dict[int, ProcessLanes] = {}  # a probe's lockstep lanes on the episode pool

    def close(self) -> None:
        self.pool.close()

    def _replace(self, probe: Probe, why: str) -> None:
        self.replaced.append((probe.name, why))
        self.pool.retire()

    def _answer(self, request: bytes | tuple) -> Any:
        if isinstance(request, tuple):
            return self._lane_call(*request)
        make_env, kwargs = cloudpickle.loads(request)
        c = kwargs.pop("config")
        runner = Runner(make_env or self.make_env, step_timeout_s=c.step_timeout_s, max_steps=c.max_steps,
                        success_threshold=c.success_threshold, ids=iter(kwargs.pop("ids")), executor=self.episodes,
                        spec=self.spec if make_env is None else None)
        return runner.run(kwargs.pop("policy"), kwargs.pop("seeds"), ordered=False, **kwargs)

    def _lane_call(self, what: str, arg: Any, more: Any) -> Any:
        if what == "lanes-open":
            fn, shared = cloudpickle.loads(arg)
            lanes = ProcessLanes(self.episodes, fn, shared, more)
            self._lanes[lanes.key] = lanes
            return lanes.key
        if what == "lanes-turn":
            return self._lanes[arg].turn(more)
        lanes = self._lanes.pop(arg, None)
        if lanes is not None:
            lanes.close()
        return None

    def _close_lanes(self) -> None:
        """End the lanes a probe left open (it crashed, or its worker died)."""
        for lanes in self._lanes.values():
            lanes.close()
        self._lanes.clear()

    def run(self, probe: Probe, ctx: ProbeContext) -> tuple[str, str | None, list[Finding]] | None:
        """Run ``probe`` in a host and bring its results into ``ctx``; None when it cannot be sent
        there (the caller runs it in this process)."""
        inputs = dataclasses.replace(ctx.inputs, make_env=None) if self.spec is not None else ctx.inputs
        shared = {k: getattr(ctx.shared, k) for k in _SHARED}
        assert isinstance(ctx.ids, IdCounter), "a scan that hosts probes counts episode ids with IdCounter"
        try:
            blob = cloudpickle.dumps(_Job(probe, inputs, shared, ctx.deadline, ctx.ids.value, (os.getcwd(), list(sys.path)), self.imports,
                                          self.recycle_bytes))
        except Exception as exc:
            warnings.warn(f"probe {probe.name!r} cannot be sent to a worker process ({type(exc).__name__}: {exc}), "
                          "so it runs in the scanning process without isolation; make the env factory "
                          "picklable, or scan a spec string", RuntimeWarning, stacklevel=3)
            return None
        try:
            [(_, out)] = list(self.pool.map(_host, None, [blob], calls=self._answer))
        except WorkerError as exc:  # a bug on the host's side of the probe run, not the env
            self._close_lanes()
            self._replace(probe, "the host failed")
            return "crashed", str(exc).splitlines()[0], []
        self._close_lanes()
        if isinstance(out, Lost):
            self.replaced.append((probe.name, f"its worker process was lost ({out.kind})"))  # the pool replaced it
            if out.kind not in ("crash", "memory"):  # only guarded calls are timed: never in a host
                return "crashed", f"its worker process was lost: {out.detail}", []
            problem = lost_problem(out, probe.name)
            ctx.lost.append(problem)
            return "crashed", problem.message, []
        if isinstance(out, bytes):
            out = cloudpickle.loads(out)
        if out.get("unfit") or "result_error" in out or "load_error" in out:
            self._replace(probe, out.get("unfit") or "its results or job could not travel")
        if "result_error" in out:
            return "crashed", out["result_error"], []
        if "load_error" in out:
            warnings.warn(f"probe {probe.name!r} could not be loaded in a worker process ({out['load_error']}), "
                          "so it runs in the scanning process without isolation", RuntimeWarning, stacklevel=3)
            return None
        for category, message in out["warnings"]:
            warnings.warn(message, category, stacklevel=3)
        ctx.kept.extend(out["kept"])
        ctx.tables.update(out["tables"])
        ctx.notes.update(out["notes"])
        ctx.skipped.extend(out["skipped"])
        shared = out["shared"]
        # Lists the probe can only add to: the new entries are those past what it was sent.
        ctx.hangs.extend(shared["hangs"][len(ctx.hangs):])
        ctx.lost.extend(shared["lost"][len(ctx.lost):])
        if ctx.tally is not None:
            vars(ctx.tally).update(vars(shared["tally"]))
        if ctx.cost is not None:
            vars(ctx.cost).update(vars(shared["cost"]))
        ctx.ids.value = out["next_id"]
        return out["status"], out["error"], out["findings"]

