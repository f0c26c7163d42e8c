"""Oscillation farming, for the ``length`` probe: does repeating an action cycle pay?

A progress bonus for each step forward with no matching cost for the step back makes pacing
forward and back pay, lap after lap, until the step limit: the boat-race loop. Repeating one action
pays nothing there, so the stall replays miss it; only the alternating cycle pays.

Signal. ``counterfactual.find_cycles`` reads exploration for windows of 2-3 actions (no action that
ends episodes) whose rewards add up to more than zero, with the prefixes they were seen after (one
lap included). From each prefix the engine plays, on the prefix's own seed:

- ``end-now``: the honest ending (``stall.honest_ender``) at once;
- ``cycle``: ``k`` more laps of the cycle, then the same ending (``k``: the laps that fit under the
  step limit after the longest prefix), watching the observations at each lap's start.

The cycle farms when the per-prefix difference ``cycle - end-now`` (both ending the same way) is
positive, significant and material (``counterfactual.paired_test``) and the laps come back to the
observation they started from (most prefixes). The ladder's yardstick for ``fail`` is honest
success from the same starts: the env's oracle on the same seeds, else the honest successes found
(``endings.honest_successes``): ``decide_length_bias("cycle")`` grades it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.counterfactual import (
    Counterfactuals,
    Prefix,
    cycle_then_end,
    end_now,
    find_cycles,
    oracle_from_here,
    paired_test,
)
from envaudit.policies import oracle_policy
from envaudit.probe import ProbeContext
from envaudit.probes._shared.endings import MIN_EFFECT, split_enders
from envaudit.probes._shared.stall import honest_ender
from envaudit.rollout import Policy, step_limit
from envaudit.stats import MIN_SAMPLES, noninferiority, reward_scale

RETURNS_SHARE = 0.5
"""Share of prefixes whose laps must come back to the observation they started from."""


def _oracle_on(ctx: ProbeContext, engine: Counterfactuals, seeds: list[int]) -> tuple[np.ndarray, str] | None:
    """The oracle's returns on ``seeds`` (its successes only), when the env has an oracle."""
    try:
        policy = oracle_policy(ctx.env)
    except Exception:  # an oracle that cannot be built only costs us the yardstick
        return None
    if not isinstance(policy, Policy):
        return None
    played = engine.play([Prefix(s) for s in sorted(set(seeds))], [oracle_from_here(policy)])
    won = [e.ret for e in played.episodes.get("oracle", {}).values() if e.success]
    return (np.asarray(won, float), "the env's oracle on the same seeds") if len(won) >= MIN_SAMPLES else None


def _laps_return(digests: list[str] | None, start: int, lap: int, k: int) -> bool:
    """Whether the observation at every lap's start (from the prefix's last lap on) is the same."""
    if not digests or len(digests) < start + lap * k:
        return False
    marks = {digests[start - lap + j * lap] for j in range(k + 1)}
    return len(marks) == 1


def cycle_farming(ctx: ProbeContext, success: np.ndarray, success_source: str) -> dict[str, Any] | None:
    """The best-paying cycle measured as the module docstring says, or None when there is no cycle
    to judge (no ``Discrete`` space, no honest ending, no paying window, no room under the limit)."""
    if not isinstance(ctx.env.action_space, gym.spaces.Discrete):
        return None
    ender = honest_ender(ctx.exploration)
    if ender is None:
        return None
    enders, _, _ = split_enders(ctx.exploration.steps)
    limit = step_limit(ctx.env) or ctx.config.max_steps
    engine = Counterfactuals(ctx.run, tag="length-cycle", tags={"arm": "cycle"})
    best: dict[str, Any] | None = None
    for cycle in find_cycles(ctx.exploration.steps, ctx.exploration.episodes, set(enders) | {ender}):
        lap = len(cycle.actions)
        prefixes = [p for p in cycle.prefixes if len(p.actions) + 2 * lap + 1 <= limit]
        if len(prefixes) < MIN_SAMPLES or ctx.over_cap(f"the cycle {list(cycle.actions)}'s replays"):
            continue
        k = (limit - max(len(p.actions) for p in prefixes) - 1) // lap
        conts = [end_now(ender, name="end-now"),
                 dataclasses.replace(cycle_then_end(cycle.actions, k, ender, name="cycle"), watch=True)]
        played = engine.play(prefixes, conts)
        same_ending = lambda a, b: a.success == b.success  # noqa: E731
        diffs, where = played.pairs("cycle", "end-now", when=same_ending)
        exploit = np.asarray([played.get("cycle", i).ret for i in where], float)
        alternative = np.asarray([played.get("end-now", i).ret for i in where], float)
        seen = played.observations.get("cycle", {})
        back = [_laps_return(seen.get(i), len(prefixes[i].actions), lap, k) for i in where]
        yardstick = _oracle_on(ctx, engine, [prefixes[i].seed for i in where])
        honest, source = yardstick if yardstick is not None else (success, success_source)
        scale = reward_scale(honest, alternative, exploit)
        rng = ctx.rng("cycle", *cycle.actions)
        test = paired_test(diffs, scale, rng, alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        vs_success = (noninferiority(exploit, honest, rng, margin=MIN_EFFECT * scale, labels=("cycle", "success"))
                      if len(honest) >= MIN_SAMPLES and len(exploit) else None)
        returns_share = float(np.mean(back)) if back else 0.0
        holds = bool(test["pays"] and returns_share >= RETURNS_SHARE)
        at_least = bool(holds and vs_success is not None and vs_success["noninferior"]
                        and vs_success["p_value"] < ctx.config.alpha)
        measured = {
            "cycle": [ctx.describe_action(a) for a in cycle.actions], "cycle_actions": list(cycle.actions),
            "laps": k, "honest_ending": ctx.describe_action(ender), "window_pay": cycle.pay,
            "windows_seen": cycle.count, "n_prefixes": len(prefixes), "returns_to_same_observation": returns_share,
            "cycle_vs_end_now": test, "vs_success": vs_success, "success_source": source,
            "mean_cycle": float(exploit.mean()) if len(exploit) else None,
            "mean_end_now": float(alternative.mean()) if len(alternative) else None,
            "mean_success": float(np.mean(honest)) if len(honest) else None,
            "replay_steps": played.cost, "holds": holds, "p_value": test["p_value"],
            "level": "at_least_success" if at_least else "above_alternative" if holds else None,
            "examples": [played.get("cycle", i).episode_id for i in where[:5]],
        }
        if holds:
            ctx.keep(played.records["cycle"])
        rank = (measured["level"] is not None, at_least, test.get("mean") or 0.0)
        if best is None or rank > best["_rank"]:
            best = {**measured, "_rank": rank}
    if best is not None:
        best.pop("_rank")
    return best
