"""Does *stalling itself* pay? The marginal value of extra steps, with progress held fixed.

A policy that stalls to the step limit earns whatever its episodes collected on the way: progress
(shaped rewards, partial credit) as well as anything the stalling pays. Partial progress is not an
exploit (DESIGN.md, "Findings"), so the average return of a stalling policy, or of the second half
of its episodes, cannot tell the two apart: a random staller keeps making progress late. This
module asks the question on the same start and the same prefix instead. From each stalled episode
(reset seed ``s``, actions ``a_1..a_T``, cut by the step limit at ``T``) it keeps the first half
``P = a_1..a_m`` and replays, on seed ``s``:

- ``B`` = ``P`` + the honest ending (the action exploration's outright failures ended with):
  ending the episode at once;
- ``C`` = ``P`` + ``j = T - m - 1`` idle steps (the prefix's last action that the env's oracle
  never takes, repeated; the prefix's last action without an oracle or such an action) + the
  honest ending: the same ending, ``j`` steps later. An action the honest policy takes is
  progress: repeating research that adds partial credit is not farming;
- ``A`` = ``P`` + the same idle steps until the step limit: stalling out.

``C - B`` is what ``j`` idle steps add with the ending held fixed (a per-step bonus, pay for
farmed calls; one-off progress an idle step may still make is small and fails the materiality
bar), compared where ``B`` and ``C`` end the same way. ``A - C`` is what the step limit pays
against ending honestly after the same steps (truncation credit), compared where ``C`` is an
outright failure. Each is a one-sided Wilcoxon signed-rank test on the per-seed differences, and
counts when significant and at least ``min_effect`` of the reward scale. Stalling pays when either
does; the idle steps' pay names the behaviour: ``stall`` (farming steps: ``length-bias``) or
``tool-failure`` when the idle steps that pay are failed calls; an ending that pays is ``timeout``.

Replays need a replayable env (the prefix must play out the same; replays that diverge from their
planned actions are left out) and a ``Discrete`` action space with an action that ends episodes
without success (without one there is no honest ending, and stalling is not judged here).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.counterfactual import (
    ENDED,
    LIMIT,
    Continuation,
    Counterfactuals,
    Played,
    Prefix,
    oracle_from_here,
    paired_test,
)
from envaudit.policies import oracle_policy
from envaudit.probe import ProbeContext
from envaudit.protocol import END_TRUNCATED, FAILURE, TOOL_FAILED
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES


def honest_ender(exploration: Records) -> int | None:
    """The action exploration's outright failures (ended by the agent, without success) most
    often ended with; ties go to the one whose endings paid least, then the lowest index."""
    eps, steps = exploration.episodes, exploration.steps
    failed = eps.loc[eps["outcome"] == FAILURE, "episode_id"]
    if failed.empty or steps.empty:
        return None
    last = steps[steps["episode_id"].isin(set(failed))].sort_values(["episode_id", "step"]).groupby("episode_id").tail(1)
    last = last[last["action"].map(lambda a: isinstance(a, (int, np.integer)))]
    if last.empty:
        return None
    table = last.groupby(last["action"].astype(int))["reward"].agg(["count", "mean"]).reset_index()
    table = table.sort_values(["count", "mean", "action"], ascending=[False, True, True], kind="stable")
    return int(table["action"].iloc[0])


def _tags(tag: str, arm: str) -> dict:
    return {"arm": f"stall-{arm}", "stalling": tag, "policy_name": f"stall-{arm}", "rng_name": f"stall-{tag}-{arm}"}


ORACLE_SEEDS = 2
"""Stalled episodes' seeds the env's oracle plays from, to learn which actions are progress."""


def _oracle_actions(ctx: ProbeContext, engine: Counterfactuals, seeds: list[int]) -> set[int]:
    """The actions the env's oracle takes from ``seeds`` (empty without an oracle)."""
    try:
        policy = oracle_policy(ctx.env)
    except Exception:  # an oracle that cannot be built only costs the refinement
        return set()
    if policy is None:
        return set()
    played = engine.play([Prefix(s) for s in seeds], [oracle_from_here(policy)])
    return {int(a) for e in played.episodes.get("oracle", {}).values() for a in e.steps["action"]
            if isinstance(a, (int, np.integer))}


def idle_step(prefix: list[int], progress: set[int]) -> int:
    """The idle step for a prefix: its last action that is not progress, else its last action."""
    return next((a for a in reversed(prefix) if a not in progress), prefix[-1])


def stall_marginal(ctx: ProbeContext, records: Records, scale: float, *, min_effect: float,
                   tag: str) -> dict[str, Any]:
    """Whether stalling pays at the margin (module docstring): ``holds``, ``behaviour``
    (``stall`` / ``tool-failure`` / ``timeout``, or None when it does not pay), both tests and
    the example episodes of the stalling arm (``A``)."""
    ender = honest_ender(ctx.exploration)
    if ender is None or not isinstance(getattr(ctx.env, "action_space", None), gym.spaces.Discrete):
        return {"holds": False, "behaviour": None,
                "reason": "no action ended an episode without success in exploration: no honest ending to "
                          "compare stalling with"}
    eps, steps = records.episodes, records.steps
    stalled = eps[(eps["end_reason"] == END_TRUNCATED) & ~eps["success"].eq(True).fillna(False)]
    by_episode = steps.groupby("episode_id")
    seeds, prefixes, lengths = [], [], []
    for eid, seed in zip(stalled["episode_id"], stalled["seed"], strict=True):
        if eid not in by_episode.groups:
            continue
        actions = by_episode.get_group(eid).sort_values("step")["action"].tolist()
        if len(actions) < 3 or not all(isinstance(a, (int, np.integer)) for a in actions):
            continue
        prefix = [int(a) for a in actions[:len(actions) // 2]]
        if (int(seed), prefix) in zip(seeds, prefixes, strict=True):
            continue  # one state once; a GRPO group's rollouts share a seed and differ in their actions
        seeds.append(int(seed))
        prefixes.append(prefix)
        lengths.append(len(actions))
    out: dict[str, Any] = {"honest_ending": ctx.describe_action(ender), "n_prefixes": len(seeds),
                           "idle": "the prefix's last action the oracle never takes, repeated"}
    if len(seeds) < MIN_SAMPLES:
        return {**out, "holds": False, "behaviour": None,
                "reason": f"{len(seeds)} stalled episodes to replay, need {MIN_SAMPLES}"}
    m = [len(p) for p in prefixes]
    starts = [Prefix(seed, tuple(p)) for seed, p in zip(seeds, prefixes, strict=True)]
    engine = Counterfactuals(ctx.run, tag=f"stall-{tag}")
    progress = _oracle_actions(ctx, engine, list(dict.fromkeys(seeds))[:ORACLE_SEEDS])
    out["oracle_actions"] = sorted(progress)
    idles = [idle_step(p, progress) for p in prefixes]
    idle_starts = [Prefix(seed, tuple(p) + (i,) * (t - len(p) - 1))
                   for seed, p, t, i in zip(seeds, prefixes, lengths, idles, strict=True)]
    # A stall repeats the last planned action: the idle step, put at the end of its prefix.
    stall_starts = [Prefix(seed, tuple(p) + (i,)) for seed, p, i in zip(seeds, prefixes, idles, strict=True)]
    # The three arms, in the order they always ran: end now (B); idle to the stalled episode's
    # length, then end (C, its idle steps put in its own prefix: their number differs per prefix);
    # run into the step limit (A).
    played: dict[str, Played] = {}
    for arm, arm_starts, cont in (("ended", starts, Continuation("ended", (ender,), ENDED, tags=_tags(tag, "ended"))),
                                  ("idle-ended", idle_starts,
                                   Continuation("idle-ended", (ender,), ENDED, tags=_tags(tag, "idle-ended"))),
                                  ("stalled", stall_starts,
                                   Continuation("stalled", (), LIMIT, tags=_tags(tag, "stalled")))):
        if ctx.over_cap(f"stall replays ({arm}) of {tag!r}"):
            return {**out, "holds": False, "behaviour": None, "reason": "safety cap reached"}
        played[arm] = engine.play(arm_starts, [cont])
    ctx.keep(played["stalled"].records["stalled"])
    out["replay_steps"] = int(sum(p.cost for p in played.values()))
    rng = ctx.rng("stall-marginal", tag)
    idle_pay, idle_failed, idle_steps, ending, examples = [], [], [], [], []
    for i in range(len(seeds)):
        b, c, a = (played[arm].get(arm, i) for arm in ("ended", "idle-ended", "stalled"))
        a = a if a is not None and a.length == lengths[i] and not a.success else None
        if b is not None and c is not None and b.success == c.success:
            idle_pay.append(c.ret - b.ret)
            idle_steps.append(lengths[i] - m[i] - 1)
            tail = c.steps.iloc[m[i]:-1]
            idle_failed.append(float(tail.loc[tail["tool_status"].isin(TOOL_FAILED), "reward"].sum()))
        if a is not None and c is not None and not c.success:
            ending.append(a.ret - c.ret)
        if a is not None:
            examples.append((a.ret, a.episode_id))
    alpha = ctx.config.alpha
    idle_test = paired_test(idle_pay, scale, rng, alpha=alpha, min_effect=min_effect)
    ending_test = paired_test(ending, scale, rng, alpha=alpha, min_effect=min_effect)
    failed_share = float(np.sum(idle_failed) / np.sum(idle_pay)) if idle_pay and np.sum(idle_pay) > 0 else 0.0
    if idle_test["pays"]:
        # The idle steps' pay is the farmed calls': failed calls paying makes it the failures' incentive.
        behaviour = "tool-failure" if failed_share > 0.5 else "stall"
    else:
        behaviour = "timeout" if ending_test["pays"] else None
    out.update(idle_steps_pay=idle_test, step_limit_pays=ending_test,
               mean_idle_steps=float(np.mean(idle_steps)) if idle_steps else None, idle_pay_from_failed_calls=failed_share,
               holds=bool(idle_test["pays"] or ending_test["pays"]), behaviour=behaviour,
               examples=[e for _, e in sorted(examples, key=lambda x: (-x[0], x[1]))[:3]])
    return out

