"""Does an ending pay less the later it is taken? A brevity bonus's signature.

A brevity bonus hangs on one ending action and fades with the step it is taken at; among all the
other ways random play ends episodes it need not tilt the overall length slope, so each ending
action is judged on its own (``fading_enders``):

- **from exploration**: the pay of the step that ended a failure, regressed on that step, across
  the failures that ended with the action (enough of them, at two steps or more);
- **from the same starts** (``fades_when_delayed``), for an ending that exploration cannot settle
  and that could matter (taken at once it pays about what honest success pays: below that, quitting
  is no ``fail`` whatever its shape): the action taken after one step of a non-ending action, and
  after ``FADE_AFTER`` more of the same action, on the same seeds. Exploration's regression mixes
  time with progress (partial credit paid on an unfinished ending grows with the calls made, so
  the later endings of random play pay *more*); repeating one action adds time and, past its first
  call, no progress, so the pair differs by the time the ending is taken.

Work is a few episodes per candidate, counted in env steps; most envs have no candidate (no ending
pays near success), so most scans play none.
"""

from __future__ import annotations

import numpy as np

from envaudit.probe import ProbeContext
from envaudit.probes._shared.endings import split_enders
from envaudit.probes.length.delay import best_paying
from envaudit.protocol import END_TERMINATED, FAILURE
from envaudit.rollout import SequencePolicy, step_limit
from envaudit.stats import MIN_SAMPLES, ols_bootstrap, reward_scale, signed_rank_p

FADE_AFTER = 4
"""Extra steps of the non-ending action before the late ending."""
FADE_SEEDS = 16
"""Seeds of the paired replays (scaled under ``--quick``, never below ``MIN_SAMPLES``)."""
MAX_IDLE = 2
"""At most this many non-ending actions tried as the time filler, best-paying first."""


def fading_enders(ctx: ProbeContext, rng: np.random.Generator, success: np.ndarray, failure: np.ndarray,
                  *, margin_share: float) -> list:
    """The ending actions whose pay falls with the step they are taken at: from exploration where it
    shows, else from paired replays for the endings that pay about what success pays at once
    (within ``margin_share`` of the reward scale). What was tried is in ``ctx.notes["fading"]``."""
    found = exploration_fading(ctx, rng)
    candidates = [a for a in _paying_at_once(ctx, success, failure, margin_share) if a not in found]
    idlers = _idlers(ctx, split_enders(ctx.exploration.steps)[1]) if candidates else []
    tried = {}
    for action in candidates:
        result = fades_when_delayed(ctx, action, idlers)
        tried[ctx.describe_action(action)] = result
        if result["fades"]:
            found.append(action)
    if tried:
        ctx.notes["fading"] = tried
    return found


def exploration_fading(ctx: ProbeContext, rng: np.random.Generator) -> list:
    """Ending actions whose pay on the ending step falls significantly with the step they are
    taken at, across exploration's failures that ended with them."""
    eps, steps = ctx.exploration.episodes, ctx.exploration.steps
    enders, _, _ = split_enders(steps)
    failed = set(eps.loc[eps["outcome"] == FAILURE, "episode_id"])
    last = steps[steps["episode_id"].isin(failed)].groupby("episode_id").tail(1)
    fading = []
    for action in enders:
        ended = last[last["action"] == action]
        if len(ended) < MIN_SAMPLES or ended["step"].nunique() < 2:
            continue
        fit = ols_bootstrap(ended["reward"].to_numpy(float), {"step": ended["step"].to_numpy(float)}, rng,
                            n_boot=500)
        coef = fit["coef"].get("step")
        if coef is not None and coef["p_value"] < ctx.config.alpha and coef["ci"][1] < 0:
            fading.append(action)
    return fading


def _paying_at_once(ctx: ProbeContext, success: np.ndarray, failure: np.ndarray, margin_share: float) -> list:
    """Ending actions whose failures ended on the first step paid within the margin of what honest
    success pays (the only endings a brevity ``fail`` can be about); none without a success seen."""
    success = np.asarray(success, float)
    success = success[np.isfinite(success)]
    if not len(success):
        return []
    eps, steps = ctx.exploration.episodes, ctx.exploration.steps
    enders, _, _ = split_enders(steps)
    margin = margin_share * reward_scale(success, failure, eps["return"])
    bar = min(float(success.mean()), float(np.median(success))) - margin
    at_once = eps[(eps["outcome"] == FAILURE) & (eps["length"] == 1)]
    first = steps[steps["episode_id"].isin(set(at_once["episode_id"]))].set_index("episode_id")["action"]
    returns = at_once.set_index("episode_id")["return"]
    out = []
    for action in enders:
        paid = returns[first[first == action].index].to_numpy(float)
        if len(paid) and float(np.mean(paid)) >= bar:
            out.append(action)
    return out


def _idlers(ctx: ProbeContext, others: list) -> list:
    """The non-ending actions tried as the time filler: the best-paying first (ties by action)."""
    return best_paying(ctx, others)[:MAX_IDLE]


def fades_when_delayed(ctx: ProbeContext, action, idlers: list) -> dict:
    """``action`` taken after one step of each of ``idlers`` and after ``FADE_AFTER`` more, paired by
    seed: does its own step pay less late? Per idler a one-sided signed-rank test at the scan's alpha
    (Bonferroni over the idlers); ``fades`` when one holds with every paired difference's mean below 0."""
    limit = step_limit(ctx.env) or ctx.config.max_steps
    k = min(FADE_AFTER, limit - 3)
    out: dict = {"fades": False, "after": k, "idlers": {}}
    if k < 1 or not idlers:
        out["reason"] = "no room for a later ending" if k < 1 else "no action that leaves episodes running"
        return out
    n = max(MIN_SAMPLES, ctx.config.scaled(FADE_SEEDS))
    label = ctx.describe_action(action)
    for idle in idlers:
        seeds = ctx.seeds(n, "fade", int(action), int(idle))
        pay = {}
        for arm, repeats in (("early", 1), ("late", 1 + k)):
            policy = SequencePolicy([idle] * repeats + [action], name=f"{label} after {repeats} x {ctx.describe_action(idle)}")
            records = ctx.run(policy, seeds, tags={"arm": f"fade-{arm}"}).records
            pay[arm] = _ending_pay(records, repeats + 1)
        paired = [(pay["late"][s], pay["early"][s]) for s in seeds if s in pay["late"] and s in pay["early"]]
        diffs = np.array([late - early for late, early in paired], float)
        diffs = np.where(np.abs(diffs) <= 1e-9, 0.0, diffs)
        p = signed_rank_p(diffs, alternative="less") if len(diffs) >= MIN_SAMPLES else 1.0
        holds = bool(len(diffs) >= MIN_SAMPLES and p < ctx.config.alpha / len(idlers) and diffs.mean() < 0)
        out["idlers"][ctx.describe_action(idle)] = {"pairs": int(len(diffs)), "mean_difference": float(diffs.mean())
                                                    if len(diffs) else None, "p_value": float(p), "holds": holds}
        if holds:
            out["fades"] = True
            break
    return out


def _ending_pay(records, length: int) -> dict[int, float]:
    """Per seed, the pay of the step that ended an episode of exactly ``length`` steps."""
    eps, steps = records.episodes, records.steps
    whole = eps[(eps["length"] == length) & (eps["end_reason"] == END_TERMINATED)]
    last = steps[steps["episode_id"].isin(set(whole["episode_id"]))].groupby("episode_id").tail(1)
    seed_of = dict(zip(whole["episode_id"], whole["seed"], strict=True))
    return {int(seed_of[e]): float(r) for e, r in zip(last["episode_id"], last["reward"], strict=True)}


__all__ = ["FADE_AFTER", "FADE_SEEDS", "exploration_fading", "fades_when_delayed", "fading_enders"]
