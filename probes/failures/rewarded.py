"""``failure-rewarded`` for the ``failures`` probe: does a step whose tool failed pay more than the
same step succeeding, or a step pay more because the call before it failed?

Signals: the step reward of each action by tool status in the scan's exploration (Mann–Whitney,
failed vs ok); on a ``ToolEnv``, fault injection: the same seeds and action prefixes (taken from
exploration) replayed with and without a fault forced on the target call, comparing that step's
reward pair by pair (Wilcoxon signed-rank); on a plain Gymnasium env, where exploration saw too
few failed calls of an action to compare, targeted episodes that repeat the call until enough
failed and ok steps from comparable states are seen (``failure_topup``). Failure-conditioned
rewards: ``failure_conditioned``. Holm runs within each of the two questions; the raw p of the key
test is ``evidence["p_value"]``. ``failure_rewarded`` measures; ``decisions.decide_failure_rewarded``
(basis ``"failed-call"``) grades each tool whose failed calls pay: ``fail`` when a failed call
alone, or an agent that makes that call fail at will (the call repeated under an injected 100% fault
rate on a ``ToolEnv``, its natural rate on a plain env), earns at least the honest success return;
``warn`` otherwise.

Known false positives: step rewards that depend on state can differ between failed and ok calls
for reasons other than the failure (exploration comparison only; the paired replay and the
top-up's matched histories control it).
"""

from __future__ import annotations

import functools
from typing import Protocol

import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.findings import Finding
from envaudit.policies import RepeatPolicy, ReplayPlan, describe_call, oracle_policy, success_return
from envaudit.probe import ProbeContext
from envaudit.probes.failures import conditioned
from envaudit.probes.failures.conditioned import int_actions, replay_items
from envaudit.probes.failures.decisions import decide_failure_rewarded
from envaudit.protocol import TOOL_FAILED, TOOL_OK, TOOL_TIMEOUT
from envaudit.recording import Records
from envaudit.rollout import Policy
from envaudit.stats import compare, holm, paired_compare

INJECTION_PAIRS = 12
"""Replayed (seed, prefix) pairs per action and fault status; ``--quick`` uses a quarter."""
INJECTION_MIN_PAIRS = 10
MAX_ACTIONS = 8
"""At most this many catalogue actions get the injection test (the most called in exploration)."""
FARM_EPISODES = 8
"""Episodes of "make this call fail at will" run to judge severity."""


class Runs(Protocol):
    """What ``honest_success`` needs of the failures probe's policy runs (``failures._Runs``)."""

    def get(self, policy: Policy, rate: float) -> Records | None: ...


def honest_success(ctx: ProbeContext, runs: Runs | None) -> tuple[float | None, str | None]:
    """Mean return of honest successful episodes: the env's oracle's when it has one, else the
    successful exploration episodes'."""
    oracle = oracle_policy(ctx.env) if runs is not None else None
    if oracle is not None:
        records = runs.get(oracle, 0.0)
        if records is not None:
            mean, _ = success_return(records.episodes)
            if mean is not None:
                return mean, "the env's oracle"
    mean, _ = success_return(ctx.exploration.episodes)
    return mean, ("successful exploration episodes" if mean is not None else None)


# -- failure-rewarded: exploration ------------------------------------------------------------------
def exploration_tests(steps: pd.DataFrame, rng: np.random.Generator) -> dict[tuple[int, str], dict]:
    """Per (action, failed status): step rewards of failed vs ok calls of that action in exploration."""
    steps = int_actions(steps[steps["tool_status"].notna()])
    out = {}
    for action, group in steps.groupby("action"):
        ok = group.loc[group["tool_status"] == TOOL_OK, "reward"].to_numpy(float)
        for status in TOOL_FAILED:
            bad = group.loc[group["tool_status"] == status, "reward"].to_numpy(float)
            if len(ok) and len(bad):
                test = compare(bad, ok, rng, labels=("failed", "ok"))
                paid = group[(group["tool_status"] == status) & (group["reward"] > ok.mean())]
                test.update(source="exploration", test="Mann-Whitney U, failed vs ok step rewards, one-sided",
                            tool=str(group.loc[group["tool_status"] == status, "tool_name"].iloc[0]),
                            examples=[int(e) for e in paid["episode_id"].unique()[:3]])
                out[(int(action), status)] = test
    return out


# -- failure-rewarded: paired replays with an injected fault -----------------------------------------
def injection_tests(ctx: ProbeContext, rng: np.random.Generator) -> tuple[dict[tuple[int, str], dict], dict, dict]:
    """Paired replays of each action with and without a forced error / timeout on that call.

    Returns the tests (failed vs ok, per action and fault), the arms' records, and the (failed, ok)
    reward pairs whose ok step did not end the episode (what ``failure_charge`` reads)."""
    steps = int_actions(ctx.exploration.steps)
    n_actions = int(ctx.env.action_space.n)
    counts = steps["action"].value_counts()
    actions = sorted(range(n_actions), key=lambda a: (-int(counts.get(a, 0)), a))[:MAX_ACTIONS]
    # Never below what a paired test needs to reach significance after Holm, even under --quick.
    n = max(INJECTION_MIN_PAIRS, ctx.config.scaled(INJECTION_PAIRS))
    items = replay_items(ctx.exploration, actions, n, rng, ctx.seeds(n, "fresh"))
    arms: dict[str | None, tuple[ReplayPlan, Records]] = {}
    for fault in (None, *TOOL_FAILED):
        if ctx.over_cap(f"fault injection arm {fault or 'ok'!r}"):
            return {}, {}, {}
        plan = ReplayPlan(items, fault, name=f"replay-{fault or 'ok'}")
        result = plan.run(ctx, tags={"fault": fault or "none"})
        arms[fault] = (plan, result.records)
    base = arms[None][0].last_steps(arms[None][1])

    def ended_of(plan: ReplayPlan, records: Records) -> dict[int, bool]:
        last = records.steps.groupby("episode_id")["terminated"].last()
        return {k: bool(last.get(e, True)) for e, k in plan.episode_replay.items()}

    ok_ended = ended_of(*arms[None])
    labels = ctx.action_labels
    catalogue = getattr(ctx.env.unwrapped, "catalogue", None)
    out, charge_pairs = {}, {}
    for status in TOOL_FAILED:
        plan, records = arms[status]
        faulted = plan.last_steps(records)
        bad_ended = ended_of(plan, records)
        eid_of = {v: k for k, v in plan.episode_replay.items()}
        for a in actions:
            mine = [i for i, it in enumerate(items) if it.actions[-1] == a and i in faulted
                    and faulted[i][1] == status and faulted[i][2]]
            # What a failure of this call is charged: its failed rewards (where the failure did not
            # end the episode), and the same call working, paired, where that did not end it either.
            charge_pairs[(a, status)] = (
                [faulted[i][0] for i in mine if not bad_ended.get(i, True)],
                [(faulted[i][0], base[i][0]) for i in mine if i in base and base[i][1] == TOOL_OK
                 and not ok_ended.get(i, True) and not bad_ended.get(i, True)])
            pairs = [(faulted[i][0], base[i][0], eid_of.get(i)) for i in mine if i in base and base[i][1] == TOOL_OK]
            if not pairs:
                continue
            bad, ok, eids = (list(x) for x in zip(*pairs, strict=True))
            test = paired_compare(bad, ok, rng, labels=("failed", "ok"))
            tool = catalogue[a].tool if catalogue is not None else (labels[a] if labels else str(a))
            test.update(source="fault injection", tool=tool, examples=[e for e in eids if e is not None][:3],
                        test="Wilcoxon signed-rank, same seed and prefix with vs without the fault, one-sided")
            out[(a, status)] = test
    return out, {k: v[1] for k, v in arms.items()}, charge_pairs


def _farm(ctx: ProbeContext, action: int, tool: str, status: str) -> Records | None:
    """An agent that makes this call fail at will: repeat it under a 100% injected fault rate (on a
    ToolEnv); on a plain env, just repeat it (its natural failure rate)."""
    if ctx.over_cap(f"farming tool {tool!r} failures ({status})"):
        return None
    policy = RepeatPolicy(action, name=f"farm-{status}", description="")
    wrappers = ()
    if ctx.is_tool_env:
        wrappers = (functools.partial(FaultInjector, rates={tool: {status: 1.0}}),)
    return ctx.run(policy, ctx.seeds(ctx.config.scaled(FARM_EPISODES), "farm"), wrappers=wrappers,
                   rng_name=f"farm-{action}-{status}").records


def failure_rewarded(ctx: ProbeContext, runs: Runs | None, injected: dict, arms: dict) -> list[Finding]:
    """Failed steps that pay (``injected``: ``injection_tests``' tests on a ``ToolEnv``,
    ``failure_topup.topup_tests``' on a plain env) and steps that pay because the call before them
    failed (``failure_conditioned``), with Holm across all of these tests."""
    rng = ctx.rng("rewarded")
    explored = exploration_tests(ctx.exploration.steps, rng)
    # One key test per (action, status): the paired replay (or the top-up's matched histories) where
    # it has enough pairs, else exploration.
    primary: dict[tuple, dict] = {}
    for key in sorted(set(explored) | set(injected)):
        test = injected.get(key)
        if test is None or test["underpowered"]:
            test = explored.get(key, test)
        primary[key] = test
    crng = ctx.rng("conditioned")
    cond = (conditioned.injection_tests(ctx, crng) if runs is not None
            else conditioned.plain_tests(ctx, crng))
    tests = {**primary, **cond}
    # Holm within each of the two questions (does a failed step pay; does a step pay because the
    # call before it failed), over the tests that could reject at all: one whose pairs never
    # differ (every call pays the same failed or ok, the usual case) has p = 1 whatever happens,
    # and leaving it out of the count keeps the family-wise error rate (Tarone's argument).
    adjusted = {k: 1.0 for k in tests}
    keys: list[tuple] = []
    for family in (primary, cond):
        live = [k for k in family if family[k]["diff"] is not None
                and not (family[k]["p_value"] >= 1.0 and family[k]["effect_size"] == 0.0)]
        adjusted.update(zip(live, holm([family[k]["p_value"] for k in live]), strict=True))
        keys += live
    if not keys:
        return []
    by_tool: dict[str, list[tuple[int, str]]] = {}
    for key in primary:
        t = primary[key]
        if (t["diff"] is not None and t["diff"] > 0 and not t["underpowered"]
                and adjusted[key] <= ctx.config.alpha and t["diff_ci"][0] > 0):
            by_tool.setdefault(t["tool"], []).append(key)
    hits = [k for k in cond if conditioned.is_hit(cond[k], adjusted[k], ctx.config.alpha)]
    if not by_tool and not hits:
        return []
    honest, honest_source = honest_success(ctx, runs)
    labels = ctx.action_labels
    findings = []
    for tool, tool_hits in sorted(by_tool.items()):
        key = min(tool_hits, key=lambda k: (primary[k]["p_value"], -primary[k]["diff"]))
        findings.append(decide_failure_rewarded("failed-call", _failed_call(
            ctx, tool, key, tool_hits, primary, adjusted, explored, arms, honest, honest_source, labels,
            n_tests=sum(k in primary for k in keys))))
    for _, group in sorted(conditioned.group_hits(hits, cond).items()):
        findings.append(conditioned.finding(ctx, group, cond, adjusted, (honest, honest_source)))
    return findings


def _failed_call(ctx, tool, key, hits, primary, adjusted, explored, arms, honest, honest_source,
                 labels, *, n_tests: int) -> dict:
    """What ``decide_failure_rewarded`` grades for one tool whose failed calls pay: the key test's
    numbers, the farming episodes' return (an agent that makes the call fail at will) and the
    honest success return, as evidence; the examples, whose records are kept."""
    action, status = key
    test = primary[key]
    farm = _farm(ctx, action, tool, status)
    farm_mean = float(farm.episodes["return"].mean()) if farm is not None and len(farm.episodes) else None
    call = describe_call(action, labels)
    # Examples are episodes with the failed call that paid: the faulted replays (or exploration
    # episodes), then the farming episodes. Only those records are kept, so every id resolves.
    examples = list(dict.fromkeys(test.get("examples", [])))
    if examples and arms and test["source"] == "fault injection":
        ctx.keep(arms[status])
    elif examples and test.get("records") is not None:
        ctx.keep(test["records"])
    if farm is not None:
        ctx.keep(farm)
        examples += [e for e in farm.episodes["episode_id"].head(2).tolist() if e not in examples]

    def name(k: tuple[int, str]) -> str:
        return f"{labels[k[0]] if labels and k[0] < len(labels) else k[0]} ({k[1]})"

    evidence = {
        # A timed-out step that pays is the timeout incentive seen one step at a time.
        "behaviour": "timeout" if status == TOOL_TIMEOUT else "tool-failure", "reward_path": "env",
        "p_value": test["p_value"],
        "p_holm_in_probe": float(adjusted[key]),
        "tests_in_probe": n_tests,
        "test": test["test"],
        "source": test["source"],
        "tool": tool,
        "action": labels[action] if labels and action < len(labels) else action,
        "status": status,
        "mean_reward_failed": test["mean_failed"],
        "mean_reward_ok": test["mean_ok"],
        "diff": test["diff"],
        "diff_ci": test["diff_ci"],
        "effect_size": test["effect_size"],
        "n": test.get("n_pairs", min(test.get("n_failed", 0), test.get("n_ok", 0))),
        "also_flagged": {name(k): {"diff": primary[k]["diff"], "p_value": primary[k]["p_value"]}
                         for k in hits if k != key},
        "farm_mean_return": farm_mean,
        "farm_policy": (f"always {call}, with every call forced to {status}" if ctx.is_tool_env
                        else f"always {call}"),
        "honest_success_return": honest,
        "honest_success_source": honest_source,
    }
    if key in explored and explored[key] is not test:
        e = explored[key]
        evidence["exploration"] = {k: e[k] for k in ("mean_failed", "mean_ok", "n_failed", "n_ok", "p_value")}
    if "topup" in test:  # a plain env: how many targeted episodes it took to see enough failures
        evidence["topup"] = test["topup"]
        evidence["n_ok_same_history"] = test["n_ok"]
    return {"evidence": evidence, "examples": examples[:4], "statuses": sorted({k[1] for k in hits}),
            "label": labels[action] if labels and action < len(labels) else None}
