"""Marginal-value checks of the ``length`` probe: does *stalling itself* pay, and does *delaying a
success* pay?

Both judge a behaviour by what the extra steps add with progress held fixed, not by the average
reward per step of a long episode (which also counts the progress made on the way):

- ``marginal_stall``: the long strategy's *tail* — the second half of each of its episodes, last
  step left out (its pay belongs to the episode's ending) — is the same prefix extended by idle
  steps. Shaped rewards (potential-based or per milestone) pay nothing there once progress stops;
  a per-step bonus does. Stalling is an incentive only when the tail pays, clearly.
- ``delay_success``: a successful episode (the env's oracle, else exploration's successes) is
  replayed on its own seed with ``k`` extra actions inserted before the action that ended it with
  success, or before everything (wrong attempts first: an answer is only "wrong", and paid as an
  attempt, while the task is unfinished). When the delayed success earns more than the success at
  once with the same honest work (a format score per wrong attempt, a per-turn bonus), a return
  maximiser learns to delay, and that is ``length-bias`` at ``fail`` (DESIGN.md's ladder).
  ``delay_success`` measures the pairs; ``decisions.decide_length_bias`` (kind ``"delay"``) grades
  them and makes the finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from envaudit.findings import Finding
from envaudit.policies import BySeed, action_stats, oracle_policy
from envaudit.probe import ProbeContext
from envaudit.probes.length.decisions import decide_length_bias
from envaudit.probes.length.search import MISSES, SearchState, find_successes
from envaudit.protocol import SUCCESS
from envaudit.recording import Records
from envaudit.rollout import Policy, Run, SequencePolicy, step_limit
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
CONFIRM_POOL = 6
"""Successes set aside per confirming pair wanted: replays that meet other tool failures than their
original do not pair, and the confirmation goes on to the next success until enough pairs did."""


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
POSITIONS = ("end", "start")
"""Where the delay goes: before the action that ended the success (a late wrong answer, a
per-turn score once the work is done), or before everything (wrong attempts first, then the work:
an answer that only counts as a delay while the task is unfinished)."""
DELAY_MIN_EFFECT = 0.02
"""The least mean gain (a share of the reward scale) that counts as a delay incentive. The test is
paired (same start, same honest work, same failed calls), so noise is already in the signed-rank
test and the CI; this bar only drops gains too small for a learner to act on."""


@dataclass(frozen=True)
class Success:
    """One successful episode to replay: its reset seed, actions, return and failed tool calls."""

    seed: int
    actions: tuple[Any, ...]
    ret: float
    source: str
    failed: int = 0
    oracle: bool = False
    """From the env's oracle: a delay placed first is followed by the oracle itself, which adapts to
    whatever the shifted random stream does (a fixed replay would not redo a call that now fails)."""


class DelayPolicy(Policy):
    """Replay ``actions`` with ``k`` copies of ``delay`` inserted before the last one (``at="end"``)
    or before the first (``at="start"``; then ``follow``, when given, acts after the delay)."""

    def __init__(self, actions: Sequence[Any], delay: Any, k: int, label: str, at: str = "end",
                 follow: Policy | None = None) -> None:
        if at not in POSITIONS:
            raise ValueError(f"delay position must be one of {POSITIONS}, got {at!r}")
        self.k, self.at = k, at
        self.plan = [*actions[:-1], *([delay] * k), actions[-1]] if at == "end" else [*([delay] * k), *actions]
        self.follow = follow if at == "start" else None
        self.name = f"delay {label} x{k} at {at}"
        where = "before the final action" if at == "end" else "first"
        self.text = f"do what succeeded, but take '{label}' {k} times {where}"

    def reset(self, env, rng) -> None:
        super().reset(env, rng)
        if self.follow is not None:
            self.follow.reset(env, rng)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        if self.follow is not None and self.t >= self.k:
            return self.follow(obs, info)
        return self.plan[min(self.t, len(self.plan) - 1)]

    def inserted(self, length: int) -> range:
        """Step indices of the inserted delay in an episode whose original had ``length`` actions."""
        return range(self.k) if self.at == "start" else range(length - 1, length - 1 + self.k)

    def describe(self) -> str:
        return self.text


def _failed(steps: pd.DataFrame) -> pd.Series:
    return steps["tool_status"].isin(("error", "timeout")) if "tool_status" in steps else pd.Series(False, steps.index)


def _sequences(records, source: str, oracle: bool = False) -> list[Success]:
    eps, steps = records.episodes, records.steps
    won = eps[eps["outcome"] == SUCCESS]
    if won.empty:
        return []
    by_episode = steps[steps["episode_id"].isin(set(won["episode_id"]))].groupby("episode_id")
    out = []
    for eid, seed, ret in zip(won["episode_id"], won["seed"], won["return"], strict=True):
        mine = by_episode.get_group(eid).sort_values("step")
        actions = mine["action"].tolist()
        if actions and all(isinstance(a, (int, np.integer)) for a in actions):
            out.append(Success(int(seed), tuple(int(a) for a in actions), float(ret), source,
                               int(_failed(mine).sum()), oracle))
    return out


def searched_successes(ctx: ProbeContext, n: int) -> list[Success]:
    """Up to ``n`` successes found by ``search.find_successes`` (an env with no oracle whose random play
    rarely succeeds), each played again through ``ctx.run`` so that only recorded successes count.
    One search per probe run, shared by the delay check and the brevity ladder: asked for more, it
    goes on from where it stopped (``search.SearchState``), and plays again only what it found since."""
    if n <= 0:
        return []
    cache = ctx.__dict__.setdefault("_searched_successes", {"state": SearchState(), "found": []})
    state = cache["state"]
    before = len(state.found)
    if before < n:
        new = find_successes(ctx, n, ctx.seeds(n + MISSES, "length", "search"), state)[before:]
        if new:  # played again in one run: each seed its own sequence
            replays = BySeed({seed: SequencePolicy(list(actions), name="searched success") for seed, actions in new})
            records = ctx.run(replays, [seed for seed, _ in new], tags={"arm": "success-search"}).records
            cache["found"] += _sequences(records, "search")
    return cache["found"][:n]


def success_sequences(ctx: ProbeContext, n_oracle: int = 0, n_search: int = 0) -> list[Success]:
    """Successful episodes to delay: the oracle's (fastest honest successes; at least ``n_oracle``
    episodes of it) first, then exploration's, then (no oracle, fewer than ``n_search`` seen) those
    the search finds; one per reset seed, shortest first within a source."""
    found: list[Success] = []
    try:
        oracle = oracle_policy(ctx.env)
    except Exception:  # an oracle that cannot be built only costs its successes
        oracle = None
    if oracle is not None:
        # Played once for the most asked: the confirmation asks again when it wants more successes.
        n = max(ctx.config.scaled(ORACLE_EPISODES), n_oracle)
        played = ctx.__dict__.setdefault("_oracle_successes", {})
        if played.get("n", 0) < n:
            records = ctx.run(oracle, ctx.seeds(n, "delay", "oracle"), tags={"arm": "delay-oracle"}).records
            played.update(n=n, found=_sequences(records, "the env's oracle", oracle=True))
        found += played["found"]
    explored = _sequences(ctx.exploration, "exploration")
    found += sorted(explored, key=lambda s: (len(s.actions), s.seed))
    if oracle is None and n_search and len({s.seed for s in found}) < n_search:
        found += searched_successes(ctx, n_search - len({s.seed for s in found}))
    seen, unique = set(), []
    for s in found:
        if s.seed not in seen:
            seen.add(s.seed)
            unique.append(s)
    return unique


def best_paying(ctx: ProbeContext, actions: Sequence[int]) -> list[int]:
    """``actions`` by their mean step reward in exploration, best first (ties by action)."""
    stats = action_stats(ctx.exploration, ctx.action_labels)
    pay = dict(zip(stats["action"].astype(int), stats["mean_reward"].astype(float), strict=True))
    return sorted(actions, key=lambda a: (-pay.get(int(a), -np.inf), int(a)))


def _delay_actions(ctx: ProbeContext, others: Sequence[int]) -> list[int]:
    """The candidate actions that paid most in exploration, best first (ties by action)."""
    return best_paying(ctx, others)[:DELAY_CANDIDATES]


def _replay(ctx: ProbeContext, sequences: Sequence[Success], action: int, k: int, at: str,
            tag: str, want: int | None = None,
            more: Callable[[int], Sequence[Success]] | None = None) -> tuple[pd.DataFrame, list]:
    """Each success replayed with ``k`` x ``action`` inserted at ``at``; paired rows (original vs
    delayed). ``matched``: the delayed episode went on past the inserted steps and still succeeded
    (an inserted answer that ends the episode with success is a lucky guess, not a delay), outside
    the inserted steps hit as many failed tool calls as the original (the same honest work, so the
    pair differs by the delay), and no inserted call failed (a failed call that pays is
    failure-rewarded, another probe's finding).
    With ``want``, replays ``want`` successes at a time and stops once that many pairs matched;
    ``more(n)``, where given, is asked for the list grown to ``n`` successes (the same ones first)
    when the next chunk would run past its end, so successes that must be searched for are found
    only when needed."""
    label = ctx.describe_action(action)
    rows, kept = [], []
    chunk = max(1, want or len(sequences))
    start = 0
    while not (want is not None and sum(r["matched"] for r in rows) >= want):
        if start + chunk > len(sequences) and more is not None:
            sequences = more(start + chunk)
        first, start = start, start + chunk
        part = sequences[first:start]
        if not part:
            break
        policies = [_delay_policy(ctx, s, action, k, label, at) for s in part]
        result = ctx.run(BySeed({s.seed: p for s, p in zip(part, policies, strict=True)}), [s.seed for s in part],
                         tags={"arm": f"delay-{tag}", "delay_action": label, "delay_at": at},
                         rng_name=f"delay-{tag}-{at}-{action}-{first}")
        if result.records.episodes.empty:
            continue
        kept.append(result.records)
        rows += _pairs(part, policies, result.records)
    return pd.DataFrame(rows), kept


def _delay_policy(ctx: ProbeContext, s: Success, action: int, k: int, label: str, at: str) -> DelayPolicy:
    return DelayPolicy(s.actions, action, k, label, at=at,
                       follow=oracle_policy(ctx.env) if s.oracle and at == "start" else None)


def _pairs(part: Sequence[Success], policies: Sequence[DelayPolicy], records: Records) -> list[dict[str, Any]]:
    """One row per success of ``part`` whose delayed replay (by ``policies``, in ``records``) was
    recorded: the original against the delayed, and whether they pair (``_replay``'s ``matched``)."""
    eps, steps = records.episodes, records.steps
    by_seed = {int(ep["seed"]): ep for ep in eps.to_dict("records")}
    rows = []
    for s, policy in zip(part, policies, strict=True):
        ep = by_seed.get(s.seed)
        if ep is None:
            continue
        mine = steps[steps["episode_id"] == ep["episode_id"]].sort_values("step")
        failed = _failed(mine).to_numpy()
        inserted = policy.inserted(len(s.actions))
        inside = [j for j in inserted if j < len(failed)]
        own = int(failed[inside].sum())
        rest = int(failed.sum()) - own
        won = ep["outcome"] == SUCCESS and int(ep["length"]) > inserted[-1] + 1
        rows.append({"seed": s.seed, "source": s.source, "original_return": s.ret,
                     "original_length": len(s.actions), "delayed_return": float(ep["return"]),
                     "delayed_length": int(ep["length"]), "delayed_success": bool(won),
                     "matched": bool(won and rest == s.failed and own == 0), "episode_id": int(ep["episode_id"])})
    return rows


def _screen(ctx: ProbeContext, screen: Sequence[Success], arms: Sequence[tuple[int, str]],
            k: int) -> dict[tuple[int, str], pd.DataFrame]:
    """``_replay``'s pairs for every ``(action, position)`` arm on the ``screen`` successes: every arm's
    replays in one run over the workers (``ctx.run_all``), each as the arm's own run plays them."""
    policies = {(a, at): [_delay_policy(ctx, s, a, k, ctx.describe_action(a), at) for s in screen] for a, at in arms}
    runs = [Run(BySeed({s.seed: p for s, p in zip(screen, policies[(a, at)], strict=True)}), [s.seed for s in screen],
                tags={"arm": "delay-screen", "delay_action": ctx.describe_action(a), "delay_at": at},
                rng_name=f"delay-screen-{at}-{a}-0") for a, at in arms]
    played = ctx.run_all(runs) if screen else []
    return {(a, at): pd.DataFrame(_pairs(screen, policies[(a, at)], records))
            for (a, at), records in zip(arms, played, strict=True)}


def paired_gain(table: pd.DataFrame) -> np.ndarray:
    """Delayed minus at-once return of the matched pairs; differences within float rounding of the
    returns are 0 (the same rewards summed in another order are the same return)."""
    if table.empty:
        return np.zeros(0)
    won = table[table["matched"]]
    a, b = won["delayed_return"].to_numpy(float), won["original_return"].to_numpy(float)
    d = a - b
    return np.where(np.abs(d) <= 1e-9 * np.maximum(1.0, np.abs(b)), 0.0, d)


def delay_success(ctx: ProbeContext, others: Sequence[int], scale: float, rng: np.random.Generator,
                  *, min_effect: float = DELAY_MIN_EFFECT, candidates: Sequence[int] | None = None) -> Finding | None:
    """``length-bias`` at ``fail`` when succeeding after ``k`` extra actions earns more than at once:
    the pairs are measured here, ``decide_length_bias("delay")`` grades them (None: no finding).

    ``others`` are the actions that leave episodes running (none: nothing can delay); ``candidates``
    the actions screened as the delay (default ``others``), each inserted at every position of
    ``POSITIONS``; only replays that still succeed with the same honest work count."""
    if not others:
        ctx.notes["delay_success"] = "no action that leaves episodes running, so success cannot be delayed"
        return None
    n_screen = max(MIN_SAMPLES, ctx.config.scaled(DELAY_SCREEN))
    n_confirm = max(MIN_SAMPLES, ctx.config.scaled(DELAY_CONFIRM))
    # The inserted steps shift the env's random stream, so some delayed replays meet other tool
    # failures than their original and do not pair; the oracle (or the search) supplies spares, up
    # to ``pool``. The oracle's are cheap (one run fanned out) and played at once; those the search
    # must find one seed after another are found for the screen and one confirming chunk, and more
    # only when that chunk does not pair (``_replay``'s ``more``).
    pool = n_screen + CONFIRM_POOL * n_confirm
    limit = step_limit(ctx.env) or ctx.config.max_steps

    def fitting(n_search: int, room: int = 1) -> list[Success]:
        found = success_sequences(ctx, n_oracle=pool, n_search=n_search)
        return [s for s in found if len(s.actions) + room < limit][:pool]

    sequences = fitting(n_screen + n_confirm)
    if len(sequences) < n_screen + MIN_SAMPLES:
        ctx.notes["delay_success"] = (f"{len(sequences)} distinct successful episodes to replay; need "
                                      f"{n_screen + MIN_SAMPLES} (an oracle() on the env supplies them)")
        return None
    screen, confirm = sequences[:n_screen], sequences[n_screen:]
    k = max(1, min(DELAY_STEPS, limit - 1 - max(len(s.actions) for s in screen + confirm)))

    def more(n: int) -> list[Success]:
        """The confirming successes grown to ``n`` (within the pool), each with room for the delay."""
        return fitting(min(pool, n_screen + n), room=k)[n_screen:] if len(confirm) < pool - n_screen else confirm
    gains, evidence = {}, {}
    arms = [(a, at) for a in _delay_actions(ctx, others if candidates is None else candidates) for at in POSITIONS]
    for (a, at), table in _screen(ctx, screen, arms, k).items():
        diffs = paired_gain(table)
        if len(diffs):
            gains[(a, at)] = float(diffs.mean())
            # What the arm will show on the confirming successes: its gain where it pairs,
            # times how often it pairs (a fixed replay shifted by a first delay often does not).
            evidence[(a, at)] = gains[(a, at)] * len(diffs) / len(screen)
    if not gains:
        ctx.notes["delay_success"] = "no delayed replay still succeeded"
        return None
    best, at = min(evidence, key=lambda key: (-evidence[key], POSITIONS.index(key[1]), key[0]))
    table, kept = _replay(ctx, confirm, best, k, at, "confirm", want=n_confirm, more=more)
    ctx.table("delay", table)
    won = table[table["matched"]] if len(table) else table
    diffs = paired_gain(table)
    verdict = {"n_pairs": int(len(diffs)), "n_replayed": int(len(table)), "k": k, "at": at,
               "delay_action": ctx.describe_action(best),
               "screen_mean_gain": {f"{ctx.describe_action(a)}@{p}": g for (a, p), g in gains.items()},
               "min_effect": min_effect * scale,
               "test": "Wilcoxon signed-rank on (delayed - at once) returns of the same successes, one-sided"}
    ctx.notes["delay_success"] = verdict
    if len(diffs) < MIN_SAMPLES:
        return None
    p = signed_rank_p(diffs, alternative="greater")
    gain = float(diffs.mean())
    ci = list(bootstrap_ci(diffs, rng))
    verdict.update(p_value=p, gain=gain, gain_ci=ci)
    holds = bool(p < ctx.config.alpha and gain >= min_effect * scale and ci[0] > 0)
    if holds:
        for records in kept:
            ctx.keep(records)
    examples = won.sort_values(["delayed_return", "episode_id"], ascending=[False, True])["episode_id"]
    shown = {"behaviour": "delay-success", "reward_path": "env", "p_value": p,
             "mean_delayed": float(won["delayed_return"].mean()), "mean_at_once": float(won["original_return"].mean()),
             "gain": gain, "gain_ci": ci, "k": k, "delay_action": verdict["delay_action"], "at": at,
             "n_pairs": int(len(diffs)), "min_effect": verdict["min_effect"], "test": verdict["test"],
             "success_source": sorted(set(won["source"]))}
    found = decide_length_bias("delay", {"holds": holds, "evidence": shown,
                                         "examples": [int(e) for e in examples.head(5)]})
    return found[0] if found else None
