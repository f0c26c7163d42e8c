"""What to replay: exploration's episodes furthest into the task first, and the env's oracle's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from envaudit.policies import oracle_policy
from envaudit.probe import ProbeContext
from envaudit.probes.replay.capture import Capture, snapshot
from envaudit.probes.replay.compare import Tally

DIFFER = 0.5
"""Least chance that two draws of a hidden choice differ (two equally likely values) — the effect
the oracle units are sized to see."""
ORACLE_MISS = 0.01
ORACLE_UNITS = math.ceil(math.log(ORACLE_MISS) / (2 * math.log(1 - DIFFER)))
"""Oracle replay units (4): each compares two more draws with its first play, so all of them miss a
hidden choice that shows in the oracle's episodes with probability at most ``ORACLE_MISS``. Not
scaled by ``--quick``: fewer would not see the effect."""
CAPPED = "the scan's wall-clock safety cap was reached"


def is_int(a: Any) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def paying_steps(steps: pd.DataFrame) -> pd.Series:
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
    if not eps.empty and len(steps) and all(is_int(a) for a in steps["action"]):
        order = ctx.rng("pick").permutation(len(eps))
        shuffled = eps.iloc[order].copy()
        shuffled["_rank"] = shuffled.groupby("seed").cumcount()
        paying = paying_steps(steps)
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
            out.append((seed, [snapshot(a) for a in played.actions], ctx.seeds(1, "oracle", i, "fallback")[0]))
    return out




__all__ = ["CAPPED", "DIFFER", "ORACLE_MISS", "ORACLE_UNITS", "is_int", "oracle_plans", "paying_steps", "plans"]
