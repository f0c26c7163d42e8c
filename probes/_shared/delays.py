"""Delayed successes: from the same start, do successes reached after extra steps earn more than
the fastest success? Read by the GRPO probe (on its trained policy's groups) and by the length
probe's logged half (on a training run's groups); both grade it as ``length-bias``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from envaudit.protocol import SUCCESS
from envaudit.stats import MIN_SAMPLES, paired_compare


def failed_calls(episodes: pd.DataFrame) -> np.ndarray:
    """Per episode, its failed tool calls (errors and timeouts)."""
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
        wins = episodes[episodes["outcome"] == SUCCESS].assign(failed=lambda e: failed_calls(e))
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
