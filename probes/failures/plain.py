"""``failure-shortcut`` on plain Gymnasium envs (no ``ToolEnv``, so no fault injection), for the
``failures`` probe: from exploration alone.

Signal: a regression of return on success, length and failure count (a failure must cost reward
beyond its step, the length term carrying the step cost), agreeing with ``failure_charge``'s
step-level verdict (failed steps pay less than the cheapest ordinary step); then, after a first
failure, the return still to come in episodes that ended within a step against those that went on.
``shortcut_exploration`` measures; ``decisions.decide_failure_shortcut`` (basis ``"exploration"``)
grades it: ``fail`` when ending within a step earns at least what the episodes that went on and
succeeded earned from the failure on, else ``warn``.

Known false positives: random exploration is a poor persisting policy, so "went on" episodes earn
little; the charge gates keep mere step costs and shaping from being read as a shortcut.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envaudit.findings import Finding
from envaudit.probe import ProbeContext
from envaudit.probes.failures.decisions import decide_failure_shortcut
from envaudit.protocol import SUCCESS, TOOL_FAILED
from envaudit.stats import MIN_SAMPLES, compare


def natural_failure_rate(episodes: pd.DataFrame) -> float:
    calls = episodes["n_tool_calls"].sum()
    return float((episodes["n_tool_errors"] + episodes["n_tool_timeouts"]).sum() / calls) if calls else 0.0


def shortcut_exploration(ctx: ProbeContext, fee: dict) -> list[Finding]:
    """Plain envs: does a failure cost reward beyond its step, and after one, does ending pay more?
    ``fee``: ``failure_charge``'s step-level verdict, which the regression must agree with."""
    steps, eps = ctx.exploration.steps, ctx.exploration.episodes
    if eps.empty or "tool_status" not in steps or not steps["tool_status"].isin(TOOL_FAILED).any():
        return []
    if not fee["charged"]:
        ctx.notes["failure_shortcut"] = ("no failed step paid less than the same tool working and less than the "
                                         "cheapest ordinary step: failures cost only the step they take")
        return []
    eps = eps[eps["n_tool_calls"] > 0]
    rng = ctx.rng("shortcut")
    n_fail = (eps["n_tool_errors"] + eps["n_tool_timeouts"]).to_numpy(float)
    y = eps["return"].to_numpy(float)
    cols = [np.ones(len(eps)), eps["length"].to_numpy(float), n_fail]
    has_success = eps["outcome"].isin([SUCCESS, "failure"]).any()
    if has_success:
        cols.insert(1, (eps["outcome"] == SUCCESS).to_numpy(float))
    X = np.column_stack(cols)
    if len(eps) < 3 * X.shape[1] or np.ptp(n_fail) == 0:
        return []
    coef = np.linalg.lstsq(X, y, rcond=None)[0][-1]
    idx = rng.integers(0, len(y), size=(500, len(y)))
    boots = np.array([np.linalg.lstsq(X[i], y[i], rcond=None)[0][-1] for i in idx])
    cost_ci = [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))]
    # After the first failure: the reward still to come when the episode ended within a step
    # (by termination, not the step limit) vs when it went on for at least two more steps.
    failed = steps[steps["tool_status"].isin(TOOL_FAILED)].groupby("episode_id")["step"].min()
    lengths = eps.set_index("episode_id")["length"]
    ends = eps.set_index("episode_id")["end_reason"]
    won = eps.set_index("episode_id")["outcome"] == SUCCESS
    after = steps.merge(failed.rename("first_fail"), left_on="episode_id", right_index=True)
    remaining = after[after["step"] > after["first_fail"]].groupby("episode_id")["reward"].sum()
    remaining = remaining.reindex(failed.index, fill_value=0.0)
    left = lengths.reindex(failed.index) - failed - 1
    short_ids = failed.index[(left <= 1) & (ends.reindex(failed.index) != "truncated")]
    persist_ids = failed.index[left >= 2]
    short, persist = remaining[short_ids].to_numpy(float), remaining[persist_ids].to_numpy(float)
    if len(short) < MIN_SAMPLES or len(persist) < MIN_SAMPLES:
        return []
    cmp = compare(short, persist, rng, labels=("short", "persist"))
    if not (cost_ci[1] < 0 and (cmp["diff"] or 0) > 0 and cmp["p_value"] <= ctx.config.alpha
            and cmp["diff_ci"][0] > 0):
        return []
    persisted_won = remaining[[i for i in persist_ids if won.get(i, False)]]
    honest = float(persisted_won.mean()) if len(persisted_won) else None
    evidence = {
        "behaviour": "quit", "reward_path": "env", "failure_charge": fee,
        "p_value": cmp["p_value"], "test": "Mann-Whitney U on the return after the first failure, "
        "ended within a step vs went on, one-sided", "mean_after_failure_short": cmp["mean_short"],
        "mean_after_failure_persist": cmp["mean_persist"], "n_short": cmp["n_short"], "n_persist": cmp["n_persist"],
        "diff_ci": cmp["diff_ci"], "failure_cost": float(coef), "failure_cost_ci": cost_ci,
        "failure_cost_model": "OLS of return on " + ("success, " if has_success else "") + "length, failures",
        "honest_after_failure_return": honest, "natural_failure_rate": natural_failure_rate(eps),
    }
    return [decide_failure_shortcut("exploration", {"evidence": evidence,
                                                    "examples": [int(i) for i in short_ids[:3]]})]
