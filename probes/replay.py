"""Replay probe: do the same seed and the same actions give the same episode?

Incentive it detects: GRPO compares G rollouts from one ``reset(seed=s)`` and credits each with its
return minus the group's. When the env is not replayable, part of that difference is noise the
policy did not cause, and an agent is rewarded (or punished) for luck; replays, offline
re-evaluation and debugging of a single rollout fail the same way.

Signal it reads: it replays episodes through guarded runs and compares everything the agent sees:
(1) the observation of ``reset(seed=s)`` repeated on the same instance and on a fresh one;
(2) whole episodes replayed from the same seed with the same actions (the exploration's recorded
actions for ``Discrete`` spaces, otherwise actions drawn from a seeded copy of the action space),
on the same instance and on a fresh one: observations, rewards, terminated/truncated and
``info["tool"]["status"]`` step by step; (3) a recorded prefix followed by a new, seeded suffix,
played on two fresh instances (a branch that exploration never took); (4) the env's ``oracle()``
episodes, when it has one, replayed the same way; (5) ``ELSEWHERE_UNITS`` replayed episodes (the
oracle's first, since a hash-seeded answer shows only once it is submitted, then those that saw the
most distinct observations, one per reset seed first) played again in ``ELSEWHERE_INTERPRETERS``
fresh Python interpreters, each with another ``PYTHONHASHSEED`` (``envaudit.interpreter``), where
state hidden in ``hash()`` of a string or in the order of a set of strings comes out differently
(every other replay shares the scan's hash seed). An env the
child cannot build or play there is listed as incomplete, not as replayable.

What to replay. Hidden state drawn outside the seed (an answer from Python's ``random``) shows only
in the states that depend on it — often only once the task is nearly done, which random play rarely
reaches, and exactly where a GRPO group compares a success against a failure. So the oracle's
episodes are replayed (they reach those states every time), and exploration episodes are replayed
furthest first: those with the most steps that paid more than an ordinary step (progress shaping,
a potential's gain, a success) come first.
Sample size from the effect it must see: a hidden choice among ``k >= 2`` equally likely values
differs between two draws with probability ``>= 1/2``, and each unit makes two independent draws
against its first play, so a unit misses it with probability ``<= 1/4``; ``ORACLE_UNITS`` oracle
units miss it with probability ``<= ORACLE_MISS``.

Integers, bools and text compare exactly, floats with ``rtol=1e-9, atol=1e-12``; Dict and Tuple observations compare
part by part. A divergence is a ``fail`` naming the first differing step and field.

A hang during the replays (one exploration never hit) is reported as ``env-error``, since the api
probe has already run. Each code is decided in one place: ``decide_non_replayable`` (from the
tally of replays) and ``decide_env_error`` (from the hang, if any).

Known false positives: tools whose real latency sits near their deadline, so a status flips
between ``ok`` and ``timeout`` with machine load (the fix names it when only statuses diverge);
observations that carry wall-clock time on purpose. Float noise below the tolerance passes.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.counterfactual.digest import digest
from envaudit.findings import Finding, Severity
from envaudit.interpreter import TIMEOUT_S, Elsewhere, other_hash_seeds
from envaudit.policies import ByIndex, oracle_policy
from envaudit.probe import Probe, ProbeContext
from envaudit.protocol import TOOL_KEY
from envaudit.rollout import Policy, Problem, RunResult

EPISODE_REPLAYS = 16  # replay units (each: the same instance twice, a fresh instance once)
BRANCH_REPLAYS = 8  # mid-episode branches (each: two fresh instances)
MIN_STEPS = 200  # envs with short episodes get more units (up to MAX_UNITS_FACTOR times as many)
MAX_UNITS_FACTOR = 4
RTOL, ATOL = 1e-9, 1e-12
DIFFER = 0.5
"""Least chance that two draws of a hidden choice differ (two equally likely values) — the effect
the oracle units are sized to see."""
ORACLE_MISS = 0.01
ORACLE_UNITS = math.ceil(math.log(ORACLE_MISS) / (2 * math.log(1 - DIFFER)))
"""Oracle replay units (4): each compares two more draws with its first play, so all of them miss a
hidden choice that shows in the oracle's episodes with probability at most ``ORACLE_MISS``. Not
scaled by ``--quick``: fewer would not see the effect."""
ELSEWHERE_INTERPRETERS = 2
"""Other interpreters (each with its own ``PYTHONHASHSEED``) that play the chosen episodes: a
hash-seeded choice is drawn afresh in each, so every interpreter adds one draw per episode."""
ELSEWHERE_UNITS = math.ceil(math.log(ORACLE_MISS) / math.log(1 - DIFFER))
"""Replayed episodes played again in each other interpreter (7), on distinct reset seeds where there
are enough (episodes of one seed draw the same hidden choice, so they are not independent draws):
each compares ``ELSEWHERE_INTERPRETERS`` more draws of a hash-seeded choice with its first play, so
all of them miss one that shows in their episodes with probability at most ``ORACLE_MISS`` —
already when only ``ELSEWHERE_UNITS / ELSEWHERE_INTERPRETERS`` of them reach where it shows. Not
scaled by ``--quick``."""
CAPPED = "the scan's wall-clock safety cap was reached"

RESET_SAME = "reset, same instance"
RESET_FRESH = "reset, fresh instance"
EPISODE_SAME = "episode, same instance"
EPISODE_FRESH = "episode, fresh instance"
BRANCH = "mid-episode branch"
ELSEWHERE = "episode, other interpreter"
CHECKS = (RESET_SAME, RESET_FRESH, EPISODE_SAME, EPISODE_FRESH, BRANCH, ELSEWHERE)


# -- capturing what the agent sees ------------------------------------------------------------
@dataclass
class Step:
    action: Any
    observation: Any = None
    reward: Any = None
    terminated: Any = None
    truncated: Any = None
    tool_status: Any = None
    exception: str | None = None  # the exception's type name when step() raised


@dataclass
class Trajectory:
    seed: int | None
    reset_obs: Any
    instance: Any  # the env instance that played it (``Capture.instance``)
    steps: list[Step] = field(default_factory=list)

    @property
    def actions(self) -> list[Any]:
        return [s.action for s in self.steps]


def _snapshot(x: Any) -> Any:
    """A copy the env cannot change later (some envs reuse their observation buffers)."""
    try:
        return copy.deepcopy(x)
    except Exception:
        return x


class Capture(gym.Wrapper):
    """Keep a ``Trajectory`` of the episode being played; the 5-tuple passes through unchanged.

    ``episode_payload()`` hands it back to the runner (``RunResult.payloads``), from whatever worker
    played the episode, so the replays fan out over the scan's workers; ``instance`` names this env
    instance (its process and its place there), which says whether two episodes shared one."""

    _made = itertools.count()

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.instance = (os.getpid(), next(Capture._made))
        self.current: Trajectory | None = None

    def reset(self, *, seed=None, options=None):
        self.current = None
        obs, info = self.env.reset(seed=seed, options=options)
        self.current = Trajectory(seed, _snapshot(obs), self.instance)
        return obs, info

    def step(self, action):
        try:
            out = self.env.step(action)
        except Exception as exc:
            if self.current is not None:
                self.current.steps.append(Step(_snapshot(action), exception=type(exc).__name__))
            raise
        if self.current is not None:
            obs, reward, terminated, truncated, info = out
            tool = info.get(TOOL_KEY) if isinstance(info, Mapping) else None
            status = tool.get("status") if isinstance(tool, Mapping) else None
            self.current.steps.append(Step(_snapshot(action), _snapshot(obs), _snapshot(reward),
                                           terminated, truncated, status))
        return out

    def episode_payload(self) -> Trajectory | None:
        return self.current


class Scripted(Policy):
    """Play ``actions``, then sample from a copy of the action space seeded with ``seed``.

    Independent of the run's generator, so two plays of the same ``Scripted`` play the same actions
    whatever else the runs did.
    """

    name = "replay"

    def __init__(self, actions: list[Any], seed: int) -> None:
        self.actions = list(actions)
        self.seed = int(seed)

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.space = copy.deepcopy(env.action_space)
        self.space.seed(self.seed)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.actions[self.t] if self.t < len(self.actions) else self.space.sample()


# -- comparing ---------------------------------------------------------------------------------
def same(a: Any, b: Any) -> bool:
    """Equal as the agent sees it: ints, bools and text exactly, floats to ``RTOL``/``ATOL``."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        return isinstance(a, (str, bytes)) and isinstance(b, (str, bytes)) and a == b
    try:
        x, y = np.asarray(a), np.asarray(b)
    except Exception:
        return bool(a == b)
    if x.shape != y.shape:
        return False
    if x.dtype == object or y.dtype == object:
        return all(same(p, q) for p, q in zip(x.ravel().tolist(), y.ravel().tolist(), strict=True))
    if x.dtype.kind in "fc" or y.dtype.kind in "fc":
        return bool(np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(x, y))


def _show(x: Any, n: int = 80) -> str:
    if isinstance(x, np.ndarray):
        text = np.array2string(x, precision=12, threshold=8)
    else:
        text = repr(x.item() if isinstance(x, np.generic) else x)
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass(frozen=True)
class Divergence:
    check: str
    seed: int | None
    step: int | None  # None: the observation of reset()
    field: str
    first: str
    second: str

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "seed": self.seed, "step": self.step, "field": self.field,
                "values": [self.first, self.second]}


FIELDS = (("observation", "observation"), ("reward", "reward"), ("terminated", "terminated"),
          ("truncated", "truncated"), ("tool_status", "tool status"), ("exception", "exception"))


def reset_difference(a: Trajectory, b: Trajectory, check: str) -> Divergence | None:
    if same(a.reset_obs, b.reset_obs):
        return None
    return Divergence(check, a.seed, None, "observation", *_shown_pair(a.reset_obs, b.reset_obs))


def _shown_pair(u: Any, v: Any) -> tuple[str, str]:
    """Both values as text; for arrays of one shape printed with their middle cut, with the first
    differing element named (the cut may be where they differ)."""
    first, second = _show(u), _show(v)
    if ("..." in first + second and isinstance(u, np.ndarray) and isinstance(v, np.ndarray) and u.shape == v.shape and u.size > 1
            and u.dtype.kind in "biufc" and v.dtype.kind in "biufc"):
        for index in zip(*np.nonzero(~np.isclose(u, v, rtol=RTOL, atol=ATOL, equal_nan=True)), strict=True):
            where = ", ".join(str(int(i)) for i in index)
            return f"{first} ([{where}] = {_show(u[index])})", f"{second} ([{where}] = {_show(v[index])})"
    return first, second


def episode_difference(a: Trajectory, b: Trajectory, check: str) -> Divergence | None:
    """The first step and field where two plays of the same actions differ."""
    for t, (x, y) in enumerate(zip(a.steps, b.steps, strict=False)):
        for attr, label in FIELDS:
            u, v = getattr(x, attr), getattr(y, attr)
            if not same(u, v):
                return Divergence(check, a.seed, t, label, *_shown_pair(u, v))
    if len(a.steps) != len(b.steps):
        return Divergence(check, a.seed, min(len(a.steps), len(b.steps)), "episode length",
                          str(len(a.steps)), str(len(b.steps)))
    return None


# -- what to replay ----------------------------------------------------------------------------
def _is_int(a: Any) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def _paying_steps(steps: pd.DataFrame) -> pd.Series:
    """Per episode: how many of its steps paid more than the env's most common step reward (the
    ordinary step: a step cost, or 0). A shaped or successful episode earns on the steps that moved
    it forward, so this counts how far into the task it got."""
    rewards = pd.to_numeric(steps["reward"], errors="coerce").round(9)
    ordinary = rewards.mode()
    if ordinary.empty:
        return pd.Series(0, index=pd.Index([], name="episode_id"))
    return (rewards > ordinary.iloc[0]).groupby(steps["episode_id"]).sum()


def plans(ctx: ProbeContext, n: int) -> list[tuple[int, list[Any], int]]:
    """``(seed, actions, fallback_seed)`` per replay unit, rarest episodes first.

    Exploration actions are reused when they are all integers (a ``Discrete`` space): episodes with
    more paying steps (further into the task) come first, then the scan's random order preferring
    distinct seeds. Otherwise the actions come from a seeded copy of the action space and are
    recorded as they are played.
    """
    fallback = ctx.seeds(n, "actions")
    eps, steps = ctx.exploration.episodes, ctx.exploration.steps
    eps = eps[eps["seed"].notna()] if not eps.empty else eps
    if not eps.empty and len(steps) and all(_is_int(a) for a in steps["action"]):
        order = ctx.rng("pick").permutation(len(eps))
        shuffled = eps.iloc[order].copy()
        shuffled["_rank"] = shuffled.groupby("seed").cumcount()
        paying = _paying_steps(steps)
        shuffled["_reach"] = -shuffled["episode_id"].map(lambda e: int(paying.get(e, 0)))
        chosen = shuffled.sort_values(["_reach", "_rank"], kind="stable").head(n)
        actions = steps.sort_values(["episode_id", "step"]).groupby("episode_id")["action"].apply(list)
        return [(int(row.seed), [int(a) for a in actions.get(row.episode_id, [])], fallback[i])
                for i, row in enumerate(chosen.itertuples())]
    return [(s, [], f) for s, f in zip(ctx.seeds(n, "episodes"), fallback, strict=True)]


def oracle_plans(ctx: ProbeContext, tally: Tally, first_unit: int) -> list[tuple[int, list[Any], int]]:
    """``(seed, actions, fallback_seed)`` of ``ORACLE_UNITS`` episodes of the env's oracle, each
    played once (captured) on a fresh seed; [] when the env has no oracle."""
    oracle = oracle_policy(ctx.env)
    if oracle is None:
        return []
    seeds = ctx.seeds(ORACLE_UNITS, "oracle")
    out = []
    for i, seed in enumerate(seeds):
        if ctx.over_cap(f"{ORACLE_UNITS - i} of {ORACLE_UNITS} oracle replay units"):
            tally.stopped = tally.stopped or CAPPED
            break
        # In this process, one after another: the oracle may read the probe's own env instance.
        result = ctx.run(oracle, [seed], wrappers=[Capture], tags={"unit": first_unit + i, "replay": "oracle"},
                         rng_name="replay-oracle", ordered=True)
        if result.hung:
            tally.stopped = "the env hung"
            tally.hang = next(p for p in result.problems if p.kind == "hang")
            break
        played = result.payloads.get(0)
        if played is not None and played.steps:
            out.append((seed, [_snapshot(a) for a in played.actions], ctx.seeds(1, "oracle", i, "fallback")[0]))
    return out


# -- the probe ---------------------------------------------------------------------------------
@dataclass
class Tally:
    replays: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    diverged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    divergences: list[Divergence] = field(default_factory=list)
    examples: list[int] = field(default_factory=list)
    skipped: int = 0
    stopped: str | None = None
    hang: Problem | None = None

    def compare(self, check: str, divergence: Divergence | None) -> bool:
        self.replays[check] += 1
        if divergence is not None:
            self.diverged[check] += 1
            self.divergences.append(divergence)
        return divergence is not None


def _play(ctx: ProbeContext, plays: list[tuple[int, Scripted, int]], chains: list[int],
          tally: Tally) -> tuple[RunResult, int]:
    """Play each ``(seed, script, unit)`` in one run over the scan's workers, each chain of
    consecutive plays on one fresh instance; the result and how many plays from the first on can be
    read (a hang or the cap stops there, and ``tally`` says so)."""
    result = ctx.run(ByIndex([script for _, script, _ in plays]), [seed for seed, _, _ in plays], wrappers=[Capture],
                     rng_name="replay", chains=chains, episode_tags=[{"unit": unit} for _, _, unit in plays])
    if result.hung:
        tally.stopped = "the env hung"
        tally.hang = next(p for p in result.problems if p.kind == "hang")
    elif result.finished < len(plays):  # the cap cut the run (ctx.run recorded it as incomplete)
        tally.stopped = tally.stopped or CAPPED
    return result, result.finished


def _units(ctx: ProbeContext, tally: Tally, units: list[tuple[int, int, list[Any], int]]) -> list[Trajectory | None]:
    """Replay each ``(unit, seed, actions, fallback)`` three times (twice on one instance, once on a
    fresh one) and compare, unit by unit in order; each unit's first play (None for a unit whose
    reset raised, which the api probe reports), up to the unit where a hang or the cap stopped."""
    plays = [(seed, Scripted(actions, fallback), unit) for unit, seed, actions, fallback in units for _ in range(3)]
    result, finished = _play(ctx, plays, [2, 1] * len(units), tally)
    out: list[Trajectory | None] = []
    for k in range(len(units)):
        if 3 * k + 3 > finished:
            break
        b1, b2, a = (result.payloads.get(3 * k + j) for j in range(3))
        if b1 is None or b2 is None or a is None:
            tally.skipped += 1
            out.append(None)
            continue
        # The runner replaces an instance whose step() raised, so "same instance" is checked, not assumed.
        shared = b1.instance == b2.instance
        reset_check, episode_check = (RESET_SAME, EPISODE_SAME) if shared else (RESET_FRESH, EPISODE_FRESH)
        diverged = [
            tally.compare(reset_check, reset_difference(b1, b2, reset_check)),
            tally.compare(RESET_FRESH, reset_difference(b1, a, RESET_FRESH)),
            tally.compare(episode_check, episode_difference(b1, b2, episode_check)),
            tally.compare(EPISODE_FRESH, episode_difference(b1, a, EPISODE_FRESH)),
        ]
        if any(diverged):
            ids = result.episode_ids[3 * k:3 * k + 3]
            ctx.keep(result.records.of_episodes(ids))
            tally.examples.extend(ids)
        out.append(b1)
    return out


def _branches(ctx: ProbeContext, tally: Tally, branches: list[tuple[int, Trajectory, int, int]]) -> None:
    """For each ``(unit, reference, cut, fallback)``: the reference's first ``cut`` actions, then the
    same new suffix, on two fresh instances, compared."""
    plays = [(reference.seed, Scripted([_snapshot(a) for a in reference.actions[:cut]], fallback), unit)
             for unit, reference, cut, fallback in branches for _ in range(2)]
    result, finished = _play(ctx, plays, [1] * len(plays), tally)
    for k in range(len(branches)):
        if 2 * k + 2 > finished:
            return
        first, second = result.payloads.get(2 * k), result.payloads.get(2 * k + 1)
        if first is None or second is None:
            tally.skipped += 1
            continue
        if tally.compare(BRANCH, episode_difference(first, second, BRANCH)):
            ids = result.episode_ids[2 * k:2 * k + 2]
            ctx.keep(result.records.of_episodes(ids))
            tally.examples.extend(ids)


def _fix(tally: Tally) -> str:
    fields = {d.field for d in tally.divergences}
    same_only = (tally.diverged[RESET_SAME] + tally.diverged[EPISODE_SAME] > 0
                 and tally.diverged[RESET_FRESH] + tally.diverged[EPISODE_FRESH] + tally.diverged[BRANCH] == 0)
    if tally.diverged[ELSEWHERE] and sum(tally.diverged.values()) == tally.diverged[ELSEWHERE]:
        return ("Most likely the env derives a task, an answer or an order from Python's hash() of a "
                "string or from iterating a set of strings, which changes with PYTHONHASHSEED from one "
                "process to the next (a resumed run, a spawned rollout worker); draw choices from "
                "self.np_random, use a stable hash (hashlib, zlib.crc32) and sort sets before iterating.")
    if fields == {"tool status"}:
        return ("Most likely a tool's real latency sits close to its deadline, so whether a call times "
                "out depends on machine load; simulate latency (return envaudit.ToolOutput(value, "
                "latency_s=...)) or move the deadline well away from the typical latency.")
    if same_only:
        return ("Most likely reset() leaves state from the previous episode behind (a counter, a "
                "cache, a buffer): a fresh instance replays but a used one does not. Reset every "
                "attribute an episode changes in reset().")
    if tally.diverged[RESET_SAME] + tally.diverged[RESET_FRESH] > 0:
        return ("Most likely reset() draws from Python's `random`, `time` or an unseeded generator "
                "instead of `self.np_random`; call super().reset(seed=seed) first and draw every "
                "random choice from self.np_random.")
    first = tally.divergences[0]
    return (f"Most likely step() draws from Python's `random`, `time` or an unseeded generator "
            f"instead of `self.np_random` (the first difference is at step {first.step}); pass seed "
            "to super().reset(seed=seed) and draw every random choice from self.np_random.")


def decide_non_replayable(tally: Tally) -> Finding | None:
    """The one place ``non-replayable`` is decided: ``fail`` as soon as any replay diverged from its
    first play (beyond ``RTOL``/``ATOL``), no finding when none did."""
    if not tally.divergences:
        return None
    n, d = sum(tally.replays.values()), sum(tally.diverged.values())
    by_field: dict[str, int] = {}
    for div in tally.divergences:
        by_field[div.field] = by_field.get(div.field, 0) + 1
    return Finding(
        code="non-replayable", severity=Severity.FAIL, title="Same seed and actions give a different episode",
        summary=_summary(tally),
        evidence={
            "behaviour": "non-replayable",
            "replays": n, "diverged": d, "fraction_diverged": d / n,
            "by_check": {c: {"replays": tally.replays[c], "diverged": tally.diverged[c]}
                         for c in CHECKS if tally.replays[c]},
            "first_divergence": tally.divergences[0].to_dict(), "first_field_counts": by_field,
            "tolerance": {"rtol": RTOL, "atol": ATOL},
        },
        examples=list(dict.fromkeys(tally.examples))[:6],
        fix=_fix(tally),
    )


def _summary(tally: Tally) -> str:
    n, d = sum(tally.replays.values()), sum(tally.diverged.values())
    first = tally.divergences[0]
    if first.step is None:
        on = {RESET_SAME: "on the same instance", ELSEWHERE: "in another interpreter"}.get(first.check,
                                                                                         "on a fresh instance")
        where = f"the observation of reset(seed={first.seed}) was {first.first} once and {first.second} {on}"
    else:
        where = (f"replaying seed {first.seed} with the same actions, the {first.field} at step "
                 f"{first.step} was {first.first} once and {first.second} the other time ({first.check})")
    return (f"{d} of {n} replays ({d / n:.0%}) diverged: {where}; GRPO groups that share a "
            "reset seed are then not comparable.")


def run(ctx: ProbeContext) -> list[Finding]:
    if ctx.env_hung("replays"):  # they would hang too
        return []
    cfg = ctx.config
    tally = Tally()
    rng = ctx.rng("cuts")
    units, min_steps = cfg.scaled(EPISODE_REPLAYS), cfg.scaled(MIN_STEPS)
    played = _exploration_units(ctx, tally, plans(ctx, units * MAX_UNITS_FACTOR), units, min_steps)
    references = [t for t in played if len(t.steps) >= 2]
    oracle_played: list[Trajectory] = []
    first = units * MAX_UNITS_FACTOR  # unit tags past every exploration unit's
    if not tally.stopped:
        oracle = oracle_plans(ctx, tally, first)
        if oracle and not tally.stopped and ctx.over_cap(f"the {len(oracle)} oracle replay units"):
            tally.stopped = CAPPED
        if oracle and not tally.stopped:
            replayed = _units(ctx, tally, [(first + ORACLE_UNITS + i, *plan) for i, plan in enumerate(oracle)])
            oracle_played = [t for t in replayed if t is not None]
    elsewhere = _start_elsewhere(ctx, tally, oracle_played + played, len(oracle_played))
    branch_seeds = ctx.seeds(len(references), "branch")
    branches = references[: cfg.scaled(BRANCH_REPLAYS)]
    if branches and not tally.stopped and ctx.over_cap(f"the {len(branches)} branch replays"):
        tally.stopped = CAPPED
    if branches and not tally.stopped:
        _branches(ctx, tally, [(first + 2 * ORACLE_UNITS + i, reference, int(rng.integers(1, len(reference.steps))),
                                branch_seeds[i]) for i, reference in enumerate(branches)])
    _compare_elsewhere(ctx, tally, elsewhere)
    ctx.notes.update({"replays": sum(tally.replays.values()), "skipped_units": tally.skipped,
                      "oracle_units": len(oracle_played), "stopped_early": tally.stopped})
    decided = [decide_non_replayable(tally), decide_env_error(tally.hang, cfg.step_timeout_s)]
    return [f for f in decided if f is not None]


def _exploration_units(ctx: ProbeContext, tally: Tally, planned: list[tuple[int, list[Any], int]], units: int,
                       min_steps: int) -> list[Trajectory]:
    """The first plays of the replay units of ``planned`` (rarest first): the first ``units``, then
    more until their replays hold ``min_steps`` steps. Played in waves that fan out over the
    workers; a wave holds the units that the planned episodes' lengths say are still needed, so an
    env that replays plays the units one at a time would (and never more)."""
    played: list[Trajectory] = []
    steps, start, size = 0, 0, units
    while start < len(planned) and size and not tally.stopped:
        if ctx.over_cap(f"replay units from unit {start} on (of {units} to {len(planned)}) and every branch replay"):
            tally.stopped = CAPPED
            break
        wave = _units(ctx, tally, [(start + k, *plan) for k, plan in enumerate(planned[start:start + size])])
        start += size
        for reference in wave:
            if reference is not None:
                steps += len(reference.steps)
                played.append(reference)
        size = _units_for(planned[start:], min_steps - steps, steps / max(1, len(played)))
    return played


def _units_for(planned: list[tuple[int, list[Any], int]], missing: float, mean_length: float) -> int:
    """How many of ``planned`` a replay of ``missing`` more steps takes, each as long as its planned
    actions (``mean_length`` where it has none); 0 when none are missing."""
    n = 0
    while missing > 0 and n < len(planned):
        missing -= len(planned[n][1]) or max(1.0, mean_length)
        n += 1
    return n


def _seen(trajectory: Trajectory) -> int:
    """How many distinct observations the agent saw in ``trajectory`` (the reset's included): how
    much of the env's state it walked through, where hidden state can show."""
    return len({digest(trajectory.reset_obs), *(digest(s.observation) for s in trajectory.steps)})


def elsewhere_choice(played: list[Trajectory], n_oracle: int, n: int = ELSEWHERE_UNITS) -> list[Trajectory]:
    """The ``n`` replayed episodes the other interpreters play (none that raised): the oracle's first
    (its ``n_oracle`` episodes lead ``played``; they reach a success, where a hash-seeded answer
    shows), then the episodes that saw the most distinct observations; one per reset seed before a
    second of any seed, since episodes of one seed draw the same hidden choice."""
    usable = [(i, t) for i, t in enumerate(played) if t.steps and not any(s.exception for s in t.steps)]
    ranked = [t for _, t in sorted(usable, key=lambda it: (it[0] >= n_oracle, -_seen(it[1]), it[0]))]
    first_of_seed: list[Trajectory] = []
    rest: list[Trajectory] = []
    seeds: set[Any] = set()
    for t in ranked:
        (rest if t.seed in seeds else first_of_seed).append(t)
        seeds.add(t.seed)
    return (first_of_seed + rest)[:n]


def _start_elsewhere(ctx: ProbeContext, tally: Tally, played: list[Trajectory],
                     n_oracle: int) -> tuple[list[Elsewhere], list[Trajectory]] | None:
    """The episodes ``elsewhere_choice`` picks, started in ``ELSEWHERE_INTERPRETERS`` other
    interpreters (one hash seed each), which play them while the branch replays run here."""
    chosen = elsewhere_choice(played, n_oracle)
    if tally.stopped or not chosen:
        return None
    timeout_s = max(1.0, min(TIMEOUT_S, ctx.time_left()))
    plans = [(t.seed, t.actions) for t in chosen]
    # Threads in the child only where the scan itself steps several env instances in one process.
    executor = ctx.executor
    workers = getattr(executor, "workers", 1) if getattr(executor, "kind", None) in ("threads", "asyncio") else 1
    return [Elsewhere(ctx.spec, ctx.make_env, plans, hash_seed=h, timeout_s=timeout_s, workers=workers)
            for h in other_hash_seeds(ELSEWHERE_INTERPRETERS)], chosen


def _compare_elsewhere(ctx: ProbeContext, tally: Tally,
                       started: tuple[list[Elsewhere], list[Trajectory]] | None) -> None:
    """Each episode every other interpreter played against its first play here (``ELSEWHERE``)."""
    if started is None:
        return
    children, chosen = started
    if tally.stopped:
        for elsewhere in children:
            elsewhere.cancel()
        return
    notes = ctx.notes["other_interpreter"] = {"hash_seeds": [e.hash_seed for e in children],
                                              "episodes": len(chosen),
                                              "reset_seeds": len({t.seed for t in chosen})}
    failed: dict[str, str] = {}
    for elsewhere in children:
        theirs = elsewhere.result()
        if theirs is None:
            failed[elsewhere.hash_seed] = elsewhere.reason or "no reason given"
            continue
        ctx.count_env(sum(len(r.steps) for r in theirs), len(theirs))
        for first, replayed in zip(chosen, theirs, strict=True):
            other = Trajectory(replayed.seed, replayed.reset_obs, object(),
                               [Step(*row) for row in replayed.steps])
            divergence = (reset_difference(first, other, ELSEWHERE)
                          or episode_difference(first, other, ELSEWHERE))
            tally.compare(ELSEWHERE, divergence)
    if failed:
        notes["reasons"] = failed
        where = "another interpreter" if len(failed) == 1 else f"{len(failed)} other interpreters"
        ctx.incomplete(f"the {len(chosen)} replays in {where} (PYTHONHASHSEED={', '.join(failed)})",
                       "; ".join(dict.fromkeys(failed.values())))


def decide_env_error(hang: Problem | None, timeout: float) -> Finding | None:
    """The one place this probe decides ``env-error``: ``fail`` for a hang during the replays, one
    that exploration never hit (the api probe ran before it and could not report it); no finding
    without one."""
    if hang is None:
        return None
    title, summary, fix = _hang_text(hang, timeout)
    return Finding(
        code="env-error", severity=Severity.FAIL, title=title, summary=summary,
        evidence={"seed": hang.seed, "step": hang.step, "message": hang.message, "behaviour": "env-error"},
        examples=[hang.episode_id] if hang.episode_id is not None else [],
        fix=fix,
    )


def _hang_text(hang: Problem, timeout: float) -> tuple[str, str, str]:
    where = f"reset(seed={hang.seed})" if hang.step is None else f"seed {hang.seed}, step {hang.step}"
    return (f"{hang.where}() hangs during replays",
            f"{hang.where}() did not return within {timeout:g} s at {where} while replaying "
            "recorded actions; a rollout worker calling it blocks for good.",
            f"Put a deadline on every blocking call inside {hang.where}(); most likely a tool call "
            "or a backend sometimes never answers.")


probe = Probe(
    name="replay",
    run=run,
    summary="same seed and same actions must give the same episode, as GRPO groups assume",
    codes=("non-replayable", "env-error"),
    decisions={"non-replayable": decide_non_replayable, "env-error": decide_env_error},
    order=20,
)
