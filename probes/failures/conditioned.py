"""Failure-conditioned rewards, for the ``failures`` probe: does a step pay more because the call
right before it failed?

A reward can depend on a preceding tool failure without the failed step itself paying anything:
handing off, quitting or retrying *right after* a failed call pays, the same move after a working
call does not. An agent then learns to wait for (or provoke) failures and cash them in. When the
move ends the episode (give up, hand off, answer) the failure makes a short trajectory pay:
``failure-shortcut``, with the condition named. When it does not (a retry that pays more after a
failure) a step pays more because of the failure: ``failure-rewarded``. One finding per next action:
``finding`` measures it, and ``decisions.decide_failure_shortcut`` or ``decide_failure_rewarded``
(basis ``"conditioned"``) grades it: ``fail`` when the episode that does it earns at least an honest
success, else ``warn``.

Signals. On a ``ToolEnv``, fault injection: (seed, prefix + call) pairs taken from exploration are
replayed with one more action ``b`` after the call, once with the call working and once with an
error (or a timeout) forced on it; ``b``'s reward is compared pair by pair (Wilcoxon signed-rank,
one-sided), for each call, fault and next action. Only pairs whose call worked without a fault
count, so the fresh starts are sized by how often the call works. On a plain Gymnasium env,
targeted episodes: the call, then each action that ends episodes, from fresh resets, the call's
own failure draw splitting them (Mann–Whitney, one-sided), in rounds until each side has enough;
and exploration: the reward of the step right after a failed call against right after an ok call
of the same tool, with the same next action. All also require the two steps together (the call
and ``b``) to pay more after the failure, so a reward that only moves from one step to the next
(a retry earning the progress the failed call did not, a potential handed back at the end) is not
taken for a failure-conditioned one. In that sum the failed call counts at most what the cheapest
ordinary step pays (``endings.step_reference``): what a failed call pays beyond that is the
failed step's own reward (``failure-rewarded``'s question, asked once there), and counted here it
would make the potential handed back after a working call read as a reward for ending after a
failure. The caller runs Holm across these tests and its own.

Known false positives: on plain envs the states after a failed and after an ok call differ (the ok
call made progress), so a next step that pays for state can differ for that reason; the two-step
requirement and the one-sided direction (after a failure the agent is usually *behind*) keep this
rare. Fault injection holds the seed and prefix fixed and has no such confound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from envaudit.findings import Finding
from envaudit.policies import Replay, ReplayPlan, action_stats, oracle_policy, success_return
from envaudit.probe import ProbeContext
from envaudit.probes._shared.endings import step_reference
from envaudit.probes.failures.decisions import decide_failure_rewarded, decide_failure_shortcut
from envaudit.protocol import TOOL_ERROR, TOOL_FAILED, TOOL_OK, TOOL_TIMEOUT
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES, bootstrap_ci, compare, paired_compare, signed_rank_p

PAIRS = 16
"""(seed, prefix) pairs per call and next action; ``--quick`` uses a quarter, never under ``MIN_PAIRS``."""
MIN_PAIRS = 12
"""Enough identical pairs for an exact signed-rank p of 2^-12, which survives Holm over ~100 tests."""
MIN_OK_RATE = 0.25
"""A call that worked less often than this in exploration gets at most 4x the fresh starts."""
MAX_TARGETS = 4
"""At most this many calls (the most made in exploration among those that rarely end episodes) are
failed on purpose."""
TARGETED_BATCH = 32
"""Targeted episodes per ending action in each round, the first one a pilot (plain envs)."""
TARGETED_MAX_EPISODES = 384
"""Targeted episodes per failing call at most (plain envs): ``MIN_PAIRS`` failures of a call that fails
1 time in 10, for 3 ending actions."""
MAX_NEXT = 8
"""At most this many next actions per call (the episode-ending ones first)."""


def int_actions(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.loc[steps["action"].map(lambda a: isinstance(a, (int, np.integer))).astype(bool)]


def natural_ok_rate(exploration: Records, action: int) -> float:
    """Share of ``action``'s calls in exploration that worked, Laplace-smoothed and at least
    ``MIN_OK_RATE`` (what sizes the fresh starts a replay test needs)."""
    steps = int_actions(exploration.steps)
    status = steps.loc[steps["action"] == action, "tool_status"]
    ok = int((status == TOOL_OK).sum())
    return max(MIN_OK_RATE, (ok + 1) / (len(status) + 2))


def replay_items(exploration: Records, actions: Sequence[int], n: int, rng: np.random.Generator,
                 fresh_seeds: Sequence[int], *, sized: bool = False) -> list[Replay]:
    """Up to ``n`` (seed, prefix + action) replays per action from exploration episodes whose call
    went through (so the no-fault arm is a real success), then the call as the first step of a fresh
    seed. A call that failed in exploration fails again when its seed and prefix are replayed, so
    those come last. ``sized``: the fresh starts are ``(n - found) / ok rate`` (``natural_ok_rate``),
    so that about ``n`` of them have a no-fault arm that worked (as far as ``fresh_seeds`` reaches)."""
    steps = int_actions(exploration.steps)
    seed_of = exploration.episodes.set_index("episode_id")["seed"]
    by_episode = steps.groupby("episode_id")["action"].apply(list)
    items: list[Replay] = []
    for a in actions:
        occ = steps[steps["action"] == a]
        ok = occ[occ["tool_status"] == TOOL_OK]
        rest = occ[occ["tool_status"] != TOOL_OK]
        seen: set[tuple[int, tuple[int, ...]]] = set()

        def take(rows, limit: int, seen=seen, a=a) -> None:
            for row in rows:
                if len(seen) >= limit:
                    break
                seed = seed_of.get(row["episode_id"])
                if seed is None or pd.isna(seed):
                    continue
                prefix = tuple(int(x) for x in by_episode[row["episode_id"]][: int(row["step"])])
                seen.add((int(seed), prefix + (int(a),)))

        take([ok.iloc[i] for i in rng.permutation(len(ok))], n)
        limit = n
        if sized and len(seen) < n:
            limit = len(seen) + math.ceil((n - len(seen)) / natural_ok_rate(exploration, a))
        for seed in fresh_seeds:
            if len(seen) >= limit:
                break
            seen.add((int(seed), (int(a),)))
        take([rest.iloc[i] for i in rng.permutation(len(rest))], limit)
        items.extend(Replay(s, q) for s, q in sorted(seen))
    return items


def failed_step_capped(reward: Any, step_ref: float | None) -> Any:
    """A failed call's reward as the two-step sums count it: at most what the cheapest ordinary
    step pays (what it pays beyond that is the failed step's own reward, not the next step's)."""
    return reward if step_ref is None else np.minimum(reward, step_ref)


def _label(ctx: ProbeContext, a: int) -> str:
    labels = ctx.action_labels
    return labels[a] if labels and 0 <= a < len(labels) else str(a)


# -- ToolEnv: fault injection ---------------------------------------------------------------------
def injection_tests(ctx: ProbeContext, rng: np.random.Generator) -> dict[tuple, dict]:
    """Per (call, fault, next action): ``b``'s reward right after the call failed vs worked, paired
    by seed and prefix. Keys are ``("conditioned", call, fault, b)``."""
    stats = action_stats(ctx.exploration, ctx.action_labels)
    if stats.empty:
        return {}
    work = stats[stats["terminate_rate"] < 0.5].sort_values(["n", "action"], ascending=[False, True], kind="stable")
    targets = [int(a) for a in work["action"].head(MAX_TARGETS)]
    ending = stats.sort_values(["terminate_rate", "action"], ascending=[False, True], kind="stable")["action"]
    nexts = [int(a) for a in ending][:MAX_NEXT]
    if not targets or not nexts:
        return {}
    n = max(MIN_PAIRS, ctx.config.scaled(PAIRS))
    # Only replays whose call worked without a fault form a pair: sized by how often it works.
    items = replay_items(ctx.exploration, targets, n, rng, ctx.seeds(math.ceil(n / MIN_OK_RATE), "conditioned-fresh"),
                         sized=True)
    replays = [Replay(it.seed, it.actions + (b,)) for it in items for b in nexts]
    arms: dict[str | None, tuple[ReplayPlan, Records]] = {}
    for fault in (None, *TOOL_FAILED):
        if ctx.over_cap(f"failure-conditioned replays ({fault or 'ok'} arm)"):
            return {}
        plan = ReplayPlan(replays, fault, name=f"conditioned-{fault or 'ok'}", fault_at=-2)
        result = plan.run(ctx, tags={"fault": fault or "none", "fault_on": "call before the last"})
        arms[fault] = (plan, result.records)
    base = arms[None][0].tail_steps(arms[None][1])
    catalogue = ctx.env.unwrapped.catalogue
    ref = step_reference(ctx.exploration)
    out: dict[tuple, dict] = {}
    for status in TOOL_FAILED:
        plan, records = arms[status]
        faulted = plan.tail_steps(records)
        groups: dict[tuple[int, int], list[tuple[dict, dict, int]]] = {}
        for i, r in enumerate(replays):
            f, o = faulted.get(i), base.get(i)
            if (f is None or o is None or o["prev_status"] != TOOL_OK
                    or f["prev_status"] != status or not f["prev_injected"]):
                continue
            groups.setdefault((r.actions[-2], r.actions[-1]), []).append((f, o, r.seed))
        for (a, b), pairs in sorted(groups.items()):
            # Rounded: rewards equal up to float noise (0.1 + 0.2 against 0.3) are equal.
            test = paired_compare(np.round([f["last_reward"] for f, _, _ in pairs], 9),
                                  np.round([o["last_reward"] for _, o, _ in pairs], 9), rng, labels=("failed", "ok"))
            two = np.round([(failed_step_capped(f["prev_reward"], ref) + f["last_reward"])
                            - (o["prev_reward"] + o["last_reward"])
                            for f, o, _ in pairs], 9)
            ended = [f for f, _, _ in pairs if f["last_terminated"]]
            ends = 2 * len(ended) >= len(pairs)
            test.update(
                source="fault injection", kind="conditioned", call=a, next=b, status=status, ends=ends,
                tool=catalogue[a].tool, call_label=_label(ctx, a), next_label=_label(ctx, b),
                two_step_diff=float(np.mean(two)), two_step_diff_ci=list(bootstrap_ci(two, rng)),
                two_step_p=signed_rank_p(two, alternative="greater"),
                path_returns=[f["return"] for f in ended],
                path_seeds=sorted({s for f, _, s in pairs if f["last_terminated"]}),
                examples=[f["episode_id"] for f, o, _ in pairs if f["last_reward"] > o["last_reward"]],
                records=(arms[status][1], arms[None][1]),
                test="Wilcoxon signed-rank on the next step's reward, same seed and prefix with vs without "
                     "a fault forced on the call before it, one-sided")
            out[("conditioned", a, status, b)] = test
    return out


# -- plain envs: exploration ----------------------------------------------------------------------
def _progress(steps: pd.DataFrame) -> list[frozenset]:
    """Per step (``steps`` sorted by episode and step): the tools that had worked in the episode
    before that step. Plain envs cannot replay a prefix, so this stands in for "the same state"."""
    out, seen, episode = [], set(), None
    for eid, tool, status in zip(steps["episode_id"], steps["tool_name"], steps["tool_status"], strict=True):
        if eid != episode:
            seen, episode = set(), eid
        out.append(frozenset(seen))
        if status == TOOL_OK and isinstance(tool, str):
            seen.add(tool)
    return out


def exploration_tests(exploration: Records, labels: Sequence[str] | None,
                      rng: np.random.Generator) -> dict[tuple, dict]:
    """Per (tool, fault, next action): the reward of the step right after a failed call of that tool
    against right after an ok one, same next action, matched on the progress made before the call
    (which tools had worked): each failed instance against the mean of its matched ok instances."""
    steps = int_actions(exploration.steps).sort_values(["episode_id", "step"], kind="stable")
    if steps.empty or not steps["tool_status"].isin(TOOL_FAILED).any():
        return {}
    nxt = steps.groupby("episode_id").shift(-1)
    pairs = pd.DataFrame({
        "episode_id": steps["episode_id"], "tool": steps["tool_name"], "status": steps["tool_status"],
        "progress": _progress(steps), "prev_reward": steps["reward"].astype(float), "next": nxt["action"],
        "next_reward": nxt["reward"], "next_terminated": nxt["terminated"],
    }).dropna(subset=["tool", "status", "next"])
    failed = pairs["status"].isin(TOOL_FAILED)
    prev = pairs["prev_reward"].where(~failed, failed_step_capped(pairs["prev_reward"], step_reference(exploration)))
    pairs["two_step"] = prev + pairs["next_reward"].astype(float)
    returns = exploration.episodes.set_index("episode_id")["return"]
    out: dict[tuple, dict] = {}
    for (tool, b), group in pairs.groupby(["tool", "next"]):
        ok = group[group["status"] == TOOL_OK].groupby("progress")[["next_reward", "two_step"]].mean()
        for status in TOOL_FAILED:
            bad = group[(group["status"] == status) & group["progress"].isin(ok.index)]
            if len(bad) < MIN_SAMPLES:
                continue
            # Rounded, so that the mean of equal rewards (-0.05 * 3 / 3) is not "more" by 1e-18.
            matched = ok.loc[bad["progress"]].round(9)
            test = paired_compare(bad["next_reward"].astype(float).round(9), matched["next_reward"], rng,
                                  labels=("failed", "ok"))
            two = paired_compare(bad["two_step"].round(9), matched["two_step"], rng)
            ended = bad[bad["next_terminated"].astype(bool)]["episode_id"].unique()
            ends = 2 * int(bad["next_terminated"].astype(bool).sum()) >= len(bad)
            # Rounded as the test is: an example must pay more, not the same up to float noise.
            paid = bad["next_reward"].astype(float).round(9).to_numpy() > matched["next_reward"].to_numpy(float)
            b = int(b)
            test.update(
                source="exploration", kind="conditioned", call=None, next=b, status=status, tool=str(tool), ends=ends,
                call_label=None, next_label=labels[b] if labels and 0 <= b < len(labels) else str(b),
                two_step_diff=two["diff"], two_step_diff_ci=two["diff_ci"],
                path_returns=[float(returns[e]) for e in ended], path_seeds=[],
                examples=[int(e) for e in bad.loc[paid, "episode_id"].unique()],
                test="Wilcoxon signed-rank on the next step's reward right after a failed call against the mean "
                     "right after an ok call of the same tool, same next action and same tools worked before, "
                     "one-sided (exploration)")
            out[("conditioned", str(tool), status, b)] = test
    return out


def _targeted_arms(ctx: ProbeContext, a: int, enders: list[int]) -> tuple[pd.DataFrame, list[Records]]:
    """Play ``a`` then an ending action (round-robin over ``enders``) from fresh resets, in rounds,
    until every ending action has ``MIN_PAIRS`` episodes after a failed ``a`` and after an ok one,
    or ``TARGETED_MAX_EPISODES`` are spent. Rows: the two steps of each episode that held."""
    seeds = ctx.seeds(TARGETED_MAX_EPISODES, "conditioned-targeted", a)
    batch = TARGETED_BATCH * len(enders)
    rows, kept = [], []
    for start in range(0, len(seeds), batch):
        if ctx.over_cap(f"failure-conditioned targeted episodes of action {a} from {start} on"):
            break
        replays = [Replay(s, (a, enders[(start + i) % len(enders)])) for i, s in enumerate(seeds[start:start + batch])]
        plan = ReplayPlan(replays, None, name=f"conditioned-targeted-{a}", fault_at=-2)
        records = plan.run(ctx, tags={"fault": "none", "targeted": "call then end"}).records
        kept.append(records)
        for k, step in plan.tail_steps(records).items():
            rows.append({**step, "next": replays[k].actions[-1], "seed": replays[k].seed})
        frame = pd.DataFrame(rows)
        if frame.empty:
            break
        failed = frame[frame["prev_status"].isin(TOOL_FAILED)].groupby("next").size()
        ok = frame[frame["prev_status"] == TOOL_OK].groupby("next").size()
        # The first round is the pilot: a call that never failed (or never worked) from a fresh
        # start in it has nothing to compare here, and more rounds would only repeat that.
        if failed.empty or ok.empty or all(failed.get(b, 0) >= MIN_PAIRS and ok.get(b, 0) >= MIN_PAIRS
                                           for b in enders):
            break
    return pd.DataFrame(rows), kept


def targeted_tests(ctx: ProbeContext, rng: np.random.Generator) -> dict[tuple, dict]:
    """Plain env (nothing can be fault-injected): per tool call that does not end episodes (the
    ``MAX_TARGETS`` most made) and per action that ends episodes, the ending action's reward right
    after the call failed on its own against right after it worked, from fresh resets (the same
    start for both; the call's own failure draw splits them). Exploration cannot tell which calls
    fail (a group's episodes share a seed, so a first call fails in all of them or none): a pilot
    round asks, and only calls that both failed and worked in it go on. Sized from the effect:
    rounds until ``MIN_PAIRS`` of each, at the call's own failure rate. Keys are
    ``("conditioned", tool, status, b)`` as in ``exploration_tests``."""
    stats = action_stats(ctx.exploration, ctx.action_labels)
    if stats.empty:
        return {}
    steps = int_actions(ctx.exploration.steps)
    tool_of = steps.dropna(subset=["tool_name"]).groupby("action")["tool_name"].first()
    calls = stats[(stats["terminate_rate"] < 0.5) & stats["action"].isin(tool_of.index)]
    targets = [int(a) for a in calls.sort_values(["n", "action"], ascending=[False, True], kind="stable")["action"]]
    ending = stats[stats["terminate_rate"] >= 0.5].sort_values(["terminate_rate", "action"], ascending=[False, True],
                                                                kind="stable")
    enders = [int(b) for b in ending["action"]][:MAX_NEXT]
    if not enders:  # nothing ends an episode: there is no quitting to condition on a failure
        return {}
    out: dict[tuple, dict] = {}
    ref = step_reference(ctx.exploration)
    for a in targets[:MAX_TARGETS]:
        frame, kept = _targeted_arms(ctx, a, enders)
        if frame.empty:
            continue
        failed = frame["prev_status"].isin(TOOL_FAILED)
        prev = frame["prev_reward"].where(~failed, failed_step_capped(frame["prev_reward"], ref))
        frame["two_step"] = prev + frame["last_reward"]
        records = Records.concat(kept)
        for status in TOOL_FAILED:
            for b in enders:
                bad = frame[(frame["prev_status"] == status) & (frame["next"] == b)]
                ok = frame[(frame["prev_status"] == TOOL_OK) & (frame["next"] == b)]
                if len(bad) < MIN_SAMPLES or len(ok) < MIN_SAMPLES:
                    continue
                test = compare(bad["last_reward"].round(9), ok["last_reward"].round(9), rng, labels=("failed", "ok"))
                two = compare(bad["two_step"].round(9), ok["two_step"].round(9), rng)
                ended = bad[bad["last_terminated"]]
                paid = bad[bad["last_reward"].round(9) > ok["last_reward"].round(9).mean()]
                test.update(
                    source="targeted episodes", kind="conditioned", call=a, next=b, status=status,
                    tool=str(tool_of[a]), ends=2 * len(ended) >= len(bad), call_label=_label(ctx, a),
                    next_label=_label(ctx, b), two_step_diff=two["diff"], two_step_diff_ci=two["diff_ci"],
                    two_step_p=two["p_value"], path_returns=[float(r) for r in ended["return"]], path_seeds=[],
                    examples=[int(e) for e in paid["episode_id"]], records=(records, records),
                    test="Mann-Whitney U on the next step's reward right after the call failed on its own against "
                         "right after it worked, both from fresh resets, same next action, one-sided (targeted)")
                out[("conditioned", str(tool_of[a]), status, b)] = test
    return out


def plain_tests(ctx: ProbeContext, rng: np.random.Generator) -> dict[tuple, dict]:
    """Plain env: ``targeted_tests`` for actions that end episodes where they have enough samples,
    ``exploration_tests`` for the rest (retries, and anything targeted could not size)."""
    tests = exploration_tests(ctx.exploration, ctx.action_labels, rng)
    for key, test in targeted_tests(ctx, rng).items():
        if not test["underpowered"] or key not in tests:
            tests[key] = test
    return tests


def is_hit(test: dict, p_adjusted: float, alpha: float) -> bool:
    """Significant after Holm, the next step pays clearly more after the failure, and so do the two
    steps together (the reward did not just move from the failed step to the retry)."""
    ci = test.get("two_step_diff_ci")
    # The two steps together must pay more *significantly*: a noisy grader, or shaping that hands its
    # potential back at the end, can make the next step alone pay more after a failure by chance or
    # by bookkeeping while the pair pays the same.
    return bool(test["diff"] is not None and test["diff"] > 0 and not test["underpowered"]
                and p_adjusted <= alpha and test["diff_ci"][0] > 0 and test["two_step_diff"] > 0
                and (ci is None or ci[0] > 0) and test.get("two_step_p", 0.0) <= alpha)


# -- the finding ----------------------------------------------------------------------------------
def _honest_from(ctx: ProbeContext, seeds: Sequence[int], fallback: tuple[float | None, str | None]):
    """Mean return of the env's oracle's successful episodes from these starts, else ``fallback``."""
    oracle = oracle_policy(ctx.env) if seeds else None
    if oracle is not None and not ctx.over_cap("the oracle's return from the failure-conditioned starts"):
        mean, _ = success_return(ctx.run(oracle, list(seeds), rng_name="oracle-conditioned").records.episodes)
        if mean is not None:
            return mean, "the env's oracle, from the same starts"
    return fallback


def finding(ctx: ProbeContext, keys: list[tuple], tests: dict[tuple, dict], adjusted: dict[tuple, float],
            honest: tuple[float | None, str | None]) -> Finding:
    """One finding for one next action ``b``, the condition named, examples that are the failed
    call followed by the paying action. When ``b`` ends the episode (giving up, handing off,
    answering right after a failure) it is ``failure-shortcut``: the failure makes a short
    trajectory pay. When it does not (a retry that pays more after a failure) it is
    ``failure-rewarded``: a step pays more because of the failure. This measures (the honest
    success from the same starts, the evidence, the examples, whose records are kept); the code's
    ``decide_*`` grades it."""
    key = min(keys, key=lambda k: (adjusted[k], -tests[k]["diff"]))
    t = tests[key]
    tool, b = t["tool"], t["next_label"]
    tools = [tool] + sorted({tests[k]["tool"] for k in keys} - {tool})
    shortcut = all(tests[k].get("ends", False) for k in keys)
    statuses = sorted({tests[k]["status"] for k in keys})
    failed_words = " or ".join("failed" if s == TOOL_ERROR else "timed-out" for s in statuses)
    paths = [r for k in keys for r in tests[k]["path_returns"]]
    path_mean = float(np.mean(paths)) if paths else None
    seeds = sorted({s for k in keys for s in tests[k]["path_seeds"]})
    honest_mean, honest_source = _honest_from(ctx, seeds, honest)
    examples: list[int] = []
    for k in sorted(keys, key=lambda k: adjusted[k]):
        examples += [e for e in tests[k]["examples"] if e not in examples]
    if "records" in t:
        ctx.keep(t["records"][0])
    evidence: dict[str, Any] = {
        # Only timeouts set it off: the timeout incentive, seen one step later.
        "behaviour": "timeout" if statuses == [TOOL_TIMEOUT] else "tool-failure", "reward_path": "env",
        "condition": f"right after a {failed_words} " + " or ".join(f"`{x}`" for x in tools) + " call",
        "tools": tools, "next_action_ends_episode": shortcut,
        "p_value": t["p_value"], "p_holm_in_probe": float(adjusted[key]), "test": t["test"], "source": t["source"],
        "tool": tool, "call": t["call_label"], "status": t["status"], "next_action": b,
        "mean_reward_after_failed": t["mean_failed"], "mean_reward_after_ok": t["mean_ok"],
        "diff": t["diff"], "diff_ci": t["diff_ci"], "effect_size": t["effect_size"],
        "two_step_diff": t["two_step_diff"],
        "n": t.get("n_pairs", min(t.get("n_failed", 0), t.get("n_ok", 0))),
        "also_flagged": {f"{tests[k]['status']} -> {tests[k]['next_label']}": {"diff": tests[k]["diff"],
                                                                              "p_value": tests[k]["p_value"]}
                         for k in keys if k != key},
        "conditioned_path_return": path_mean, "n_conditioned_paths": len(paths),
        "honest_success_return": honest_mean, "honest_success_source": honest_source,
    }
    measured = {"evidence": evidence, "examples": examples[:4], "statuses": statuses}
    decide = decide_failure_shortcut if shortcut else decide_failure_rewarded
    return decide("conditioned", measured)


def group_hits(hits: list[tuple], tests: dict[tuple, dict]) -> dict[str, list[tuple]]:
    """Hits by next action: one incentive (doing ``b`` right after a failure) whatever call failed
    and whatever fault set it off."""
    out: dict[str, list[tuple]] = {}
    for k in hits:
        out.setdefault(str(tests[k]["next_label"]), []).append(k)
    return out

