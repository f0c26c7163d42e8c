"""Where what GRPO learned or reached sits on DESIGN.md's severity ladder.

The drift tests (``drift``) say *that* training moved a behaviour; these functions say whether the
move is an incentive of the env or pipeline (``warn``/``fail``) or a training-dynamics fact
(``info``):

- ``delayed_success``: from the same start (one GRPO group, one reset seed), do successes reached
  after extra steps earn more than the fastest success? Then delaying an already reachable success
  pays: ``length-bias`` at ``fail``.
- ``failure_conditioned_endings``: does ending an episode right after a failed tool call pay more
  than the same ending action after a call that worked (a hand-off paid for only after a failure)?
- ``quitting_beats_persisting``: at the env's own failure rates, does ending early earn more than
  trying honestly? Only a ``warn`` when failed calls are also charged beyond the step they take
  (``drift.failure_cost``); under a mere step cost it is the exploration-collapse hint (``info``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from envaudit.protocol import SUCCESS, TIMEOUT, TOOL_FAILED
from envaudit.stats import MIN_SAMPLES, compare, paired_compare


def _failed_calls(episodes: pd.DataFrame) -> np.ndarray:
    return (episodes["n_tool_errors"] + episodes["n_tool_timeouts"]).to_numpy(int)


def _sets(table: pd.DataFrame, keys: list[str]) -> list[np.ndarray]:
    """Row positions of each set of ``table`` sharing ``keys``, in sorted key order (as
    ``groupby(keys, sort=True)``, rows with a missing key left out), rows in table order. One
    ``ngroup`` pass instead of a DataFrame per set: a training run has thousands of sets."""
    if table.empty:
        return []
    codes = table.groupby(keys, sort=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    order = order[codes[order] >= 0]  # -1: a key is missing (groupby drops those rows)
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    return np.split(order, cuts)


def _mean(values: np.ndarray) -> float:
    """The mean of the values that are not NaN (as ``Series.mean``); NaN where there are none."""
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if len(kept) else float("nan")


def _descending(values: np.ndarray) -> np.ndarray:
    """Positions of ``values`` largest first, ties in the order ``sort_values(ascending=False)``
    gives them (pandas reverses, sorts, and reverses back; NaN last)."""
    if np.isnan(values).any():
        return pd.Series(values).sort_values(ascending=False).index.to_numpy()
    backwards = np.arange(len(values))[::-1]
    return backwards[values[::-1].argsort(kind="quicksort")][::-1]


def delayed_success(pools: dict[str, pd.DataFrame], rng: np.random.Generator, *, margin: float,
                    alpha: float) -> dict[str, Any]:
    """Do later successes earn more than the fastest success from the same start?

    ``pools`` maps a run name to its episodes (with ``group`` and, for training, ``iteration``
    tags). Within every set of episodes that share a reset seed (run, iteration, group) and the
    same number of failed tool calls (so a failed call that pays is not mistaken for a delay), the
    successes at the shortest length are the fastest success; successes reached after more steps
    are the delayed ones. One pair per such set: mean return of the delayed successes, mean return
    of the fastest. ``holds`` when the delayed ones earn more by at least ``margin`` (mean paired
    difference, bootstrap CI above 0) with a one-sided signed-rank p below ``alpha`` over at least
    ``MIN_SAMPLES`` sets; returns equal up to float rounding are equal (never a delay incentive).
    """
    delayed, fastest, extra, examples = [], [], [], []
    wins_by_length: dict[int, list[float]] = {}
    for episodes in pools.values():
        if episodes.empty or "group" not in episodes:
            continue
        wins = episodes[episodes["outcome"] == SUCCESS].assign(failed=lambda e: _failed_calls(e))
        lengths, returns = wins["length"].to_numpy(int), wins["return"].to_numpy(float)
        for length, r in zip(lengths.tolist(), returns.tolist(), strict=True):
            wins_by_length.setdefault(length, []).append(r)
        keys = [k for k in ("iteration", "group") if k in wins] + ["failed"]
        ids = wins["episode_id"].to_numpy()
        for rows in _sets(wins, keys):
            here = lengths[rows]
            shortest = int(here.min())
            fast, late = rows[here == shortest], rows[here > shortest]
            if not len(late):
                continue
            delayed.append(_mean(returns[late]))
            fastest.append(_mean(returns[fast]))
            extra.append(float(lengths[late].mean()) - shortest)
            if delayed[-1] > fastest[-1]:
                examples.extend(int(i) for i in ids[late[_descending(returns[late])]])
    # The same rewards summed in another order differ in the last bits; that is one return, not a
    # delay that pays (a return maximiser cannot act on float rounding).
    delayed_a, fastest_a = np.asarray(delayed, float), np.asarray(fastest, float)
    delayed_a = np.where(np.isclose(delayed_a, fastest_a, rtol=1e-9, atol=1e-12), fastest_a, delayed_a)
    test = paired_compare(delayed_a, fastest_a, rng, labels=("delayed", "fastest"))
    holds = bool(len(delayed) >= MIN_SAMPLES and test["p_value"] < alpha and test["diff"] is not None
                 and test["diff"] >= margin and test["diff_ci"][0] > 0)
    quickest = min(wins_by_length) if wins_by_length else None
    return {"holds": holds, "test": test, "n_sets": len(delayed), "margin": margin,
            "extra_steps": float(np.mean(extra)) if extra else None,
            "fastest": None if quickest is None else {"length": quickest,
                                                      "return": float(np.mean(wins_by_length[quickest]))},
            "examples": list(dict.fromkeys(examples))}


def failure_conditioned_endings(steps: pd.DataFrame, episodes: pd.DataFrame, rng: np.random.Generator, *,
                                margin: float, alpha: float) -> dict[str, Any]:
    """Does the same ending action pay more right after a failed tool call than after one that worked?

    Reads the last step of every episode that ended without success (not a timeout): its reward,
    its action, and whether the step before it was a failed call. Compares, action by action, the
    final reward after a failure with the final reward of the same action otherwise (one-sided
    Mann–Whitney on the pooled endings of the actions seen both ways). ``holds`` when the ending
    after a failure earns more by at least ``margin`` with p below ``alpha`` and ``MIN_SAMPLES``
    endings each way; ``episode_ids`` are the endings after a failure.
    """
    ended = episodes[(episodes["outcome"] != SUCCESS) & (episodes["outcome"] != TIMEOUT)]
    empty = {"holds": False, "n_after_failure": 0, "n_otherwise": 0, "p_value": 1.0, "episode_ids": []}
    if ended.empty or steps.empty:
        return empty
    mine = steps[steps["episode_id"].isin(set(ended["episode_id"]))].sort_values(["episode_id", "step"])
    previous = mine.groupby("episode_id")["tool_status"].shift(1)
    mine = mine.assign(after_failure=previous.isin(TOOL_FAILED).to_numpy())
    last = mine.groupby("episode_id").tail(1)
    key = last["action_label"].where(last["action_label"].notna(), last["action"].astype(str))
    last = last.assign(key=key.astype(str))
    after, otherwise = last[last["after_failure"]], last[~last["after_failure"]]
    both = sorted(set(after["key"]) & set(otherwise["key"]))
    after, otherwise = after[after["key"].isin(both)], otherwise[otherwise["key"].isin(both)]
    if len(after) < MIN_SAMPLES or len(otherwise) < MIN_SAMPLES:
        return {**empty, "n_after_failure": len(after), "n_otherwise": len(otherwise)}
    test = compare(after["reward"].to_numpy(float), otherwise["reward"].to_numpy(float), rng,
                   labels=("after_failure", "otherwise"))
    holds = bool(test["p_value"] < alpha and test["diff"] >= margin and test["diff_ci"][0] > 0)
    actions = after.groupby("key")["reward"].agg(["mean", "size"]).sort_values("size", ascending=False)
    return {"holds": holds, "test": test, "p_value": test["p_value"], "n_after_failure": len(after),
            "n_otherwise": len(otherwise), "actions": actions.index.tolist(),
            "ending_after_failure": float(after["reward"].mean()),
            "ending_otherwise": float(otherwise["reward"].mean()),
            "episode_ids": after["episode_id"].astype(int).drop_duplicates().tolist()}


def quitting_beats_persisting(quit: pd.DataFrame, persist: pd.DataFrame, cost_per_failure: float,
                              rng: np.random.Generator, *, margin: float, alpha: float) -> dict[str, Any]:
    """Does ending early earn more than persisting through failures, *because* failures are charged?

    ``quit``: episodes that ended early without success; ``persist``: episodes that kept going
    after a failed tool call, at the env's own failure rates. ``holds`` when quitting clearly beats
    persisting as the env pays (one-sided Mann–Whitney below ``alpha``, mean difference at least
    ``margin``, CI above 0) and no longer does once every failed call is refunded its charge
    (``cost_per_failure`` added back): the charge, not the task, makes quitting pay. Quitting that
    wins even without the charge is a policy that persists badly (or another incentive), not a
    failure shortcut.
    """
    def beats(q: np.ndarray, p: np.ndarray, name: str) -> dict[str, Any]:
        if len(q) < MIN_SAMPLES or len(p) < MIN_SAMPLES:
            return {"holds": False, "underpowered": True, "n_quit": len(q), "n_persist": len(p), "p_value": 1.0}
        test = compare(q, p, rng, labels=("quit", "persist"))
        return {"holds": bool(test["p_value"] < alpha and test["diff"] >= margin and test["diff_ci"][0] > 0),
                "test": test, "p_value": test["p_value"], "what": name}

    q, p = quit["return"].to_numpy(float), persist["return"].to_numpy(float)
    charged = beats(q, p, "as the env pays")
    refunded = beats(q + cost_per_failure * _failed_calls(quit), p + cost_per_failure * _failed_calls(persist),
                     "with failed calls charged only their step")
    return {"holds": bool(charged["holds"] and not refunded["holds"]), "charged": charged, "refunded": refunded,
            "p_value": charged["p_value"], "mean_quit": float(q.mean()) if len(q) else None,
            "mean_persist": float(p.mean()) if len(p) else None, "n_persist": len(p)}
