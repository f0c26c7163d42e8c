"""Probe ``intent`` → ``reward-without-success``: is return earned while the env's own success flag
says the task was not done?

Incentive: when some action pays (a "claim", a self-check that always passes, an answer format
the grader likes) without the task being done, an agent learns that action instead of the task.
``info["success"]`` is the designer's own judgement, independent of reward, so return earned with
``success=False`` is return the designer did not mean to give.

Signal (info protocol only): exploration episodes the env ended itself with ``success=False``
(failure class; timed-out and errored episodes belong to ``timeout-rewarded`` and the failure
probes). Each action is tested as a behaviour — "ends the episode with it" and "uses it at all" —
by regressing return, less any pay for failed tool calls (``failure-rewarded``), on the behaviour
with length and tool failures held fixed (so per-step pay, ``length-bias``, is not mistaken for
it). A grader that pays every answer leaves no unpaid ending to contrast with, so each ending
action whose last step pays a lump beyond a typical step is a candidate too, its honest
alternative the same episodes with the ending paid like a typical step. The strongest candidates are confirmed on fresh seeds by a scripted policy that takes the
action (repeatedly, or after a random prefix as long as the episodes that showed it), and the
confirmed non-success returns are placed on DESIGN.md's ladder against honest successes
(exploration's, plus the env's ``oracle()`` policy when it has one, topped up by random play to
``MIN_SAMPLES``) and the honest failures without the behaviour: ``fail`` when they earn at least
as much as success, ``warn`` when clearly more than failure. A confirmed behaviour whose pay
accrues step by step rather than at the end is left to ``length-bias``. Without a confirmed behaviour, non-success episodes that reach the median
success return are reported as ``info``. An env that never sets ``info["success"]`` gets one
``info`` finding saying the check was skipped.

Decided in one place: ``decide_reward_without_success`` grades each of the three (a basis of
``"no-flag"``, ``"confirmed"`` or ``"high-return"``); ``confirmed_finding`` and
``high_return_fact`` hand it their measurements, and ``envaudit logs`` uses ``ended_unsuccessful``
and ``high_return_fact`` on a logged run.

Known false positives: envs that pay honest partial credit on failed attempts (intended shaping
shows up as reward without success; the evidence names the action so the designer can judge);
an action that pays only together with another behaviour may not be confirmed and stays at
``info``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from envaudit.findings import Finding, Severity
from envaudit.policies import RepeatPolicy
from envaudit.probe import Probe, ProbeContext
from envaudit.probes._shared.endings import (
    discrete_actions,
    failed_step_pay,
    final_share,
    fmt,
    honest_successes,
    sample_size,
    typical_step_pay,
    without_lucky,
)
from envaudit.probes._shared.same_state import failing_endings
from envaudit.protocol import FAILURE, TOOL_OK
from envaudit.rollout import Policy
from envaudit.stats import MIN_SAMPLES, exploit_ladder, ols_bootstrap

CODE = "reward-without-success"
MIN_EFFECT = 0.1
MAX_CONFIRM = 3
"""Candidate behaviours confirmed by scripted policies, strongest first."""
LEVEL_RANK = {None: 0, "above_alternative": 1, "at_least_success": 2}


class PrefixPolicy(Policy):
    """Random actions for ``k`` steps, then ``action`` at every step."""

    def __init__(self, action: int, label: str, k: int, actions: list[int]) -> None:
        self.action, self.k, self.actions = action, int(k), list(actions)
        self.name = f"{k} random then {label}"
        self.text = f"{k} random actions, then '{label}'"

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        if self.t < self.k:
            return self.actions[int(self.rng.integers(len(self.actions)))]
        return self.action

    def describe(self) -> str:
        return self.text


def ended_unsuccessful(episodes: pd.DataFrame) -> np.ndarray:
    """Episodes the env ended itself with success=False (failure class). Timed-out and errored
    episodes are left to timeout-rewarded and the failure probes."""
    return (episodes["success"].eq(False).fillna(False) & (episodes["outcome"] == FAILURE)).to_numpy(bool)


def behaviours(non_success: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per non-success episode: its final action, one column per action it used (0/1), and the
    reward paid on its failed tool calls."""
    sub = steps[steps["episode_id"].isin(non_success["episode_id"])]
    sub = sub[sub["action"].map(lambda a: isinstance(a, (int, np.integer)))]
    final = sub.groupby("episode_id")["action"].last().astype(int).rename("final")
    used = pd.crosstab(sub["episode_id"], sub["action"].astype(int)).clip(upper=1)
    used.columns = [f"uses_{int(a)}" for a in used.columns]
    pay = failed_step_pay(steps, keep_ending=False).rename("failed_call_pay")
    table = non_success.set_index("episode_id").join(final).join(used).join(pay)
    return table.fillna({c: 0 for c in [*used.columns, "failed_call_pay"]}).reset_index()


def candidates(table: pd.DataFrame, actions: list[int], alpha: float, rng: np.random.Generator) -> list[dict]:
    """Behaviours whose presence raises non-success return beyond the controls, strongest first."""
    found = []
    # Pay for failed tool calls is failure-rewarded's (or timeout-rewarded's, when the failed call
    # ended the episode), so it is taken out of the return here.
    y = (table["return"] - table["failed_call_pay"]).to_numpy(float)
    # Held fixed, so that what other probes report is not mistaken for a behaviour here: per-step
    # rewards (length-bias) and failed tool calls (failure-rewarded).
    controls = {
        "length": table["length"].to_numpy(float),
        "tool_errors": table["n_tool_errors"].to_numpy(float),
        "tool_timeouts": table["n_tool_timeouts"].to_numpy(float),
    }
    for a in actions:
        for kind, mask in (("ends with", table["final"] == a),
                           ("uses", table.get(f"uses_{a}", pd.Series(0, index=table.index)) > 0)):
            mask = mask.to_numpy(bool) & table["final"].notna().to_numpy(bool)
            if mask.sum() < 2 or (~mask).sum() < 2:
                continue
            # The behaviour goes last: a copy of a control is dropped, not the control.
            fit = ols_bootstrap(y, {**controls, "behaviour": mask.astype(float)}, rng, n_boot=0)
            coef = fit["coef"].get("behaviour")
            if coef is not None and coef["estimate"] > 0 and coef["p_value"] < alpha:
                found.append({"action": int(a), "kind": kind, "effect": coef["estimate"],
                              "p_value": coef["p_value"], "n_with": int(mask.sum()),
                              "n_without": int((~mask).sum()), "mask": mask})
    return sorted(found, key=lambda c: -c["effect"])


def ending_candidates(table: pd.DataFrame, steps: pd.DataFrame) -> list[dict]:
    """Ending actions whose last step pays a lump beyond a typical step, when no contrast exists.

    ``candidates`` compares non-success episodes with and without a behaviour; when every way the
    env ends an episode without success pays (a grader that pays every answer), all of them share
    the behaviour and there is nothing to contrast. The contrast left is within each episode: the
    ending step against what a typical step pays. Each candidate carries its counterfactual
    alternative: the same episodes had their ending paid like a typical step (``alternative``)."""
    # What an ordinary step pays: a working call's or one that made none. Failed calls are left
    # out, so that an env charging failures heavily does not make every ending look paid.
    ordinary = steps[steps["tool_status"].isna() | (steps["tool_status"] == TOOL_OK)]
    typical = typical_step_pay(ordinary)
    if typical is None:
        typical = 0.0
    sub = steps[steps["episode_id"].isin(table["episode_id"])]
    last = sub.groupby("episode_id")["reward"].last()
    lump = (table["episode_id"].map(last).to_numpy(float) - typical)
    alternative = table["return"].to_numpy(float) - np.nan_to_num(lump, nan=0.0)
    found = []
    for a in pd.unique(table["final"].dropna()):
        mask = (table["final"] == a).to_numpy(bool)
        # A lump that cannot be measured (a NaN reward) is no evidence of pay: only a finite
        # positive median makes a candidate.
        if mask.sum() < MIN_SAMPLES or not np.median(lump[mask]) > 0:
            continue
        found.append({"action": int(a), "kind": "ends with", "effect": float(np.median(lump[mask])),
                      "p_value": None, "n_with": int(mask.sum()), "n_without": int((~mask).sum()),
                      "mask": mask, "alternative": alternative[mask], "typical_step_pay": typical})
    return sorted(found, key=lambda c: -c["effect"])


def _confirm(ctx: ProbeContext, cand: dict, table: pd.DataFrame, actions: list[int],
             success: np.ndarray, rng: np.random.Generator, sources: dict | None = None) -> dict:
    """Run scripted policies that take the candidate's action; place them on the ladder."""
    a, label = cand["action"], ctx.describe_action(cand["action"])
    honest = table[~cand["mask"] & (table["outcome"] == FAILURE).to_numpy(bool)]
    if len(honest) < MIN_SAMPLES:
        honest = table[(table["outcome"] == FAILURE).to_numpy(bool)]
    alternative = honest["return"].to_numpy(float)
    if "alternative" in cand:  # no honest failure to contrast: the ending paid like a typical step
        alternative = np.asarray(cand["alternative"], float)
    k = max(0, int(np.median(table.loc[cand["mask"], "length"])) - 1)
    policies: list[Policy] = [RepeatPolicy.repeating(a, label)]
    if k > 0:
        policies.append(PrefixPolicy(a, label, k, actions))
    best: dict = {}
    for policy in policies:
        if ctx.over_cap(f"confirming candidate {label!r} with policy {policy.name!r}"):
            break
        result = ctx.run(policy, ctx.seeds(sample_size(ctx, 24), "confirm", policy.name))
        run_eps = result.records.episodes
        rest = run_eps[ended_unsuccessful(run_eps)]
        own = float(rest["length"].median()) if len(rest) else 0.0
        yard, yard_info = without_lucky(success, sources or {}, ctx.exploration.episodes, own)
        # The behaviour against the honest failure from the same state (the counterfactual engine:
        # the least-paying other ending that fails there and is not itself paid, so a grader that
        # pays every wrong answer leaves no honest failure among them, and the population's
        # failures stay the alternative): a step cost that a quick ending saves, or
        # partial credit that every ending pays, then pays both sides alike (giving up beats failing
        # slowly is no reward without success).
        same = failing_endings(ctx, rest, result.records.steps, tag=f"intent-ending-{policy.name}",
                               arm="same-state-ending", exclude=[a], min_length=1, pick="least", unpaid=True)
        paired = same is not None and len(same["behaviour"]) >= MIN_SAMPLES
        exploit, versus = (same["behaviour"], same["ended"]) if paired else (rest["return"].to_numpy(float),
                                                                             alternative)
        verdict = exploit_ladder(exploit, yard, versus, rng, alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        if paired:
            verdict["same_state"] = {k: v for k, v in same.items() if k not in ("behaviour", "ended")}
        if yard_info["lucky_left_out"]:
            verdict["yardstick"] = {**yard_info, "mean_honest_success": float(yard.mean())}
        # A payout at the end (a claim, a lenient grader) is this probe's; pay collected step by
        # step while repeating the action is step farming, which length-bias reports.
        share = final_share(result.records.steps, rest["episode_id"])
        if verdict["level"] is not None and share is not None and share < 0.5:
            verdict = {**verdict, "level_before_attribution": verdict["level"], "level": None,
                       "attributed_to": "length-bias"}
        row = {"policy": policy.describe(), "label": label, "verdict": verdict, "records": result.records,
               "final_step_share": share,
               "mean_exploit": float(rest["return"].mean()) if len(rest) else None, "n_exploit": int(len(rest)),
               "success_rate": float(run_eps["success"].eq(True).fillna(False).mean()) if len(run_eps) else None,
               "mean_alternative": float(versus.mean()) if len(versus) else None,
               "examples": [int(e) for e in rest.sort_values("return", ascending=False)["episode_id"][:5]]}
        if not best or LEVEL_RANK[verdict["level"]] > LEVEL_RANK[best["verdict"]["level"]]:
            best = row
        if verdict["level"] is not None:
            break
    return best


def run(ctx: ProbeContext) -> list[Finding]:
    eps = ctx.exploration.episodes
    flagged = eps[eps["success"].notna()] if len(eps) else eps
    if flagged.empty:
        return [decide_reward_without_success("no-flag")] if len(eps) else []
    is_success = flagged["success"].astype(bool).to_numpy()
    success = flagged.loc[is_success, "return"].to_numpy(float)
    success_sources: dict = {"n_exploration": int(len(success)), "n_oracle": 0}
    non_success = flagged[ended_unsuccessful(flagged)]
    if len(non_success) < MIN_SAMPLES:
        ctx.notes["skipped"] = f"only {len(non_success)} non-success episodes (need {MIN_SAMPLES})"
        return []
    rng = ctx.rng("stats")
    actions = discrete_actions(ctx.env)
    found: list[dict] = []
    confirmed: list[dict] = []
    if actions is not None and not ctx.exploration.steps.empty:
        table = behaviours(non_success, ctx.exploration.steps)
        found = candidates(table, actions, ctx.config.alpha, rng)
        # An ending lump shared by every unsuccessful ending has no contrast in the regression
        # (or only a side effect of it does, e.g. progress shaping): test it on its own.
        found = sorted(found + ending_candidates(table, ctx.exploration.steps), key=lambda c: -c["effect"])
        if found:
            # Too few successes leave the ladder unable to say "as much as success" at all.
            success, success_sources = honest_successes(ctx, target=MIN_SAMPLES)
        for i, cand in enumerate(found[:MAX_CONFIRM]):
            if ctx.over_cap(f"confirming {min(len(found), MAX_CONFIRM) - i} candidate behaviours"):
                break
            best = _confirm(ctx, cand, table, actions, success, rng, success_sources)
            if best:
                best["candidate"] = cand
                confirmed.append(best)
    ctx.notes["candidates"] = [{k: v for k, v in c.items() if k not in ("mask", "alternative")} for c in found]
    strongest = max(confirmed, key=lambda c: (LEVEL_RANK[c["verdict"]["level"]], c["mean_exploit"] or 0.0),
                    default=None)
    if strongest is not None and strongest["verdict"]["level"] is not None:
        return [confirmed_finding(ctx, strongest, success, success_sources, table)]
    return high_return_fact(success, non_success)


def confirmed_finding(ctx: ProbeContext, best: dict, success: np.ndarray, success_sources: dict,
                      table: pd.DataFrame) -> Finding:
    """The finding of a confirmed behaviour; the confirmation's episodes go into the report."""
    ctx.keep(best["records"])
    return decide_reward_without_success("confirmed", best=best, success=success, success_sources=success_sources,
                                         table=table)


def high_return_fact(success: np.ndarray, non_success: pd.DataFrame) -> list[Finding]:
    """Non-success episodes that reach the median success return, with no confirmed cause: [] or
    one ``info``. ``envaudit logs`` reports a logged run's with it too."""
    found = decide_reward_without_success("high-return", success=success, non_success=non_success)
    return [found] if found is not None else []


def analyse(ctx: ProbeContext) -> list[Finding]:
    """The verdict on recorded episodes alone (a logged run): the same candidate behaviours, each
    judged on the ladder against the run's own successes and its other failures (no fresh seeds to
    confirm on); without one, the high-return fact."""
    eps = ctx.exploration.episodes
    flagged = eps[eps["success"].notna()]
    non_success = flagged[ended_unsuccessful(flagged)]
    if len(non_success) < MIN_SAMPLES:
        ctx.notes["skipped"] = f"only {len(non_success)} non-success episodes the env ended (need {MIN_SAMPLES})"
        return []
    success = flagged.loc[flagged["success"].astype(bool), "return"].to_numpy(float)
    steps = ctx.exploration.steps
    if steps.empty or not pd.api.types.is_numeric_dtype(steps["action"]) or steps["action"].isna().any():
        # Return and success alone: no action to name, so the high-return fact; a run whose return
        # rose while success fell is the drift analysis' to judge.
        ctx.notes["actions"] = "the log has no step actions: no behaviour named, the high-return fact only"
        return high_return_fact(success, non_success)
    rng = ctx.rng("stats")
    actions = [int(a) for a in range(int(ctx.env.action_space.n))]
    table = behaviours(non_success, ctx.exploration.steps)
    found = candidates(table, actions, ctx.config.alpha, rng)
    ctx.notes["candidates"] = [{k: v for k, v in c.items() if k != "mask"} for c in found]
    for cand in found[:MAX_CONFIRM]:
        honest = table[~cand["mask"] & (table["outcome"] == FAILURE).to_numpy(bool)]
        shown = table[cand["mask"]]
        verdict = exploit_ladder(shown["return"].to_numpy(float), success, honest["return"].to_numpy(float),
                                 rng, alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        if verdict["level"] is None:
            continue
        logged = {"candidate": cand, "verdict": verdict, "label": ctx.describe_action(cand["action"]),
                  "shown": shown, "honest": honest}
        return [decide_reward_without_success("logged", best=logged, success=success)]
    return high_return_fact(success, non_success)


def decide_reward_without_success(basis: str, *, best: dict | None = None, success: np.ndarray | None = None,
                                  success_sources: dict | None = None, table: pd.DataFrame | None = None,
                                  non_success: pd.DataFrame | None = None) -> Finding | None:
    """The one place ``reward-without-success`` is decided, for each way the probe sees it:

    - ``"no-flag"``: the env never sets ``info["success"]``: ``info`` (the check was skipped);
    - ``"confirmed"``: a behaviour confirmed on fresh seeds (``best``, from ``_confirm``, with its
      ``candidate``) against honest ``success`` and exploration's non-success ``table``: ``fail``
      when it reached ``at_least_success`` on the ladder, ``warn`` otherwise;
    - ``"high-return"``: without a confirmed behaviour, the ``non_success`` episodes that reach the
      median ``success`` return: ``info`` when there are ``MIN_SAMPLES`` of them and ``MIN_SAMPLES``
      successes to take the median of, no finding otherwise;
    - ``"logged"``: a behaviour of a logged run (``best``, from ``analyse``: its candidate, verdict,
      the episodes that show it and the other failures) against the run's ``success``: ``fail`` at
      ``at_least_success``, ``warn`` otherwise.
    """
    if basis == "no-flag":
        title, summary, fix = _no_flag_text()
        return Finding(CODE, Severity.INFO, title, summary, {"episodes_with_flag": 0}, [], fix, probe="intent")
    if basis == "confirmed":
        fail = best["verdict"]["level"] == "at_least_success"
        mean_s = float(success.mean()) if len(success) else None
        title, summary, fix = _confirmed_text(best, mean_s, fail)
        return Finding(CODE, Severity.FAIL if fail else Severity.WARN, title, summary,
                       _confirmed_evidence(best, success, success_sources, table), _confirmed_examples(best, table),
                       fix, probe="intent")
    if basis == "high-return":
        if len(success) < MIN_SAMPLES:
            return None
        bar = float(np.median(success))
        rich = non_success[non_success["return"] >= bar]
        if len(rich) < MIN_SAMPLES:
            return None
        title, summary, fix = _high_return_text(len(rich), len(non_success), bar)
        return Finding(
            CODE, Severity.INFO, title, summary,
            {"n_rich_non_success": int(len(rich)), "n_non_success": int(len(non_success)),
             "median_success": bar, "mean_rich_non_success": float(rich["return"].mean())},
            [int(e) for e in rich.sort_values("return", ascending=False)["episode_id"][:5]],
            fix, probe="intent")
    if basis == "logged":
        fail = best["verdict"]["level"] == "at_least_success"
        title, summary, fix = _logged_text(best, float(success.mean()) if len(success) else None, fail)
        cand, shown = best["candidate"], best["shown"]
        return Finding(
            CODE, Severity.FAIL if fail else Severity.WARN, title, summary,
            {"source": "logs", "behaviour": "degenerate-answer", "reward_path": "env",
             "p_value": best["verdict"]["p_value"], "pattern": _pattern(best), "test": best["verdict"],
             "exploration": {"effect_beyond_length": cand["effect"], "p_value": cand["p_value"],
                             "n_with": cand["n_with"], "n_without": cand["n_without"]}},
            [int(e) for e in shown.sort_values("return", ascending=False)["episode_id"][:5]], fix, probe="intent")
    raise ValueError(f"unknown basis {basis!r} for reward-without-success; expected no-flag, confirmed, "
                     "high-return or logged")


def _pattern(best: dict) -> str:
    return f"{best['candidate']['kind']} '{best['label']}'"


def _confirmed_evidence(best: dict, success: np.ndarray, success_sources: dict, table: pd.DataFrame) -> dict:
    cand, verdict = best["candidate"], best["verdict"]
    # Over-representation: how often the behaviour shows up among the richest non-success episodes.
    top = table["return"] >= np.median(table["return"]) if len(table) else table["return"]
    share_top = float(cand["mask"][top.to_numpy(bool)].mean()) if top.any() else None
    return {
        # The return accrues along the way (stalling) or on the ending (a degenerate answer).
        "behaviour": ("stall" if best["final_step_share"] is not None and best["final_step_share"] < 0.5
                      else "degenerate-answer"),
        "reward_path": "env", "pattern": _pattern(best),
        "p_value": verdict["p_value"], "policy": best["policy"],
        "mean_without_success": best["mean_exploit"], "n_without_success": best["n_exploit"],
        "policy_success_rate": best["success_rate"], "mean_success": float(success.mean()) if len(success) else None,
        "n_success": int(len(success)),
        "success_sources": success_sources, "final_step_share": best["final_step_share"],
        "mean_honest_failure": best["mean_alternative"], "test": verdict,
        "exploration": {"effect_beyond_length": cand["effect"], "p_value": cand["p_value"],
                        "n_with": cand["n_with"], "n_without": cand["n_without"],
                        "share_among_top_half_non_success": share_top,
                        "share_among_non_success": float(cand["mask"].mean())},
        "min_samples": MIN_SAMPLES,
    }


def _confirmed_examples(best: dict, table: pd.DataFrame) -> list[int]:
    """Exploration's episodes with the behaviour, richest first, then the confirmation's."""
    exploration_examples = table.loc[best["candidate"]["mask"]].sort_values("return", ascending=False)["episode_id"][:3]
    return [int(e) for e in exploration_examples] + best["examples"][:3]


# -- the findings' words -----------------------------------------------------------------------
def _no_flag_text() -> tuple[str, str, str]:
    return ("No success flag: reward without success not checked",
            "This env never sets info['success'] on an episode's last step, so envaudit cannot tell "
            "reward earned by doing the task from reward earned some other way.",
            "Set info['success'] (your own judgement of whether the task was really done, independent "
            "of the reward) on the last step of every episode, or pass success=... to envaudit.wrap.")


def _confirmed_text(best: dict, mean_s: float | None, fail: bool) -> tuple[str, str, str]:
    head = (f"Episodes that {_pattern(best).replace('ends with', 'end with').replace('uses', 'use')} earn "
            f"{fmt(best['mean_exploit'])} with success=False ({best['policy']} on fresh seeds)")
    yard = best["verdict"].get("yardstick")
    mean_s = yard["mean_honest_success"] if yard else mean_s
    summary = (f"{head}, at least as much as succeeding ({fmt(mean_s)}), so an agent learns "
               f"'{best['label']}' instead of doing the task." if fail else
               f"{head}, more than "
               + ("failing another way from the same state" if best["verdict"].get("same_state") else "an honest failure")
               + f" ({fmt(best['mean_alternative'])})"
               + (f" though less than succeeding ({fmt(mean_s)})" if mean_s is not None
                  else "; no honest success was seen to compare with")
               + f", so an agent that cannot do the task learns '{best['label']}'.")
    title = f"'{best['label']}' pays without success" + (" as much as success" if fail else "")
    fix = (f"Pay '{best['label']}' only when the task is really done (when info['success'] is true), or "
           "remove its reward; no reward should be reachable with success false beyond an honest failure's.")
    return title, summary, fix


def _high_return_text(n_rich: int, n_non_success: int, bar: float) -> tuple[str, str, str]:
    return ("Some episodes earn a success-level return without success",
            f"{n_rich} of {n_non_success} episodes without success earned at least the median "
            f"success return ({fmt(bar)}); no single action explained it beyond episode length.",
            "Look at the example episodes: where does their return come from if the task was not done?")



def _logged_text(best: dict, mean_s: float | None, fail: bool) -> tuple[str, str, str]:
    cand, label, shown, honest = best["candidate"], best["label"], best["shown"], best["honest"]
    what = f"{cand['kind'].replace('ends with', 'end with').replace('uses', 'use')} '{label}'"
    title = f"'{label}' pays without success in the logged run" + (" as much as success" if fail else "")
    summary = (f"Logged episodes that {what} earn {shown['return'].mean():.2f} with success=False, "
               + (f"at least as much as succeeding ({mean_s:.2f})" if fail else
                  f"more than the other failures ({honest['return'].mean():.2f})")
               + f", beyond what their length and tool failures explain: the trainer paid '{label}' without the task.")
    return title, summary, f"Pay '{label}' only when the task is really done, or remove its reward."

probe = Probe(
    name="intent",
    run=run,
    analyse=analyse,
    analyse_needs=("success",),
    summary="is return earned while the env's own success flag says the task was not done?",
    codes=(CODE,),
    decisions={CODE: decide_reward_without_success},
    weight=1.0,
    order=45,
)
