"""Marginal-value checks of the ``length`` probe: does *stalling itself* pay, and does *delaying a
success* pay?

Both judge a behaviour by what the extra steps add with progress held fixed, not by the average
reward per step of a long episode (which also counts the progress made on the way):

- ``marginal_stall``: the long strategy's *tail* — the second half of each of its episodes, last
  step left out (its pay belongs to the episode's ending) — is the same prefix extended by idle
  steps. Shaped rewards (potential-based or per milestone) pay nothing there once progress stops;
  a per-step bonus does. Stalling is an incentive only when the tail pays, clearly.
- ``delay_success``: a successful episode (the env's oracle, else exploration's successes) is
  replayed on its own seed with ``k`` extra non-ending actions inserted before the action that
  ended it with success. When the delayed success earns more than the success at once (a format
  score per wrong attempt, a per-turn bonus), a return maximiser learns to delay, and that is
  ``length-bias`` at ``fail`` (DESIGN.md's ladder).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from envaudit.findings import Finding, Severity
from envaudit.policies import action_stats, oracle_policy
from envaudit.probe import ProbeContext
from envaudit.protocol import SUCCESS
from envaudit.rollout import Policy, step_limit
from envaudit.stats import MIN_SAMPLES, bootstrap_ci, signed_rank_p

DELAY_STEPS = 4
"""Extra actions inserted before a success ("succeeding after four wrong attempts")."""
DELAY_CANDIDATES = 4
"""Actions tried as the delay, the best-paying in exploration first."""
DELAY_SCREEN, DELAY_CONFIRM = 8, 24
"""Successes replayed to pick the delay action, then fresh ones to confirm it (a quarter under --quick,
never fewer than ``MIN_SAMPLES``)."""
ORACLE_EPISODES = 48
"""Oracle episodes run to collect successes to delay when the env has an oracle."""


# -- stalling: does the tail pay? ----------------------------------------------------------------
def tail_pay(episodes: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per episode: how many tail steps it had and what they paid (second half, last step out)."""
    rows = []
    by_episode = steps.groupby("episode_id", sort=False)
    for eid in episodes["episode_id"]:
        if eid not in by_episode.groups:
            continue
        rewards = by_episode.get_group(eid).sort_values("step")["reward"].to_numpy(float)
        body = rewards[:-1]
        tail = body[len(body) // 2:]
        if len(tail):
            rows.append({"episode_id": int(eid), "tail_steps": len(tail), "tail_pay": float(tail.sum())})
    return pd.DataFrame(rows, columns=["episode_id", "tail_steps", "tail_pay"])


def marginal_stall(episodes: pd.DataFrame, steps: pd.DataFrame, scale: float, *, alpha: float,
                   min_effect: float) -> dict[str, Any]:
    """Whether idle steps appended to a prefix pay: a one-sided signed-rank test of the per-episode
    tail pay against 0, and a mean tail pay of at least ``min_effect * scale``."""
    tails = tail_pay(episodes, steps)
    pays = tails["tail_pay"].to_numpy(float)
    n = len(pays)
    out: dict[str, Any] = {"n": n, "min_effect": min_effect * scale,
                           "test": "Wilcoxon signed-rank of each episode's tail pay against 0, one-sided"}
    if n < MIN_SAMPLES:
        return {**out, "pays": False, "p_value": 1.0, "mean_tail_pay": float(pays.mean()) if n else None,
                "underpowered": True}
    p = signed_rank_p(pays, alternative="greater")
    mean = float(pays.mean())
    out.update(mean_tail_pay=mean, mean_tail_steps=float(tails["tail_steps"].mean()),
               pay_per_tail_step=float(pays.sum() / tails["tail_steps"].sum()), p_value=p,
               underpowered=False, pays=bool(p < alpha and mean >= min_effect * scale))
    return out


# -- delaying a success --------------------------------------------------------------------------
@dataclass(frozen=True)
class Success:
    """One successful episode to replay: its reset seed, actions and return."""

    seed: int
    actions: tuple[Any, ...]
    ret: float
    source: str


class DelayPolicy(Policy):
    """Replay ``actions`` with ``k`` copies of ``delay`` inserted before the last one."""

    def __init__(self, actions: Sequence[Any], delay: Any, k: int, label: str) -> None:
        self.plan = [*actions[:-1], *([delay] * k), actions[-1]]
        self.name = f"delay {label} x{k}"
        self.text = f"do what succeeded, but take '{label}' {k} times before the final action"

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.plan[min(self.t, len(self.plan) - 1)]

    def describe(self) -> str:
        return self.text


def _sequences(records, source: str) -> list[Success]:
    eps, steps = records.episodes, records.steps
    won = eps[eps["outcome"] == SUCCESS]
    if won.empty:
        return []
    by_episode = steps[steps["episode_id"].isin(set(won["episode_id"]))].groupby("episode_id")
    out = []
    for eid, seed, ret in zip(won["episode_id"], won["seed"], won["return"], strict=True):
        actions = by_episode.get_group(eid).sort_values("step")["action"].tolist()
        if actions and all(isinstance(a, (int, np.integer)) for a in actions):
            out.append(Success(int(seed), tuple(int(a) for a in actions), float(ret), source))
    return out


def success_sequences(ctx: ProbeContext) -> list[Success]:
    """Successful episodes to delay: the oracle's (fastest honest successes) first, then exploration's;
    one per reset seed, shortest first within a source."""
    found: list[Success] = []
    oracle = oracle_policy(ctx.env)
    if oracle is not None:
        found += _sequences(ctx.run(oracle, ctx.seeds(ctx.config.scaled(ORACLE_EPISODES), "delay", "oracle"),
                                    tags={"arm": "delay-oracle"}).records, "the env's oracle")
    explored = _sequences(ctx.exploration, "exploration")
    found += sorted(explored, key=lambda s: (len(s.actions), s.seed))
    seen, unique = set(), []
    for s in found:
        if s.seed not in seen:
            seen.add(s.seed)
            unique.append(s)
    return unique


def _delay_actions(ctx: ProbeContext, others: Sequence[int]) -> list[int]:
    """The candidate actions that paid most in exploration, best first (ties by action)."""
    stats = action_stats(ctx.exploration, ctx.action_labels)
    pay = dict(zip(stats["action"].astype(int), stats["mean_reward"].astype(float), strict=True))
    return sorted(others, key=lambda a: (-pay.get(int(a), -np.inf), int(a)))[:DELAY_CANDIDATES]


def _replay(ctx: ProbeContext, sequences: Sequence[Success], action: int, k: int,
            tag: str) -> tuple[pd.DataFrame, list]:
    """Each success replayed with ``k`` x ``action`` inserted; paired rows (original vs delayed)."""
    label = ctx.describe_action(action)
    rows, kept = [], []
    for i, s in enumerate(sequences):
        result = ctx.run(DelayPolicy(s.actions, action, k, label), [s.seed],
                         tags={"arm": f"delay-{tag}", "delay_action": label}, rng_name=f"delay-{tag}-{i}")
        eps = result.records.episodes
        if eps.empty:
            continue
        kept.append(result.records)
        ep = eps.iloc[0]
        rows.append({"seed": s.seed, "source": s.source, "original_return": s.ret,
                     "original_length": len(s.actions), "delayed_return": float(ep["return"]),
                     "delayed_length": int(ep["length"]), "delayed_success": ep["outcome"] == SUCCESS,
                     "episode_id": int(ep["episode_id"])})
    return pd.DataFrame(rows), kept


def delay_success(ctx: ProbeContext, others: Sequence[int], scale: float, rng: np.random.Generator,
                  *, min_effect: float, candidates: Sequence[int] | None = None) -> Finding | None:
    """``length-bias`` at ``fail`` when succeeding after ``k`` extra actions earns more than at once.

    ``others`` are the actions that leave episodes running (none: nothing can delay); ``candidates``
    the actions screened as the delay (default ``others``), only replays that still succeed count."""
    if not others:
        ctx.notes["delay_success"] = "no action that leaves episodes running, so success cannot be delayed"
        return None
    sequences = success_sequences(ctx)
    limit = step_limit(ctx.env) or ctx.config.max_steps
    sequences = [s for s in sequences if len(s.actions) + 1 < limit]
    n_screen = max(MIN_SAMPLES, ctx.config.scaled(DELAY_SCREEN))
    n_confirm = max(MIN_SAMPLES, ctx.config.scaled(DELAY_CONFIRM))
    if len(sequences) < n_screen + MIN_SAMPLES:
        ctx.notes["delay_success"] = (f"{len(sequences)} distinct successful episodes to replay; need "
                                      f"{n_screen + MIN_SAMPLES} (an oracle() on the env supplies them)")
        return None
    screen, confirm = sequences[:n_screen], sequences[n_screen:n_screen + n_confirm]
    k = max(1, min(DELAY_STEPS, limit - 1 - max(len(s.actions) for s in sequences[:n_screen + n_confirm])))
    gains = {}
    for a in _delay_actions(ctx, others if candidates is None else candidates):
        table, _ = _replay(ctx, screen, a, k, "screen")
        won = table[table["delayed_success"]] if len(table) else table
        if len(won):
            gains[a] = float((won["delayed_return"] - won["original_return"]).mean())
    if not gains:
        ctx.notes["delay_success"] = "no delayed replay still succeeded"
        return None
    best = min(gains, key=lambda a: (-gains[a], a))
    table, kept = _replay(ctx, confirm, best, k, "confirm")
    ctx.table("delay", table)
    won = table[table["delayed_success"]] if len(table) else table
    diffs = (won["delayed_return"] - won["original_return"]).to_numpy(float) if len(won) else np.array([])
    verdict = {"n_pairs": int(len(diffs)), "n_replayed": int(len(table)), "k": k,
               "delay_action": ctx.describe_action(best), "screen_mean_gain": gains,
               "min_effect": min_effect * scale,
               "test": "Wilcoxon signed-rank on (delayed - at once) returns of the same successes, one-sided"}
    ctx.notes["delay_success"] = verdict
    if len(diffs) < MIN_SAMPLES:
        return None
    p = signed_rank_p(diffs, alternative="greater")
    gain = float(diffs.mean())
    verdict.update(p_value=p, gain=gain, gain_ci=list(bootstrap_ci(diffs, rng)))
    if not (p < ctx.config.alpha and gain >= min_effect * scale):
        return None
    for records in kept:
        ctx.keep(records)
    at_once = float(won["original_return"].mean())
    delayed = float(won["delayed_return"].mean())
    label = verdict["delay_action"]
    examples = won.sort_values(["delayed_return", "episode_id"], ascending=[False, True])["episode_id"]
    return Finding(
        "length-bias", Severity.FAIL, "Delaying success pays",
        f"Succeeding after taking '{label}' {k} more times earns {delayed:.3g}, more than succeeding at once "
        f"({at_once:.3g}) on the same starts, so a return maximiser learns to hold a success back and "
        "collect the extra steps' pay first.",
        {"behaviour": "delay-success", "reward_path": "env", "p_value": p, "mean_delayed": delayed,
         "mean_at_once": at_once, "gain": gain, "gain_ci": verdict["gain_ci"], "k": k, "delay_action": label,
         "n_pairs": int(len(diffs)), "min_effect": verdict["min_effect"], "test": verdict["test"],
         "success_source": sorted(set(won["source"]))},
        [int(e) for e in examples.head(5)],
        f"Pay '{label}' nothing (or a cost) when it does not complete the task — e.g. give a format "
        "score only on the final answer — so that succeeding later never earns more than succeeding now.",
        probe="length")
