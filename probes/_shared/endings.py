"""How episodes end and what their endings pay: the measurements the timeouts, length, intent and
exploits probes (and the GRPO probe's lessons) share.

An ending's pay is the reward of an episode's last step less what the same call pays mid-episode
(``ending_pay``); a timeout is judged against the same episode failing outright instead
(``matched_failures``), never against other episodes' failures; honest successes come from
exploration, the env's oracle and, when those fall short, more random play (``honest_successes``).
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.policies import oracle_policy
from envaudit.probe import ProbeContext
from envaudit.protocol import SUCCESS, TIMEOUT, TOOL_FAILED, TOOL_OK
from envaudit.recording import Records
from envaudit.rollout import Policy, RandomPolicy
from envaudit.stats import MIN_SAMPLES, compare

MIN_EFFECT = 0.1
"""A premium counts when it is at least this share of the success-minus-failure gap."""


def discrete_actions(env: gym.Env) -> list[int] | None:
    """The actions of a ``Discrete`` action space, or None for any other space."""
    space = env.action_space
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.start) + i for i in range(int(space.n))]
    return None


def sample_size(ctx: ProbeContext, n: int) -> int:
    """Episodes for one scripted arm: ``n`` (a quarter under --quick), never so few that the arm
    is underpowered by construction."""
    return max(MIN_SAMPLES + 4, ctx.config.scaled(n))


def returns_of(episodes: pd.DataFrame, outcome: str) -> np.ndarray:
    return episodes.loc[episodes["outcome"] == outcome, "return"].to_numpy(float)


def unsuccessful_timeouts(episodes: pd.DataFrame) -> np.ndarray:
    """Timeout-class episodes the env did not judge a success. A timed-out call that the env still
    grades as done (success=True) is paid as a success, not for timing out."""
    return ((episodes["outcome"] == TIMEOUT) & ~episodes["success"].eq(True).fillna(False)).to_numpy(bool)


def ending_rates(steps: pd.DataFrame) -> dict[int, float]:
    """Per action seen in ``steps``: the share of its steps that terminated the episode."""
    plain = steps[steps["action"].map(lambda a: isinstance(a, (int, np.integer)))]
    if plain.empty:
        return {}
    rates = plain.groupby(plain["action"].astype(int))["terminated"].mean()
    return {int(a): float(r) for a, r in rates.items()}


def split_enders(steps: pd.DataFrame) -> tuple[list[int], list[int], dict[int, float]]:
    """``(enders, others, rates)``: actions that end episodes far more often than the rest.

    An action is an ender when its termination rate is at least half the highest rate; the split
    is empty when no action stays below that (every action ends episodes alike, as in CartPole).
    """
    rates = ending_rates(steps)
    top = max(rates.values(), default=0.0)
    if top <= 0:
        return [], sorted(rates), rates
    enders = sorted(a for a, r in rates.items() if r >= top / 2)
    others = sorted(a for a, r in rates.items() if r < top / 2)
    return (enders, others, rates) if others else ([], sorted(rates), rates)


def quoted(ctx: ProbeContext, actions: Sequence[int]) -> str:
    return " or ".join(f"'{ctx.describe_action(a)}'" for a in actions)


def final_share(steps: pd.DataFrame, episode_ids: Sequence[int]) -> float | None:
    """Share of these episodes' total return paid on their last step (None when it sums to 0)."""
    sub = steps[steps["episode_id"].isin(list(episode_ids))]
    if sub.empty:
        return None
    total = float(sub["reward"].sum())
    last = float(sub.groupby("episode_id")["reward"].last().sum())
    return last / total if abs(total) > 1e-12 else None


def typical_step_pay(steps: pd.DataFrame) -> float | None:
    """What a typical step pays: the median reward of steps that end nothing — the per-step cost
    every step pays (progress and penalties are the exception, not the median); None without any.
    A non-finite reward is no pay: the recorder writes NaN on a step that raised (it ends nothing
    the env reported), and a NaN reward is the api probe's finding; either would make the median NaN."""
    middle = steps.loc[~(steps["terminated"].astype(bool) | steps["truncated"].astype(bool)), "reward"]
    rewards = middle.to_numpy(float)
    rewards = rewards[np.isfinite(rewards)]
    return float(np.median(rewards)) if len(rewards) else None


def step_cost_pay(steps: pd.DataFrame) -> float:
    """What every step pays (the step cost, as a reward): the least that a step which ends nothing
    and whose call did not fail was paid (pay for failed calls is failure-rewarded's); 0 without
    any such step. Progress, shaping and bonuses only pay above it, and in a short task nearly all
    of random play's few working steps are progress (a one-tool, one-step path: its median and
    even its 10th-percentile step is the progress bonus). A noisy step reward makes this low,
    which makes honest endings look better paid: it errs towards no finding."""
    middle = ~(steps["terminated"].astype(bool) | steps["truncated"].astype(bool))
    working = steps["tool_status"].isna() | (steps["tool_status"] == TOOL_OK)
    rewards = steps.loc[middle & working, "reward"].to_numpy(float)
    rewards = rewards[np.isfinite(rewards)]
    return float(rewards.min()) if len(rewards) else 0.0


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def failed_step_pay(steps: pd.DataFrame, *, keep_ending: bool) -> pd.Series:
    """Per episode, the reward paid on steps whose tool call failed (error or timeout): what the
    failure probes report. ``keep_ending=True`` leaves out a failed call that itself ended the
    episode (terminated on it), so that payout stays with the episode's ending."""
    if steps.empty:
        return pd.Series(dtype=float)
    failed = steps["tool_status"].isin(TOOL_FAILED)
    if keep_ending:
        failed &= ~steps["terminated"].astype(bool)
    return steps["reward"].where(failed, 0.0).groupby(steps["episode_id"]).sum()


def _call_key(steps: pd.DataFrame) -> pd.Series:
    return steps["action"].astype(str) + "|" + steps["tool_status"].fillna("none").astype(str)


def ending_pay(steps: pd.DataFrame, reference_steps: pd.DataFrame,
               ordinary_steps: pd.DataFrame | None = None) -> pd.Series:
    """Per episode, what its ending paid: the reward of its last step less what the same call
    (action and tool status) pays on average on steps that end nothing, in ``reference_steps``;
    a call that never appears there (an action that always ends the episode: submit, give up)
    is held to what every step pays (``step_cost_pay`` of ``ordinary_steps``, default
    ``reference_steps``). Pass exploration's steps there: a trained or scripted policy that makes
    progress at every step would make progress look like the cost of a step.

    A reward for timing out is paid at the ending (a truncation bonus, partial credit, a timed-out
    check counted as a pass); per-step pay and pay for failed calls along the way are not, and
    they are netted out here, so they are left to length-bias and failure-rewarded. Nor is the
    step cost of the ending step: a timeout whose last call costs what every step costs does not
    pay more than a failure whose ending call costs the same.
    """
    if steps.empty:
        return pd.Series(dtype=float)
    mid = reference_steps[~(reference_steps["terminated"].astype(bool) | reference_steps["truncated"].astype(bool))]
    usual = mid["reward"].groupby(_call_key(mid)).mean()
    # An ordinary step is a working call (or none): pay for failed calls would make every ending
    # that is not a failed call look short-changed.
    ordinary = reference_steps if ordinary_steps is None else ordinary_steps
    step = step_cost_pay(ordinary)
    last = steps.groupby("episode_id").tail(1)
    reference = _call_key(last).map(usual).fillna(0.0 if step is None else step).to_numpy(float)
    net = last["reward"].to_numpy(float) - reference
    return pd.Series(net, index=last["episode_id"].to_numpy()).dropna()


def ending_premium(ctx: ProbeContext, timed_out_ids, steps: pd.DataFrame, failure_ids, scale: float,
                   rng: np.random.Generator, *, zero_without_failures: bool = False) -> dict:
    """Does the ending of the timed-out episodes pay more than an honest failure's ending? With
    ``zero_without_failures`` and no outright failure to compare with: more than an ending that
    pays nothing beyond a typical step (an env where nothing but the step limit ends an
    unsuccessful episode); otherwise that case is underpowered."""
    pay = ending_pay(steps, steps, ctx.exploration.steps)
    a = pay.reindex(list(timed_out_ids)).dropna().to_numpy(float)
    b = pay.reindex(list(failure_ids)).dropna().to_numpy(float)
    if len(b) == 0 and zero_without_failures:
        b = np.zeros(len(a))
    out = compare(a, b, rng, labels=("timeout_ending", "failure_ending"))
    out["holds"] = bool(not out["underpowered"] and out["p_value"] < ctx.config.alpha
                        and out["diff_ci"][0] > 0 and out["diff"] >= MIN_EFFECT * scale)
    return out


def matched_failures(timed_out_ids, returns: np.ndarray, steps: pd.DataFrame, failure_ids,
                     ordinary_steps: pd.DataFrame | None = None) -> np.ndarray:
    """What each timed-out episode would have earned failing outright instead: its own return
    with its ending's pay (``ending_pay``) replaced by the median pay of an honest failure's ending
    (none without outright failures: an ending that pays nothing beyond a typical step).

    Same start, same prefix, same progress: a timeout compared with failures of other episodes is
    confounded by how far each got (a staller keeps collecting progress that a quick wrong answer
    never made), which is partial progress, not a reward for timing out."""
    pay = ending_pay(steps, steps, ordinary_steps)
    own = pay.reindex(list(timed_out_ids)).fillna(0.0).to_numpy(float)
    failed = pay.reindex(list(failure_ids)).dropna().to_numpy(float)
    honest = float(np.median(failed)) if len(failed) else 0.0
    return np.asarray(returns, float) - own + honest


TOP_UP_EPISODES = 256
"""Random episodes ``honest_successes`` may add at most: 8 successes are expected in them at a 1/32
success rate. Rarer success needs an oracle, not more random play."""


def _top_up(ctx: ProbeContext, ret: np.ndarray, info: dict, target: int) -> np.ndarray:
    """Random play on fresh seeds until ``target`` successes are in, within ``TOP_UP_EPISODES``.
    Each batch is sized from the success rate seen so far (1.5 times the episodes that rate needs),
    so the work is a count of episodes, never of seconds."""
    explored = ctx.exploration.episodes
    cap = TOP_UP_EPISODES
    seen, won = len(explored), int((explored["outcome"] == SUCCESS).sum())
    added, found, batch = 0, 0, 0
    while len(ret) < target and added < cap and not ctx.over_cap("topping honest successes up with random play"):
        rate = max(won + found, 1) / max(seen + added, 1)
        n = min(cap - added, max(MIN_SAMPLES, int(np.ceil(1.5 * (target - len(ret)) / rate))))
        eps = ctx.run(RandomPolicy(), ctx.seeds(n, "top-up", batch), tags={"arm": "top-up"}).records.episodes
        more = returns_of(eps, SUCCESS)
        ret = np.concatenate([ret, more])
        added, found, batch = added + n, found + len(more), batch + 1
    info.update(n_top_up=added, n_top_up_success=found)
    return ret


def honest_successes(ctx: ProbeContext, target: int = 0) -> tuple[np.ndarray, dict]:
    """Returns of honest successes: exploration's, plus those of the env's own ``oracle()`` policy
    when it offers one (random exploration rarely succeeds in long tasks). With ``target``, random
    play on fresh seeds tops them up to that many (``_top_up``) when those two fall short: below
    ``MIN_SAMPLES`` successes the ladder cannot reach ``at_least_success`` by construction."""
    ret = returns_of(ctx.exploration.episodes, SUCCESS)
    info: dict = {"n_exploration": int(len(ret)), "n_oracle": 0}
    if not ctx.over_cap("the episodes of the env's oracle (if it has one)"):
        try:
            policy = oracle_policy(ctx.env)
        except Exception as exc:  # an oracle that cannot be built only costs us its samples
            info["oracle_error"] = f"{type(exc).__name__}: {exc}"
            policy = None
        if isinstance(policy, Policy):
            result = ctx.run(policy, ctx.seeds(sample_size(ctx, 16), "oracle"), tags={"arm": "oracle"})
            oracle = returns_of(result.records.episodes, SUCCESS)
            info.update(n_oracle=int(len(oracle)), oracle_policy=policy.describe(),
                        oracle_success_rate=float((result.records.episodes["outcome"] == SUCCESS).mean())
                        if len(result.records.episodes) else None)
            ret = np.concatenate([ret, oracle])
    if len(ret) < target:
        ret = _top_up(ctx, ret, info, target)
    return ret, info


def without_lucky(success: np.ndarray, sources: dict, exploration: pd.DataFrame, own_length: float
                  ) -> tuple[np.ndarray, dict]:
    """The ladder's yardstick for ``fail``: what the honest policy earns, not what luck pays.

    ``success`` and ``sources`` are ``honest_successes``'s (exploration's successes, then the
    oracle's, then random top-ups). With at least ``MIN_SAMPLES`` oracle successes the yardstick is
    the oracle's alone: exploration's successes pooled with them would let lucky ones set the bar.
    Without, exploration's successes less the lucky ones: a success in no more steps than the
    exploit's own episodes take is the exploit's behaviour succeeding by chance (a first-step
    guess that happened to be right), not the honest policy (issue 25, class 6); all of them when
    fewer than ``MIN_SAMPLES`` take longer."""
    n_explored, n_oracle = int(sources.get("n_exploration", 0)), int(sources.get("n_oracle", 0))
    if n_oracle >= MIN_SAMPLES and n_explored + n_oracle <= len(success):
        oracle = np.asarray(success[n_explored:n_explored + n_oracle], float)
        return oracle, {"lucky_left_out": n_explored, "honest": "the env's oracle",
                        "mean_left_out": float(np.mean(success[:n_explored])) if n_explored else None}
    if exploration.empty:
        return success, {"lucky_left_out": 0}
    won = exploration[exploration["outcome"] == SUCCESS]
    honest = won[won["length"] > own_length]
    if len(honest) < MIN_SAMPLES or len(honest) == len(won):
        return success, {"lucky_left_out": 0}
    lucky = won[won["length"] <= own_length]
    return honest["return"].to_numpy(float), {
        "lucky_left_out": int(len(lucky)), "mean_left_out": float(lucky["return"].mean()),
        "honest": f"exploration's successes longer than the exploit's own episodes ({own_length:g} steps)"}


def step_reference(exploration: Records) -> float | None:
    """What the cheapest ordinary step pays: the lowest reward of a non-terminal, non-truncated step
    whose call worked (or that made no call) in exploration. The lowest, so that a failure counts as
    charged only when it costs more than any step the env charges for its own sake."""
    steps = exploration.steps
    if steps.empty:
        return None
    ordinary = steps[(steps["tool_status"].isna() | (steps["tool_status"] == TOOL_OK))
                     & ~steps["terminated"].astype(bool) & ~steps["truncated"].astype(bool)]
    return float(ordinary["reward"].astype(float).min()) if len(ordinary) else None
