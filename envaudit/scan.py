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
    findings: list[Finding] = []
    # Progress by the probes' relative cost; exploration counts as one probe of weight 1.
    total_weight = 1.0 + sum(p.weight for p in probes)
    tell("exploring", 0.0)
    ids = IdCounter()
    incomplete: list[dict[str, str]] = []
    exploration, problems = _explore(make_env, config, ids, deadline, incomplete, executor, spec)
    cost = EnvCost(config.max_env_steps)  # every probe's env steps and episodes, exploration's first
    cost.add_episodes("explore", exploration.episodes)
    lost = [p for p in problems if p.kind in ("crash", "memory")]
    lost_in = {id(p): "explore" for p in lost}  # which probe's work each lost episode was
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
    kept: list[Records] = [exploration]
    tables: dict[str, pd.DataFrame] = {}
    statuses: list[ProbeStatus] = []
    done_weight = 1.0
    for probe in probes:
        now = time.monotonic()
        cost.add(probe.name, 0, 0)  # listed in the cost section even when it stepped no env
        tell(f"probe {probe.name}", done_weight / total_weight)
        done_weight += probe.weight
        if now >= deadline:
            incomplete.append({"probe": probe.name, "skipped": "the whole probe",
                               "reason": cap_reason(config.budget_s)})
            statuses.append(ProbeStatus(probe.name, "skipped", 0.0, 0, "the wall-clock safety cap was reached"))
            continue
        if cost.reached():  # the unit cap: the same seed skips the same probes
            incomplete.append({"probe": probe.name, "skipped": "the whole probe", "reason": cost.cap_reason()})
            statuses.append(ProbeStatus(probe.name, "skipped", 0.0, 0, cost.cap_reason()))
            continue
        ctx = ProbeContext(ProbeInputs(env_id, make_env, config, exploration, problems, pipeline, probe.name, spec),
                           shared)
        hangs_before = len(shared.hangs)
        status, error, produced = _run_probe(probe, ctx, host)
        if status == "ok" and (len(shared.hangs) > hangs_before or HUNG_NOTE in ctx.notes):
            # Its env work stopped at a hang (its own, or one seen before it): not a full run.
            status = "hung"
            error = ctx.notes.get(HUNG_NOTE) or f"stopped by a hang: {shared.hangs[hangs_before].message}"
        if status == "crashed" and not produced:  # its worker process died: its checks are missing
            produced = [probe_failure(probe, status, error)]
        lost_in.update({id(p): probe.name for p in lost if id(p) not in lost_in})
        findings.extend(produced)
        kept.extend(ctx.kept)
        incomplete.extend(ctx.skipped)
        tables.update({f"{probe.name}_{k}": v for k, v in ctx.tables.items()})
        statuses.append(ProbeStatus(probe.name, status, time.monotonic() - now, len(produced), error, ctx.notes))
        ctx.close()
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
