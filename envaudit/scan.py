"""Scan orchestration: resolve the env, explore it, run the probes, correct, report.

``run_scan`` is the one call behind ``envaudit scan`` and the pytest plugin. Exploration and every
probe do all of their work units, so the report depends on the seed and config, not on the load of
the machine; ``budget_s`` is a safety cap only, and work it cuts is listed in ``report.incomplete``.
A probe that raises becomes a finding about that probe; a hanging or crashing env becomes data for
the ``api`` probe; the scan always returns a report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import difflib
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import pandas as pd

from envaudit.conclusion import broken_finding, conclude, lost_finding, version
from envaudit.config import ScanConfig
from envaudit.cost import EnvCost
from envaudit.coverage import ReturnTally, coverage_findings
from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.errors import a_type, user_frame
from envaudit.execution import ExecutionConfig, make_executor
from envaudit.execution.aio import sync_factory
from envaudit.findings import Finding
from envaudit.probe import (
    HUNG_NOTE,
    Probe,
    ProbeContext,
    ProbeInputs,
    ScanShared,
    cap_reason,
    probe_modules,
    probe_names,
    registered_probes,
)
from envaudit.probe_host import IdCounter, ProbeHost, env_modules
from envaudit.probe_run import probe_failure, run_probe_here
from envaudit.recording import Records
from envaudit.report import ProbeStatus, Report
from envaudit.resolve import UsageError, fingerprint, resolve_env
from envaudit.rollout import Problem, RandomPolicy, Runner
from envaudit.seeding import child_rng, child_seed
from envaudit.stats import MIN_SAMPLES

Progress = Callable[[str, float], None]


def select_probes(names: Sequence[str] | None) -> list[Probe]:
    check_probe_names(names)
    return list(registered_probes(names).values())


def check_probe_names(names: Sequence[str] | None) -> None:
    """Raise ``UsageError`` for a name no probe is registered under (nothing is imported)."""
    if names is None:
        return
    known = probe_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        def named(name: str) -> str:
            hint = difflib.get_close_matches(name, known, n=1)
            return f"{name!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")

        raise UsageError(
            f"unknown probe{'s' if len(unknown) > 1 else ''} {', '.join(map(named, unknown))}; "
            f"registered: {', '.join(known)} (`envaudit probes` lists them)"
        )


def _explore(make_env, config: ScanConfig, ids, deadline: float, skipped: list[dict[str, str]],
             executor=None, spec: str | None = None) -> tuple[Records, list[Problem]]:
    """Random-policy rollouts in GRPO-style groups: G episodes from each reset seed, all of them
    unless the env hangs or the safety cap (``deadline``) is reached, which ``skipped`` records.
    The groups go out as one run, so every worker has an episode to play."""
    group_size, n_groups = config.exploration_groups()
    runner = Runner(make_env, step_timeout_s=config.step_timeout_s, max_steps=config.max_steps,
                    success_threshold=config.success_threshold, ids=ids, executor=executor, spec=spec)
    rng = child_rng(config.seed, "explore", "policy")
    seeds = [child_seed(config.seed, "explore", "group", g) % (2**31 - 1) for g in range(n_groups)]
    result = runner.run(RandomPolicy(), [s for s in seeds for _ in range(group_size)], rng=rng, deadline=deadline,
                        tags={"probe": "explore", "policy": "random"},
                        episode_tags=[{"group": g} for g in range(n_groups) for _ in range(group_size)])
    if result.stopped_early and time.monotonic() > deadline and not result.hung:
        done = len(result.records.episodes)
        skipped.append({"probe": "explore", "reason": cap_reason(config.budget_s),
                        "skipped": f"{group_size * n_groups - done} of {group_size * n_groups} exploration episodes"})
    return result.records, result.problems


def _summary(records: Records) -> dict[str, Any]:
    eps = records.episodes
    if eps.empty:
        return {"episodes": 0}
    return {
        "episodes": int(len(eps)),
        "steps": int(len(records.steps)),
        "mean_return": float(eps["return"].mean()),
        "mean_length": float(eps["length"].mean()),
        "outcomes": {k: int(v) for k, v in eps["outcome"].value_counts().sort_index().items()},
        "end_reasons": {k: int(v) for k, v in eps["end_reason"].value_counts().sort_index().items()},
        "success_flag": bool(eps["success"].notna().any()),
    }


def run_scan(
    target: str | Callable[[], gym.Env],
    config: ScanConfig | None = None,
    *,
    progress: Progress | None = None,
    env_id: str | None = None,
    env_args: Mapping[str, Any] | None = None,
    execution: ExecutionConfig | None = None,
    **overrides: Any,
) -> Report:
    """Scan an env (a spec string or a zero-argument factory) and return the report.

    ``env_args`` are the options of a spec string's adapter or factory (``--env-arg``; e.g.
    ``{"tasks": "rows.jsonl"}`` for ``skyrl-gym:gsm8k``).

    ``execution`` says where rollouts run (default: inline, one at a time in this process; the CLI
    defaults to worker processes); it never changes the report, only how long it takes and whether
    a crash of env code is survived."""
    config = dataclasses.replace(config or ScanConfig(), **overrides) if overrides else (config or ScanConfig())
    started = time.monotonic()
    deadline = started + config.budget_s
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    # Workers resolve a bare spec themselves; with options they get the (pickled) factory instead.
    spec = target if isinstance(target, str) and not env_args else None
    if isinstance(target, str):
        env_id, make_env = resolve_env(target, dict(env_args or {}))
    elif env_args:
        raise UsageError(f"env_args {sorted(env_args)} are options of a spec string's adapter or factory; "
                         "a factory passed as the target takes its own: functools.partial(factory, ...)")
    else:
        make_env, env_id = target, env_id or getattr(target, "__name__", repr(target))
    make_env = sync_factory(make_env)  # an env with async reset/step is awaited (execution.aio)
    check_probe_names(config.probes)
    pipeline = config.rollout_pipeline()
    tell = progress or (lambda _msg, _frac: None)

    made = _first_make(make_env, config.step_timeout_s, env_id)
    if made[0] == "usage":
        raise UsageError(made[1])
    if made[0] == "broken":
        broken = made[1]
        return Report(env_id, config.to_dict(), {}, [broken_finding(broken)], [], {"episodes": 0}, created,
                      time.monotonic() - started, version(), broken=broken)
    _, env_fingerprint, action_space, modules = made
    # Worker processes start with the env's libraries imported, so their first make is as quick as
    # this one was (an import inside a timed make would read as a hang). The fork server does those
    # imports while this process imports the probes (torch among them): on two cores that overlap
    # is seconds off every scan under the process executor.
    preload = probe_modules(config.probes) + modules
    executor = make_executor(execution, preload=preload)
    host = None
    try:
        if executor.kind == "processes":
            with _sigint_blocked():
                executor.warm()
        probes = select_probes(config.probes)
        if executor.kind == "processes":  # each probe's own env calls run in a worker process too
            host = ProbeHost(executor, make_env, spec, memory_cap_bytes=executor.memory_cap_bytes,
                             imports=modules, preload=preload)
        return _audit(make_env, env_id, spec, config, probes, pipeline, tell, executor, started, deadline, created,
                      env_fingerprint, action_space, host)
    finally:
        if host is not None:
            host.close()
        executor.close()


@contextlib.contextmanager
def _sigint_blocked():
    """SIGINT ignored by the worker processes started in this block: an ignored signal stays
    ignored across exec and fork (a handler would not), so a Ctrl-C, which the terminal sends to
    the whole process group, never prints a traceback from the fork server importing its preload
    (seconds on a loaded machine) or from a worker; the scanning process handles it (exit 130) and
    ends them. Here it is blocked meanwhile, so one that lands in the block waits for its handler."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _hung_before_enough(exploration: Records, problems: list[Problem]) -> dict[str, Any] | None:
    """The ``broken`` of an env whose exploration a hang stopped before ``MIN_SAMPLES`` episodes
    finished: no check has the episodes it needs, and every probe would wait on the hang again."""
    hang = next((p for p in problems if p.kind == "hang"), None)
    done = len(exploration.episodes)
    if hang is None or done >= MIN_SAMPLES:
        return None
    at = f" at step {hang.step}" if hang.step is not None else ""
    seed = f", reset seed {hang.seed}" if hang.seed is not None else ""
    return {"stage": hang.where or "step", "where": hang.location,
            "message": f"{hang.message}{at}{seed}; {done} exploration episode{'s' if done != 1 else ''} "
                       f"finished before it, fewer than the {MIN_SAMPLES} any check needs"}


def _first_make(make_env, step_timeout_s: float, env_id: str) -> tuple:
    """Make the env once, under a deadline: ``("ok", fingerprint, action space, the modules it is
    made of)``, ``("usage", message)`` when the factory makes no env, or ``("broken", what failed)``."""
    guard = DeadlineWorker("envaudit-make")
    try:
        probe_env = guard.call(make_env, step_timeout_s, what="making the env")
        if not isinstance(probe_env, gym.Env):
            return ("usage", f"{env_id!r} made {a_type(probe_env)}, not a gymnasium.Env; return an env "
                             "instance (a gymnasium.Env subclass) from the factory")
        env_fingerprint = fingerprint(probe_env)
        action_space = probe_env.action_space
        modules = env_modules(probe_env, make_env)
        probe_env.close()
    except (DeadlineExceeded, Exception) as exc:
        return ("broken", {"stage": "make", "message": f"{type(exc).__name__}: {exc}", "where": user_frame(exc)})
    return ("ok", env_fingerprint, action_space, modules)


def _audit(make_env, env_id, spec, config, probes, pipeline, tell, executor, started, deadline, created,
           env_fingerprint, action_space, host: ProbeHost | None = None) -> Report:
    """Explore and run the probes (everything after the env proved it can be made); ``host`` runs
    each probe in a worker process of its own."""
    # Progress by the probes' relative cost; exploration counts as one probe of weight 1.
    total_weight = 1.0 + sum(p.weight for p in probes)
    tell("exploring", 0.0)
    ids = IdCounter()
    incomplete: list[dict[str, str]] = []
    exploration, problems = _explore(make_env, config, ids, deadline, incomplete, executor, spec)
    cost = EnvCost(config.max_env_steps)  # every probe's env steps and episodes, exploration's first
    cost.add_episodes("explore", exploration.episodes)
    lost = [p for p in problems if p.kind in ("crash", "memory")]
    tally = ReturnTally()  # every episode any probe runs, kept or not: the coverage check's view
    tally.add(exploration.episodes)
    hung = _hung_before_enough(exploration, problems)
    if (exploration.episodes.empty and problems) or hung is not None:
        # Nothing (or too little) ran to the end of an episode: there is nothing to audit, only a
        # broken env; a hang ends the scan here, instead of every probe waiting on it again.
        first = problems[0]
        broken = hung or {"stage": first.where, "message": first.message, "where": first.location}
        return Report(env_id, config.to_dict(), env_fingerprint, [broken_finding(broken)], [],
                      _summary(exploration), created, time.monotonic() - started, version(),
                      incomplete=incomplete, broken=broken, cost=cost.section())
    hangs = [p for p in problems if p.kind == "hang"]
    shared = ScanShared(deadline=deadline, ids=ids, hangs=hangs, lost=lost, tally=tally, executor=executor,
                        cost=cost)
    # A probe that plays beside the others has state of its own: its id block, exploration's hangs.
    own = {p.name: ScanShared(deadline=deadline, ids=IdCounter(k * BESIDE_IDS), hangs=list(hangs), lost=[],
                              tally=ReturnTally(), executor=executor, cost=cost)
           for k, p in enumerate((p for p in probes if p.beside), start=1)}
    for probe in probes:  # every probe is listed in the cost section, in order, even one that stepped no env
        cost.add(probe.name, 0, 0)

    def context(probe: Probe) -> ProbeContext:
        mine = exploration if probe.name not in own else Records(exploration.steps.copy(), exploration.episodes.copy())
        return ProbeContext(ProbeInputs(env_id, make_env, config, mine, problems, pipeline, probe.name, spec),
                            own.get(probe.name, shared))

    played: dict[str, _Played] = {}
    alongside = _plays_beside(probes, config, executor, host)
    beside = {p.name: _Beside(p, context(p), played) for p in probes if p.name in alongside}
    done_weight = 1.0
    try:
        for probe in probes:
            if probe.name in beside:
                continue
            tell(f"probe {probe.name}", done_weight / total_weight)
            done_weight += probe.weight
            if time.monotonic() >= deadline:
                played[probe.name] = _Played.not_run(probe, "the wall-clock safety cap was reached",
                                                     cap_reason(config.budget_s))
                continue
            if cost.reached():  # the unit cap: the same seed skips the same probes
                played[probe.name] = _Played.not_run(probe, cost.cap_reason(), cost.cap_reason())
                continue
            played[probe.name] = _play(probe, context(probe), host)
        for name, running in beside.items():
            tell(f"probe {name}", done_weight / total_weight)
            running.wait()
            done_weight += running.probe.weight
    finally:
        for name, running in beside.items():
            running.stop(own[name])
    findings: list[Finding] = []
    kept: list[Records] = [exploration]
    tables: dict[str, pd.DataFrame] = {}
    statuses: list[ProbeStatus] = []
    # Which probe's work each lost episode was: exploration's own first, then each probe's.
    lost_in = {id(p): "explore" for p in problems if p.kind in ("crash", "memory")}
    for probe in probes:
        part = played[probe.name]
        findings.extend(part.findings)
        kept.extend(part.kept)
        incomplete.extend(part.skipped)
        tables.update({f"{probe.name}_{k}": v for k, v in part.tables.items()})
        statuses.append(part.status)
        if probe.name in own:  # the scan's own lists hold the others' already
            lost.extend(part.lost)
            tally.merge(own[probe.name].tally)
        lost_in.update({id(p): probe.name for p in part.lost})
    tell("done", 1.0)
    if lost:
        findings.append(lost_finding(lost, [lost_in.get(id(p), "") for p in lost]))
    records = Records.concat(kept)
    # Probes may keep the same episodes twice (a replay kept by two analyses): one row each.
    records.episodes = records.episodes.drop_duplicates("episode_id", keep="first")
    records.steps = records.steps.drop_duplicates(["episode_id", "step"], keep="first").reset_index(drop=True)
    return conclude(env_id, config.to_dict(), env_fingerprint, findings, statuses, _summary(exploration),
                    alpha=config.alpha, created=created, started=started, records=records, tables=tables,
                    incomplete=incomplete,
                    after_correction=coverage_findings(records, action_space, tally,
                                                     (env_fingerprint or {}).get("adapter")),
                    cost=cost.section())  # never a falsely clean report


BESIDE_IDS = 10**9
"""The k-th probe that plays beside the others (``Probe.beside``, k = 1, 2, ... in probe order)
numbers its episodes from ``k * BESIDE_IDS``: its ids do not depend on what played at the same time."""


@dataclasses.dataclass
class _Played:
    """One probe's part of the report, put in probe order once every probe is done."""

    status: ProbeStatus
    findings: list[Finding]
    kept: list[Records]
    skipped: list[dict[str, str]]
    tables: dict[str, pd.DataFrame]
    lost: list[Problem]
    """The episodes whose worker process died in its runs."""

    @classmethod
    def not_run(cls, probe: Probe, why: str, reason: str) -> _Played:
        """A probe the scan skipped: ``why`` in its status, ``reason`` in the report's ``incomplete``."""
        return cls(ProbeStatus(probe.name, "skipped", 0.0, 0, why), [], [], [
            {"probe": probe.name, "skipped": "the whole probe", "reason": reason}], {}, [])


def _play(probe: Probe, ctx: ProbeContext, host: ProbeHost | None) -> _Played:
    """Run one probe (``_run_probe``) and take its part of the report."""
    now = time.monotonic()
    hangs_before, lost_before = len(ctx.hangs), len(ctx.lost)
    status, error, produced = _run_probe(probe, ctx, host)
    if status == "ok" and (len(ctx.hangs) > hangs_before or HUNG_NOTE in ctx.notes):
        # Its env work stopped at a hang (its own, or one seen before it): not a full run.
        status = "hung"
        error = ctx.notes.get(HUNG_NOTE) or f"stopped by a hang: {ctx.hangs[hangs_before].message}"
    if status == "crashed" and not produced:  # its worker process died: its checks are missing
        produced = [probe_failure(probe, status, error)]
    part = _Played(ProbeStatus(probe.name, status, time.monotonic() - now, len(produced), error, ctx.notes),
                   produced, list(ctx.kept), list(ctx.skipped), dict(ctx.tables), list(ctx.lost[lost_before:]))
    ctx.close()
    return part


def _plays_beside(probes: Sequence[Probe], config: ScanConfig, executor: Any, host: ProbeHost | None) -> set[str]:
    """The probes that play on a thread of their own while the others play in order: those marked
    ``beside``, where the executor's workers bound every env call in flight together (threads,
    asyncio) and no unit cap is set (``--max-env-steps`` stops the probe that crosses it, which must
    not depend on timing). Elsewhere they play in their place, with the same state of their own."""
    if host is not None or getattr(executor, "kind", None) not in ("threads", "asyncio") \
            or config.max_env_steps is not None or len(probes) < 2:
        return set()
    return {p.name for p in probes if p.beside}


class _Beside:
    """A probe playing on a thread of its own (``_plays_beside``); its part lands in ``played``."""

    def __init__(self, probe: Probe, ctx: ProbeContext, played: dict[str, _Played]) -> None:
        self.probe = probe
        self.error: BaseException | None = None

        def body() -> None:
            try:
                played[probe.name] = _play(probe, ctx, None)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the scan's thread
                self.error = exc

        self.thread = threading.Thread(target=body, name=f"envaudit-beside-{probe.name}", daemon=True)
        self.thread.start()

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error

    def stop(self, state: ScanShared) -> None:
        """After the scan's own thread failed (an interrupt): the probe stops at its next check of the
        safety cap."""
        if self.thread.is_alive():
            state.deadline = float("-inf")
            self.thread.join(timeout=5.0)


def _run_probe(probe: Probe, ctx: ProbeContext, host: ProbeHost | None = None) -> tuple[str, str | None, list[Finding]]:
    """Run one probe in a worker process of its own (``host``) or, without one or when the probe
    cannot be sent there, in this process."""
    hosted = host.run(probe, ctx) if host is not None else None
    return hosted if hosted is not None else run_probe_here(probe, ctx)


def default_out_dir(env_id: str) -> str:
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in env_id).strip("-")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"reports/{slug}-{stamp}"


__all__ = ["default_out_dir", "run_scan", "select_probes"]
