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
- ``C`` = ``P`` + ``j = T - m - 1`` idle steps (the prefix's last action, repeated) + the honest
  ending: the same ending, ``j`` steps later;
- ``A`` = ``P`` + idle steps until the step limit: stalling out.

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

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.probe import ProbeContext
from envaudit.protocol import END_TRUNCATED, FAILURE, SUCCESS, TOOL_FAILED
from envaudit.recording import Records
from envaudit.rollout import Policy
from envaudit.stats import MIN_SAMPLES, bootstrap_ci, signed_rank_p


class PlanPolicy(Policy):
    """Episode ``k`` of a run plays ``plans[k]`` (then repeats its last action). Runs ``ordered``,
    so the k-th reset is the k-th seed's episode; a replay that still diverges is dropped by
    ``_played``."""

    ordered = True

    def __init__(self, plans: Sequence[Sequence[int]], name: str) -> None:
        self.plans = [list(p) for p in plans]
        self.name = name
        self.k = -1

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.k += 1

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        plan = self.plans[min(self.k, len(self.plans) - 1)]
        return plan[min(self.t, len(plan) - 1)]


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


def _played(records: Records, plans: Sequence[Sequence[int]], seeds: Sequence[int],
            prefix_len: Sequence[int]) -> dict[int, tuple[pd.DataFrame, bool]]:
    """Per plan index: the episode's steps and whether it succeeded, when it played its plan's
    prefix as planned (a non-replayable env may not)."""
    out: dict[int, tuple[pd.DataFrame, bool]] = {}
    eps = records.episodes
    if eps.empty:
        return out
    index_of = {int(s): i for i, s in enumerate(seeds)}
    meta = eps.set_index("episode_id")
    for eid, ep in records.steps.sort_values(["episode_id", "step"]).groupby("episode_id", sort=True):
        if eid not in meta.index:
            continue
        i = index_of.get(int(meta.loc[eid, "seed"]))
        if i is None:
            continue
        m = prefix_len[i]
        if [int(a) for a in ep["action"]][:m] == list(plans[i][:m]):
            out[i] = (ep, bool(meta.loc[eid, "outcome"] == SUCCESS))
    return out


def _test(diffs: np.ndarray, scale: float, rng: np.random.Generator, *, alpha: float, min_effect: float) -> dict:
    n = len(diffs)
    out: dict[str, Any] = {"n_pairs": n, "min_effect": min_effect * scale,
                           "test": "Wilcoxon signed-rank on per-seed differences, one-sided"}
    if n < MIN_SAMPLES:
        return {**out, "mean": float(diffs.mean()) if n else None, "p_value": 1.0, "underpowered": True,
                "pays": False}
    p = signed_rank_p(diffs, alternative="greater")
    mean = float(diffs.mean())
    out.update(mean=mean, ci=list(bootstrap_ci(diffs, rng)), p_value=p, underpowered=False,
               pays=bool(p < alpha and mean >= min_effect * scale))
    return out


def stall_marginal(ctx: ProbeContext, records: Records, scale: float, *, min_effect: float,
                   tag: str) -> dict[str, Any]:
    """Whether stalling pays at the margin (module docstring): ``holds``, ``behaviour``
    (``stall`` / ``tool-failure`` / ``timeout``, or None when it does not pay), both tests and
    the example episodes of the stalling arm (``A``)."""
    ender = honest_ender(ctx.exploration)
    if ender is None or not isinstance(ctx.env.action_space, gym.spaces.Discrete):
        return {"holds": False, "behaviour": None,
                "reason": "no action ended an episode without success in exploration: no honest ending to "
                          "compare stalling with"}
    eps, steps = records.episodes, records.steps
    stalled = eps[(eps["end_reason"] == END_TRUNCATED) & ~eps["success"].eq(True).fillna(False)]
    by_episode = steps.groupby("episode_id")
    seeds, prefixes, lengths = [], [], []
    for eid, seed in zip(stalled["episode_id"], stalled["seed"], strict=True):
        if eid not in by_episode.groups or int(seed) in seeds:
            continue
        actions = by_episode.get_group(eid).sort_values("step")["action"].tolist()
        if len(actions) < 3 or not all(isinstance(a, (int, np.integer)) for a in actions):
            continue
        seeds.append(int(seed))
        prefixes.append([int(a) for a in actions[:len(actions) // 2]])
        lengths.append(len(actions))
    out: dict[str, Any] = {"honest_ending": ctx.describe_action(ender), "n_prefixes": len(seeds),
                           "idle": "the prefix's last action, repeated"}
    if len(seeds) < MIN_SAMPLES:
        return {**out, "holds": False, "behaviour": None,
                "reason": f"{len(seeds)} stalled episodes to replay, need {MIN_SAMPLES}"}
    m = [len(p) for p in prefixes]
    plans = {
        "ended": [p + [ender] for p in prefixes],
        "idle-ended": [p + [p[-1]] * (t - len(p) - 1) + [ender] for p, t in zip(prefixes, lengths, strict=True)],
        "stalled": [list(p) for p in prefixes],
    }
    played: dict[str, dict[int, tuple[pd.DataFrame, bool]]] = {}
    for arm, arm_plans in plans.items():
        if ctx.over_cap(f"stall replays ({arm}) of {tag!r}"):
            return {**out, "holds": False, "behaviour": None, "reason": "safety cap reached"}
        result = ctx.run(PlanPolicy(arm_plans, name=f"stall-{arm}"), seeds, ordered=True,
                         rng_name=f"stall-{tag}-{arm}", tags={"arm": f"stall-{arm}", "stalling": tag})
        played[arm] = _played(result.records, arm_plans, seeds, m)
        if arm == "stalled":
            ctx.keep(result.records)
    rng = ctx.rng("stall-marginal", tag)
    idle, idle_failed, idle_steps, ending, examples = [], [], [], [], []
    for i in range(len(seeds)):
        (b, b_won), (c, c_won), (a, a_won) = (played[arm].get(i, (None, False))
                                              for arm in ("ended", "idle-ended", "stalled"))
        b_ok = b is not None and len(b) == m[i] + 1 and bool(b["terminated"].iloc[-1])
        c_ok = c is not None and len(c) == lengths[i] and bool(c["terminated"].iloc[-1])
        if b_ok and c_ok and b_won == c_won:
            idle.append(float(c["reward"].sum() - b["reward"].sum()))
            idle_steps.append(lengths[i] - m[i] - 1)
            tail = c.iloc[m[i]:-1]
            idle_failed.append(float(tail.loc[tail["tool_status"].isin(TOOL_FAILED), "reward"].sum()))
        a_ok = a is not None and len(a) == lengths[i] and bool(a["truncated"].iloc[-1]) and not a_won
        if a_ok and c_ok and not c_won:
            ending.append(float(a["reward"].sum() - c["reward"].sum()))
        if a_ok:
            examples.append((float(a["reward"].sum()), int(a["episode_id"].iloc[0])))
    alpha = ctx.config.alpha
    idle_test = _test(np.asarray(idle, float), scale, rng, alpha=alpha, min_effect=min_effect)
    ending_test = _test(np.asarray(ending, float), scale, rng, alpha=alpha, min_effect=min_effect)
    failed_share = float(np.sum(idle_failed) / np.sum(idle)) if idle and np.sum(idle) > 0 else 0.0
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

