"""A second, larger look at the env's own failure rates, for the ``failures`` probe's sweep.

A large failure charge on a short path makes persisting's return swing widely: most episodes meet
no failure and earn the full success, a few meet one and lose several successes' worth. The mean
then favours giving up while the rate-0 sample of the sweep is too small to say so (the paired
t-test's standard error is the charge times the spread of the failure count over sqrt(n)). When
that first look favours the short strategy but cannot decide, this runs the same two policies on
fresh seeds, as many as a power calculation from the first look asks for (at most
``CONFIRM_MAX_EPISODES``), and tests that sample alone.

The second look also runs when the first look wins but not well inside alpha (its p-value above
``alpha * DECISIVE_SHARE``): the scan corrects every finding's p-value for the others' (Holm), so a
first look at p = 0.027 filed beside three stronger tests is demoted to ``info`` although it held
alone (a generated failure-cost env at seed 0 was missed this way).

Error rate: the second look runs only when the first look's mean favours the short strategy
(probability at most 1/2 under the null, independent of the fresh sample) and its p-value is
doubled (tested at ``alpha / 2``); the smaller of the first look's p-value and the second's doubled
one stands. Under the null, for every threshold t, P(p <= t) <= t + t/4: the two looks together
reject a true null at most 1.25 times as often as one look, at alpha and after the scan's Holm.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats as _st

from envaudit.probe import ProbeContext
from envaudit.probes.failures import charge
from envaudit.recording import Records
from envaudit.rollout import Policy
from envaudit.stats import paired_compare

CONFIRM_MAX_EPISODES = 1024
"""Fresh-seed episodes per policy the second look may run."""
POWER = 0.9
DECISIVE_SHARE = 0.1
"""A first look whose p-value is at most ``alpha`` times this is decided: it survives the scan's Holm
correction with up to ten tests beside it. Above it, a second look runs."""


def episodes_needed(diffs: np.ndarray, alpha: float, floor: int) -> int:
    """Pairs a one-sided paired t-test at ``alpha`` needs to detect half the first look's mean
    difference with ``POWER``, given its spread; at least ``floor``, at most the cap."""
    mean, sd = float(np.mean(diffs)), float(np.std(diffs, ddof=1)) if len(diffs) > 1 else 0.0
    if mean <= 0:
        return floor
    if sd == 0:
        return floor
    # Planned for half the first look's mean: the second look runs because the first favoured the
    # short strategy, so that mean is biased upwards (the winner's curse).
    n = ((_st.norm.ppf(1 - alpha) + _st.norm.ppf(POWER)) * sd / (mean / 2)) ** 2
    return int(min(CONFIRM_MAX_EPISODES, max(floor, math.ceil(n))))


def second_look(ctx: ProbeContext, persist: Policy, short: Policy, pilot_short: Records,
                pilot_persist: Records, step_ref: float | None) -> dict[str, Any] | None:
    """The short strategy against persisting on fresh seeds, sized from the first look; None when
    the first look does not favour the short strategy or the safety cap stops it."""
    m = pilot_short.episodes[["seed", "return"]].merge(pilot_persist.episodes[["seed", "return"]], on="seed",
                                                       suffixes=("_a", "_b"))
    diffs = (m["return_a"] - m["return_b"]).to_numpy(float)
    if not len(diffs) or diffs.mean() <= 0:
        return None
    alpha = ctx.config.alpha / 2
    n = episodes_needed(diffs, alpha, floor=len(diffs))
    seeds = ctx.seeds(n, "sweep", "second-look")
    recs = {}
    for policy in (short, persist):
        if ctx.over_cap(f"second look at the env's own failure rates ({policy.name!r})"):
            return None
        recs[policy.name] = ctx.run(policy, seeds, tags={"fault_rate": 0.0, "look": "second"},
                                    rng_name=f"{policy.name}@second-look").records
    a, b = recs[short.name], recs[persist.name]
    both = a.episodes[["seed", "return"]].merge(b.episodes[["seed", "return"]], on="seed", suffixes=("_a", "_b"))
    cmp = paired_compare(both["return_a"], both["return_b"], ctx.rng("sweep", "second-look"),
                         labels=("short", "persist"), test="t")
    # Tested at alpha / 2: the p-value doubled is what is compared with alpha.
    cmp["p_bonferroni"] = min(1.0, 2 * cmp["p_value"])
    cmp["second_look"] = {"n_pairs": int(len(both)), "n_first_look": int(len(diffs)),
                          "first_look_mean_diff": float(diffs.mean()), "alpha": alpha}
    if step_ref is not None:
        r = charge.refunded_returns(a, step_ref).merge(charge.refunded_returns(b, step_ref), on="seed",
                                                        suffixes=("_a", "_b"))
        cmp["diff_if_failures_cost_a_step"] = float((r["return_a"] - r["return_b"]).mean()) if len(r) else None
    else:
        cmp["diff_if_failures_cost_a_step"] = None
    return {"short": cmp, "records": a, "persist_records": b}


__all__ = ["CONFIRM_MAX_EPISODES", "DECISIVE_SHARE", "episodes_needed", "second_look"]
