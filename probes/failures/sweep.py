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

Signals. For ``failure-rewarded``: see ``failure_rewarded`` (exploration, fault injection on a
``ToolEnv``, targeted top-up episodes on a plain env: ``failure_topup``) and, for rewards that
depend on a preceding failure, ``failure_conditioned``.

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
A return-maximising agent compares expected returns (``shortcut_sweep`` finds which short path
pays, ``decisions.decide_failure_shortcut`` grades it): if a short strategy earns at least what
persisting earns at the env's own failure rate, it never tries -> ``fail``; if only quitting
after a failure beats persisting, it gives up whenever a call fails -> ``warn``; if short
strategies only overtake persisting at injected rates -> ``info`` (the crossover rate is worth
knowing if production tools fail more often). A short strategy that earns as much as persisting
does when no call fails is an exploit whatever the tools do (``exploits`` / ``intent`` report
it), not a failure shortcut, and is left out. On plain Gymnasium envs the probe reads
exploration only (``failure_plain``).

Known false positives: a derived persisting policy can be a poor stand-in for an honest agent;
the probe then requires it to succeed more often than the short strategies before it claims anything.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.findings import Finding
from envaudit.policies import (
    QuitOnFailurePolicy,
    RepeatPolicy,
    action_stats,
    describe_call,
    oracle_policy,
    persist_policy,
    success_return,
)
from envaudit.probe import ProbeContext
from envaudit.probes._shared.endings import step_reference
from envaudit.probes.failures import charge
from envaudit.probes.failures.confirm import DECISIVE_SHARE, second_look
from envaudit.probes.failures.decisions import decide_failure_shortcut
from envaudit.probes.failures.plain import natural_failure_rate, shortcut_exploration
from envaudit.probes.failures.rewarded import (
    failure_rewarded,
    injection_tests,
)
from envaudit.probes.failures.topup import topup_tests
from envaudit.protocol import SUCCESS, TOOL_FAILED
from envaudit.recording import Records
from envaudit.rollout import Policy
from envaudit.seeding import child_seed
from envaudit.stats import bootstrap_ci, paired_compare

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
        # Failing slowly costs only the step every step pays: giving up beating it is no flaw. The
        # note says what was not run, never that there is no failure-shortcut: an ending that pays
        # because a call failed is the failure-conditioned check's, and may be filed beside it.
        ctx.notes["failure_shortcut"] = (
            "no failure-rate sweep: tool failures cost only the step they take (no failed call paid less "
            f"than the same call working and less than the cheapest ordinary step, {fee['step_reward_reference']}), "
            "so what failures cost cannot make giving up beat persisting; an ending that pays because the "
            "call before it failed is checked separately (failure-conditioned)")
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

    def wins(c: dict, p: float, level: float = alpha) -> bool:
        # Only the charges make it pay: with failures costing just their step, persisting would earn
        # more. (A short strategy that earns as much even then is an exploit whatever the tools do,
        # exploit-policy / reward-without-success, or giving up beating failing slowly: no flaw.)
        caused = c["diff_if_failures_cost_a_step"] is not None and c["diff_if_failures_cost_a_step"] < 0
        return (c["diff"] or 0) > 0 and not c["underpowered"] and p <= level and c["diff_ci"][0] > 0 and caused

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
    short_records = per_rate[0.0][zero["best"].name]
    # A first look that is not decided well inside alpha is close: the scan's Holm correction over
    # the other probes' tests may still demote it. A second, larger look on fresh seeds settles it,
    # and the smaller of the two p-values stands (``confirm`` states the error rate of the pair).
    first_p = zero["short"]["p_bonferroni"]
    if not wins(zero["short"], first_p, alpha * DECISIVE_SHARE):
        look = second_look(ctx, persist, zero["best"], short_records, per_rate[0.0][persist.name], ref)
        if look is not None:
            evidence["second_look"] = {k: look["short"][k] for k in ("second_look", "diff", "p_value", "mean_short",
                                                                     "mean_persist")}
            evidence["second_look"]["first_look_p"] = first_p
            if wins(look["short"], look["short"]["p_bonferroni"]) and look["short"]["p_bonferroni"] < first_p:
                zero = {**zero, "short": look["short"]}
                short_records = look["records"]
                evidence.update(persist_mean_return=look["short"]["mean_persist"],
                                short_mean_return=look["short"]["mean_short"])
    # Which short path pays, the most direct first (``decide_failure_shortcut`` grades it): a short
    # strategy at the env's own failure rate, else quitting at the first failure there, else a short
    # strategy once faults are injected on top. Its records are kept, so every example resolves.
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
        pays, short = "give-up", zero["best"]
    elif wins(zero["quit"], zero["quit"]["p_value"]):
        ctx.keep(per_rate[0.0][quitter.name])
        evidence.update(p_value=zero["quit"]["p_value"], diff=zero["quit"]["diff"], diff_ci=zero["quit"]["diff_ci"],
                        test="paired t-test on returns, quit-on-failure vs persisting, same seeds, one-sided")
        examples = _quit_after_failure(per_rate[0.0][quitter.name], quit_action)
        pays, short = "quit-on-failure", zero["best"]
    elif crossover is not None:
        c = results[crossover]["short"]
        evidence.update(diff_at_crossover=c["diff"], p_at_crossover=c["p_bonferroni"])
        ctx.keep(per_rate[crossover][results[crossover]["best"].name])
        examples = per_rate[crossover][results[crossover]["best"].name].episodes["episode_id"].head(3).tolist()
        pays, short = "give-up-at-injected-rate", results[crossover]["best"]
    else:
        return []
    return [decide_failure_shortcut("sweep", {"pays": pays, "short_policy": short.describe(),
                                              "evidence": evidence, "examples": examples})]


def _quit_after_failure(records: Records, quit_action: int, n: int = 3) -> list[int]:
    """Episodes that quit right after a failed call (those that never met a failure are not the behaviour)."""
    steps = records.steps.sort_values(["episode_id", "step"], kind="stable")
    last = steps.groupby("episode_id").tail(1)
    before = steps.groupby("episode_id")["tool_status"].shift(1).loc[last.index]
    hit = last[(last["action"] == quit_action) & before.isin(TOOL_FAILED).to_numpy()]
    return [int(e) for e in hit["episode_id"].head(n)]


def run(ctx: ProbeContext) -> list[Finding]:
    discrete_tool_env = ctx.is_tool_env and isinstance(ctx.env.action_space, gym.spaces.Discrete)
    runs = _Runs(ctx) if discrete_tool_env else None
    if runs is not None:
        injected, arms, pairs = injection_tests(ctx, ctx.rng("injection"))
    else:  # nothing to inject faults into: repeat calls until enough of them failed on their own
        injected, arms, pairs = topup_tests(ctx, ctx.rng("topup")), {}, {}
    findings = failure_rewarded(ctx, runs, injected, arms)
    ref = step_reference(ctx.exploration)
    alpha = ctx.config.alpha
    if runs is not None:
        findings += shortcut_sweep(ctx, runs, charge.injected_charges(pairs, ref, ctx.action_labels,
                                                                      ctx.rng("charge"), alpha))
    else:
        findings += shortcut_exploration(ctx, charge.exploration_charges(ctx.exploration.steps, ref,
                                                                         ctx.rng("charge"), alpha))
    return findings


