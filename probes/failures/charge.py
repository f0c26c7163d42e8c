"""Are tool failures charged beyond the step they take? The gate of ``failure-shortcut``.

A failed call always costs the agent one step: whatever every step pays (a step cost), and the
progress the call did not make. That is the backend's flakiness, not an incentive: giving up
beating *failing slowly* under a mere step cost is no env flaw (DESIGN.md). A failure is *charged*
when the failed step pays less than the cheapest ordinary step the env pays (non-terminal steps
whose call worked, or that made none), and less than the same call working where that was seen
(paired by seed and prefix under fault injection on a ``ToolEnv``; across exploration on plain
envs). Against the cheapest step, not the same call working, so that progress rewards stay out:
a working call that earns shaping pays more than the failed one, but the failed one then pays
what an idle step pays.

``refunds`` turns the charge into a counterfactual: each failed step's charge paid back. If a short
strategy beats persisting with the charges but not without them, the charges are why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from envaudit.protocol import TOOL_FAILED, TOOL_OK
from envaudit.recording import Records
from envaudit.stats import holm, paired_compare


def injected_charges(pairs: dict[tuple[int, str], tuple[list[float], list[tuple[float, float]]]],
                     step_ref: float | None, labels: list[str] | None, rng: np.random.Generator,
                     alpha: float) -> dict[str, Any]:
    """Charge tests from fault injection. ``pairs`` maps (call, fault) to the failed step rewards
    (failures that did not end the episode) and (failed, ok) reward pairs of the same seed and prefix."""
    tests = {}
    for (a, status), (bad, paired) in sorted(pairs.items()):
        call = labels[a] if labels and 0 <= a < len(labels) else str(a)
        tests[f"{call} ({status})"] = _test(bad, [o - f for f, o in paired], step_ref, rng)
    return _decide(tests, step_ref, "fault injection", alpha)


def exploration_charges(steps: pd.DataFrame, step_ref: float | None, rng: np.random.Generator,
                        alpha: float) -> dict[str, Any]:
    """Charge tests from exploration: per (tool, fault), the failed steps that did not end the
    episode, against the cheapest ordinary step; the same tool's ok steps give the second check."""
    steps = steps[steps["tool_status"].notna() & ~steps["terminated"].astype(bool) & ~steps["truncated"].astype(bool)]
    tests = {}
    for tool, group in steps.groupby("tool_name"):
        ok = group.loc[group["tool_status"] == TOOL_OK, "reward"].to_numpy(float)
        for status in TOOL_FAILED:
            bad = group.loc[group["tool_status"] == status, "reward"].to_numpy(float)
            if len(bad):
                gap = [float(ok.mean() - bad.mean())] if len(ok) else []
                tests[f"{tool} ({status})"] = _test(bad, gap, step_ref, rng)
    return _decide(tests, step_ref, "exploration", alpha)


def _test(bad: list[float] | np.ndarray, ok_minus_failed: list[float], step_ref: float | None,
          rng: np.random.Generator) -> dict[str, Any]:
    """Do failed steps pay less than the cheapest ordinary step (signed-rank on the shortfalls)?"""
    bad = np.asarray(bad, float).round(9)  # rewards equal up to float noise are equal
    ref = 0.0 if step_ref is None else round(step_ref, 9)
    t = paired_compare(np.full(len(bad), ref), bad, rng, labels=("step", "failed"))
    t["ok_minus_failed"] = float(np.mean(ok_minus_failed)) if len(ok_minus_failed) else None
    t["test"] = ("Wilcoxon signed-rank, the cheapest ordinary step's reward minus each failed step's, "
                 "one-sided; plus the same call working paying more (paired where available)")
    return t


def _decide(tests: dict[str, dict], step_ref: float | None, source: str, alpha: float) -> dict[str, Any]:
    """Charged: failed steps pay significantly (Holm) less than the cheapest ordinary step, and less
    than the same call working where that was seen. The charge is the smaller of the two gaps."""
    keys = list(tests)
    adjusted = dict(zip(keys, holm([tests[k]["p_value"] for k in keys]), strict=True))
    per: dict[str, float] = {}
    for k in keys:
        t = tests[k]
        if step_ref is None or t["diff"] is None or t["underpowered"] or adjusted[k] > alpha or t["diff_ci"][0] <= 0:
            continue
        gaps = [t["diff"]] + ([t["ok_minus_failed"]] if t["ok_minus_failed"] is not None else [])
        if min(gaps) > 1e-9:
            per[k] = float(min(gaps))
    return {
        "charged": bool(per), "source": source, "step_reward_reference": step_ref,
        "charge_per_failure": per, "max_charge": max(per.values()) if per else 0.0,
        "tests": {k: {"mean_failed": tests[k]["mean_failed"], "below_cheapest_step": tests[k]["diff"],
                      "ok_minus_failed": tests[k]["ok_minus_failed"], "n": tests[k]["n_pairs"],
                      "p_value": tests[k]["p_value"], "p_holm": float(adjusted[k])}
                  for k in keys},
    }


def refunds(records: Records, step_ref: float) -> pd.Series:
    """Per episode id: what its failed steps were charged beyond the cheapest ordinary step."""
    steps = records.steps
    failed = steps[steps["tool_status"].isin(TOOL_FAILED)]
    owed = (step_ref - failed["reward"].astype(float)).clip(lower=0.0)
    per = owed.groupby(failed["episode_id"]).sum()
    return per.reindex(records.episodes["episode_id"], fill_value=0.0)


def refunded_returns(records: Records, step_ref: float) -> pd.DataFrame:
    """``seed`` and ``return`` with each failure's charge paid back (the env as if failures cost a step)."""
    ep = records.episodes[["episode_id", "seed", "return"]].copy()
    ep["return"] = ep["return"].to_numpy(float) + refunds(records, step_ref).to_numpy(float)
    return ep[["seed", "return"]]
