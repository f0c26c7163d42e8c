"""Targeted top-up of failed and ok calls on plain Gymnasium envs, for ``failure-rewarded``.

A plain env (not a ``ToolEnv``) cannot be fault-injected: the failures probe can only compare the
failed and the ok calls the env produced on its own. Random exploration of a short task sees few
calls of each tool, and a tool that fails one call in five then shows too few failures (under
``MIN_SAMPLES``) for the comparison to say anything, however much its failed calls pay.

This module makes up the shortfall by repeating the call. It replays, on fresh seeds, the action
prefixes exploration reached the call from (the prefixes where the call failed first, shortest
first), then makes the call once more; each replay's own tool draws decide whether it fails. A
call's samples are compared only within the same *history*: the same actions with the same tool
statuses before it, in exploration or in these replays, which on an env that speaks the info
protocol is as close to "the same state" as an outsider can get. Each failed call is paired with
the mean reward of the ok calls of its history (Wilcoxon signed-rank, one-sided). A seed replayed
with the same actions is the same draw again (exploration plays each seed once per GRPO group
member), so each (seed, history) counts once.

Sizing in episodes, from the samples still missing: each round plays what the shortfall needs at
the call's failure and ok yields so far (Laplace-smoothed; exploration's rates before the first
round), at least ``TOPUP_BATCH``, until ``MIN_SAMPLES`` failed and ``MIN_SAMPLES`` ok calls share
histories, or ``TOPUP_MAX_EPISODES`` are spent for that call (then the probe says so in its notes:
the question stays open, it is not answered "no"). A prefix whose replays, after ``PRUNE_AFTER``
of them, never gave the call both statuses (a precondition that always fails, a state where the
call never does, a prefix that ends the episode first) is dropped from later rounds.

A call exploration never saw fail gets no top-up: nothing says it can fail, and repeating every
call of every plain env until it fails would cost hundreds of episodes per call for nothing.

Known false positives: hidden state (an answer drawn at reset) can differ between replays of the
same history; the one-sided test and the requirement that failed calls pay more than ok ones
from the same visible history keep that from favouring failures.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.policies import Replay, ReplayPlan
from envaudit.probe import ProbeContext
from envaudit.probes.failures.conditioned import int_actions
from envaudit.protocol import TOOL_FAILED, TOOL_OK
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES, paired_compare

TOPUP_BATCH = 16
"""Episodes per round at least (the first round is the pilot that prunes prefixes)."""
TOPUP_MAX_EPISODES = 320
"""Top-up episodes per call at most: ``MIN_SAMPLES`` failures of a call that fails 1 time in 40."""
MAX_CALLS = 8
"""At most this many calls get a top-up (the most made in exploration)."""
MAX_PREFIXES = 4
"""Prefixes replayed per call (the shortest; those where the call failed first)."""
PRUNE_AFTER = 16
"""Replays of a prefix after which one that gave the call only one status is dropped."""


def histories(steps: pd.DataFrame) -> pd.Series:
    """Per step: the (action, tool status) pairs before it in its episode, as a tuple."""
    steps = steps.sort_values(["episode_id", "step"], kind="stable")
    out, seen, episode = [], [], None
    for eid, action, status in zip(steps["episode_id"], steps["action"], steps["tool_status"], strict=True):
        if eid != episode:
            seen, episode = [], eid
        out.append(tuple(seen))
        seen.append((action, status if isinstance(status, str) else None))
    return pd.Series(out, index=steps.index, dtype=object)


def samples_of(records: Records, action: int) -> pd.DataFrame:
    """The calls of ``action`` that came back ok or failed, with their history and reset seed; one
    per (seed, history). Exploration plays each seed several times (a GRPO group), and the same seed
    with the same actions before the call is the same draw again, not another sample."""
    steps = int_actions(records.steps)
    hist = histories(steps)
    mine = steps[(steps["action"] == action) & steps["tool_status"].isin((TOOL_OK, *TOOL_FAILED))]
    seed = mine["episode_id"].map(records.episodes.set_index("episode_id")["seed"])
    mine = mine.assign(history=hist.loc[mine.index], seed=seed)
    return mine.drop_duplicates(subset=["seed", "history"], keep="first")


def _matched(samples: pd.DataFrame, status: str) -> tuple[pd.DataFrame, pd.Series]:
    """Failed (``status``) calls whose history also has ok calls, and those histories' mean ok reward."""
    ok = samples[samples["tool_status"] == TOOL_OK].groupby("history")["reward"].mean()
    bad = samples[(samples["tool_status"] == status) & samples["history"].isin(ok.index)]
    return bad, ok


def _counts(samples: pd.DataFrame, statuses: list[str]) -> tuple[dict[str, int], int]:
    """Matched failed calls per status, and ok calls in histories that also hold a failure."""
    failed = {s: len(_matched(samples, s)[0]) for s in statuses}
    with_failure = set(samples.loc[samples["tool_status"].isin(statuses), "history"])
    ok = int(((samples["tool_status"] == TOOL_OK) & samples["history"].isin(with_failure)).sum())
    return failed, ok


def _prefixes(steps: pd.DataFrame, action: int) -> list[tuple[int, ...]]:
    """Action prefixes exploration made ``action`` from: those where it failed first, shortest first."""
    steps = int_actions(steps).sort_values(["episode_id", "step"], kind="stable")
    by_episode = steps.groupby("episode_id")["action"].apply(list)
    found: dict[tuple[int, ...], tuple[int, int]] = {}
    for row in steps[steps["action"] == action].itertuples():
        prefix = tuple(int(a) for a in by_episode[row.episode_id][: int(row.step)])
        failed = row.tool_status in TOOL_FAILED
        rank = (0 if failed else 1, len(prefix))
        found[prefix] = min(found.get(prefix, rank), rank)
    return sorted(found, key=lambda p: (found[p], p))[:MAX_PREFIXES]


def _yield(count: int, episodes: int) -> float:
    return (count + 1) / (episodes + 2)


def _top_up(ctx: ProbeContext, action: int, statuses: list[str]) -> tuple[Records | None, dict[str, Any]]:
    """Rounds of replays until every status in ``statuses`` has ``MIN_SAMPLES`` matched failed calls
    and the histories holding them ``MIN_SAMPLES`` ok ones, or the cap. Returns the replays' records
    and what was done."""
    explored = samples_of(ctx.exploration, action)
    prefixes = _prefixes(ctx.exploration.steps, action)
    seeds = ctx.seeds(TOPUP_MAX_EPISODES, "topup", action)
    tries: dict[tuple[int, ...], dict[str, int]] = {p: {"played": 0, "failed": 0, "ok": 0} for p in prefixes}

    def dead(p: tuple[int, ...]) -> bool:
        return tries[p]["played"] >= PRUNE_AFTER and min(tries[p]["failed"], tries[p]["ok"]) == 0

    kept: list[Records] = []
    used, rounds, stop = 0, 0, "enough"
    # Before the first round, the call's own rates in exploration stand in for the yields.
    n_calls = max(1, len(explored))
    rate_failed = _yield(int(explored["tool_status"].isin(statuses).sum()), n_calls)
    rate_ok = _yield(int((explored["tool_status"] == TOOL_OK).sum()), n_calls)
    while True:
        samples = pd.concat([explored, *(samples_of(r, action) for r in kept)])
        failed, ok = _counts(samples, statuses)
        short_failed = max(MIN_SAMPLES - min(failed.values()), 0)
        short_ok = max(MIN_SAMPLES - ok, 0)
        if not short_failed and not short_ok:
            break
        live = [p for p in prefixes if not dead(p)]
        if not live:
            stop = f"no prefix gave the call both statuses in {PRUNE_AFTER} replays"
            break
        if used >= len(seeds):
            stop = f"cap of {TOPUP_MAX_EPISODES} episodes reached"
            break
        if ctx.over_cap(f"failure-rewarded top-up of action {action} from episode {used} on"):
            stop = "the scan's safety cap"
            break
        if kept:
            last = pd.concat([samples_of(r, action) for r in kept])
            rate_failed = _yield(int(last["tool_status"].isin(statuses).sum()), used)
            rate_ok = _yield(int((last["tool_status"] == TOOL_OK).sum()), used)
        want = max(short_failed / rate_failed, short_ok / rate_ok, TOPUP_BATCH)
        n = min(math.ceil(want), len(seeds) - used)
        replays = [Replay(s, live[i % len(live)] + (action,)) for i, s in enumerate(seeds[used:used + n])]
        plan = ReplayPlan(replays, None, name=f"topup-{action}")
        records = plan.run(ctx, tags={"fault": "none", "targeted": "repeat the call"}).records
        kept.append(records)
        for replay in replays:
            tries[replay.actions[:-1]]["played"] += 1
        for k, (_, status, _) in plan.last_steps(records).items():
            prefix = replays[k].actions[:-1]
            if status in TOOL_FAILED or status == TOOL_OK:
                tries[prefix]["failed" if status in TOOL_FAILED else "ok"] += 1
        used += n
        rounds += 1
    info = {"episodes": used, "rounds": rounds, "prefixes": [list(p) for p in prefixes],
            "pruned_prefixes": [list(p) for p in prefixes if dead(p)],
            "matched_failed": failed, "matched_ok": ok, "stopped": stop, "cap_episodes": TOPUP_MAX_EPISODES}
    return (Records.concat(kept) if kept else None), info


def topup_tests(ctx: ProbeContext, rng: np.random.Generator) -> dict[tuple[int, str], dict]:
    """Plain env: per (call, failed status) that exploration saw fail, but fewer than ``MIN_SAMPLES``
    times, failed vs ok rewards of that call from the same histories after a top-up. Keys are
    ``(action, status)`` as in ``failure_rewarded.exploration_tests``; ``ctx.notes`` says what each
    top-up did, and why one stopped short."""
    if not isinstance(ctx.env.action_space, gym.spaces.Discrete):
        return {}
    steps = int_actions(ctx.exploration.steps)
    steps = steps[steps["tool_status"].notna()]
    if steps.empty:
        return {}
    calls = steps.groupby("action").size().sort_values(ascending=False, kind="stable")
    out: dict[tuple[int, str], dict] = {}
    notes: dict[str, Any] = {}
    for a in [int(x) for x in calls.index][:MAX_CALLS]:
        seen = samples_of(ctx.exploration, a)["tool_status"].value_counts()
        short = [s for s in TOOL_FAILED if 0 < int(seen.get(s, 0)) < MIN_SAMPLES]
        if not short:
            continue
        records, info = _top_up(ctx, a, short)
        label = ctx.describe_action(a)
        if info["stopped"] != "enough":
            notes[label] = (f"too few failed and ok `{label}` calls from the same history after "
                            f"{info['episodes']} top-up episodes ({info['stopped']}): "
                            f"failed {info['matched_failed']}, ok {info['matched_ok']}, "
                            f"{MIN_SAMPLES} of each needed; whether its failures pay stays open")
        samples = pd.concat([samples_of(ctx.exploration, a)] + ([samples_of(records, a)] if records is not None else []))
        for status in short:
            bad, ok = _matched(samples, status)
            if bad.empty:
                continue
            # Rounded, so that rewards equal up to float noise are equal.
            matched = ok.loc[bad["history"]].round(9).to_numpy(float)
            test = paired_compare(bad["reward"].astype(float).round(9).to_numpy(), matched, rng,
                                  labels=("failed", "ok"))
            n_ok = int(((samples["tool_status"] == TOOL_OK) & samples["history"].isin(set(bad["history"]))).sum())
            test["underpowered"] = bool(test["underpowered"] or n_ok < MIN_SAMPLES)
            paid = bad[bad["reward"].round(9).to_numpy(float) > matched]
            test.update(
                source="targeted episodes", tool=str(bad["tool_name"].iloc[0]), n_ok=n_ok, topup=info,
                examples=[int(e) for e in paid["episode_id"].unique()[:3]], records=records,
                test="Wilcoxon signed-rank, each failed call's reward against the mean of the ok calls of the "
                     "same call after the same actions and tool statuses (exploration and targeted episodes "
                     "that repeat the call), one-sided")
            out[(a, status)] = test
    if notes:
        ctx.notes["failure_rewarded_topup"] = notes
    return out


__all__ = ["MAX_CALLS", "MAX_PREFIXES", "PRUNE_AFTER", "TOPUP_BATCH", "TOPUP_MAX_EPISODES", "histories",
           "topup_tests"]
