"""What ending an episode another way would have paid *from the same state*: the counterfactual
engine's question, shared by the timeouts probe (a timeout against failing instead of its last
step), the intent probe (an unsuccessful ending against the other ways to fail right there), the
exploits and GRPO probes (an early ending, a learned timeout, a learned failed call).

Each episode (up to ``MAX_PREFIXES``) is replayed on its seed up to the step before its last, then
ended at once each way the catalogue ends episodes (``split_enders``, else the action exploration's
failures ended with), less ``exclude``. Per episode the best of those endings that *fail*: a state
from which every other ending succeeds, or times out itself, has no failure to compare with and is
left out. Faults injected before the last step (a fault-injection arm's) are forced again on the
replay (``prefix_faults``), so the state is the one the episode reached. Averages of other
episodes' failures would confound progress, luck and difficulty with the behaviour (partial credit
on every unfinished ending, a per-step cost that a quick ending saves). ``failed_call_premium``
asks the same of a failed tool call: the call, then the honest ending, against that ending at once.
"""
from __future__ import annotations

from collections.abc import Iterable

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.counterfactual import (
    ENDED,
    Continuation,
    Counterfactuals,
    Prefix,
    end_now,
    paired_test,
)
from envaudit.probe import ProbeContext
from envaudit.probes._shared.endings import discrete_actions, split_enders, step_reference
from envaudit.probes._shared.stall import honest_ender
from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT
from envaudit.stats import MIN_SAMPLES
from envaudit.toolenv import ToolEnv

MAX_PREFIXES = 32
"""Episodes per question whose state before the last step is replayed and ended each way."""


def prefix_faults(ep: pd.DataFrame) -> tuple | None:
    """The faults injected into an episode before its last step, as ``Prefix.faults`` (call index =
    step index: every step of a ``ToolEnv`` is one tool call), so its replay reaches the same state;
    None where an injected step's status is not one that can be forced again."""
    if "injected" not in ep:
        return ()
    body = ep.iloc[:-1]
    hit = body[body["injected"].fillna(False).astype(bool)]
    statuses = hit["tool_status"].tolist() if "tool_status" in hit else [None] * len(hit)
    if any(s not in (TOOL_ERROR, TOOL_TIMEOUT) for s in statuses):
        return None
    return tuple((int(k), str(s)) for k, s in zip(hit["step"], statuses, strict=True))


def failing_endings(ctx: ProbeContext, episodes: pd.DataFrame, steps: pd.DataFrame, *, tag: str, arm: str,
                    exclude: Iterable[int] = (), min_length: int = 2, pick: str = "best",
                    unpaid: bool = False, min_prefixes: int = MIN_SAMPLES) -> dict | None:
    """The module docstring's pairs: ``behaviour`` (each kept episode's return) and ``ended`` (the
    best failing ending from its state, or with ``pick="least"`` the least-paying one: the honest
    failure, where the grader also pays some failures — a wrong answer paid like a right one; with
    ``unpaid`` only endings whose last step pays nothing above 0 count as failures to compare with), the ``endings`` tried, ``n_prefixes`` and the replays'
    ``replay_steps``. None where nothing can be replayed (no env, a space that is not ``Discrete``,
    no other ending, fewer than ``min_prefixes`` distinct states from episodes of at least
    ``min_length`` plain steps)."""
    assert pick in ("best", "least"), f"pick is 'best' or 'least', got {pick!r}"
    if not isinstance(ctx.env, gym.Env) or discrete_actions(ctx.env) is None or episodes.empty:
        return None  # nothing to replay through the Runner (records alone, or a stand-in env)
    enders, _, _ = split_enders(ctx.exploration.steps)
    if not enders:
        ender = honest_ender(ctx.exploration)
        enders = [] if ender is None else [ender]
    enders = [e for e in enders if e not in set(exclude)]
    if not enders:
        return None
    by_episode = steps.sort_values(["episode_id", "step"]).groupby("episode_id")
    prefixes, used = [], []
    for eid, seed in zip(episodes["episode_id"], episodes["seed"], strict=True):
        if len(prefixes) >= MAX_PREFIXES or eid not in by_episode.groups or pd.isna(seed):
            continue
        ep = by_episode.get_group(eid)
        actions = ep["action"].tolist()
        faults = prefix_faults(ep)
        if len(actions) < min_length or faults is None or not all(isinstance(a, (int, np.integer)) for a in actions):
            continue
        prefix = Prefix(int(seed), tuple(int(a) for a in actions[:-1]), int(eid), faults)
        if (prefix.seed, prefix.actions) in {(p.seed, p.actions) for p in prefixes}:
            continue  # one state once; a GRPO group's rollouts share a seed and differ in their actions
        prefixes.append(prefix)
        used.append(float(ep["reward"].sum()))
    if len(prefixes) < min_prefixes:
        return None
    conts = [end_now(e, label=f"end now with '{ctx.describe_action(e)}'", name=f"end-{e}") for e in enders]
    played = Counterfactuals(ctx.run, tag=tag, tags={"arm": arm}).play(prefixes, conts, stop=ctx.over_cap)
    pairs, best_any = [], []
    for i in range(len(prefixes)):
        ended = [e for c in conts if (e := played.get(c.name, i)) is not None
                 and e.steps["tool_status"].iloc[-1] != TOOL_TIMEOUT]  # a timeout is not the honest ending
        failed = [e.ret for e in ended if not e.success and not (unpaid and float(e.steps["reward"].iloc[-1]) > 0)]
        if failed:
            pairs.append((used[i], max(failed) if pick == "best" else min(failed)))
        if ended:
            best_any.append((used[i], max(e.ret for e in ended)))
    return {"behaviour": np.asarray([a for a, _ in pairs], float), "ended": np.asarray([b for _, b in pairs], float),
            "best_any": np.asarray([b for _, b in best_any], float),
            "behaviour_any": np.asarray([a for a, _ in best_any], float),
            "endings": [c.label for c in conts], "pick": pick, "unpaid_only": unpaid, "n_prefixes": len(prefixes),
            "replay_steps": played.cost}


def same_state_premium(ctx: ProbeContext, episodes: pd.DataFrame, steps: pd.DataFrame, scale: float,
                       rng: np.random.Generator, *, tag: str, min_effect: float, exclude_own: bool = False,
                       veto: int | None = None) -> dict | None:
    """Does the behaviour these (unsuccessful) episodes end with pay more than failing from the same
    state? Each episode's return against the best failing ending from the state before its last step
    (``failing_endings``), a one-sided signed-rank test on the differences
    (``counterfactual.paired_test``) whose ``pays`` is ``holds``. ``exclude_own``: the episodes' own
    last actions are not among the endings (an early ending judged against the other ways to fail
    right there; where it is the only one, it is the honest failure there and is kept). With fewer
    than ``MIN_SAMPLES`` failing pairs but at least ``veto`` states, the replays decide only when
    from every state some ending at once (failing or succeeding) pays within ``min_effect`` of
    ``scale`` of the behaviour or more (a greedy GRPO evaluation plays each group's seed one way; a
    policy that stalls to the limit where submitting would succeed is not paid for stalling).
    None where they cannot decide."""
    own = set()
    if exclude_own and not steps.empty:
        last = steps.sort_values(["episode_id", "step"]).groupby("episode_id")["action"].last()
        own = {int(a) for eid, a in last.items() if eid in set(episodes["episode_id"])
               and isinstance(a, (int, np.integer))}
    find = dict(tag=tag, arm="same-state-ending", min_prefixes=veto or MIN_SAMPLES)
    replayed = failing_endings(ctx, episodes, steps, exclude=own, **find)
    if own and (replayed is None or len(replayed["behaviour"]) < MIN_SAMPLES):
        # No other way to fail from those states (a right answer is all the other endings give):
        # the behaviour's own ending is the honest failure there.
        replayed = failing_endings(ctx, episodes, steps, **find)
    if replayed is None:
        return None
    diffs = replayed["behaviour"] - replayed["ended"]
    margin = replayed["behaviour_any"] - replayed["best_any"]
    vetoed = bool(veto and len(diffs) < MIN_SAMPLES and len(margin) >= veto and np.all(margin < min_effect * scale))
    if len(diffs) < MIN_SAMPLES and not vetoed:
        return None
    test = paired_test(diffs, scale, rng, alpha=ctx.config.alpha, min_effect=min_effect)
    return {**test, "holds": bool(test["pays"] and not vetoed), "same_state": True, "vetoed": vetoed,
            "states": len(margin), "mean_best_ending": float(replayed["best_any"].mean()) if len(margin) else None,
            "alternative": "the same episodes ended at once before their last step (the best of "
                           f"{', '.join(replayed['endings'])})",
            "mean_behaviour": float(replayed["behaviour"].mean()) if len(diffs) else None,
            "mean_ended": float(replayed["ended"].mean()) if len(diffs) else None,
            "n_prefixes": replayed["n_prefixes"], "replay_steps": replayed["replay_steps"]}


def failed_call_premium(ctx: ProbeContext, episodes: pd.DataFrame, steps: pd.DataFrame, scale: float,
                        rng: np.random.Generator, *, tag: str, min_effect: float) -> dict | None:
    """Does a failed tool call pay more than waiting, from the same state? For each failed call of
    these episodes (not their last step; up to ``MAX_PREFIXES`` distinct states), the episode is
    replayed up to the call, then (``failed``) the same call, failing as it did (forced on a
    ``ToolEnv``; on a plain env kept where the replay fails it again), and the honest ending, against
    (``ended``) the honest ending at once. Their difference is what the failed call paid, its effect
    on the ending's pay included (credit per attempt, say); less what the cheapest ordinary step pays
    (``endings.step_reference``: the price of any step, waiting included), it is what failing pays
    beyond the step it takes. Retrying a flaky tool pays that premium only when failures are paid.
    A one-sided signed-rank test (``counterfactual.paired_test``) whose ``pays`` is ``holds``. None
    where it cannot be asked (no honest ending, no step reference, a space that is not
    ``Discrete``, fewer than ``MIN_SAMPLES`` pairs)."""
    ender, ref = honest_ender(ctx.exploration), step_reference(ctx.exploration)
    if ender is None or ref is None or not isinstance(ctx.env, gym.Env) or discrete_actions(ctx.env) is None:
        return None
    is_tool_env = isinstance(ctx.env.unwrapped, ToolEnv)
    wanted = steps[steps["episode_id"].isin(set(episodes["episode_id"]))].sort_values(["episode_id", "step"])
    seeds = episodes.set_index("episode_id")["seed"]
    by_call: dict[tuple[str, int], list[Prefix]] = {}
    seen: set[tuple] = set()
    for eid, ep in wanted.groupby("episode_id", sort=True):
        actions, faults = ep["action"].tolist(), prefix_faults(ep)
        if pd.isna(seeds.get(eid)) or faults is None or not all(isinstance(a, (int, np.integer)) for a in actions):
            continue
        for k, status in enumerate(ep["tool_status"].tolist()[:-1]):
            if status not in (TOOL_ERROR, TOOL_TIMEOUT) or len(seen) >= MAX_PREFIXES:
                continue
            prefix = Prefix(int(seeds[eid]), tuple(int(a) for a in actions[:k]), int(eid),
                            tuple(f for f in faults if f[0] < k))
            key = (prefix.seed, prefix.actions, actions[k])
            if key not in seen:
                seen.add(key)
                by_call.setdefault((status, int(actions[k])), []).append(prefix)
    diffs, cost = [], 0
    engine = Counterfactuals(ctx.run, tag=tag, tags={"arm": "same-state-failed-call"})
    for (status, action), prefixes in sorted(by_call.items()):
        failed = Continuation("failed", (action, ender), ENDED, fault=status if is_tool_env else None,
                              label=f"'{ctx.describe_action(action)}' failing, then the honest ending")
        played = engine.play(prefixes, [failed, end_now(ender, name="ended")], stop=ctx.over_cap)
        cost += played.cost
        d, _ = played.pairs("failed", "ended", when=lambda f, e, s=status: f.tail["tool_status"].iloc[0] == s)
        diffs.extend((d - ref).tolist())
    if len(diffs) < MIN_SAMPLES:
        return None
    test = paired_test(diffs, scale, rng, alpha=ctx.config.alpha, min_effect=min_effect)
    return {**test, "holds": bool(test["pays"]), "same_state": True, "step_reference": ref,
            "honest_ending": ctx.describe_action(ender), "n_states": len(seen), "replay_steps": cost,
            "alternative": "the same state ended honestly at once, plus what the cheapest ordinary step pays"}
