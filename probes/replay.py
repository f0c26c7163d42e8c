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
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.counterfactual.digest import digest
from envaudit.findings import Finding, Severity
from envaudit.interpreter import TIMEOUT_S, Elsewhere, other_hash_seeds
from envaudit.policies import oracle_policy
from envaudit.probe import Probe, ProbeContext
from envaudit.protocol import TOOL_KEY
from envaudit.rollout import Policy, Problem

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
    instance: object
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
    """Append one ``Trajectory`` per reset to ``sink``; the 5-tuple passes through unchanged."""

    def __init__(self, env: gym.Env, sink: list[Trajectory]) -> None:
        super().__init__(env)
        self.sink = sink
        self.instance = object()
        self.current: Trajectory | None = None

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.current = Trajectory(seed, _snapshot(obs), self.instance)
        self.sink.append(self.current)
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


class Scripted(Policy):
    """Play ``actions``, then sample from a copy of the action space seeded with ``seed``.

    Independent of the run's generator, so two runs of the same ``Scripted`` play the same actions
    whatever else the runs did.
    """

    name = "replay"
    ordered = True  # its runs compare two episodes on one instance through Capture's sink

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
        sink: list[Trajectory] = []
        # In this process: Capture reports through ``sink`` (on the episode pool it stayed empty,
        # and under --executor processes no oracle unit ran).
        result = ctx.run(oracle, [seed], wrappers=[lambda env, sink=sink: Capture(env, sink)],
                         tags={"unit": first_unit + i, "replay": "oracle"}, rng_name="replay-oracle", ordered=True)
        if result.hung:
            tally.stopped = "the env hung"
            tally.hang = next(p for p in result.problems if p.kind == "hang")
            break
        if len(sink) == 1 and sink[0].steps:
            out.append((seed, [_snapshot(a) for a in sink[0].actions], ctx.seeds(1, "oracle", i, "fallback")[0]))
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


def _play(ctx: ProbeContext, policy: Scripted, seeds: list[int], unit: int, tally: Tally):
    """Run ``policy`` from each seed on one new instance; None when the probe must stop."""
    sink: list[Trajectory] = []
    result = ctx.run(policy, seeds, wrappers=[lambda env: Capture(env, sink)], tags={"unit": unit},
                     rng_name="replay")
    if result.hung:
        tally.stopped = "the env hung"
        tally.hang = next(p for p in result.problems if p.kind == "hang")
        return None
    if result.stopped_early:  # the cap cut the run (ctx.run recorded it as incomplete)
        tally.stopped = tally.stopped or CAPPED
        return None
    ids = result.records.episodes["episode_id"].tolist()
    return sink, result.records, ids if len(ids) == len(sink) else []


def _unit(ctx, tally, unit, seed, actions, fallback) -> Trajectory | None:
    """Replay one seed three times (twice on one instance, once on a fresh one) and compare."""
    policy = Scripted(actions, fallback)
    played = _play(ctx, policy, [seed, seed], unit, tally)
    if played is None:
        return None
    pair, records_b, ids_b = played
    played = _play(ctx, policy, [seed], unit, tally)
    if played is None:
        return None
    fresh, records_a, ids_a = played
    if len(pair) != 2 or len(fresh) != 1:  # a reset raised: the api probe reports it
        tally.skipped += 1
        return None
    b1, b2, a = pair[0], pair[1], fresh[0]
    # The runner replaces an instance whose step() raised, so "same instance" is checked, not assumed.
    shared = b1.instance is b2.instance
    reset_check, episode_check = (RESET_SAME, EPISODE_SAME) if shared else (RESET_FRESH, EPISODE_FRESH)
    diverged = [
        tally.compare(reset_check, reset_difference(b1, b2, reset_check)),
        tally.compare(RESET_FRESH, reset_difference(b1, a, RESET_FRESH)),
        tally.compare(episode_check, episode_difference(b1, b2, episode_check)),
        tally.compare(EPISODE_FRESH, episode_difference(b1, a, EPISODE_FRESH)),
    ]
    if any(diverged):
        ctx.keep(records_b)
        ctx.keep(records_a)
        tally.examples.extend((ids_b + ids_a)[:3])
    return b1


def _branch(ctx, tally, unit, reference: Trajectory, cut: int, fallback: int) -> None:
    """Replay a recorded prefix, then the same new suffix, on two fresh instances."""
    policy = Scripted([_snapshot(a) for a in reference.actions[:cut]], fallback)
    runs = []
    for _ in range(2):
        played = _play(ctx, policy, [reference.seed], unit, tally)
        if played is None:
            return
        runs.append(played)
    (first, rec_1, ids_1), (second, rec_2, ids_2) = runs
    if len(first) != 1 or len(second) != 1:
        tally.skipped += 1
        return
    if tally.compare(BRANCH, episode_difference(first[0], second[0], BRANCH)):
        ctx.keep(rec_1)
        ctx.keep(rec_2)
        tally.examples.extend((ids_1 + ids_2)[:2])


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
    references: list[Trajectory] = []
    played: list[Trajectory] = []
    units, min_steps, steps = cfg.scaled(EPISODE_REPLAYS), cfg.scaled(MIN_STEPS), 0
    for unit, (seed, actions, fallback) in enumerate(plans(ctx, units * MAX_UNITS_FACTOR)):
        if unit >= units and steps >= min_steps:
            break
        if not tally.stopped and ctx.over_cap(f"replay units from unit {unit} on (of {units} to "
                                              f"{units * MAX_UNITS_FACTOR}) and every branch replay"):
            tally.stopped = CAPPED
        if tally.stopped:
            break
        reference = _unit(ctx, tally, unit, seed, actions, fallback)
        if reference is not None:
            steps += len(reference.steps)
            played.append(reference)
            if len(reference.steps) >= 2:
                references.append(reference)
    oracle_played: list[Trajectory] = []
    first = units * MAX_UNITS_FACTOR  # unit tags past every exploration unit's
    if not tally.stopped:
        for i, (seed, actions, fallback) in enumerate(oracle_plans(ctx, tally, first)):
            if not tally.stopped and ctx.over_cap(f"oracle replay units from {i} on (of {ORACLE_UNITS})"):
                tally.stopped = CAPPED
            if tally.stopped:
                break
            reference = _unit(ctx, tally, first + ORACLE_UNITS + i, seed, actions, fallback)
            if reference is not None:
                oracle_played.append(reference)
    elsewhere = _start_elsewhere(ctx, tally, oracle_played + played, len(oracle_played))
    branch_seeds = ctx.seeds(len(references), "branch")
    branches = references[: cfg.scaled(BRANCH_REPLAYS)]
    for i, reference in enumerate(branches):
        if not tally.stopped and ctx.over_cap(f"{len(branches) - i} of {len(branches)} branch replays"):
            tally.stopped = CAPPED
        if tally.stopped:
            break
        cut = int(rng.integers(1, len(reference.steps)))
        _branch(ctx, tally, first + 2 * ORACLE_UNITS + i, reference, cut, branch_seeds[i])
    _compare_elsewhere(ctx, tally, elsewhere)
    ctx.notes.update({"replays": sum(tally.replays.values()), "skipped_units": tally.skipped,
                      "oracle_units": len(oracle_played), "stopped_early": tally.stopped})
    decided = [decide_non_replayable(tally), decide_env_error(tally.hang, cfg.step_timeout_s)]
    return [f for f in decided if f is not None]


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
    return [Elsewhere(ctx.spec, ctx.make_env, plans, hash_seed=h, timeout_s=timeout_s)
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
