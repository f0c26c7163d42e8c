"""Oscillation farming, for the ``length`` probe: does repeating an action cycle pay?

A progress bonus for each step forward with no matching cost for the step back makes pacing
forward and back pay, lap after lap, until the step limit: the boat-race loop. Repeating one action
pays nothing there, so the stall replays miss it; only the alternating cycle pays.

Signal. ``counterfactual.find_cycles`` reads exploration for windows of 2-3 actions (no action that
ends episodes) whose rewards add up to more than zero, with the prefixes they were seen after (one
lap included). Random play with many ways to end an episode seldom walks a lap twice, so
``screened_cycles`` adds the loops a short screen finds: from where a paying action first paid,
each other non-ending action as the way back, then the paying action again. From each prefix the
engine plays, on the prefix's own seed:

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
import pandas as pd

from envaudit.counterfactual import (
    MAX_PREFIXES,
    Counterfactuals,
    Cycle,
    Played,
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
SCREEN_PAYERS, SCREEN_PREFIXES, SCREEN_LAPS = 2, 2, 2
"""The cycle screen: the best-paying non-ending actions it starts from, the prefixes it plays each
way back from, and the laps it plays."""


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
    """Whether the laps come back to the observation the cycle started from (the start of the
    prefix's last lap): at least ``RETURNS_SHARE`` of the later laps' starts are that observation.
    Not every one: a flaky call on the way forward shows its error in one lap's observation, and
    the next lap is back where it was."""
    if not digests or len(digests) < start + lap * k:
        return False
    first = digests[start - lap]
    back = [digests[start - lap + j * lap] == first for j in range(1, k + 1)]
    return float(np.mean(back)) >= RETURNS_SHARE


def _paying_prefixes(steps: pd.DataFrame, episodes: pd.DataFrame, action: int) -> list[Prefix]:
    """One prefix per seed (the earliest-paying episode first) ending on the first step where
    ``action`` paid more than nothing; exploration's other seeds get the shortest of those action
    sequences (random play reaches the paying state on a few seeds only, and the engine pairs each
    prefix's continuations with each other, whatever state the prefix reaches)."""
    seeds = episodes.set_index("episode_id")["seed"]
    paid = steps[(steps["action"].map(lambda a: isinstance(a, (int, np.integer)) and int(a) == action))
                 & (steps["reward"] > 0)]
    first = paid.sort_values(["step", "episode_id"]).drop_duplicates("episode_id")
    chosen: dict[int, Prefix] = {}
    for eid, t in zip(first["episode_id"], first["step"], strict=True):
        if eid not in seeds.index or pd.isna(seeds.loc[eid]) or int(seeds.loc[eid]) in chosen:
            continue
        ep = steps[steps["episode_id"] == eid].sort_values("step")
        acts = ep["action"].tolist()[: int(t) + 1]
        if all(isinstance(a, (int, np.integer)) for a in acts):
            chosen[int(seeds.loc[eid])] = Prefix(int(seeds.loc[eid]), tuple(int(a) for a in acts), int(eid))
    if chosen:
        shortest = min(chosen.values(), key=lambda p: (len(p.actions), p.actions))
        for seed in dict.fromkeys(int(s) for s in episodes["seed"].dropna()):
            chosen.setdefault(seed, Prefix(seed, shortest.actions))
    return list(chosen.values())[:MAX_PREFIXES]


def _rotation(actions: tuple[int, ...]) -> tuple[int, ...]:
    """One name for a cycle and its rotations: the smallest of them."""
    return min(actions[i:] + actions[:i] for i in range(len(actions)))


def one_per_cycle(cycles: list[Cycle]) -> list[Cycle]:
    """One candidate per cycle, whichever way round it was found ((back, forward) is (forward, back)
    started later), in the order first found: the one with more prefixes (a window random play
    walked on 4 seeds, screened from all 8: generated oscillation-1-74), the first on a tie."""
    kept: dict[tuple[int, ...], Cycle] = {}
    for c in cycles:
        key = _rotation(c.actions)
        if key not in kept or len(c.prefixes) > len(kept[key].prefixes):
            kept[key] = c
    return list(kept.values())


def _repeats_pay(played: Played, name: str, i: int, start: int) -> bool:
    """Whether continuation ``name`` (one action repeated) from prefix ``i`` paid on every repeat
    while its observation stayed where the prefix left it."""
    ep, seen = played.get(name, i), played.observations.get(name, {}).get(i)
    if ep is None or not seen or len(seen) <= start + 1:
        return False
    repeats = len(seen) - start - 1  # the last step is the ending
    still = all(seen[start + j] == seen[start] for j in range(1, repeats + 1))
    return still and bool((ep.tail["reward"].to_numpy(float)[:repeats] > 0).all())


def screened_cycles(engine: Counterfactuals, steps: pd.DataFrame, episodes: pd.DataFrame, enders: set[int],
                    ender: int, limit: int) -> list[Cycle]:
    """Cycles that random play never walks back to back (its episodes end too soon to see a lap
    twice): from the first state where a non-ending action ``a`` paid (the ``SCREEN_PAYERS``
    best-paying by total pay in exploration), each other non-ending action ``b`` as the way back,
    then ``a`` again, ``SCREEN_LAPS`` times, then the honest ending. A way back after which the
    lap comes back to the observation it left and nets more than nothing, on a prefix where ``a``
    repeated alone does not pay while staying where it is (that is step farming, no cycle), on at
    least one of ``SCREEN_PREFIXES`` prefixes, makes ``(b, a)`` a candidate, with every prefix where
    ``a`` paid (one per seed) and one lap appended, as ``find_cycles`` hands its windows over."""
    ints = steps[steps["action"].map(lambda a: isinstance(a, (int, np.integer)))]
    if ints.empty:
        return []
    actions = ints["action"].astype(int)
    others = sorted(set(actions) - enders)
    pay = ints.assign(action=actions)[actions.isin(others) & (ints["reward"] > 0)].groupby("action")["reward"].sum()
    found: list[Cycle] = []
    for a in pay.sort_values(ascending=False, kind="stable").index[:SCREEN_PAYERS]:
        prefixes = [p for p in _paying_prefixes(steps, episodes, int(a))
                    if len(p.actions) + 2 * (SCREEN_LAPS + 1) + 1 <= limit]
        if len(prefixes) < MIN_SAMPLES:
            continue
        screen = prefixes[:SCREEN_PREFIXES]
        ways = [b for b in others if b != a]
        conts = [dataclasses.replace(cycle_then_end((b, int(a)), SCREEN_LAPS, ender, name=f"back-{b}"), watch=True)
                 for b in ways]
        # The same steps on ``a`` alone: a call that pays every time without changing the state is
        # farmed without a way back (the stall replays' question); a lap through it is no cycle.
        alone = dataclasses.replace(cycle_then_end((int(a),), 2 * SCREEN_LAPS, ender, name="alone"), watch=True)
        played = engine.play(screen, [*conts, alone])
        farmed_alone = [_repeats_pay(played, "alone", i, len(p.actions)) for i, p in enumerate(screen)]
        for b in ways:
            name = f"back-{b}"
            laps_pay = []
            for i, prefix in enumerate(screen):
                if farmed_alone[i]:
                    continue
                ep, seen = played.get(name, i), played.observations.get(name, {}).get(i)
                start = len(prefix.actions)
                if ep is None or not seen or len(seen) <= start + 2 * SCREEN_LAPS:
                    continue
                if len({seen[start + 2 * j] for j in range(SCREEN_LAPS + 1)}) != 1:
                    continue
                rewards = ep.tail["reward"].to_numpy(float)[: 2 * SCREEN_LAPS]
                net = rewards.reshape(SCREEN_LAPS, 2).sum(axis=1)
                if (net > 0).all():
                    laps_pay.append(float(net.mean()))
            if laps_pay:
                found.append(Cycle((b, int(a)), float(np.mean(laps_pay)), 0,
                                   [dataclasses.replace(p, actions=p.actions + (b, int(a))) for p in prefixes]))
    return found


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
    windows = find_cycles(ctx.exploration.steps, ctx.exploration.episodes, set(enders) | {ender})
    if not ctx.over_cap("the cycle screen's replays"):
        windows += screened_cycles(engine, ctx.exploration.steps, ctx.exploration.episodes, set(enders) | {ender},
                                   ender, limit)
    for cycle in one_per_cycle(windows):
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
