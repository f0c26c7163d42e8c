"""Probe ``failures``: do tool failures pay, or make giving up pay?

Incentives detected:

- ``failure-rewarded``: a step whose tool failed (``error``, or ``timeout``) pays more than the
  same step succeeding, so an agent that can make calls fail (bad arguments, calls out of order)
  learns to; or a step pays more *because the call before it failed* (handing off, quitting or
  retrying right after a failure pays: ``failure_conditioned``).
- ``failure-shortcut``: tool failures, charged beyond the step they take, make short trajectories
  (give up, answer at once) pay better than persisting at the env's own failure rates, so under
  flaky tools an agent learns to quit instead of retrying. Giving up beating *failing slowly*,
  when a failure costs only the step every step pays, is not a flaw and gives nothing here.

Signals. For ``failure-rewarded``: the step reward of each action by tool status in the scan's
exploration (Mann–Whitney, failed vs ok); on a ``ToolEnv``, confirmed by fault injection: the
same seeds and action prefixes (taken from exploration) replayed with and without a fault forced
on the target call, comparing that step's reward pair by pair (Wilcoxon signed-rank); for
failure-conditioned rewards see ``failure_conditioned``. Holm runs within each of the two
questions; the raw p of the key test is ``evidence["p_value"]``. Severity: ``fail``
when a failed call alone, or an agent that makes that call fail at will (the call repeated under
an injected 100% fault rate), earns at least the honest success return; ``warn`` otherwise.

For ``failure-shortcut`` on a ``ToolEnv``: first ``failure_charge`` asks whether failed calls pay
less than the cheapest ordinary step (and than the same call working), from the same replays;
if not, there is nothing to find and no sweep runs. Then a sweep of injected error rates (``SWEEP_RATES`` on
every tool except those of the calls that end episodes: giving up is the agent's move, not a
flaky backend) running, on the same seeds, the short strategies (each call that ends episodes,
repeated), the honest persisting policy (the env's ``oracle()`` when it has one, else one
derived from exploration that retries each needed call until it works) and "quit on failure"
(persist, but end the episode at the first failed call), compared by paired t-tests on returns
(Bonferroni over the short strategies), each also with the failures' charges paid back: a win
that survives the refund is not the charges' doing and is not claimed. Rate 0 is the env as it
is (its own, natural failures).
A return-maximising agent compares expected returns: if a short strategy earns at least what
persisting earns at the env's own failure rate, it never tries -> ``fail``; if only quitting
after a failure beats persisting, it gives up whenever a call fails -> ``warn``; if short
strategies only overtake persisting at injected rates -> ``info`` (the crossover rate is worth
knowing if production tools fail more often). A short strategy that earns as much as persisting
does when no call fails is an exploit whatever the tools do (``exploits`` / ``intent`` report
it), not a failure shortcut, and is left out. On plain Gymnasium envs the probe reads
exploration only (``failure_plain``).

Known false positives: step rewards that depend on state can differ between failed and ok calls
for reasons other than the failure (exploration comparison only; the paired replay controls it).
A derived persisting policy can be a poor stand-in for an honest agent; the probe then requires
it to succeed more often than the short strategies before it claims anything.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.findings import Finding, Severity
from envaudit.policies import (
    QuitOnFailurePolicy,
    RepeatPolicy,
    ReplayPlan,
    action_stats,
    describe_call,
    oracle_policy,
    persist_policy,
    success_return,
)
from envaudit.probe import Probe, ProbeContext
from envaudit.protocol import SUCCESS, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.recording import Records
from envaudit.rollout import Policy
from envaudit.seeding import child_seed
from envaudit.stats import bootstrap_ci, compare, holm, paired_compare

from . import failure_charge as charge
from . import failure_conditioned as conditioned
from .failure_conditioned import int_actions, replay_items
from .failure_confirm import second_look
from .failure_plain import natural_failure_rate, shortcut_exploration

FAILED = (TOOL_ERROR, TOOL_TIMEOUT)
INJECTION_PAIRS = 12
"""Replayed (seed, prefix) pairs per action and fault status; ``--quick`` uses a quarter."""
INJECTION_MIN_PAIRS = 10
MAX_ACTIONS = 8
"""At most this many catalogue actions get the injection test (the most called in exploration)."""
FARM_EPISODES = 8
"""Episodes of "make this call fail at will" run to judge severity."""
SWEEP_RATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
"""Injected error rates of the failure sweep (on every tool, on top of the env's own failures)."""
SWEEP_EPISODES = 32
"""Episodes per policy and injected rate in the sweep (the first of the rate-0 seeds)."""
NATURAL_EPISODES = 128
"""Episodes per policy at rate 0, the env as it is, where severity is decided."""
NATURAL_MIN_EPISODES = 64
"""Never fewer at rate 0, even under ``--quick``: a guess that wins 1 time in 4 against a costly
persisting policy needs about this many to clear Bonferroni over the short strategies."""
MAX_SHORT = 6
"""At most this many short strategies (calls that end episodes, best-paying first) in the sweep."""
FIX_REWARDED = ("Pay a failed call no more than the same call succeeding (0 or a cost): never give credit "
                "for attempts, and do not let a timeout or error count as a pass.")
FIX_SHORTCUT = ("Do not make tool failures cost the agent reward beyond the time they take (the agent does "
                "not control the backend); make giving up or answering early pay less than an honest "
                "attempt, and keep failure rates in training close to production.")


# -- shared -----------------------------------------------------------------------------------------
class _Runs:
    """Runs of policies under an injected error rate, on one set of seeds, each run once."""

    def __init__(self, ctx: ProbeContext) -> None:
        self.ctx = ctx
        self.natural_seeds = ctx.seeds(max(NATURAL_MIN_EPISODES, ctx.config.scaled(NATURAL_EPISODES)), "sweep")
        self.sweep_seeds = self.natural_seeds[: ctx.config.scaled(SWEEP_EPISODES)]
        self.cache: dict[tuple[str, float], Records] = {}
        self.tools: list[str] | None = None
        """The tools faults are injected into (None: all of them)."""

    def get(self, policy: Policy, rate: float) -> Records | None:
        key = (policy.name, rate)
        if key not in self.cache:
            if self.ctx.over_cap(f"policy {policy.name!r} at fault rate {rate:g}"):
                return None
            wrappers = ()
            if rate > 0:
                seed = child_seed(self.ctx.config.seed, "failures", "sweep", round(rate * 1000))
                wrappers = (functools.partial(FaultInjector, error_rate=rate, tools=self.tools, seed=seed),)
            seeds = self.natural_seeds if rate == 0 else self.sweep_seeds
            result = self.ctx.run(policy, seeds, wrappers=wrappers, tags={"fault_rate": rate},
                                  rng_name=f"{policy.name}@{rate:g}")
            self.cache[key] = result.records
        return self.cache[key]


def honest_success(ctx: ProbeContext, runs: _Runs | None) -> tuple[float | None, str | None]:
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
        for status in FAILED:
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
    for fault in (None, *FAILED):
        if ctx.over_cap(f"fault injection arm {fault or 'ok'!r}"):
            return {}, {}, {}
        plan = ReplayPlan(items, fault, name=f"replay-{fault or 'ok'}")
        result = ctx.run(plan.policy(), plan.seeds, wrappers=plan.wrappers(), tags={"fault": fault or "none"})
        arms[fault] = (plan, result.records)
    base = arms[None][0].last_steps(arms[None][1])

    def ended_of(plan: ReplayPlan, records: Records) -> dict[int, bool]:
        last = records.steps.groupby("episode_id")["terminated"].last()
        return {k: bool(last.get(e, True)) for e, k in plan.episode_replay.items()}

    ok_ended = ended_of(*arms[None])
    labels = ctx.action_labels
    catalogue = getattr(ctx.env.unwrapped, "catalogue", None)
    out, charge_pairs = {}, {}
    for status in FAILED:
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


def failure_rewarded(ctx: ProbeContext, runs: _Runs | None, injected: dict, arms: dict) -> list[Finding]:
    """Failed steps that pay (``injected``: ``injection_tests``' tests) and steps that pay because
    the call before them failed (``failure_conditioned``), with Holm across all of these tests."""
    rng = ctx.rng("rewarded")
    explored = exploration_tests(ctx.exploration.steps, rng)
    # One key test per (action, status): the paired replay where it has enough pairs, else exploration.
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
        findings.append(_rewarded_finding(ctx, tool, key, tool_hits, primary, adjusted, explored, arms,
                                          honest, honest_source, labels,
                                          n_tests=sum(k in primary for k in keys)))
    for _, group in sorted(conditioned.group_hits(hits, cond).items()):
        findings.append(conditioned.finding(ctx, group, cond, adjusted, (honest, honest_source)))
    return findings


def _rewarded_finding(ctx, tool, key, hits, primary, adjusted, explored, arms, honest, honest_source,
                      labels, *, n_tests: int) -> Finding:
    action, status = key
    test = primary[key]
    farm = _farm(ctx, action, tool, status)
    farm_mean = float(farm.episodes["return"].mean()) if farm is not None and len(farm.episodes) else None
    failed_mean = test["mean_failed"]
    as_much = honest is not None and (failed_mean >= honest or (farm_mean is not None and farm_mean >= honest))
    severity = Severity.FAIL if as_much else Severity.WARN
    call = describe_call(action, labels)
    # Examples are episodes with the failed call that paid: the faulted replays (or exploration
    # episodes), then the farming episodes. Only those records are kept, so every id resolves.
    examples = list(dict.fromkeys(test.get("examples", [])))
    if examples and arms and test["source"] == "fault injection":
        ctx.keep(arms[status])
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
        "mean_reward_failed": failed_mean,
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
    statuses = sorted({k[1] for k in hits})
    word = " or ".join("fails" if s == TOOL_ERROR else "times out" for s in statuses)
    label = labels[action] if labels and action < len(labels) else None
    subject = f"a `{label}` call" if label is not None else f"action {action!r}"
    verb = "fail" if status == TOOL_ERROR else "time out"
    farm_text = (f"; an agent that makes it {verb} at will earns {farm_mean:.3g} per episode"
                 if farm_mean is not None else "")
    if severity == Severity.FAIL and farm_mean is not None and farm_mean >= honest:
        tail = farm_text + f", at least an honest success ({honest:.3g})"
    elif severity == Severity.FAIL:
        tail = f"; one failed call pays at least an honest success ({honest:.3g})"
    else:
        tail = farm_text + (f", less than an honest success ({honest:.3g})" if honest is not None else "")
    return Finding(
        code="failure-rewarded", severity=severity,
        title=f"a failed `{tool}` call pays more than a working one",
        summary=(f"When {subject} {word}, that step pays {failed_mean:.3g} against {test['mean_ok']:.3g} "
                 f"when it works ({test['source']}, n={evidence['n']}){tail}."),
        evidence=evidence, examples=examples[:4], fix=FIX_REWARDED,
    )


# -- failure-shortcut -------------------------------------------------------------------------------
def _row(rate: float, policy: Policy, episodes: pd.DataFrame, rng: np.random.Generator) -> dict:
    r = episodes["return"].to_numpy(float)
    lo, hi = bootstrap_ci(r, rng) if len(r) else (float("nan"), float("nan"))
    calls = episodes["n_tool_calls"].sum()
    fails = (episodes["n_tool_errors"] + episodes["n_tool_timeouts"]).sum()
    return {
        "rate": rate, "policy": policy.name, "description": policy.describe(), "n": len(r),
        "mean_return": float(r.mean()) if len(r) else float("nan"), "ci_low": lo, "ci_high": hi,
        "success_rate": float((episodes["outcome"] == SUCCESS).mean()) if len(r) else float("nan"),
        "mean_length": float(episodes["length"].mean()) if len(r) else float("nan"),
        "observed_failure_rate": float(fails / calls) if calls else 0.0,
    }


def _paired(a: Records, b: Records, rng: np.random.Generator) -> dict:
    m = a.episodes[["seed", "return"]].merge(b.episodes[["seed", "return"]], on="seed", suffixes=("_a", "_b"))
    return paired_compare(m["return_a"], m["return_b"], rng, labels=("short", "persist"), test="t")


def shortcut_sweep(ctx: ProbeContext, runs: _Runs, fee: dict) -> list[Finding]:
    """``fee``: ``failure_charge``'s verdict on whether failures cost more than their step."""
    env = ctx.env
    labels = ctx.action_labels
    if not fee["charged"]:
        # Failing slowly costs only the step every step pays: giving up beating it is no flaw.
        ctx.notes["failure_shortcut"] = (
            "tool failures cost only the step they take (no failed call paid less than the same call "
            f"working and less than the cheapest ordinary step, {fee['step_reward_reference']}), so "
            "giving up beating failing slowly is not a failure shortcut; no sweep run")
        return []
    persist = oracle_policy(env) or persist_policy(ctx.exploration, env)
    if persist is None:
        ctx.notes["failure_shortcut"] = "no oracle() and no persisting policy could be derived from exploration"
        return []
    stats = action_stats(ctx.exploration, labels)
    enders = stats[stats["terminate_rate"] >= 0.5].sort_values(
        ["mean_reward", "terminate_rate", "n"], ascending=False, kind="stable").head(MAX_SHORT)
    if enders.empty:
        ctx.notes["failure_shortcut"] = "no call ended episodes in exploration, so there is no short strategy"
        return []
    shorts = [RepeatPolicy(int(a), name=f"short:{labels[int(a)] if labels else a}",
                           description=f"end the episode at once: always {describe_call(int(a), labels)}")
              for a in enders["action"]]
    # Faults go into the tools that do the work, not into the calls that end the episode: giving
    # up or answering is the agent's own move, not a flaky backend.
    catalogue = env.unwrapped.catalogue
    ending_tools = {catalogue[int(a)].tool for a in enders["action"]}
    work_tools = sorted(set(env.unwrapped.tools) - ending_tools)
    runs.tools = work_tools or None
    quit_action = int(enders["action"].iloc[0])
    quitter = QuitOnFailurePolicy(persist, quit_action, description=(
        f"{persist.describe()}, but {describe_call(quit_action, labels)} at the first failed call"))
    rng = ctx.rng("sweep")
    rows, per_rate = [], {}
    for rate in SWEEP_RATES:
        recs = {p.name: runs.get(p, rate) for p in (persist, quitter, *shorts)}
        if any(r is None for r in recs.values()):
            ctx.notes["sweep_stopped_for_time_at_rate"] = rate
            break
        rows.extend(_row(rate, p, recs[p.name].episodes, rng) for p in (persist, quitter, *shorts))
        per_rate[rate] = recs
    if not rows:
        return []
    table = pd.DataFrame(rows)
    ctx.table("failure_sweep", table)
    if 0.0 not in per_rate:
        return []
    ref = fee["step_reward_reference"]

    def at(rate: float) -> dict:
        recs = per_rate[rate]
        # The short strategy with the strongest evidence; Bonferroni over all of them keeps the
        # choice honest (min p times the number of candidates is a valid p-value).
        tests = {p.name: _paired(recs[p.name], recs[persist.name], rng) for p in shorts}
        best = min(shorts, key=lambda p: (tests[p.name]["p_value"], -(tests[p.name]["diff"] or 0)))
        cmp = tests[best.name]
        cmp["p_bonferroni"] = min(1.0, cmp["p_value"] * len(shorts))
        quit_cmp = _paired(recs[quitter.name], recs[persist.name], rng)
        # The same comparisons with every failure's charge paid back: what is left is not the charge.
        for c, name in ((cmp, best.name), (quit_cmp, quitter.name)):
            m = charge.refunded_returns(recs[name], ref).merge(
                charge.refunded_returns(recs[persist.name], ref), on="seed", suffixes=("_a", "_b"))
            c["diff_if_failures_cost_a_step"] = float((m["return_a"] - m["return_b"]).mean()) if len(m) else None
        return {"best": best, "short": cmp, "quit": quit_cmp}

    # What persisting earns when no call fails (evidence only; ``wins`` asks the refunded question).
    natural_persist = per_rate[0.0][persist.name].episodes
    clean = natural_persist[(natural_persist["n_tool_errors"] + natural_persist["n_tool_timeouts"]) == 0]
    flawless = float(clean["return"].mean()) if len(clean) >= 3 else success_return(natural_persist)[0]
    alpha = ctx.config.alpha

    def wins(c: dict, p: float) -> bool:
        # Only the charges make it pay: with failures costing just their step, persisting would earn
        # more. (A short strategy that earns as much even then is an exploit whatever the tools do,
        # exploit-policy / reward-without-success, or giving up beating failing slowly: no flaw.)
        caused = c["diff_if_failures_cost_a_step"] is not None and c["diff_if_failures_cost_a_step"] < 0
        return (c["diff"] or 0) > 0 and not c["underpowered"] and p <= alpha and c["diff_ci"][0] > 0 and caused

    results = {rate: at(rate) for rate in per_rate}
    crossover = next((r for r in sorted(results) if wins(results[r]["short"], results[r]["short"]["p_bonferroni"])), None)
    zero = results[0.0]
    rate0 = table[table["rate"] == 0.0].set_index("policy")
    persist_success = float(rate0.loc[persist.name, "success_rate"])
    best_short_success = float(rate0.loc[zero["best"].name, "success_rate"])
    natural = float(rate0.loc[persist.name, "observed_failure_rate"])
    evidence: dict[str, Any] = {
        "behaviour": "quit", "reward_path": "env",
        "natural_failure_rate": natural,
        "natural_failure_rate_source": "calls of the persisting policy at injected rate 0",
        "exploration_failure_rate": natural_failure_rate(ctx.exploration.episodes),
        "persist_policy": persist.describe(),
        "short_policy": zero["best"].describe(),
        "quit_policy": quitter.describe(),
        "crossover_rate": crossover,
        "rates": list(per_rate),
        "injected_tools": runs.tools or sorted(env.unwrapped.tools),
        "n_natural": len(runs.natural_seeds),
        "n_per_injected_rate": len(runs.sweep_seeds),
        "persist_mean_return": zero["short"]["mean_persist"],
        "persist_return_without_failures": flawless,
        "short_mean_return": zero["short"]["mean_short"],
        "quit_mean_return": zero["quit"]["mean_short"],
        "persist_success_rate": persist_success,
        "short_success_rate": best_short_success,
        "failure_charge": fee,
        "short_minus_persist_if_failures_cost_a_step": zero["short"]["diff_if_failures_cost_a_step"],
        "quit_minus_persist_if_failures_cost_a_step": zero["quit"]["diff_if_failures_cost_a_step"],
        "sweep_best_short_vs_persist": {
            float(r): {"short": res["best"].name, "short_mean": res["short"]["mean_short"],
                       "persist_mean": res["short"]["mean_persist"], "p_bonferroni": res["short"]["p_bonferroni"]}
            for r, res in results.items()},
    }
    if persist_success <= best_short_success:
        ctx.notes["failure_shortcut"] = (f"the persisting policy ({persist.describe()}) succeeds no more often "
                                         "than ending at once, so it is no honest yardstick")
        return []
    cost = _charge_words(fee)
    short_records = per_rate[0.0][zero["best"].name]
    if not wins(zero["short"], zero["short"]["p_bonferroni"]):
        look = second_look(ctx, persist, zero["best"], short_records, per_rate[0.0][persist.name], ref)
        if look is not None:
            evidence["second_look"] = {k: look["short"][k] for k in ("second_look", "diff", "p_value", "mean_short",
                                                                     "mean_persist")}
            if wins(look["short"], look["short"]["p_bonferroni"]):
                zero = {**zero, "short": look["short"]}
                short_records = look["records"]
                evidence.update(persist_mean_return=look["short"]["mean_persist"],
                                short_mean_return=look["short"]["mean_short"])
    if wins(zero["short"], zero["short"]["p_bonferroni"]):
        ctx.keep(short_records)
        examples = short_records.episodes["episode_id"].head(4).tolist()
        evidence.update(p_value=zero["short"]["p_bonferroni"], p_raw=zero["short"]["p_value"],
                        diff=zero["short"]["diff"], diff_ci=zero["short"]["diff_ci"],
                        test=("paired t-test on returns, short strategy vs persisting, same fresh seeds, "
                              "one-sided at alpha/2 (a second, larger look; see failure_confirm)"
                              if "second_look" in zero["short"] else
                              f"paired t-test on returns, short strategy vs persisting, same seeds, "
                              f"one-sided; Bonferroni over the {len(shorts)} short strategies"))
        return [Finding(
            code="failure-shortcut", severity=Severity.FAIL,
            title="giving up pays more than persisting through tool failures",
            summary=(f"At the env's own tool failure rate ({natural:.0%} of calls), \"{zero['best'].describe()}\" "
                     f"earns {evidence['short_mean_return']:.3g} per episode against "
                     f"{evidence['persist_mean_return']:.3g} for persisting ({persist.describe()}), because "
                     f"{cost}: a return-maximising agent never tries."),
            evidence=evidence, examples=examples, fix=FIX_SHORTCUT)]
    if wins(zero["quit"], zero["quit"]["p_value"]):
        ctx.keep(per_rate[0.0][quitter.name])
        evidence.update(p_value=zero["quit"]["p_value"], diff=zero["quit"]["diff"], diff_ci=zero["quit"]["diff_ci"],
                        test="paired t-test on returns, quit-on-failure vs persisting, same seeds, one-sided")
        ex = _quit_after_failure(per_rate[0.0][quitter.name], quit_action)
        return [Finding(
            code="failure-shortcut", severity=Severity.WARN,
            title="giving up after a tool failure pays more than persisting",
            summary=(f"At the env's own tool failure rate ({natural:.0%} of calls), quitting at the first failed "
                     f"call earns {evidence['quit_mean_return']:.3g} per episode against "
                     f"{evidence['persist_mean_return']:.3g} for persisting, because {cost}; trying at all "
                     "still beats giving up at once, so an agent learns to quit whenever a call fails."),
            evidence=evidence, examples=ex, fix=FIX_SHORTCUT)]
    if crossover is not None:
        c = results[crossover]["short"]
        evidence.update(diff_at_crossover=c["diff"], p_at_crossover=c["p_bonferroni"])
        ctx.keep(per_rate[crossover][results[crossover]["best"].name])
        examples = per_rate[crossover][results[crossover]["best"].name].episodes["episode_id"].head(3).tolist()
        return [Finding(
            code="failure-shortcut", severity=Severity.INFO,
            title=f"giving up overtakes persisting at an injected failure rate of {crossover:.0%}",
            summary=(f"With {crossover:.0%} of tool calls failing on top of the env's own {natural:.0%}, "
                     f"\"{results[crossover]['best'].describe()}\" earns more than persisting; if production "
                     f"tools fail that often, agents trained there will learn to give up ({cost})."),
            evidence=evidence, examples=examples, fix=FIX_SHORTCUT)]
    return []


def _charge_words(fee: dict) -> str:
    """The failure charge in words: "each failed `search` call costs 0.5 beyond the step it takes"."""
    by_call: dict[str, float] = {}
    for which, amount in fee["charge_per_failure"].items():
        call = which.rpartition(" (")[0]
        by_call[call] = max(amount, by_call.get(call, 0.0))
    calls = sorted(by_call, key=lambda c: (-by_call[c], c))
    names = ", ".join(f"`{c}`" for c in calls[:3]) + (" and others" if len(calls) > 3 else "")
    return f"each failed {names} call costs up to {by_call[calls[0]]:.3g} beyond the step it takes"


def _quit_after_failure(records: Records, quit_action: int, n: int = 3) -> list[int]:
    """Episodes that quit right after a failed call (those that never met a failure are not the behaviour)."""
    steps = records.steps.sort_values(["episode_id", "step"], kind="stable")
    last = steps.groupby("episode_id").tail(1)
    before = steps.groupby("episode_id")["tool_status"].shift(1).loc[last.index]
    hit = last[(last["action"] == quit_action) & before.isin(FAILED).to_numpy()]
    return [int(e) for e in hit["episode_id"].head(n)]


def run(ctx: ProbeContext) -> list[Finding]:
    discrete_tool_env = ctx.is_tool_env and isinstance(ctx.env.action_space, gym.spaces.Discrete)
    runs = _Runs(ctx) if discrete_tool_env else None
    injected, arms, pairs = injection_tests(ctx, ctx.rng("injection")) if runs is not None else ({}, {}, {})
    findings = failure_rewarded(ctx, runs, injected, arms)
    ref = charge.step_reference(ctx.exploration)
    alpha = ctx.config.alpha
    if runs is not None:
        findings += shortcut_sweep(ctx, runs, charge.injected_charges(pairs, ref, ctx.action_labels,
                                                                      ctx.rng("charge"), alpha))
    else:
        findings += shortcut_exploration(ctx, charge.exploration_charges(ctx.exploration.steps, ref,
                                                                         ctx.rng("charge"), alpha))
    return findings


probe = Probe(
    name="failures",
    run=run,
    summary="failed tool calls that pay, and failures that make giving up pay (fault injection, failure sweep)",
    codes=("failure-rewarded", "failure-shortcut"),
    weight=1.0,
    order=55,
)
