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

import math
from typing import Any

import pandas as pd

from envaudit.config import ScanConfig
from envaudit.findings import Finding, Severity
from envaudit.policies import ByIndex
from envaudit.probe import Probe, ProbeContext
from envaudit.probes.replay.capture import Capture, Scripted, Step, Trajectory, snapshot
from envaudit.probes.replay.compare import (
    ATOL,
    BRANCH,
    CHECKS,
    ELSEWHERE,
    EPISODE_FRESH,
    EPISODE_SAME,
    RESET_FRESH,
    RESET_SAME,
    RTOL,
    Divergence,
    Tally,
    episode_difference,
    reset_difference,
    same,
    shown,
)
from envaudit.probes.replay.elsewhere import (
    ELSEWHERE_INTERPRETERS,
    ELSEWHERE_UNITS,
    compare_elsewhere,
    elsewhere_choice,
    start_elsewhere,
)
from envaudit.probes.replay.plans import (
    CAPPED,
    ORACLE_MISS,
    ORACLE_UNITS,
    is_int,
    oracle_plans,
    plans,
)
from envaudit.rollout import Problem, RunResult

EPISODE_REPLAYS = 16  # replay units (each: the same instance twice, a fresh instance once)
BRANCH_REPLAYS = 8  # mid-episode branches (each: two fresh instances)
MIN_STEPS = 200  # envs with short episodes get more units (up to MAX_UNITS_FACTOR times as many)
MAX_UNITS_FACTOR = 4


def _play(ctx: ProbeContext, plays: list[tuple[int, Scripted, int]], chains: list[int],
          tally: Tally) -> RunResult:
    """Play each ``(seed, script, unit)`` in one run over the scan's workers, each chain of
    consecutive plays on one fresh instance; the plays from ``result.finished`` on cannot be read (a
    hang or the cap stopped there, and ``tally`` says so)."""
    result = ctx.run(ByIndex([script for _, script, _ in plays]), [seed for seed, _, _ in plays], wrappers=[Capture],
                     rng_name="replay", chains=chains, episode_tags=[{"unit": unit} for _, _, unit in plays])
    if result.hung:
        tally.stopped = "the env hung"
        tally.hang = next(p for p in result.problems if p.kind == "hang")
    elif result.finished < len(plays):  # the cap cut the run (ctx.run recorded it as incomplete)
        tally.stopped = tally.stopped or CAPPED
    return result


def _units(ctx: ProbeContext, tally: Tally, units: list[tuple[int, int, list[Any], int]]) -> list[Trajectory | None]:
    """Replay each ``(unit, seed, actions, fallback)`` three times (twice on one instance, once on a
    fresh one) and compare, unit by unit in order; each unit's first play (None for a unit whose
    reset raised, which the api probe reports), up to the unit where a hang or the cap stopped."""
    plays = [(seed, Scripted(actions, fallback), unit) for unit, seed, actions, fallback in units for _ in range(3)]
    result = _play(ctx, plays, [2, 1] * len(units), tally)
    out: list[Trajectory | None] = []
    for k in range(len(units)):
        if 3 * k + 3 > result.finished:
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
    plays = [(reference.seed, Scripted([snapshot(a) for a in reference.actions[:cut]], fallback), unit)
             for unit, reference, cut, fallback in branches for _ in range(2)]
    result = _play(ctx, plays, [1] * len(plays), tally)
    for k in range(len(branches)):
        if 2 * k + 2 > result.finished:
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
    elsewhere = start_elsewhere(ctx, tally, oracle_played + played, len(oracle_played))
    branch_seeds = ctx.seeds(len(references), "branch")
    branches = references[: cfg.scaled(BRANCH_REPLAYS)]
    if branches and not tally.stopped and ctx.over_cap(f"the {len(branches)} branch replays"):
        tally.stopped = CAPPED
    if branches and not tally.stopped:
        _branches(ctx, tally, [(first + 2 * ORACLE_UNITS + i, reference, int(rng.integers(1, len(reference.steps))),
                                branch_seeds[i]) for i, reference in enumerate(branches)])
    compare_elsewhere(ctx, tally, elsewhere)
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
        size = units_for(planned[start:], min_steps - steps, steps / max(1, len(played)))
    return played


def units_for(planned: list[tuple[int, list[Any], int]], missing: float, mean_length: float) -> int:
    """How many of ``planned`` a replay of ``missing`` more steps takes, each as long as its planned
    actions (``mean_length`` where it has none); 0 when none are missing."""
    n = 0
    while missing > 0 and n < len(planned):
        missing -= len(planned[n][1]) or max(1.0, mean_length)
        n += 1
    return n


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


def planned_episodes(scan: ScanConfig, explore: pd.DataFrame, is_tool_env: bool) -> int:
    """The episodes the probe plays at these settings (``envaudit scan --plan``), from the mean length
    of exploration's first episodes: the units (three plays each; past the first ones, as many as
    ``MIN_STEPS`` of replays take, at most as many as exploration plays episodes), two plays per
    branch and ``ELSEWHERE_UNITS`` per other interpreter. An env with an ``oracle()`` adds
    ``ORACLE_UNITS`` units and their first plays (16 episodes), which the plan cannot know."""
    length = float(explore["length"].mean()) if len(explore) else 1.0
    group_size, groups = scan.exploration_groups()
    first, floor = scan.scaled(EPISODE_REPLAYS), scan.scaled(MIN_STEPS)
    units = min(group_size * groups, first * MAX_UNITS_FACTOR, max(first, math.ceil(floor / max(length, 1e-9))))
    branches = min(scan.scaled(BRANCH_REPLAYS), units) if length >= 2 else 0
    return 3 * units + 2 * branches + ELSEWHERE_INTERPRETERS * min(ELSEWHERE_UNITS, units)


probe = Probe(
    name="replay",
    run=run,
    summary="same seed and same actions must give the same episode, as GRPO groups assume",
    codes=("non-replayable", "env-error"),
    decisions={"non-replayable": decide_non_replayable, "env-error": decide_env_error},
    order=20,
    plan=planned_episodes,
)


__all__ = [
    "ATOL", "BRANCH", "BRANCH_REPLAYS", "CAPPED", "CHECKS", "ELSEWHERE", "ELSEWHERE_INTERPRETERS", "ELSEWHERE_UNITS",
    "EPISODE_FRESH", "EPISODE_REPLAYS", "EPISODE_SAME", "MAX_UNITS_FACTOR", "MIN_STEPS", "ORACLE_MISS", "ORACLE_UNITS",
    "RESET_FRESH", "RESET_SAME", "RTOL", "Divergence", "Scripted", "Step", "Tally", "Trajectory",
    "decide_env_error", "decide_non_replayable", "elsewhere_choice", "episode_difference", "is_int", "planned_episodes",
    "plans",
    "probe", "reset_difference", "run", "same", "shown", "units_for",
]
