"""The probe interface: what a probe receives (``ProbeContext``) and how it is registered.

A probe is a ``Probe`` object exposed by a module and registered under the entry-point group
``envaudit.probes`` (third-party packages add probes the same way). Its ``run(ctx)`` returns
findings. It reads the scan's exploration records, runs its own policies through ``ctx.run``
(hang-protected, recorded, seeded) and keeps whatever it wants in the report with ``ctx.keep`` and
``ctx.table``. A probe that raises becomes a finding about the probe; the scan goes on.

A probe sizes its work in units (episodes, iterations, env steps) from the config, never from the
clock, so a seed gives the same findings on any machine under any load. The clock is only a safety
cap (``--budget``): a probe that reaches it stops and says what it skipped with
``ctx.incomplete`` (or ``ctx.over_cap``, which checks and records in one call); ``ctx.run`` records
the episodes the cap cut from a run on its own. The report then lists the gap and the CLI exits 4.
"""

from __future__ import annotations

import importlib
import itertools
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.config import ScanConfig
from envaudit.cost import CountingEnv
from envaudit.errors import ProbeRegistryError
from envaudit.execution import InlineExecutor
from envaudit.findings import CODES, Finding
from envaudit.pipeline import Pipeline
from envaudit.recording import Recorder, Records
from envaudit.rollout import (
    EnvFactory,
    Policy,
    Problem,
    Run,
    Runner,
    RunResult,
    Segments,
    policy_seeds,
)
from envaudit.seeding import child_rng, child_seed
from envaudit.toolenv import ToolEnv

GROUP = "envaudit.probes"
HUNG_NOTE = "stopped_by_hang"
"""The note a probe's env work that a hang stopped leaves (``ProbeContext.env_hung``): the scan
lists the probe as ``hung``, with this note, instead of ``ok``."""

# The bundled probes, importable even when the package metadata is stale (an editable install made
# before a probe was added); the entry points are the public registry and take precedence.
BUILTIN = {
    "api": "envaudit.probes.api:probe",
    "replay": "envaudit.probes.replay:probe",
    "timeouts": "envaudit.probes.timeouts:probe",
    "length": "envaudit.probes.length:probe",
    "intent": "envaudit.probes.intent:probe",
    "pipeline": "envaudit.probes.pipeline:probe",
    "grpo": "envaudit.probes.grpo:probe",
    "exploits": "envaudit.probes.exploits:probe",
    "failures": "envaudit.probes.failures:probe",
}


@dataclass(frozen=True)
class Probe:
    """A registered probe: a name, the finding codes it can emit, and its entry function."""

    name: str
    run: Callable[[ProbeContext], Iterable[Finding]]
    summary: str
    codes: tuple[str, ...] = ()
    weight: float = 1.0
    """Relative cost of the probe's work, for the progress bar only (work is sized in units)."""
    order: int = 50
    """Probes run in ascending order (cheap API checks first)."""
    beside: bool = False
    """The probe plays beside the others where the executor's workers can be shared (threads,
    asyncio): it reads only exploration, numbers its episodes from an id block of its own and sees
    only the hangs exploration met, so its report is the same whether it ran beside the other
    probes or after them (``envaudit.scan``)."""
    preload: tuple[str, ...] = ()
    """Modules the probe's run imports that hold much memory (torch): a probe run in a worker
    process imports them first, and the memory cap counts what the env adds from there."""
    analyse: Callable[[ProbeContext], Iterable[Finding]] | None = None
    """The half of the probe that judges from recorded episodes alone (``ctx.exploration``, with no
    env to step): ``envaudit logs`` runs it on a training run's logged rollouts."""
    analyse_needs: tuple[str, ...] = ()
    """The record columns ``analyse`` cannot do without (``success``, ``end_reason``, ``group_id``,
    ``length``, ``steps``, ``steps.<column>``): a log without one of them is not analysed."""
    plan: Callable[[ScanConfig, pd.DataFrame, bool], int] | None = None
    """The episodes the probe will play at a scan's settings, given the first exploration episodes
    and whether the env is a ``ToolEnv`` (``envaudit scan --plan``); None: not declared."""
    plan_is_cap: bool = False
    """``plan`` gives the most the probe will play: it may stop early once more work cannot change its answer."""
    decisions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    """Finding code → the one function that decides it (``decide_<code>``, dashes as
    underscores): the only place where a finding of that code is created and its severity set."""

    def __post_init__(self) -> None:
        bad = [c for c in self.codes if c not in CODES]
        if bad:
            raise ValueError(f"probe {self.name!r} declares unknown finding codes {bad}")
        undeclared = sorted(set(self.decisions) - set(self.codes))
        if undeclared:
            raise ValueError(f"probe {self.name!r} has deciding functions for codes it does not declare: "
                             f"{undeclared}; add them to codes=")
        for code, decide in self.decisions.items():
            if getattr(decide, "__name__", "") != decision_name(code):
                raise ValueError(f"probe {self.name!r}: the function deciding {code!r} is named "
                                 f"{getattr(decide, '__name__', decide)!r}; name it {decision_name(code)!r}")
        if not callable(self.run):
            raise TypeError(f"probe {self.name!r}: run must be callable, got {type(self.run).__name__}")


def decision_name(code: str) -> str:
    """The name of the function that decides finding ``code``: ``decide_timeout_rewarded``."""
    return "decide_" + code.replace("-", "_")


def _load(name: str, target: Any) -> Probe:
    where = target if isinstance(target, str) else target.value
    try:
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            obj = getattr(importlib.import_module(module), attr)
        else:
            obj = target.load()
    except Exception as exc:
        raise ProbeRegistryError(
            f"probe plugin {name!r} ({where}) failed to load: {type(exc).__name__}: {exc}; "
            "fix or uninstall the package that provides it"
        ) from exc
    if not isinstance(obj, Probe):
        raise ProbeRegistryError(
            f"entry point {name!r} in group {GROUP!r} gives a {type(obj).__name__}, not an "
            "envaudit.Probe; expose `probe = Probe(name=..., run=..., summary=...)` in its module"
        )
    if obj.name != name:
        raise ProbeRegistryError(f"entry point {name!r} loads a probe named {obj.name!r}; use the same name")
    return obj


def probe_names() -> list[str]:
    """Names of every registered probe, without importing any of them."""
    return sorted(set(BUILTIN) | {ep.name for ep in entry_points(group=GROUP)})


def probe_modules(names: Iterable[str] | None = None) -> list[str]:
    """The modules the probes (all, or ``names``) are registered in, without importing them."""
    found = {name: target.partition(":")[0] for name, target in BUILTIN.items()}
    found.update({ep.name: ep.module for ep in entry_points(group=GROUP)})
    return [found[n] for n in (found if names is None else names) if n in found]


def registered_probes(names: Iterable[str] | None = None) -> dict[str, Probe]:
    """The bundled probes and those of installed packages (only ``names`` when given), in run order."""
    found: dict[str, Any] = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        found[ep.name] = ep
    wanted = found if names is None else {n: found[n] for n in names if n in found}
    probes = {name: _load(name, target) for name, target in wanted.items()}
    return dict(sorted(probes.items(), key=lambda kv: (kv[1].order, kv[0])))


def cap_reason(budget_s: float) -> str:
    return (f"the scan reached its wall-clock safety cap of {budget_s:g} s "
            "(raise --budget, or scan on a less loaded machine)")


@dataclass(frozen=True)
class ProbeInputs:
    """What a probe reads: the env under audit, the scan's settings and its exploration."""

    env_id: str
    make_env: EnvFactory
    config: ScanConfig
    exploration: Records
    exploration_problems: list[Problem]
    pipeline: Pipeline
    name: str = ""
    """The probe's name: its seeds and random streams derive from it."""
    spec: str | None = None
    """The env's spec string, when the scan was given one: worker processes resolve it themselves."""


@dataclass
class ScanShared:
    """The scan-wide state behind every probe's services: one per scan, shared by all its probes."""

    deadline: float = float("inf")
    """The scan's wall-clock safety cap (``time.monotonic()``)."""
    ids: Iterator[int] = field(default_factory=itertools.count)
    """The scan's episode ids: every episode of every probe gets the next one."""
    hangs: list[Problem] = field(default_factory=list)
    """Hangs seen so far: once the env has hung, probes stop stepping it, so one hanging env costs
    a few deadlines, not one per rollout."""
    lost: list[Problem] = field(default_factory=list)
    """Episodes whose worker process crashed or was killed past the memory cap, in any probe's runs;
    the scan reports them as one ``env-error`` finding."""
    tally: Any = None
    """The scan's ``coverage.ReturnTally``: every episode ``run`` plays is counted there, kept or not."""
    executor: Any = None
    """Where ``run`` plays episodes (``envaudit.execution``); None: one at a time in this process."""
    cost: Any = None
    """The scan's ``cost.EnvCost``: env steps and episodes per probe, and the ``--max-env-steps`` cap."""


@dataclass
class ProbeOutput:
    """What a probe hands back to the scan beside its findings."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    kept: list[Records] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Work the safety cap cut (``{"probe", "skipped", "reason"}``); the report's ``incomplete``."""


def _view(part: str, name: str) -> property:
    return property(lambda self: getattr(getattr(self, part), name),
                    doc=f"``{part}.{name}`` (read it here; the scan owns it)")


class ProbeContext:
    """What a probe gets from the scan: what it reads (``inputs``), the services it may call
    (``run``, ``rng``, ``seeds``, the inspection env, the safety cap; their scan-wide state is
    ``shared``) and what it hands back (``output``: ``keep``, ``table``, ``notes``, ``incomplete``).
    The fields of the three parts read as attributes of the context (``ctx.config``, ``ctx.notes``)."""

    def __init__(self, inputs: ProbeInputs, shared: ScanShared | None = None,
                 output: ProbeOutput | None = None) -> None:
        self.inputs = inputs
        self.shared = ScanShared() if shared is None else shared
        self.output = ProbeOutput() if output is None else output
        self._probe_env: gym.Env | None = None

    env_id = _view("inputs", "env_id")
    make_env = _view("inputs", "make_env")
    config = _view("inputs", "config")
    exploration = _view("inputs", "exploration")
    exploration_problems = _view("inputs", "exploration_problems")
    pipeline = _view("inputs", "pipeline")
    name = _view("inputs", "name")
    spec = _view("inputs", "spec")
    deadline = _view("shared", "deadline")
    ids = _view("shared", "ids")
    hangs = _view("shared", "hangs")
    lost = _view("shared", "lost")
    tally = _view("shared", "tally")
    executor = _view("shared", "executor")
    cost = _view("shared", "cost")
    tables = _view("output", "tables")
    kept = _view("output", "kept")
    notes = _view("output", "notes")
    skipped = _view("output", "skipped")

    # -- randomness and time ------------------------------------------------------------------
    def rng(self, *names: str | int) -> np.random.Generator:
        """A generator for one purpose of this probe, derived from the scan seed."""
        return child_rng(self.config.seed, "probe", self.name, *names)

    def seeds(self, n: int, *names: str | int) -> list[int]:
        """``n`` reset seeds for one purpose of this probe."""
        base = child_seed(self.config.seed, "probe", self.name, "seeds", *names)
        return [int((base + i) % (2**31 - 1)) for i in range(n)]

    def time_left(self) -> float:
        """Seconds until the safety cap; for stopping only, never for sizing work."""
        return self.deadline - time.monotonic()

    def env_hung(self, skipped: str) -> bool:
        """True once the env has hung in this scan: the probe skips ``skipped`` (its own env work,
        in the user's words), which would wait on the hang again, and the scan lists the probe as
        ``hung``. ``run`` checks this itself; a probe that steps envs its own way asks first."""
        hangs = self.hangs or [p for p in self.exploration_problems if p.kind == "hang"]
        if not hangs:
            return False
        hang = hangs[0]
        at = f" at step {hang.step}" if hang.step is not None else ""
        self.notes.setdefault(HUNG_NOTE, f"{skipped} skipped: the env already hung in this scan "
                                         f"({hang.message}{at})")
        return True

    def incomplete(self, skipped: str, reason: str | None = None) -> None:
        """Record work this probe did not do (``skipped``, in the user's words) and why."""
        entry = {"probe": self.name, "skipped": skipped, "reason": reason or cap_reason(self.config.budget_s)}
        if entry not in self.skipped:  # a loop that re-checks the cap names the same gap once
            self.skipped.append(entry)

    def over_cap(self, skipped: str) -> bool:
        """True once the safety cap is reached, recording ``skipped`` as incomplete; the probe stops."""
        if self.time_left() > 0:
            return False
        self.incomplete(skipped)
        return True

    def count_env(self, steps: int, episodes: int) -> None:
        """Count env work this probe did outside ``run`` (a GRPO run's rollouts) in the scan's cost."""
        if self.cost is not None:
            self.cost.add(self.name, steps, episodes)

    def counted(self, env: gym.Env) -> gym.Env:
        """``env`` with its resets and steps counted in the scan's cost (for envs a probe steps itself)."""
        return env if self.cost is None else CountingEnv(env, self.cost, self.name)

    def steps_capped(self, skipped: str) -> bool:
        """True once the scan's env steps reached ``--max-env-steps``, recording ``skipped`` as
        incomplete; the probe stops (a unit cap: the same seed stops at the same place)."""
        if self.cost is None or not self.cost.reached():
            return False
        self.incomplete(skipped, self.cost.cap_reason())
        return True

    # -- the env ------------------------------------------------------------------------------
    @property
    def env(self) -> gym.Env:
        """One instance for inspection (spaces, labels, tools); do not step it, use ``run``."""
        if self._probe_env is None:
            self._probe_env = self.make_env()
        return self._probe_env

    @property
    def is_tool_env(self) -> bool:
        return isinstance(self.env.unwrapped, ToolEnv)

    @property
    def action_labels(self) -> list[str] | None:
        labels = getattr(self.env.unwrapped, "action_labels", None)
        return list(labels) if labels is not None else None

    def describe_action(self, action: Any) -> str:
        """An action in the user's words: its catalogue label when the env has one."""
        labels = self.action_labels
        if labels is not None and isinstance(action, (int, np.integer)) and 0 <= int(action) < len(labels):
            return labels[int(action)]
        return repr(action)

    def runner(self, make_env: EnvFactory | None = None, *, ids: Iterator[int] | None = None) -> Runner:
        c = self.config
        remote = getattr(self.executor, "kind", None) == "remote"
        return Runner(make_env or self.make_env, step_timeout_s=c.step_timeout_s, max_steps=c.max_steps,
                      success_threshold=c.success_threshold, ids=ids or self.ids,
                      executor=InlineExecutor() if remote else self.executor,
                      spec=self.spec if make_env is None else None)

    def run(
        self,
        policy: Policy,
        seeds: Sequence[int],
        *,
        wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
        tags: Mapping[str, Any] | None = None,
        rng_name: str | None = None,
        make_env: EnvFactory | None = None,
        ordered: bool | None = None,
        episode_tags: Sequence[Mapping[str, Any]] | None = None,
        chains: Sequence[int] | None = None,
        rng_seeds: Sequence[int] | None = None,
    ) -> RunResult:
        """Run ``policy`` once per seed (hang-protected, recorded); episodes the safety cap cuts
        are recorded as incomplete. ``ordered=True`` plays the seeds in order on one instance in
        this process (for wrappers or policies that report back through shared state).
        ``episode_tags[i]`` adds tags to episode ``i`` only; ``chains`` plays consecutive stretches
        of the seeds each on one fresh instance, the stretches over the workers; ``rng_seeds`` gives
        each episode's policy randomness (``Runner.run``)."""
        if self.env_hung(f"policy {policy.name!r}'s episodes"):
            return RunResult(Recorder().records(), [], stopped_early=True)
        seeds = list(seeds)
        if self.steps_capped(f"{len(seeds)} episodes of policy {policy.name!r}"):
            return RunResult(Recorder().records(), [], stopped_early=True)
        rng = self.rng("policy", rng_name or policy.name)
        tags = {"probe": self.name, "policy": policy.name, **(tags or {})}
        more = dict(episode_tags=episode_tags, chains=chains, rng_seeds=rng_seeds)
        result = self._remote_run(make_env, policy, seeds, rng, wrappers, tags, ordered, **more)
        if result is None:
            result = self.runner(make_env).run(policy, seeds, rng=rng, wrappers=wrappers, tags=tags,
                                               deadline=self.deadline, ordered=ordered, **more)
        self.hangs.extend(p for p in result.problems if p.kind == "hang")
        self.lost.extend(p for p in result.problems if p.kind in ("crash", "memory"))
        if self.tally is not None:
            self.tally.add(result.records.episodes)
        if self.cost is not None:
            self.cost.add_episodes(self.name, result.records.episodes)
        # The runner stops early for a hang, an env that cannot be made, or the cap.
        if result.stopped_early and not result.hung and not any(p.where == "make" for p in result.problems):
            done = len(result.records.episodes)
            self.incomplete(f"{len(seeds) - done} of {len(seeds)} episodes of policy {policy.name!r}")
        return result

    def run_all(self, runs: Sequence[Run]) -> list[Records]:
        """Several independent runs played as one, over the workers at once, each episode as it would
        play in its own ``run`` (its policy, its tags, its policy randomness from the run's
        ``rng_name``, the episode ids handed out in the runs' order): the records of each run. For a
        probe's runs that do not depend on each other (its scripted policies on the same seeds)."""
        runs = [r for r in runs if len(r.seeds)]
        if not runs:
            return []
        parts, seeds, tags, rng_seeds = [], [], [], []
        for r in runs:
            parts.append((r.policy, len(r.seeds)))
            seeds += [int(s) for s in r.seeds]
            tags += [{"policy": r.policy.name, **(r.tags or {})}] * len(r.seeds)
            rng_seeds += policy_seeds(self.rng("policy", r.rng_name or r.policy.name), len(r.seeds))
        result = self.run(Segments(parts), seeds, episode_tags=tags, rng_seeds=rng_seeds)
        out, start = [], 0
        for _, n in parts:
            out.append(result.records.of_episodes(result.episode_ids[start:start + n]))
            start += n
        return out

    def _remote_run(self, make_env: EnvFactory | None, policy: Policy, seeds: list[int], rng: np.random.Generator,
                    wrappers: Sequence[Callable[[gym.Env], gym.Env]], tags: dict[str, Any],
                    ordered: bool | None, **more: Any) -> RunResult | None:
        """In a probe run in a worker process (``envaudit.probe_host``): the run played on the scan's
        episode pool, or None when it stays here (in order on one instance, or not picklable)."""
        if getattr(self.executor, "kind", None) != "remote":
            return None
        ids = [next(self.ids) for _ in seeds]  # what the runner would draw, in the same order
        if ordered or (ordered is None and getattr(policy, "ordered", False)):
            return self.runner(make_env, ids=iter(ids)).run(policy, seeds, rng=rng, wrappers=wrappers, tags=tags,
                                                            deadline=self.deadline, ordered=True, **more)
        kwargs = dict(config=self.config, policy=policy, seeds=seeds, ids=ids, rng=rng, wrappers=tuple(wrappers),
                      tags=tags, deadline=self.deadline, **more)
        try:
            request = cloudpickle.dumps((make_env, kwargs))
        except Exception as exc:
            warnings.warn(f"policy {policy.name!r}: this run cannot be sent to worker processes "
                          f"({type(exc).__name__}: {exc}), so it runs in the probe's own process; make the env "
                          "factory, policy and wrappers picklable, or scan a spec string", RuntimeWarning,
                          stacklevel=3)
            return self.runner(make_env, ids=iter(ids)).run(policy, seeds, rng=rng, wrappers=wrappers, tags=tags,
                                                            deadline=self.deadline, ordered=True, **more)
        return self.executor.run(request)

    # -- what goes into the report -------------------------------------------------------------
    def keep(self, records: Records) -> None:
        """Add these episodes to the report's tables (so findings can cite their ids)."""
        self.kept.append(records)

    def table(self, name: str, frame: pd.DataFrame) -> None:
        """Save a table in the report folder as ``<probe>_<name>.parquet``."""
        self.tables[name] = frame

    def close(self) -> None:
        if self._probe_env is not None:
            try:
                self._probe_env.close()
            except Exception:
                pass
            self._probe_env = None
