"""Probe ``timeouts`` → ``timeout-rewarded``: does timing out earn more than failing outright?

Incentive: when a truncated episode, or one that ends on a tool timeout, pays more than an honest
failure, an agent that is unsure of the answer learns to stall (or to make a tool time out)
instead of trying; when it pays as much as success, it learns to stop doing the task at all.

Signal (info protocol only, so any Gymnasium env works). Three kinds of arm, each a set of
timed-out episodes that the env did not judge a success:

1. exploration: the timeout-class episodes of the random exploration;
2. scripted, on fresh seeds: stalling (random actions that never take an action which ends
   episodes in exploration, so the episode runs into its step limit), and repeating the action
   whose tool times out most often;
3. on a ``ToolEnv``, fault injection: every call of one tool forced to time out under the
   exploration policy, one tool at a time (with the paired difference against the same seeds and
   actions un-faulted, Wilcoxon signed-rank, in the evidence).

Each arm's returns are placed on DESIGN.md's ladder with ``stats.exploit_ladder`` against ending the
same episodes honestly from the same state instead (``same_state_endings``: replayed through the
counterfactual engine up to the step before their last, with the faults an injection arm forced on
the way forced again, then ended at once each way that fails; partial credit paid on every
unfinished ending then pays both sides alike). Where that cannot be replayed (no ``Discrete`` space,
a logged run, too few failing states): against the same episodes failing outright instead
(``matched_failures``: each timed-out episode's return with its ending's pay swapped for what an
honest failure's ending pays — same start, same prefix, same progress; failures of *other* episodes
got less far, and progress is not a reward for timing out) and honest successes (exploration's, plus
the env's ``oracle()`` policy when it has one, topped up by random play to ``MIN_SAMPLES``):
``fail`` when non-inferior to success and clearly above failing, ``warn`` when only clearly above
failing (one-sided Mann–Whitney, the key ``p_value``; "clearly" includes a margin of ``MIN_EFFECT``
of the success-minus-failure gap). A level counts only when the *ending* of the timed-out episodes
pays more than a failure's ending (the last step's reward less what the same call and status pay
mid-episode, or less a typical step's pay for a call that only ever ends episodes): a stall that
earns more only by collecting per-step pay or pay for failed calls is left to ``length-bias`` and
``failure-rewarded``. An env where nothing but the step limit ends an unsuccessful episode (no quit,
wrong answers go on) has no outright failure: where the replays confirm it (no ending fails from any
of at least ``MIN_SAMPLES`` replayed states), "more than failing" has nothing to compare with and
only the top rung (as much as succeeding) can be reached; where they cannot, a timeout's ending is
compared with an ending that pays nothing beyond a typical step. The strongest arm becomes the
finding; all arms are in its evidence and the ``arms`` table.

Decided in one place: ``decide_timeout_rewarded`` grades the arms, whichever kind they are; each
arm is measured by ``arm_verdict`` (its ladder) and ``arm_row`` (its row), which ``envaudit logs``
also uses on a logged run's timeouts.

Known false positives: an env whose *failures* carry a penalty (a wrong submit pays -1 while
the step limit pays 0) is reported, correctly, as rewarding timeouts over failing — if that is
the intended design, the pipeline should still treat timeouts as failures. The scripted arms are
a handful of fixed policies, chosen before looking at their returns; the strongest of them is
reported, so its p-value is the best of a few.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.findings import Finding, Severity
from envaudit.policies import RepeatPolicy, StallPolicy
from envaudit.probe import Probe, ProbeContext
from envaudit.probes._shared.endings import (
    MIN_EFFECT,
    discrete_actions,
    ending_premium,
    final_share,
    fmt,
    honest_successes,
    matched_failures,
    quoted,
    returns_of,
    sample_size,
    split_enders,
    unsuccessful_timeouts,
)
from envaudit.probes._shared.same_state import failing_endings
from envaudit.protocol import (
    END_TOOL_TIMEOUT,
    FAILURE,
    SUCCESS,
    TOOL_TIMEOUT,
)
from envaudit.recording import Records
from envaudit.rollout import Policy, RandomPolicy, Run
from envaudit.stats import (
    MIN_SAMPLES,
    exploit_ladder,
    paired_compare,
)

CODE = "timeout-rewarded"
LEVEL_RANK = {None: 0, "above_alternative": 1, "at_least_success": 2}



PAIRED = ("timeout", "ended", "best_any", "behaviour_any")
"""The per-episode arrays of ``same_state_endings``, kept out of the evidence (its counts stay)."""


def same_state_endings(ctx: ProbeContext, timed_out: pd.DataFrame, steps: pd.DataFrame) -> dict | None:
    """Each timed-out episode against the best ending that fails from the state before its last
    step (``same_state.failing_endings``): ``timeout`` and ``ended`` returns, paired."""
    out = failing_endings(ctx, timed_out, steps, tag="timeouts-ending", arm="same-state-ending")
    if out is None:
        return None
    return {"timeout": out.pop("behaviour"), **out}


def arm_verdict(ctx: ProbeContext, records: Records | None, success, failure, rng, *,
                same_state: bool = True) -> dict:
    """The ladder for one arm's timeouts (exploration when ``records`` is None) against ending the
    same episode honestly instead, from the same state (``same_state_endings``: replayed through
    the counterfactual engine, faults injected on the way included). Where the engine cannot replay
    them (a space that is not ``Discrete``, nothing but the step limit ends episodes, a logged run),
    against the same episodes with their ending's pay swapped for an honest failure's
    (``matched_failures``), kept only when the timeout's ending itself pays more than a failure's."""
    episodes = ctx.exploration.episodes if records is None else records.episodes
    timed_out = episodes[unsuccessful_timeouts(episodes)]
    pooled = ctx.exploration if records is None else Records.concat([ctx.exploration, records])
    explored = ctx.exploration.episodes
    failure_ids = explored.loc[explored["outcome"] == FAILURE, "episode_id"]
    returns = timed_out["return"].to_numpy(float)
    replayed = same_state_endings(ctx, timed_out, pooled.steps) if same_state else None
    if replayed is not None and len(replayed["timeout"]) >= MIN_SAMPLES:
        verdict = exploit_ladder(replayed["timeout"], success, replayed["ended"], rng, alpha=ctx.config.alpha,
                                 min_effect=MIN_EFFECT)
        verdict["alternative"] = ("the same episodes ended honestly instead of their last step, from the same state "
                                  f"(the best of {', '.join(replayed['endings'])})")
        verdict["same_state"] = {k: v for k, v in replayed.items() if k not in PAIRED}
        verdict["mean_failure_elsewhere"] = float(np.mean(failure)) if len(failure) else None
        return verdict
    matched = matched_failures(timed_out["episode_id"], returns, pooled.steps, failure_ids, ctx.exploration.steps)
    verdict = exploit_ladder(returns, success, matched, rng, alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
    verdict["alternative"] = "the same episodes failing outright instead (their ending's pay swapped for a failure's)"
    verdict["mean_failure_elsewhere"] = float(np.mean(failure)) if len(failure) else None
    if verdict["level"] == "above_alternative" and len(failure) == 0 and _never_fails(replayed):
        # No episode failed in exploration, and from every replayed state the endings tried either
        # succeed or do not end: an unsuccessful episode can only time out here, so "more than
        # failing" has nothing to compare with. Timing out is then an incentive only when it pays
        # as much as succeeding (the ladder's top rung); partial credit for progress at the limit
        # is shaping, not a reason to stall instead of trying.
        verdict["level_before_attribution"] = verdict["level"]
        verdict["level"] = None
        verdict["no_failing_ending"] = {"states": replayed["n_prefixes"], "ended": len(replayed["best_any"]),
                                        "endings": replayed["endings"]}
        return verdict
    if verdict["level"] is None:
        return verdict
    premium = ending_premium(ctx, timed_out["episode_id"], pooled.steps, failure_ids, verdict["scale"], rng,
                             zero_without_failures=True)
    verdict["ending_premium"] = premium
    if not premium["holds"]:
        # Stalling earns more only by collecting per-step pay or pay for failed calls on the way:
        # length-bias or failure-rewarded, reported by those probes, not a reward for timing out.
        verdict["level_before_attribution"] = verdict["level"]
        verdict["level"] = None
    return verdict


def _never_fails(replayed: dict | None) -> bool:
    """Whether the same-state replays tried at least ``MIN_SAMPLES`` states and no ending failed from
    any of them (each either succeeded or did not end the episode)."""
    return replayed is not None and replayed["n_prefixes"] >= MIN_SAMPLES and len(replayed["timeout"]) == 0


# -- the arms ------------------------------------------------------------------------------------
def arm_row(name: str, what: str, episodes: pd.DataFrame, steps: pd.DataFrame, verdict: dict) -> dict:
    """One arm as ``decide_timeout_rewarded`` reads it (a row of the ``arms`` table, plus its
    ``verdict`` and ``examples``): its timed-out episodes, the tool they timed out on, its ladder."""
    tmo = episodes[unsuccessful_timeouts(episodes)]
    on_tool = tmo[tmo["end_reason"] == END_TOOL_TIMEOUT]
    last_tools = steps[steps["episode_id"].isin(on_tool["episode_id"])].groupby("episode_id")["tool_name"].last()
    return {
        "arm": name, "what": what, "level": verdict["level"], "p_value": verdict["p_value"],
        "same_state": bool(verdict.get("same_state")),
        "ended_on_tool_timeout": float(len(on_tool) / len(tmo)) if len(tmo) else None,
        "timed_out_tool": str(last_tools.mode().iloc[0]) if len(last_tools.dropna()) else None,
        "mean_timeout": float(tmo["return"].mean()) if len(tmo) else None,
        "n_timeout": int(len(tmo)), "n_episodes": int(len(episodes)),
        "final_step_share": final_share(steps, tmo["episode_id"]),
        "verdict": verdict, "examples": [int(e) for e in tmo.sort_values("return", ascending=False)["episode_id"][:5]],
    }


def _scripted_arms(ctx: ProbeContext, success: np.ndarray, failure: np.ndarray, rng) -> list[dict]:
    actions = discrete_actions(ctx.env)
    steps = ctx.exploration.steps
    if actions is None or steps.empty:
        return []
    n = sample_size(ctx, 32)
    policies: list[tuple[str, Policy]] = []
    enders, others, _ = split_enders(steps)
    if enders:
        policies.append(("stall", StallPolicy(others, avoided=quoted(ctx, enders))))
    tool_steps = steps[steps["tool_status"].notna()]
    if not tool_steps.empty:
        rate = (tool_steps["tool_status"] == TOOL_TIMEOUT).groupby(tool_steps["action"]).mean()
        if len(rate) and rate.max() > 0:
            a = int(rate.idxmax())
            label = ctx.describe_action(a)
            why = f"its tool timed out in {float(rate.max()):.0%} of exploration calls"
            policies.append((f"repeat-{label}", RepeatPolicy.repeating(a, label, why)))
    runnable = []
    for name, policy in policies:
        if ctx.over_cap(f"scripted arm {name!r} and those after it"):
            break
        runnable.append((name, policy))
    # Every arm's episodes in one run over the workers, each as its own run would play it.
    played = ctx.run_all([Run(policy, ctx.seeds(n, name), tags={"arm": name}) for name, policy in runnable])
    arms = []
    for (name, policy), records in zip(runnable, played, strict=True):
        ctx.keep(records)
        verdict = arm_verdict(ctx, records, success, failure, rng)
        arms.append(arm_row(name, policy.describe(), records.episodes, records.steps, verdict))
    return arms


INJECT_MAX = 96
"""Most episodes one injection arm runs (four times the default arm)."""


def _injection_sizes(ctx: ProbeContext, tools: Sequence[str]) -> dict[str, int]:
    """Episodes per injection arm. Only the episodes that call the tool can time out on it, so an
    arm of ``n`` episodes judges about ``n * q`` timeouts, where ``q`` is the share of exploration
    episodes that called the tool: ``n`` is sized for ``2 * MIN_SAMPLES`` of them (fewer than
    ``MIN_SAMPLES``, where the ladder cannot decide, is then a < 1% event for ``q >= 0.2``), within
    the default arm size and ``INJECT_MAX``. A tool exploration never called gets the default."""
    steps, n_explored = ctx.exploration.steps, len(ctx.exploration.episodes)
    if "tool_name" in steps:
        calls = steps[steps["tool_name"].notna()]
        reach = calls.groupby("tool_name")["episode_id"].nunique() / max(n_explored, 1)
    else:  # a steps table without tool columns: no tool was seen called
        reach = pd.Series(dtype=float)
    floor = sample_size(ctx, 24)
    return {t: int(min(INJECT_MAX, max(floor, np.ceil(2 * MIN_SAMPLES / reach[t])))) if reach.get(t, 0) > 0
            else floor for t in tools}


def _injection_arms(ctx: ProbeContext, success: np.ndarray, failure: np.ndarray, rng) -> list[dict]:
    """Force every call of one tool to time out under the exploration policy, one tool at a time.

    The episodes that time out are judged like every other arm; the same seeds and actions
    un-faulted (the random policy draws the same actions whatever the env answers) give the paired
    difference in return that the faults cause, reported alongside.
    """
    tools = sorted(ctx.env.unwrapped.tools)
    sizes = _injection_sizes(ctx, tools)
    seeds = ctx.seeds(max(sizes.values(), default=sample_size(ctx, 24)), "inject")
    base = ctx.run(RandomPolicy(), seeds, rng_name="paired", tags={"faults": "none"})
    ctx.keep(base.records)
    b = base.records.episodes
    arms = []
    for tool in tools:
        if ctx.over_cap(f"timeout injection into tool {tool!r} and those after it"):
            break
        wrapper = lambda env, t=tool: FaultInjector(env, rates={t: {"timeout": 1.0}})  # noqa: E731
        result = ctx.run(RandomPolicy(), seeds[:sizes[tool]], wrappers=[wrapper], rng_name="paired",
                         tags={"faults": f"timeout:{tool}"})
        ctx.keep(result.records)
        f = result.records.episodes
        verdict = arm_verdict(ctx, result.records, success, failure, rng)
        pairs = f[f["n_injected"] > 0].merge(b[["seed", "return"]], on="seed", suffixes=("", "_unfaulted"))
        verdict["paired"] = paired_compare(pairs["return"].to_numpy(float), pairs["return_unfaulted"].to_numpy(float),
                                           rng, labels=("faulted", "unfaulted"))
        arms.append(arm_row(f"inject-{tool}", f"every '{tool}' call forced to time out, random actions",
                         f, result.records.steps, verdict))
    return arms


# -- the finding ---------------------------------------------------------------------------------
def _title(level: str) -> str:
    return "Timing out pays as much as succeeding" if level == "at_least_success" else "Timing out pays more than failing"


def _summary(best: dict, mean_s: float | None, mean_f: float | None) -> str:
    v = best["verdict"]
    if best["arm"].startswith("inject-"):
        tool = best["arm"][len("inject-"):]
        head = (f"When every '{tool}' call times out, the episodes that end in a timeout earn "
                f"{fmt(best['mean_timeout'])} on average")
    else:
        what = {"exploration": "Episodes that timed out during random exploration earn",
                "logged": "Episodes that timed out in the logged run earn",
                "stall": f"Stalling until the step limit ({best['what']}) earns"}.get(
                    best["arm"], f"Timing out by {best['what'].replace('repeat ', 'repeating ', 1)} earns")
        head = f"{what} {fmt(best['mean_timeout'])} on average"
    matched = fmt((v.get("vs_alternative") or {}).get("mean_alternative"))
    versus = (f"more than the same episodes would earn ending at once from the same state instead ({matched}"
              if v.get("same_state") else f"more than the same episodes would earn failing outright instead ({matched}")
    versus += f"; failures elsewhere earn {fmt(mean_f)})" if mean_f is not None else ")"
    if v["level"] == "at_least_success":
        return (f"{head}, at least as much as succeeding ({fmt(mean_s)}) and {versus}, so an agent can learn "
                "to time out instead of doing the task.")
    return (f"{head}: {versus} though less than succeeding ({fmt(mean_s)}), so an agent that is unsure "
            "learns to time out rather than try.")


def _fix(best: dict) -> str:
    pipeline = "; and have the pipeline treat timeouts as failures (--timeout-handling zero or penalty)."
    if (best.get("ended_on_tool_timeout") or 0) >= 0.5 and best.get("timed_out_tool"):
        tool = best["timed_out_tool"]
        return (f"Treat a timed-out '{tool}' call as a failed one: an episode that ends on it should "
                "earn no more than an honest failure (no pass, partial credit or refund on a timeout)"
                + pipeline)
    return ("Pay an episode cut by the step limit no more than an honest failure (remove any reward "
            "given at the step limit, such as partial credit for work in progress)" + pipeline)


def run(ctx: ProbeContext) -> list[Finding]:
    eps = ctx.exploration.episodes
    failure = returns_of(eps, FAILURE)
    ctx.notes["outcomes"] = eps["outcome"].value_counts().to_dict() if len(eps) else {}
    if not (eps["outcome"].isin([SUCCESS, FAILURE]).any() if len(eps) else False):
        # Without a success flag (or any ending but the step limit) nothing tells a timeout from
        # the task: there is no honest ending to compare a timeout's with.
        ctx.notes["skipped"] = "no episode in exploration ended by success or an outright failure"
        return []
    if len(failure) == 0:
        # Nothing ends an unsuccessful episode but the step limit (no quit, wrong answers go on):
        # a timeout is then compared with the same episode ending with no pay (``matched_failures``).
        ctx.notes["no_outright_failures"] = ("no episode failed outright in exploration: timeouts are compared with "
                                             "the same episodes ending without their ending's pay")
    # Too few successes leave the ladder unable to say "as much as success" at all.
    success, success_sources = honest_successes(ctx, target=MIN_SAMPLES)
    rng = ctx.rng("stats")
    verdict = arm_verdict(ctx, None, success, failure, rng)
    arms = [arm_row("exploration", "random exploration", eps, ctx.exploration.steps, verdict)]
    arms += _scripted_arms(ctx, success, failure, rng)
    if ctx.is_tool_env and not ctx.over_cap("timeout injection into every tool"):
        arms += _injection_arms(ctx, success, failure, rng)
    return decide_timeout_rewarded(ctx, arms, success, success_sources, failure)


def decide_timeout_rewarded(ctx: ProbeContext, arms: list[dict], success: np.ndarray, success_sources: dict,
                            failure: np.ndarray) -> list[Finding]:
    """The one place ``timeout-rewarded`` is decided, for every arm (exploration, scripted, fault
    injection, or a logged run's): the strongest arm's level on the ladder grades it, ``fail`` at
    ``at_least_success``, ``warn`` at ``above_alternative``, no finding when no arm reached a level.
    Writes the ``arms`` table. Reads records only, so ``envaudit logs`` judges a logged run's
    timeouts with it too."""
    ctx.table("arms", pd.DataFrame([{k: v for k, v in a.items() if k not in ("verdict", "examples")}
                                    for a in arms]))
    best = max(arms, key=lambda a: (LEVEL_RANK[a["level"]], -a["p_value"]))
    if best["level"] is None:
        return []
    severity = Severity.FAIL if best["level"] == "at_least_success" else Severity.WARN
    mean_s = float(success.mean()) if len(success) else None
    mean_f = float(failure.mean()) if len(failure) else None
    evidence = {
        "behaviour": "timeout", "reward_path": "env",
        "p_value": best["p_value"], "arm": best["arm"], "policy": best["what"],
        "mean_timeout": best["mean_timeout"],
        "mean_success": mean_s, "mean_failure": mean_f,
        "n_success": int(len(success)), "n_failure": int(len(failure)), "success_sources": success_sources,
        "final_step_share": best["final_step_share"], "min_samples": MIN_SAMPLES,
        "test": best["verdict"], "arms": [{k: v for k, v in a.items() if k != "verdict"} for a in arms],
    }
    return [Finding(CODE, severity, _title(best["level"]), _summary(best, mean_s, mean_f), evidence,
                    best["examples"], _fix(best), probe="timeouts")]


def analyse(ctx: ProbeContext) -> list[Finding]:
    """The verdict on recorded episodes alone (a logged run): its timed-out episodes, as one arm,
    against the same episodes failing outright instead and its own successes."""
    eps = ctx.exploration.episodes
    failure = returns_of(eps, FAILURE)
    if len(failure) == 0:
        ctx.notes["skipped"] = "no failed episode in the log to compare timeouts with"
        return []
    success = returns_of(eps, SUCCESS)
    rng = ctx.rng("stats")
    verdict = arm_verdict(ctx, None, success, failure, rng, same_state=False)
    arm = arm_row("logged", "the logged policy", eps, ctx.exploration.steps, verdict)
    return decide_timeout_rewarded(ctx, [arm], success, {"n_logged": int(len(success))}, failure)


probe = Probe(
    name="timeouts",
    run=run,
    analyse=analyse,
    analyse_needs=("end_reason", "success"),
    summary="does timing out (truncation or a tool timeout) earn more than failing outright?",
    codes=(CODE,),
    decisions={CODE: decide_timeout_rewarded},
    weight=1.0,
    order=30,
)
