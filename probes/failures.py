"""Probe ``failures``: do tool failures pay, or make giving up pay?

Incentives detected:

- ``failure-rewarded``: a step whose tool failed (``error``, or ``timeout``) pays more than the
  same step succeeding, so an agent that can make calls fail (bad arguments, calls out of order)
  learns to.
- ``failure-shortcut``: tool failures make short trajectories (give up, answer at once) pay better
  than persisting, so under flaky tools an agent learns to quit instead of retrying.

Signals. For ``failure-rewarded``: the step reward of each action by tool status in the scan's
exploration (Mann–Whitney, failed vs ok); on a ``ToolEnv``, confirmed by fault injection: the
same seeds and action prefixes (taken from exploration) replayed with and without a fault forced
on the target call, comparing that step's reward pair by pair (Wilcoxon signed-rank). Holm runs
across the probe's tests; the raw p of the key test is ``evidence["p_value"]``. Severity: ``fail``
when a failed call alone, or an agent that makes that call fail at will (the call repeated under
an injected 100% fault rate), earns at least the honest success return; ``warn`` otherwise.

For ``failure-shortcut`` on a ``ToolEnv``: a sweep of injected error rates (``SWEEP_RATES`` on
every tool except those of the calls that end episodes: giving up is the agent's move, not a
flaky backend) running, on the same seeds, the short strategies (each call that ends episodes,
repeated), the honest persisting policy (the env's ``oracle()`` when it has one, else one
derived from exploration that retries each needed call until it works) and "quit on failure"
(persist, but end the episode at the first failed call), compared by paired t-tests on returns
(Bonferroni over the short strategies). Rate 0 is the env as it is (its own, natural failures).
A return-maximising agent compares expected returns: if a short strategy earns at least what
persisting earns at the env's own failure rate, it never tries -> ``fail``; if only quitting
after a failure beats persisting, it gives up whenever a call fails -> ``warn``; if short
strategies only overtake persisting at injected rates -> ``info`` (the crossover rate is worth
knowing if production tools fail more often). A short strategy that earns as much as persisting
does when no call fails is an exploit whatever the tools do (``exploits`` / ``intent`` report
it), not a failure shortcut, and is left out. On plain Gymnasium envs the probe reads
exploration only: a regression of return on success, length and failure count (a failure must
cost reward beyond its step) and, after a first failure, the remaining return of episodes that
ended within a step against those that went on.

Known false positives: step rewards that depend on state can differ between failed and ok calls
for reasons other than the failure (exploration comparison only; the paired replay controls it).
A derived persisting policy can be a poor stand-in for an honest agent; the probe then requires
it to succeed more often than the short strategies before it claims anything.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.findings import Finding, Severity
from envaudit.policies import (
    QuitOnFailurePolicy,
    RepeatPolicy,
    Replay,
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
from envaudit.stats import MIN_SAMPLES, bootstrap_ci, compare, holm, paired_compare

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
        self.natural_seeds = ctx.seeds(ctx.config.scaled(NATURAL_EPISODES), "sweep")
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


def _int_actions(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.loc[steps["action"].map(lambda a: isinstance(a, (int, np.integer))).astype(bool)]


# -- failure-rewarded: exploration ------------------------------------------------------------------
def exploration_tests(steps: pd.DataFrame, rng: np.random.Generator) -> dict[tuple[int, str], dict]:
    """Per (action, failed status): step rewards of failed vs ok calls of that action in exploration."""
    steps = _int_actions(steps[steps["tool_status"].notna()])
    out = {}
    for action, group in steps.groupby("action"):
        ok = group.loc[group["tool_status"] == TOOL_OK, "reward"].to_numpy(float)
        for status in FAILED:
            bad = group.loc[group["tool_status"] == status, "reward"].to_numpy(float)
            if len(ok) and len(bad):
                test = compare(bad, ok, rng, labels=("failed", "ok"))
                test.update(source="exploration", test="Mann-Whitney U, failed vs ok step rewards, one-sided",
                            tool=str(group.loc[group["tool_status"] == status, "tool_name"].iloc[0]))
                out[(int(action), status)] = test
    return out


# -- failure-rewarded: paired replays with an injected fault -----------------------------------------
def replay_items(exploration: Records, actions: Sequence[int], n: int, rng: np.random.Generator,
                 fresh_seeds: Sequence[int]) -> list[Replay]:
    """Up to ``n`` (seed, prefix + action) replays per action, from exploration episodes that made
    that call (preferring calls that went through, so the no-fault arm is a real success); the
    call as the first step of a fresh seed fills up the rest."""
    steps = _int_actions(exploration.steps)
    seed_of = exploration.episodes.set_index("episode_id")["seed"]
    by_episode = steps.groupby("episode_id")["action"].apply(list)
    items: list[Replay] = []
    for a in actions:
        occ = steps[steps["action"] == a]
        ok = occ[occ["tool_status"] == TOOL_OK]
        rest = occ[occ["tool_status"] != TOOL_OK]
        chosen = [ok.iloc[i] for i in rng.permutation(len(ok))] + [rest.iloc[i] for i in rng.permutation(len(rest))]
        seen: set[tuple[int, tuple[int, ...]]] = set()
        for row in chosen:
            if len(seen) >= n:
                break
            seed = seed_of.get(row["episode_id"])
            if seed is None or pd.isna(seed):
                continue
            seq = tuple(int(x) for x in by_episode[row["episode_id"]][: int(row["step"])]) + (int(a),)
            if (int(seed), seq) not in seen:
                seen.add((int(seed), seq))
        for seed in fresh_seeds:
            if len(seen) >= n:
                break
            seen.add((int(seed), (int(a),)))
        items.extend(Replay(s, q) for s, q in sorted(seen))
    return items


def injection_tests(ctx: ProbeContext, rng: np.random.Generator) -> tuple[dict[tuple[int, str], dict], dict]:
    """Paired replays of each action with and without a forced error / timeout on that call."""
    steps = _int_actions(ctx.exploration.steps)
    n_actions = int(ctx.env.action_space.n)
    counts = steps["action"].value_counts()
    actions = sorted(range(n_actions), key=lambda a: (-int(counts.get(a, 0)), a))[:MAX_ACTIONS]
    # Never below what a paired test needs to reach significance after Holm, even under --quick.
    n = max(INJECTION_MIN_PAIRS, ctx.config.scaled(INJECTION_PAIRS))
    items = replay_items(ctx.exploration, actions, n, rng, ctx.seeds(n, "fresh"))
    arms: dict[str | None, tuple[ReplayPlan, Records]] = {}
    for fault in (None, *FAILED):
        if ctx.over_cap(f"fault injection arm {fault or 'ok'!r}"):
            return {}, {}
        plan = ReplayPlan(items, fault, name=f"replay-{fault or 'ok'}")
        result = ctx.run(plan.policy(), plan.seeds, wrappers=plan.wrappers(), tags={"fault": fault or "none"})
        arms[fault] = (plan, result.records)
    base = arms[None][0].last_steps(arms[None][1])
    labels = ctx.action_labels
    catalogue = getattr(ctx.env.unwrapped, "catalogue", None)
    out = {}
    for status in FAILED:
        plan, records = arms[status]
        faulted = plan.last_steps(records)
        eid_of = {v: k for k, v in plan.episode_replay.items()}
        for a in actions:
            pairs = [(faulted[i][0], base[i][0], eid_of.get(i)) for i, it in enumerate(items)
                     if it.actions[-1] == a and i in base and i in faulted
                     and base[i][1] == TOOL_OK and faulted[i][1] == status and faulted[i][2]]
            if not pairs:
                continue
            bad, ok, eids = (list(x) for x in zip(*pairs, strict=True))
            test = paired_compare(bad, ok, rng, labels=("failed", "ok"))
            tool = catalogue[a].tool if catalogue is not None else (labels[a] if labels else str(a))
            test.update(source="fault injection", tool=tool, examples=[e for e in eids if e is not None][:3],
                        test="Wilcoxon signed-rank, same seed and prefix with vs without the fault, one-sided")
            out[(a, status)] = test
    return out, {k: v[1] for k, v in arms.items()}


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


def failure_rewarded(ctx: ProbeContext, runs: _Runs | None) -> list[Finding]:
    rng = ctx.rng("rewarded")
    explored = exploration_tests(ctx.exploration.steps, rng)
    injected, arms = (injection_tests(ctx, rng) if runs is not None else ({}, {}))
    # One key test per (action, status): the paired replay where it has enough pairs, else exploration.
    primary = {}
    for key in sorted(set(explored) | set(injected)):
        test = injected.get(key)
        if test is None or test["underpowered"]:
            test = explored.get(key, test)
        primary[key] = test
    if not primary:
        return []
    keys = list(primary)
    adjusted = dict(zip(keys, holm([primary[k]["p_value"] for k in keys]), strict=True))
    by_tool: dict[str, list[tuple[int, str]]] = {}
    for key in keys:
        t = primary[key]
        if (t["diff"] is not None and t["diff"] > 0 and not t["underpowered"]
                and adjusted[key] <= ctx.config.alpha and t["diff_ci"][0] > 0):
            by_tool.setdefault(t["tool"], []).append(key)
    if not by_tool:
        return []
    honest, honest_source = honest_success(ctx, runs)
    labels = ctx.action_labels
    findings = []
    for tool, hits in sorted(by_tool.items()):
        key = min(hits, key=lambda k: (primary[k]["p_value"], -primary[k]["diff"]))
        findings.append(_rewarded_finding(ctx, tool, key, hits, primary, adjusted, explored, arms,
                                          honest, honest_source, labels))
    return findings


def _rewarded_finding(ctx, tool, key, hits, primary, adjusted, explored, arms, honest, honest_source,
                      labels) -> Finding:
    action, status = key
    test = primary[key]
    farm = _farm(ctx, action, tool, status)
    farm_mean = float(farm.episodes["return"].mean()) if farm is not None and len(farm.episodes) else None
    failed_mean = test["mean_failed"]
    as_much = honest is not None and (failed_mean >= honest or (farm_mean is not None and farm_mean >= honest))
    severity = Severity.FAIL if as_much else Severity.WARN
    call = describe_call(action, labels)
    examples = list(test.get("examples", []))
    if examples and arms:
        ctx.keep(arms[status])
        ctx.keep(arms[None])
    if farm is not None:
        ctx.keep(farm)
        examples += farm.episodes["episode_id"].head(1).tolist()

    def name(k: tuple[int, str]) -> str:
        return f"{labels[k[0]] if labels and k[0] < len(labels) else k[0]} ({k[1]})"

    evidence = {
        # A timed-out step that pays is the timeout incentive seen one step at a time.
        "behaviour": "timeout" if status == TOOL_TIMEOUT else "tool-failure", "reward_path": "env",
        "p_value": test["p_value"],
        "p_holm_in_probe": float(adjusted[key]),
        "tests_in_probe": len(primary),
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
    if severity == Severity.FAIL:
        tail = farm_text + (f", at least an honest success ({honest:.3g})" if farm_mean is not None
                            else f"; one failed call pays at least an honest success ({honest:.3g})")
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


def natural_failure_rate(episodes: pd.DataFrame) -> float:
    calls = episodes["n_tool_calls"].sum()
    return float((episodes["n_tool_errors"] + episodes["n_tool_timeouts"]).sum() / calls) if calls else 0.0


def shortcut_sweep(ctx: ProbeContext, runs: _Runs) -> list[Finding]:
    env = ctx.env
    labels = ctx.action_labels
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

    def at(rate: float) -> dict:
        recs = per_rate[rate]
        # The short strategy with the strongest evidence; Bonferroni over all of them keeps the
        # choice honest (min p times the number of candidates is a valid p-value).
        tests = {p.name: _paired(recs[p.name], recs[persist.name], rng) for p in shorts}
        best = min(shorts, key=lambda p: (tests[p.name]["p_value"], -(tests[p.name]["diff"] or 0)))
        cmp = tests[best.name]
        cmp["p_bonferroni"] = min(1.0, cmp["p_value"] * len(shorts))
        quit_cmp = _paired(recs[quitter.name], recs[persist.name], rng)
        return {"best": best, "short": cmp, "quit": quit_cmp}

    # What persisting earns when no call fails. A short strategy that earns that much is an exploit
    # whatever the tools do (exploit-policy / reward-without-success), not a failure shortcut.
    natural_persist = per_rate[0.0][persist.name].episodes
    clean = natural_persist[(natural_persist["n_tool_errors"] + natural_persist["n_tool_timeouts"]) == 0]
    flawless = float(clean["return"].mean()) if len(clean) >= 3 else success_return(natural_persist)[0]
    alpha = ctx.config.alpha

    def wins(c: dict, p: float) -> bool:
        caused = flawless is None or c["mean_short"] < flawless
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
        "sweep_best_short_vs_persist": {
            float(r): {"short": res["best"].name, "short_mean": res["short"]["mean_short"],
                       "persist_mean": res["short"]["mean_persist"], "p_bonferroni": res["short"]["p_bonferroni"]}
            for r, res in results.items()},
    }
    if persist_success <= best_short_success:
        ctx.notes["failure_shortcut"] = (f"the persisting policy ({persist.describe()}) succeeds no more often "
                                         "than ending at once, so it is no honest yardstick")
        return []
    examples = []
    for name in (zero["best"].name, persist.name):
        ep = per_rate[0.0][name].episodes
        examples += ep["episode_id"].head(2).tolist()
    if wins(zero["short"], zero["short"]["p_bonferroni"]):
        ctx.keep(per_rate[0.0][zero["best"].name])
        ctx.keep(per_rate[0.0][persist.name])
        evidence.update(p_value=zero["short"]["p_bonferroni"], p_raw=zero["short"]["p_value"],
                        diff=zero["short"]["diff"], diff_ci=zero["short"]["diff_ci"],
                        test=f"paired t-test on returns, short strategy vs persisting, same seeds, "
                             f"one-sided; Bonferroni over the {len(shorts)} short strategies")
        return [Finding(
            code="failure-shortcut", severity=Severity.FAIL,
            title="giving up pays more than persisting through tool failures",
            summary=(f"At the env's own tool failure rate ({natural:.0%} of calls), \"{zero['best'].describe()}\" "
                     f"earns {evidence['short_mean_return']:.3g} per episode against "
                     f"{evidence['persist_mean_return']:.3g} for persisting ({persist.describe()}): "
                     "a return-maximising agent never tries."),
            evidence=evidence, examples=examples, fix=FIX_SHORTCUT)]
    if wins(zero["quit"], zero["quit"]["p_value"]):
        ctx.keep(per_rate[0.0][quitter.name])
        ctx.keep(per_rate[0.0][persist.name])
        evidence.update(p_value=zero["quit"]["p_value"], diff=zero["quit"]["diff"], diff_ci=zero["quit"]["diff_ci"],
                        test="paired t-test on returns, quit-on-failure vs persisting, same seeds, one-sided")
        ex = per_rate[0.0][quitter.name].episodes["episode_id"].head(2).tolist()
        return [Finding(
            code="failure-shortcut", severity=Severity.WARN,
            title="giving up after a tool failure pays more than persisting",
            summary=(f"At the env's own tool failure rate ({natural:.0%} of calls), quitting at the first failed "
                     f"call earns {evidence['quit_mean_return']:.3g} per episode against "
                     f"{evidence['persist_mean_return']:.3g} for persisting, though trying at all still beats "
                     "giving up at once: an agent learns to quit whenever a call fails."),
            evidence=evidence, examples=ex, fix=FIX_SHORTCUT)]
    if crossover is not None:
        c = results[crossover]["short"]
        evidence.update(diff_at_crossover=c["diff"], p_at_crossover=c["p_bonferroni"])
        return [Finding(
            code="failure-shortcut", severity=Severity.INFO,
            title=f"giving up overtakes persisting at an injected failure rate of {crossover:.0%}",
            summary=(f"With {crossover:.0%} of tool calls failing on top of the env's own {natural:.0%}, "
                     f"\"{results[crossover]['best'].describe()}\" earns more than persisting; if production "
                     "tools fail that often, agents trained there will learn to give up."),
            evidence=evidence, examples=[], fix=FIX_SHORTCUT)]
    return []


def shortcut_exploration(ctx: ProbeContext) -> list[Finding]:
    """Plain envs: does a failure cost reward beyond its step, and after one, does ending pay more?"""
    steps, eps = ctx.exploration.steps, ctx.exploration.episodes
    if eps.empty or "tool_status" not in steps or not steps["tool_status"].isin(FAILED).any():
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
    failed = steps[steps["tool_status"].isin(FAILED)].groupby("episode_id")["step"].min()
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
    severity = Severity.FAIL if honest is not None and cmp["mean_short"] >= honest else Severity.WARN
    evidence = {
        "behaviour": "quit", "reward_path": "env",
        "p_value": cmp["p_value"], "test": "Mann-Whitney U on the return after the first failure, "
        "ended within a step vs went on, one-sided", "mean_after_failure_short": cmp["mean_short"],
        "mean_after_failure_persist": cmp["mean_persist"], "n_short": cmp["n_short"], "n_persist": cmp["n_persist"],
        "diff_ci": cmp["diff_ci"], "failure_cost": float(coef), "failure_cost_ci": cost_ci,
        "failure_cost_model": "OLS of return on " + ("success, " if has_success else "") + "length, failures",
        "honest_after_failure_return": honest, "natural_failure_rate": natural_failure_rate(eps),
    }
    return [Finding(
        code="failure-shortcut", severity=severity,
        title="after a tool failure, ending the episode pays more than persisting",
        summary=(f"Each tool failure costs {-coef:.3g} reward beyond its step, and after a first failure, episodes "
                 f"that ended within a step earned {cmp['mean_short']:.3g} from there against "
                 f"{cmp['mean_persist']:.3g} for those that went on (exploration, n={cmp['n_short']}+"
                 f"{cmp['n_persist']})."),
        evidence=evidence, examples=[int(i) for i in list(short_ids[:2]) + list(persist_ids[:1])],
        fix=FIX_SHORTCUT)]


def run(ctx: ProbeContext) -> list[Finding]:
    discrete_tool_env = ctx.is_tool_env and isinstance(ctx.env.action_space, gym.spaces.Discrete)
    runs = _Runs(ctx) if discrete_tool_env else None
    findings = failure_rewarded(ctx, runs)
    findings += shortcut_sweep(ctx, runs) if runs is not None else shortcut_exploration(ctx)
    return findings


probe = Probe(
    name="failures",
    run=run,
    summary="failed tool calls that pay, and failures that make giving up pay (fault injection, failure sweep)",
    codes=("failure-rewarded", "failure-shortcut"),
    weight=1.0,
    order=55,
)
