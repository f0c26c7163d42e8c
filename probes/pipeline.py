"""The ``pipeline`` probe: does the configured training pipeline make timing out beat failing?

Incentive detected (``timeout-drop-incentive``): a trainer that drops timed-out rollouts from the
loss (rLLM compact filtering, TRL ``mask_truncated_completions``), masks their whole group
(SkyRL's Harbor generator) or trains them on a reward above a failure's (``zero`` when failures are
negative) hands a failing attempt a way out: time out instead, and the negative advantage of
failing becomes 0. A return-maximising agent learns to stall whenever it is losing.

Signal read: the scan's exploration groups (rollouts from one reset seed). For every group the
probe computes the advantages GRPO would see under the configured pipeline
(``envaudit.pipeline.group_advantages``) and under ``keep``, and keeps the per-outcome-class table
(mean, bootstrap CI over groups, n) as the ``advantages`` table. The test is counterfactual and
paired within groups: each failing rollout is switched, in its own group, to a timed-out one
(with the return a timeout earns on that task: observed timeouts of the group, else of the
exploration, else of the stall runs) and its advantage recomputed; a group's gap is the mean
"advantage if it had timed out - advantage as a failure". A one-sided sign test over the groups
with a non-zero gap gives ``p_value``. The same rollout switched to a success (with the return a
success earns there) is what "as good as succeeding" is measured against. Switching, rather than
comparing the timeouts that happened, keeps the test powered when exploration seldom times out
and compares like with like (same task, same group). An all-failure group carries no gap, so
when too few groups carry one for the sign test to decide (a task random play mostly fails
outright), the probe adds random-play groups on fresh seeds, up to ``EXTRA_GROUPS``. Then the probe checks that the agent can
cause a timeout: it repeats the action most tied to timeouts in exploration (a tool that times
out, or an action that never ends the episode) on a few groups' seeds and names it in the
catalogue's words; timeouts seen in exploration also count as reachable.

Severity: ``fail`` when timing out earns a failing rollout at least what succeeding would,
or no exploration rollout succeeded (timing out is then the best advantage on offer); ``warn`` when
it beats failing but not success; ``info`` when the agent could not be shown to cause timeouts or
fewer than ``MIN_SAMPLES`` groups could be tested. A pipeline that keeps timed-out rollouts gets
no finding here: a timeout that out-earns a failure in the env's own rewards is the
``timeout-rewarded`` probe's business. That ladder is decided in one place,
``decide_timeout_drop_incentive``, from the sign test and the reachability the probe measured.

Errors: a pipeline that drops errored rollouts (prime-rl, rLLM ``mask_error``, SkyRL) creates the
same escape for an agent that can make a call fail. The probe runs the same analysis for the
``error`` class but reports it in ``ctx.notes["error_drop"]``, not as a finding: the catalogue
code names timeouts, and whether an agent can cause errors on purpose is what the fault and
failure probes measure; a separate code would be the right home (see the lead's report).

Known false positives: exploration by a random policy gives advantages that a trained policy will
not see (success rates change), so the size of the gap is indicative; its sign is what matters. A
timeout the stall policy reaches only because the env has no step limit of its own (envaudit adds
``max_steps``) may not exist in training, where the trainer's own turn limit applies. A pipeline
whose dropped timeouts are re-sampled until the group is full is modelled as a plain drop.
Known false negative: under whole-group masking (SkyRL) on an env where exploration times out
often, almost every group is masked already, so few groups carry a gap and the test can lack
power although the incentive is there for a policy that times out less.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from scipy import stats as _st

from envaudit.findings import Finding, Severity
from envaudit.pipeline import CLASSES, Pipeline, group_advantages
from envaudit.presets import timeout_fix
from envaudit.probe import Probe, ProbeContext
from envaudit.protocol import ERROR, FAILURE, SUCCESS, TIMEOUT
from envaudit.rollout import RandomPolicy, SequencePolicy
from envaudit.stats import MIN_SAMPLES, bootstrap_ci

CODE = "timeout-drop-incentive"
KEEP = Pipeline(name="keep", description="every rollout trained on its env return")
STALL_SEEDS = 4
"""Reset seeds (of exploration groups) each candidate stall action is tried on."""
STALL_SHARE = 0.5
"""A stall action shows timeouts are agent-reachable when at least this share of its runs time out."""
MAX_CANDIDATES = 4
"""Stall actions tried when exploration already names suspects; all actions (up to 12) otherwise."""
TOL = 1e-9
EXTRA_GROUPS = 32
EXTRA_GROUP_BASE = 1_000_000
"""Exploration groups the probe may add (random play, fresh reset seeds) when too few groups carry
a gap for the sign test to decide at all: a task that random play mostly fails outright leaves
most groups all-failure, and an all-failure group has no advantage to escape from."""


# -- effective advantages --------------------------------------------------------------------------
def _groups(episodes: pd.DataFrame) -> pd.DataFrame:
    """Exploration episodes with a ``_group`` key and finite returns (an exception leaves NaN: 0)."""
    eps = episodes.copy()
    key = "group" if "group" in eps and eps["group"].notna().all() else "seed"
    eps["_group"] = eps[key].astype(str)
    ret = pd.to_numeric(eps["return"], errors="coerce").to_numpy(float)
    eps["_return"] = np.where(np.isfinite(ret), ret, 0.0)
    return eps.sort_values(["_group", "episode_id"]).reset_index(drop=True)


def effective_advantages(eps: pd.DataFrame, pipeline: Pipeline) -> pd.DataFrame:
    """Per episode: the advantage the policy gradient sees under ``pipeline`` (0 when not trained)."""
    # Arrays split at group boundaries, one frame at the end: a logged run has thousands of groups.
    eps = eps.sort_values(["_group", "episode_id"], kind="stable")
    keys, returns, outcomes = eps["_group"].to_numpy(), eps["_return"].to_numpy(float), eps["outcome"].to_numpy()
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, int)
    ends = np.r_[starts[1:], len(keys)] if len(keys) else np.zeros(0, int)
    advantage, trained = np.zeros(len(keys)), np.zeros(len(keys), dtype=bool)
    for a, b in zip(starts, ends, strict=True):
        ga = group_advantages(returns[a:b], list(outcomes[a:b]), pipeline)
        advantage[a:b], trained[a:b] = ga.advantages, ga.trained
    return pd.DataFrame({"episode_id": eps["episode_id"].to_numpy(), "_group": keys, "outcome": outcomes,
                         "return": returns, "advantage": advantage, "trained": trained})


def _cluster_mean_ci(values: np.ndarray, groups: np.ndarray, rng: np.random.Generator,
                     n_boot: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap of a mean over episodes, resampling whole groups."""
    keys, inv = np.unique(groups, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=len(keys))
    counts = np.bincount(inv, minlength=len(keys)).astype(float)
    if len(keys) < 2:
        m = float(values.mean()) if len(values) else float("nan")
        return (m, m)
    idx = rng.integers(0, len(keys), size=(n_boot, len(keys)))
    boots = sums[idx].sum(1) / counts[idx].sum(1)
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def _rows(frame: pd.DataFrame, value: str, pipeline: Pipeline, role: str, kind: str, outcome: str,
          rng: np.random.Generator, returns: str = "return") -> dict[str, Any]:
    lo, hi = _cluster_mean_ci(frame[value].to_numpy(float), frame["_group"].to_numpy(), rng)
    return {"pipeline": pipeline.name, "role": role, "outcome": outcome, "kind": kind,
            "n_episodes": int(len(frame)), "n_groups": int(frame["_group"].nunique()),
            "mean_advantage": float(frame[value].mean()), "ci_low": lo, "ci_high": hi,
            "trained_share": float(frame["trained"].mean()) if "trained" in frame else float("nan"),
            "mean_return": float(frame[returns].mean())}


# -- the counterfactual switch -------------------------------------------------------------------
def _target_returns(eps: pd.DataFrame, cls: str, extra: Sequence[float]) -> tuple[dict[str, float], str]:
    """The return a rollout of class ``cls`` earns, per group, and where that number comes from."""
    seen = eps[eps["outcome"] == cls]
    per_group = seen.groupby("_group")["_return"].median().to_dict()
    if len(seen):
        fallback, source = float(seen["_return"].median()), f"observed {cls} rollouts"
    elif len(extra):
        fallback, source = float(np.median(extra)), f"{cls} rollouts of the stall policy"
    else:
        fallback, source = float("nan"), f"the failing rollout's own return (no {cls} observed)"
    return {g: per_group.get(g, fallback) for g in eps["_group"].unique()}, source


def switch_failures(eps: pd.DataFrame, pipeline: Pipeline, cls: str, target: dict[str, float],
                    success: dict[str, float]) -> pd.DataFrame:
    """Per failing rollout, its advantage three ways in its own group: as the failure it was, had it
    ended as ``cls`` instead (with return ``target``) and had it succeeded (with return ``success``)."""

    def switched(returns, outcomes, i, outcome, value) -> float:
        r2, o2 = returns.copy(), list(outcomes)
        r2[i] = returns[i] if np.isnan(value) else value
        o2[i] = outcome
        return float(group_advantages(r2, o2, pipeline).advantages[i])

    rows = []
    for key, g in eps.groupby("_group", sort=True):
        returns, outcomes = g["_return"].to_numpy(), list(g["outcome"])
        as_is = group_advantages(returns, outcomes, pipeline).advantages
        for i in np.flatnonzero(np.array(outcomes) == FAILURE):
            rows.append({"_group": key, "episode_id": int(g["episode_id"].iloc[i]), "return": returns[i],
                         "switched_return": returns[i] if np.isnan(target[key]) else target[key],
                         "as_failure": float(as_is[i]),
                         "switched": switched(returns, outcomes, i, cls, target[key]),
                         "as_success": (float("nan") if np.isnan(success[key])
                                        else switched(returns, outcomes, i, SUCCESS, success[key]))})
    return pd.DataFrame(rows, columns=["_group", "episode_id", "return", "switched_return", "as_failure",
                                       "switched", "as_success"])


def gap_test(per_rollout: pd.DataFrame, rng: np.random.Generator) -> dict[str, Any]:
    """Group-level gaps (switched - as failure), a one-sided sign test and a bootstrap CI."""
    if per_rollout.empty:
        return {"n_groups": 0, "p_value": 1.0, "gap": None, "gap_ci": None}
    by = per_rollout.groupby("_group")
    gaps = (by["switched"].mean() - by["as_failure"].mean()).to_numpy()
    vs_success = (by["switched"].mean() - by["as_success"].mean()).dropna().to_numpy()
    nonzero = gaps[np.abs(gaps) > TOL]
    n_pos = int((nonzero > 0).sum())
    p = float(_st.binomtest(n_pos, len(nonzero), 0.5, alternative="greater").pvalue) if len(nonzero) else 1.0
    lo, hi = bootstrap_ci(gaps, rng)
    out: dict[str, Any] = {
        "test": "sign test over groups: advantage if the failing rollouts had timed out minus as failures",
        "n_groups": int(len(gaps)), "n_groups_nonzero": int(len(nonzero)), "n_groups_positive": n_pos,
        "p_value": p, "gap": float(gaps.mean()), "gap_ci": [lo, hi],
        "mean_as_failure": float(per_rollout["as_failure"].mean()),
        "mean_switched": float(per_rollout["switched"].mean()),
        "mean_as_success": float(per_rollout["as_success"].mean()) if len(vs_success) else None,
        "n_groups_with_success": int(len(vs_success)),
        "switched_minus_success": float(vs_success.mean()) if len(vs_success) else None,
        "underpowered": bool(len(gaps) < MIN_SAMPLES),
    }
    if len(vs_success) >= 2:
        out["switched_minus_success_ci"] = list(bootstrap_ci(vs_success, rng))
    return out


def treats_specially(pipeline: Pipeline, cls: str) -> bool:
    return pipeline.handling_of(cls) != "keep" or cls in pipeline.mask_group_on


def _same_as_keep(pipeline: Pipeline) -> bool:
    return (all(pipeline.handling_of(c) == "keep" for c in CLASSES) and not pipeline.mask_group_on
            and not pipeline.filter_zero_variance and pipeline.advantage_scaling == KEEP.advantage_scaling)


# -- can the agent cause it? ------------------------------------------------------------------------
def _suspects(ctx: ProbeContext, cls: str) -> tuple[list[Any], int]:
    """Candidate stall actions, most suspect first, and how many episodes of ``cls`` exploration saw."""
    space = ctx.env.action_space
    eps, steps = ctx.exploration.episodes, ctx.exploration.steps
    n_seen = int((eps["outcome"] == cls).sum()) if len(eps) else 0
    if not isinstance(space, gym.spaces.Discrete):
        space.seed(int(ctx.rng("stall", "sample").integers(2**31)))
        return [space.sample() for _ in range(3)], n_seen
    actions = [int(space.start) + i for i in range(int(space.n))]
    status = "timeout" if cls == TIMEOUT else "error"
    if len(steps):
        s = steps.merge(eps[["episode_id", "outcome"]], on="episode_id", how="left")
        per = s.groupby("action").agg(n=("step", "size"),
                                      bad=("tool_status", lambda x: float((x == status).sum())),
                                      ends=("terminated", "sum"),
                                      in_cls=("outcome", lambda x: float((x == cls).sum())))
        share_all = per["n"] / per["n"].sum()
        share_cls = per["in_cls"] / max(per["in_cls"].sum(), 1.0)
        per["lift"] = share_cls / share_all
        per["bad_rate"] = per["bad"] / per["n"]
    else:
        per = pd.DataFrame()

    def key(a: int) -> tuple:
        if a not in per.index:
            return (0.0, 0, 0.0, a)  # never tried: it never ended an episode either
        row = per.loc[a]
        return (-row["bad_rate"], int(row["ends"] > 0), -row["lift"], a)

    ranked = sorted(actions, key=key)
    return ranked[:MAX_CANDIDATES] if n_seen else ranked[:12], n_seen


def reach(ctx: ProbeContext, eps: pd.DataFrame) -> dict[str, Any]:
    """Whether the agent can cause a timeout: in exploration, and by repeating one action."""
    n_explore = len(eps)
    out: dict[str, Any] = {"exploration_timeouts": int((eps["outcome"] == TIMEOUT).sum()),
                           "exploration_rate": float((eps["outcome"] == TIMEOUT).mean()) if n_explore else 0.0,
                           "stall_action": None, "stall_rate": 0.0, "stall_episodes": 0,
                           "stall_returns": [], "stall_examples": [], "tried": []}
    seeds = [int(s) for s in eps.groupby("_group")["seed"].first().head(ctx.config.scaled(STALL_SEEDS))]
    candidates, _ = _suspects(ctx, TIMEOUT)
    best = None
    for i, action in enumerate(candidates):
        if ctx.over_cap(f"stall runs of {len(candidates) - i} of {len(candidates)} candidate actions"):
            out["stopped"] = "the scan's wall-clock safety cap was reached"
            break
        label = ctx.describe_action(action)
        res = ctx.run(SequencePolicy([action], name=f"stall:{label}"), seeds, tags={"stall_action": label})
        ctx.keep(res.records)
        ep = res.records.episodes
        if ep.empty:
            continue
        timed = ep[ep["outcome"] == TIMEOUT]
        rate = len(timed) / len(ep)
        out["tried"].append({"action": label, "timeout_rate": rate, "episodes": int(len(ep))})
        if best is None or rate > best[0]:
            best = (rate, label, ep, timed)
        if rate >= STALL_SHARE:
            break
    if best is not None:
        rate, label, ep, timed = best
        out.update(stall_action=label, stall_rate=rate, stall_episodes=int(len(ep)),
                   stall_returns=[float(r) for r in timed["return"] if np.isfinite(r)],
                   stall_examples=[int(i) for i in timed["episode_id"].head(3)])
    out["by_stall"] = bool(out["stall_rate"] >= STALL_SHARE)
    out["reachable"] = bool(out["by_stall"] or out["exploration_timeouts"] > 0)
    return out


# -- the finding -------------------------------------------------------------------------------------
def _escape(pipeline: Pipeline, adv: float, cls: str = TIMEOUT) -> str:
    if cls in pipeline.mask_group_on:
        return "masks its whole group out of the loss (advantage 0)"
    how = pipeline.handling_of(cls)
    if how == "drop":
        return "is removed from the loss (advantage 0)"
    reward = 0.0 if how == "zero" else pipeline.penalty
    return f"is trained on reward {reward:g} (advantage {adv:+.2f})"


def decide_timeout_drop_incentive(ctx: ProbeContext, test: dict, keep_test: dict, reachable: dict, source: str,
                                  per_group: pd.DataFrame) -> Finding | None:
    """The one place ``timeout-drop-incentive`` is decided, from the timeout switch's sign test
    under the configured pipeline (``test``; ``keep_test`` under ``keep``, for the evidence) and
    whether the agent can cause a timeout (``reachable``): no finding without a significant positive
    gap; ``info`` when no timeout is reachable or too few groups were tested; ``fail`` when timing
    out earns as much as succeeding would, or nothing succeeded; ``warn`` otherwise."""
    pipeline = ctx.pipeline
    if test["gap"] is None or test["gap"] <= TOL:
        return None
    significant = test["p_value"] < ctx.config.alpha
    no_success = test["n_groups_with_success"] == 0
    at_least_success = test["switched_minus_success"] is not None and test["switched_minus_success"] >= -TOL
    if not significant:
        return None
    if not reachable["reachable"]:
        severity, case = Severity.INFO, "latent"
    elif test["underpowered"]:
        severity, case = Severity.INFO, "underpowered"
    else:
        severity = Severity.FAIL if (at_least_success or no_success) else Severity.WARN
        case = "no_success" if no_success else "at_least_success" if at_least_success else "beats_failing"
    examples = reachable["stall_examples"] + [
        int(i) for i in per_group.sort_values("as_failure")["episode_id"].head(3)]
    return Finding(
        code=CODE, severity=severity, probe="pipeline",
        title=_title(pipeline, test),
        summary=_summary(pipeline, test, reachable, case),
        evidence={**test, "behaviour": "timeout", "reward_path": "pipeline",
                  "pipeline": pipeline.to_dict(), "timeout_return_source": source,
                  "gap_under_keep": keep_test["gap"], "mean_as_failure_under_keep": keep_test["mean_as_failure"],
                  "mean_switched_under_keep": keep_test["mean_switched"],
                  "reachable": reachable["reachable"], "stall_action": reachable["stall_action"],
                  "stall_timeout_rate": reachable["stall_rate"], "stall_episodes": reachable["stall_episodes"],
                  "exploration_timeout_rate": reachable["exploration_rate"], "alpha": ctx.config.alpha,
                  "min_groups": MIN_SAMPLES},
        examples=examples, fix=_fix(pipeline, reachable),
    )


def _title(pipeline: Pipeline, test: dict) -> str:
    return (f"{pipeline.name}: timing out beats failing ({test['mean_switched']:+.2f} vs "
            f"{test['mean_as_failure']:+.2f} advantage)")


def _summary(pipeline: Pipeline, test: dict, reachable: dict, case: str) -> str:
    """``case``: ``latent`` (no timeout reachable), ``underpowered``, ``no_success``,
    ``at_least_success`` or ``beats_failing``."""
    handling = ("masks the whole group" if TIMEOUT in pipeline.mask_group_on
                else pipeline.handling_of(TIMEOUT))
    fail_adv, switched = test["mean_as_failure"], test["mean_switched"]
    if reachable["by_stall"]:
        how = f"repeating `{reachable['stall_action']}`"
    elif reachable["reachable"]:
        how = f"stalling (exploration timed out in {reachable['exploration_rate']:.0%} of rollouts)"
    else:
        how = "stalling"
    summary = (f"Under {pipeline.name} (timed-out rollouts: {handling}), a failing rollout that times out "
               f"{_escape(pipeline, switched)} instead of receiving {fail_adv:+.2f}")
    if case == "latent":
        return summary + (": a latent incentive, since no exploration rollout timed out and repeating no single "
                          "action reached a timeout.")
    if case == "underpowered":
        return summary + (f": forcing a timeout by {how} avoids the penalty of failing (only {test['n_groups']} "
                          "groups tested).")
    summary += f": forcing a timeout by {how} avoids the penalty of failing"
    if case == "no_success":
        return summary + "; no exploration rollout succeeded, so timing out is the best advantage on offer."
    if case == "at_least_success":
        return summary + f", and earns as much as succeeding would ({test['mean_as_success']:+.2f})."
    return summary + "."


def _fix(pipeline: Pipeline, reachable: dict) -> str:
    fix = ("Keep timed-out rollouts in the loss with a reward no higher than a failure's "
           "(`--timeout-handling penalty --timeout-penalty <failure return>` models that), or stop the "
           "agent from causing them" + (f" (bound what `{reachable['stall_action']}` can cost)"
                                        if reachable["by_stall"] else "") + ".")
    return f"{fix} {timeout_fix(pipeline)}".strip()


def _analyse(eps: pd.DataFrame, pipeline: Pipeline, cls: str, target: dict[str, float],
             rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    success, _ = _target_returns(eps, SUCCESS, [])
    switched = switch_failures(eps, pipeline, cls, target, success)
    return switched, gap_test(switched, rng)


def _error_note(ctx: ProbeContext, eps: pd.DataFrame) -> dict[str, Any]:
    target, source = _target_returns(eps, ERROR, [])
    _, test = _analyse(eps, ctx.pipeline, ERROR, target, ctx.rng("error", "bootstrap"))
    suspects, n_seen = _suspects(ctx, ERROR)
    return {"handling": ctx.pipeline.handling_of(ERROR), "masks_group": ERROR in ctx.pipeline.mask_group_on,
            "mean_as_failure": test.get("mean_as_failure"), "mean_if_errored": test.get("mean_switched"),
            "gap": test["gap"], "p_value": test["p_value"], "n_groups": test["n_groups"],
            "error_return_source": source, "exploration_errors": n_seen,
            "most_error_prone_action": ctx.describe_action(suspects[0]) if n_seen and suspects else None,
            "why_not_a_finding": "the finding code names timeouts; whether an agent can make calls fail "
                                 "on purpose is measured by the failure probes"}


def _decidable(n_nonzero: int, alpha: float) -> bool:
    """Whether a one-sided sign test over ``n_nonzero`` groups can reach ``alpha`` at all."""
    return n_nonzero >= MIN_SAMPLES and 0.5 ** n_nonzero < alpha


def _more_groups(ctx: ProbeContext, eps: pd.DataFrame, reachable: dict) -> tuple[pd.DataFrame, dict]:
    """Exploration ``eps`` with random-play groups added until the timeout switch has enough
    groups with a gap to be decided (``_decidable``), within ``EXTRA_GROUPS`` groups.

    Each batch is sized from the share of groups that carried a gap so far, so the work is a count
    of groups, never of seconds. Returns the groups and what was added."""
    size = int(eps.groupby("_group").size().max())
    added, batch = 0, 0
    info: dict[str, Any] = {"added_groups": 0, "added_episodes": 0}
    while True:
        target, _ = _target_returns(eps, TIMEOUT, reachable["stall_returns"])
        _, test = _analyse(eps, ctx.pipeline, TIMEOUT, target, ctx.rng("more-groups", "test", batch))
        n_nonzero = int(test.get("n_groups_nonzero", 0))
        if _decidable(n_nonzero, ctx.config.alpha) or added >= EXTRA_GROUPS:
            break
        if ctx.over_cap("extra exploration groups for the timeout switch"):
            break
        share = max(n_nonzero, 1) / max(int(eps["_group"].nunique()), 1)
        need = max(MIN_SAMPLES - n_nonzero, 1)
        n = min(EXTRA_GROUPS - added, max(2, int(np.ceil(1.5 * need / share))))
        parts = []
        for k, seed in enumerate(ctx.seeds(n, "more-groups", batch)):
            # Integer ids past any exploration group's: the report's episode table keeps one type per column.
            g = EXTRA_GROUP_BASE + added + k
            res = ctx.run(RandomPolicy(), [seed] * size, tags={"group": g}, rng_name=f"more-groups-{added + k}")
            ctx.keep(res.records)
            parts.append(res.records.episodes)
        more = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        if more.empty:
            break
        eps = pd.concat([eps, _groups(more)], ignore_index=True).sort_values(["_group", "episode_id"])
        eps = eps.reset_index(drop=True)
        added, batch = added + n, batch + 1
        info.update(added_groups=added, added_episodes=info["added_episodes"] + int(len(more)))
    info["groups_with_gap"] = n_nonzero
    return eps, info


def observed_reach(ctx: ProbeContext, eps: pd.DataFrame) -> dict[str, Any]:
    """Whether the agent causes timeouts, from the recorded episodes alone (no stall runs): what
    ``envaudit logs`` knows of a logged run, whose policy either timed out or did not."""
    rate = float((eps["outcome"] == TIMEOUT).mean()) if len(eps) else 0.0
    n = int((eps["outcome"] == TIMEOUT).sum())
    return {"exploration_timeouts": n, "exploration_rate": rate, "stall_action": None, "stall_rate": 0.0,
            "stall_episodes": 0, "stall_returns": [], "stall_examples": [], "tried": [], "by_stall": False,
            "reachable": n > 0}


def run(ctx: ProbeContext, *, reach_of=reach) -> list[Finding]:
    """``reach_of``: how timeouts are shown reachable (stall runs by default; ``observed_reach`` on logs)."""
    episodes = ctx.exploration.episodes
    if episodes.empty:
        ctx.notes["skipped"] = "no exploration episodes"
        return []
    eps = _groups(episodes)
    pipeline = ctx.pipeline
    pipelines = [("configured", pipeline)] + ([] if _same_as_keep(pipeline) else [("keep", KEEP)])
    special = treats_specially(pipeline, TIMEOUT)
    can_test = bool((eps["outcome"] == FAILURE).any())
    reachable = reach_of(ctx, eps) if special and can_test else None
    if reachable is not None and reachable["reachable"] and reach_of is reach:
        # More groups need the env itself; a logged run (``observed_reach``) has only its episodes.
        eps, ctx.notes["extra_groups"] = _more_groups(ctx, eps, reachable)
    target, source = _target_returns(eps, TIMEOUT, reachable["stall_returns"] if reachable else [])

    rows, tests, per_groups = [], {}, {}
    for role, p in pipelines:
        rng = ctx.rng("bootstrap", role)
        eff = effective_advantages(eps, p)
        for outcome, part in eff.groupby("outcome", sort=True):
            rows.append(_rows(part, "advantage", p, role, "observed", str(outcome), rng))
        if can_test:
            switched, tests[role] = _analyse(eps, p, TIMEOUT, target, rng)
            per_groups[role] = switched
            if len(switched):
                rows.append(_rows(switched, "switched", p, role, "failing rollouts switched to timeout",
                                  "timeout_if_failing", rng, returns="switched_return"))
    ctx.table("advantages", pd.DataFrame(rows))
    ctx.notes["pipeline"] = pipeline.to_dict()
    if not can_test:
        ctx.notes["skipped"] = ("no failing rollout in exploration (the env reports no info['success'] "
                                "and no --success-threshold was given, or every rollout succeeded)")
        return []
    ctx.table("timeout_counterfactual", per_groups["configured"].rename(columns={"_group": "group"}))
    if treats_specially(pipeline, ERROR):
        ctx.notes["error_drop"] = _error_note(ctx, eps)
    if not special:
        ctx.notes["timeouts"] = (f"{pipeline.name} trains timed-out rollouts like any other; whether the "
                                 "env itself pays timeouts more than failures is the timeout-rewarded probe's check")
        return []
    ctx.notes["reachability"] = {k: v for k, v in reachable.items() if k != "stall_returns"}
    keep_test = tests.get("keep", tests["configured"])
    finding = decide_timeout_drop_incentive(ctx, tests["configured"], keep_test, reachable, source,
                                            per_groups["configured"])
    if finding is None:
        ctx.notes["timeouts"] = {"gap": tests["configured"]["gap"], "p_value": tests["configured"]["p_value"],
                                 "verdict": "timing out does not beat failing under this pipeline"}
        return []
    return [finding]


def analyse(ctx: ProbeContext) -> list[Finding]:
    """The verdict on recorded episodes alone (a logged run): timeouts are shown reachable by the
    logged policy's own timeouts, not by stall runs."""
    found = run(ctx, reach_of=observed_reach)
    return [dataclasses.replace(f, summary=f.summary.replace("exploration timed out", "the logged run timed out"))
            for f in found]


probe = Probe(
    name="pipeline",
    run=run,
    analyse=analyse,
    analyse_needs=("end_reason", "success", "group_id"),
    summary="effective advantage per outcome class under the training pipeline; flags pipelines under "
            "which timing out beats failing",
    codes=(CODE,),
    decisions={CODE: decide_timeout_drop_incentive},
    weight=1.0,
    order=40,
)
