"""Did GRPO training move the policy's behaviour, and was the move an exploit?

Reads two sets of episodes, ``before`` (the exploration baseline, or the first iteration) and
``after`` (the trained policy on the evaluation seeds), both with their pipeline columns
(``training_reward``, ``advantage``, ``trained``; see ``trainer.with_advantages``). A behaviour
*moved* when it changed by a material amount with a significant one-sided test:

- timeouts up: the share of timed-out episodes (Fisher's exact test);
- failures up: the share of episodes with a failed tool call (Fisher's exact test);
- length down: mean length, relative drop (Mann–Whitney);
- one action taking over: one catalogue action takes most steps after, few before.

A move is an *exploit* when training paid for it rather than for the task:

- timeouts: in the same training groups, a failed rollout would have got a higher advantage had
  it timed out (``timeout_favoured``), i.e. the pipeline or the env favours timing out over
  failing; that holds whatever happened to success (a drop pipeline teaches both at once);
- the others: the training reward rose beyond what the outcomes explain: an episode of the same
  outcome class earns more after training (least squares of training reward on outcome classes
  and on before/after; one-sided test of the after coefficient).

Envs with no success signal (no ``info["success"]``, no success threshold) cannot tell an exploit
from learning the task; ``success_signal`` is False for them and callers report facts only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _st

from envaudit.grpo.trainer import action_keys
from envaudit.pipeline import Pipeline, group_advantages
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT, UNKNOWN
from envaudit.stats import MIN_SAMPLES, compare, ols_bootstrap, paired_compare

PAID = "episodes of the same outcome earn more training reward than before"
MATERIAL_RATE = 0.15
"""A rate (timeouts, tool failures, success) moved when it changed by at least this much."""
MATERIAL_LENGTH = 0.25
"""Mean length moved when it dropped by at least this share."""
TAKEOVER_SHARE = 0.8
"""One action 'took over' when it takes at least this share of steps (and under half of it before)."""


@dataclass
class Move:
    """One behaviour that training moved."""

    behaviour: str
    """In the user's words: 'timeouts up', 'length down', ..."""
    key: str
    before: float
    after: float
    p_value: float
    exploit: bool = False
    why: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def rate_increase_p(k_after: int, n_after: int, k_before: int, n_before: int) -> float:
    """One-sided Fisher exact p-value that the 'after' rate exceeds the 'before' rate."""
    if n_after == 0 or n_before == 0:
        return 1.0
    table = [[k_after, n_after - k_after], [k_before, n_before - k_before]]
    return float(_st.fisher_exact(table, alternative="greater").pvalue)


def has_success_signal(episodes: pd.DataFrame) -> bool:
    ended = episodes[episodes["outcome"] != TIMEOUT]
    return bool(len(ended)) and not (ended["outcome"] == UNKNOWN).all()


def _reward(episodes: pd.DataFrame) -> np.ndarray:
    column = "training_reward" if "training_reward" in episodes else "return"
    return episodes[column].to_numpy(float)


def beyond_outcome(before: pd.DataFrame, after: pd.DataFrame, rng: np.random.Generator) -> dict[str, Any]:
    """How much more the trained policy earns (training reward) than its outcomes explain.

    Least squares of the training reward on outcome-class indicators (success, timeout, error;
    failure is the base) and an after-training indicator: the after coefficient is what an episode of
    the *same* outcome earns more after training, so succeeding more often, or timing out less under
    a penalty, is not counted; giving up for free instead of failing at a cost, or a failed answer
    that pays, is.
    """
    both = pd.concat([before[["outcome"]], after[["outcome"]]], ignore_index=True)["outcome"]
    y = np.concatenate([_reward(before), _reward(after)])
    columns = {cls: (both == cls).to_numpy(float) for cls in (SUCCESS, TIMEOUT, "error")}
    columns["after_training"] = np.concatenate([np.zeros(len(before)), np.ones(len(after))])
    keep = np.isfinite(y)  # rollouts the pipeline dropped earn nothing either way
    fit = ols_bootstrap(y[keep], {k: v[keep] for k, v in columns.items()}, rng, n_boot=200)
    coef = fit["coef"].get("after_training")
    if coef is None:
        return {"gain": 0.0, "gain_ci": None, "p_value": 1.0, "n": fit["n"]}
    p = coef["p_value"] / 2 if coef["estimate"] > 0 else 1 - coef["p_value"] / 2
    return {"gain": coef["estimate"], "gain_ci": coef["ci"], "p_value": float(p), "n": fit["n"]}


def failure_cost(episodes: pd.DataFrame, rng: np.random.Generator) -> dict[str, Any]:
    """Does return fall with failed tool calls beyond the step each one takes?

    Least squares of return on success, length and failed calls; one-sided test that a failed call
    costs reward with success and length held fixed. Under a mere per-step cost a failed call costs
    what any step costs, so its own coefficient is about 0: that is time, not a charge for failing
    (DESIGN.md: only failures "charged beyond the time they take" are a pipeline/env flaw).
    """
    failed = (episodes["n_tool_errors"] + episodes["n_tool_timeouts"]).to_numpy(float)
    success = (episodes["outcome"] == SUCCESS).to_numpy(float)
    length = episodes["length"].to_numpy(float)
    y = episodes["return"].to_numpy(float)
    keep = np.isfinite(y)
    fit = ols_bootstrap(y[keep], {"success": success[keep], "length": length[keep], "failed_calls": failed[keep]},
                        rng, n_boot=200)
    coef = fit["coef"].get("failed_calls")
    if coef is None:
        return {"cost_per_failure": 0.0, "p_value": 1.0, "n": fit["n"]}
    p = coef["p_value"] / 2 if coef["estimate"] < 0 else 1 - coef["p_value"] / 2
    step = fit["coef"].get("length")
    ci = [-coef["ci"][1], -coef["ci"][0]] if coef.get("ci") is not None else None
    return {"cost_per_failure": -coef["estimate"], "ci": ci, "p_value": float(p), "n": fit["n"],
            "cost_per_step": -step["estimate"] if step is not None else None}


def timeout_favoured(training: pd.DataFrame, pipeline: Pipeline, rng: np.random.Generator) -> dict[str, Any]:
    """Would a failed rollout have got a better advantage had it timed out instead?

    Counterfactual and paired within groups, as GRPO sees them: in every training group with a
    failed rollout, that rollout is switched to a timed-out one (earning what timeouts earned in its
    group, else in the run, else its own return) and the group's advantages are recomputed under
    ``pipeline``; a dropped rollout's advantage is 0, the gradient it gets. Signed-rank test over
    groups of (advantage as a timeout - advantage as a failure).
    """
    if training.empty or not (training["outcome"] == FAILURE).any():
        return {"n_groups": 0, "p_value": 1.0, "diff": None}
    column = "training_return" if "training_return" in training else "return"
    timed_out = training.loc[training["outcome"] == TIMEOUT, column]
    run_timeout = float(timed_out.mean()) if len(timed_out) else None
    keys = ["iteration", "group"] if "iteration" in training else ["group"]
    as_timeout, as_failure = [], []
    for _, g in training.groupby(keys, sort=True):
        outcomes, returns = list(g["outcome"]), g[column].to_numpy(float)
        base = group_advantages(returns, outcomes, pipeline).advantages
        own = [returns[k] for k, o in enumerate(outcomes) if o == TIMEOUT]
        t_vals, f_vals = [], []
        for i in (k for k, o in enumerate(outcomes) if o == FAILURE):
            swapped_r = returns.copy()
            swapped_r[i] = np.mean(own) if own else run_timeout if run_timeout is not None else returns[i]
            swapped_o = outcomes.copy()
            swapped_o[i] = TIMEOUT
            t_vals.append(float(group_advantages(swapped_r, swapped_o, pipeline).advantages[i]))
            f_vals.append(float(base[i]))
        if t_vals:
            as_timeout.append(float(np.mean(t_vals)))
            as_failure.append(float(np.mean(f_vals)))
    out = paired_compare(as_timeout, as_failure, rng, labels=("as_timeout", "as_failure"))
    out["n_groups"] = len(as_timeout)
    return out


def outcome_advantages(training: pd.DataFrame) -> dict[str, float]:
    """Mean advantage each outcome class received in training (dropped rollouts at 0)."""
    if training.empty:
        return {}
    return {str(k): float(v) for k, v in training.groupby("outcome")["advantage"].mean().items()}


def _share(mask: np.ndarray) -> tuple[int, int]:
    return int(mask.sum()), int(len(mask))


def drift(
    before: pd.DataFrame,
    before_steps: pd.DataFrame,
    after: pd.DataFrame,
    after_steps: pd.DataFrame,
    training: pd.DataFrame,
    rng: np.random.Generator,
    *,
    pipeline: Pipeline,
    alpha: float = 0.05,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """Compare ``before`` and ``after`` episodes; returns rates, tests and the ``moves``."""
    out: dict[str, Any] = {"n_before": len(before), "n_after": len(after)}
    out["success_signal"] = has_success_signal(before) or has_success_signal(after)
    out["return"] = compare(_reward(after)[np.isfinite(_reward(after))],
                            _reward(before)[np.isfinite(_reward(before))], rng, labels=("after", "before"))
    ks_b, n_b = _share((before["outcome"] == SUCCESS).to_numpy())
    ks_a, n_a = _share((after["outcome"] == SUCCESS).to_numpy())
    out["success_before"], out["success_after"] = ks_b / max(n_b, 1), ks_a / max(n_a, 1)
    # fell: the share of rollouts that did not succeed is larger after than before
    out["success_fell_p"] = rate_increase_p(n_a - ks_a, n_a, n_b - ks_b, n_b) if n_a and n_b else 1.0
    out["success_fell"] = bool(out["success_after"] <= out["success_before"] - MATERIAL_RATE
                               and out["success_fell_p"] < alpha)
    out["beyond_outcome"] = beyond_outcome(before, after, rng) if out["success_signal"] else None
    paid = bool(out["beyond_outcome"] and out["beyond_outcome"]["p_value"] < alpha
                and out["beyond_outcome"]["gain"] > 0)
    out["advantage_by_outcome"] = outcome_advantages(training)
    moves: list[Move] = []

    # Timeouts up.
    k_b, n_b = _share((before["outcome"] == TIMEOUT).to_numpy())
    k_a, n_a = _share((after["outcome"] == TIMEOUT).to_numpy())
    rb, ra = k_b / max(n_b, 1), k_a / max(n_a, 1)
    p = rate_increase_p(k_a, n_a, k_b, n_b)
    if ra - rb >= MATERIAL_RATE and p < alpha:
        fav = timeout_favoured(training, pipeline, rng)
        out["timeout_favoured"] = fav
        favoured = fav["n_groups"] >= 4 and fav["p_value"] < alpha and (fav["diff"] or 0) > 0
        why = ("in the same groups, a failed rollout would have got a higher advantage by timing out"
               if favoured else PAID if paid else "")
        moves.append(Move("timeouts up", "timeout", rb, ra, p, bool(why) and out["success_signal"], why,
                          {"timeout_favoured": fav}))

    # Failures up.
    fails_b = ((before["n_tool_errors"] + before["n_tool_timeouts"]) > 0).to_numpy()
    fails_a = ((after["n_tool_errors"] + after["n_tool_timeouts"]) > 0).to_numpy()
    k_b, n_b = _share(fails_b)
    k_a, n_a = _share(fails_a)
    rb, ra = k_b / max(n_b, 1), k_a / max(n_a, 1)
    p = rate_increase_p(k_a, n_a, k_b, n_b)
    if ra - rb >= MATERIAL_RATE and p < alpha:
        moves.append(Move("failures up", "failure", rb, ra, p, paid,
                          PAID if paid else ""))

    # Length down.
    lb, la = before["length"].to_numpy(float), after["length"].to_numpy(float)
    if len(lb) and len(la) and la.mean() <= (1 - MATERIAL_LENGTH) * lb.mean():
        test = compare(lb, la, rng, labels=("before", "after"))
        if test["p_value"] < alpha and min(len(lb), len(la)) >= MIN_SAMPLES:
            moves.append(Move("length down", "length", float(lb.mean()), float(la.mean()), test["p_value"],
                              paid, PAID if paid else "",
                              {"length_test": test}))

    # One action taking over.
    if len(after_steps) and len(before_steps):
        # Text actions (a language model's tool calls) count by the call they parsed to.
        acts_a, acts_b = action_keys(after_steps).to_numpy(), action_keys(before_steps).to_numpy()
        values, counts = np.unique(acts_a, return_counts=True)
        top = values[int(np.argmax(counts))]
        share_a = float(counts.max() / counts.sum())
        share_b = float(np.mean(acts_b == top))
        if share_a >= TAKEOVER_SHARE and share_b < TAKEOVER_SHARE / 2:
            k_top_b = int(np.sum(acts_b == top))
            p = rate_increase_p(int(counts.max()), int(counts.sum()), k_top_b, len(before_steps))
            index = isinstance(top, (int, np.integer))
            label = labels[int(top)] if index and labels is not None and 0 <= int(top) < len(labels) else str(top)
            moves.append(Move(f"one action taking over ({label})", "takeover", share_b, share_a, p, paid,
                              PAID if paid else "",
                              {"action": label}))
    out["moves"] = moves
    return out
