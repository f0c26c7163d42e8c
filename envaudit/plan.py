"""``envaudit scan --plan``: what a scan will cost, in env steps per probe, before paying for it.

The plan plays the first exploration group (G episodes, the same seeds and policy a scan starts
with) one at a time in this process, timing them (after one untimed warm-up episode). Each probe that declares its work
(``Probe.plan``: episodes at these settings, from those first episodes) gets that many episodes
times their mean length in steps; exploration's are exact. The predicted wall time is the steps
at the measured seconds per step (and per reset), serially and divided over ``workers``, the best
the pool can do. No report folder is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from envaudit.config import ScanConfig
from envaudit.errors import UsageError
from envaudit.execution.aio import sync_factory
from envaudit.resolve import resolve_env
from envaudit.rollout import RandomPolicy, Runner
from envaudit.scan import select_probes
from envaudit.seeding import child_rng, child_seed
from envaudit.toolenv import ToolEnv


@dataclass
class ProbePlan:
    name: str
    episodes: int | None
    """None: the probe does not declare its work (``Probe.plan``)."""
    env_steps: int | None
    cap: bool = False
    """The probe may stop before ``episodes`` (``Probe.plan_is_cap``): they are the most it plays."""


@dataclass
class ScanPlan:
    env_id: str
    pilot_episodes: int
    mean_length: float
    step_s: float
    reset_s: float
    workers: int
    probes: list[ProbePlan] = field(default_factory=list)

    @property
    def env_steps(self) -> int:
        return sum(p.env_steps or 0 for p in self.probes)

    @property
    def episodes(self) -> int:
        return sum(p.episodes or 0 for p in self.probes)

    @property
    def undeclared(self) -> list[str]:
        return [p.name for p in self.probes if p.episodes is None]

    def serial_s(self) -> float:
        return self.env_steps * self.step_s + self.episodes * self.reset_s

    def lines(self) -> list[str]:
        """The plan as the terminal shows it."""
        width = max(len(p.name) for p in self.probes)
        out = [f"plan for {self.env_id}: {self.pilot_episodes} first episodes timed, mean length "
               f"{self.mean_length:.1f} steps, {self.step_s * 1e3:.2f} ms a step, {self.reset_s * 1e3:.2f} ms a reset",
               f"{'probe':<{width}}  {'episodes':>9}  {'env steps':>10}"]
        for p in self.probes:
            if p.episodes is None:
                out.append(f"{p.name:<{width}}  {'?':>9}  {'?':>10}  (the probe does not declare its work)")
            else:
                out.append(f"{p.name:<{width}}  {p.episodes:>9,}  {p.env_steps:>10,}"
                           + ("  (at most: a run with nothing left to learn stops early)" if p.cap else ""))
        least = "at least " if self.undeclared else ""
        serial = self.serial_s()
        capped = " if no probe stops early" if any(p.cap for p in self.probes) else ""
        out.append(f"{'total':<{width}}  {self.episodes:>9,}  {self.env_steps:>10,}  ({least}what the scan will "
                   f"step{capped})")
        out.append(f"predicted wall time in env calls: {least}{_duration(serial)} serially, {least}"
                   f"{_duration(serial / max(1, self.workers))} at --workers {self.workers} "
                   "(if every probe's episodes fan out)")
        return out


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def plan_scan(target: str | Callable[[], gym.Env], config: ScanConfig, *, workers: int,
              env_args: Mapping[str, Any] | None = None) -> ScanPlan:
    """Time the first exploration group and size each probe's work at ``config``'s settings."""
    if isinstance(target, str):
        env_id, make_env = resolve_env(target, dict(env_args or {}))
    else:
        make_env, env_id = target, getattr(target, "__name__", repr(target))
    make_env = sync_factory(make_env)
    probes = select_probes(config.probes)
    group_size, n_groups = config.exploration_groups()
    # The scan's own first group: the same seed and policy stream as exploration's start.
    seed = child_seed(config.seed, "explore", "group", 0) % (2**31 - 1)
    runner = Runner(make_env, step_timeout_s=config.step_timeout_s, max_steps=config.max_steps,
                    success_threshold=config.success_threshold)
    # One untimed episode first: imports and caches filled on first use are not a step's cost.
    runner.run(RandomPolicy(), [seed], rng=child_rng(config.seed, "plan", "warm-up"))
    started = time.perf_counter()
    result = runner.run(RandomPolicy(), [seed] * group_size, rng=child_rng(config.seed, "explore", "policy"),
                        tags={"probe": "explore", "policy": "random"})
    seconds = time.perf_counter() - started
    pilot = result.records.episodes
    if pilot.empty:
        problem = result.problems[0].message if result.problems else "no episode finished"
        raise UsageError(f"cannot plan a scan of {env_id}: its first episodes did not run ({problem}); "
                         "run the scan itself to see the env-error finding")
    steps = int(pilot["length"].sum())
    mean_length = steps / len(pilot)
    # Resets and steps share the time in proportion to their number: a first estimate.
    per_call = seconds / (steps + len(pilot))
    probe_env = make_env()
    try:
        is_tool_env = isinstance(probe_env.unwrapped, ToolEnv)
    finally:
        probe_env.close()
    plans = [ProbePlan("explore", group_size * n_groups, round(group_size * n_groups * mean_length))]
    for probe in probes:
        if probe.plan is None:
            plans.append(ProbePlan(probe.name, None, None))
            continue
        episodes = int(probe.plan(config, pilot, is_tool_env))
        plans.append(ProbePlan(probe.name, episodes, round(episodes * mean_length), probe.plan_is_cap))
    return ScanPlan(env_id, len(pilot), mean_length, per_call, per_call, workers, plans)
