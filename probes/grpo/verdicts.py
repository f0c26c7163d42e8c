"""Where what GRPO learned or reached sits on DESIGN.md's severity ladder.

The drift tests (``drift``) say *that* training moved a behaviour; these functions say whether the
move is an incentive of the env or pipeline (``warn``/``fail``) or a training-dynamics fact
(``info``):

- ``delayed_success`` (``probes._shared.delays``, shared with the length probe's logged half): from
  the same start (one GRPO group, one reset seed), do successes reached after extra steps earn more
  than the fastest success? Then delaying an already reachable success pays: ``length-bias`` at ``fail``.
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

from envaudit.probes._shared.delays import failed_calls
from envaudit.protocol import SUCCESS, TIMEOUT, TOOL_FAILED
from envaudit.stats import MIN_SAMPLES, compare


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
    refunded = beats(q + cost_per_failure * failed_calls(quit), p + cost_per_failure * failed_calls(persist),
                     "with failed calls charged only their step")
    return {"holds": bool(charged["holds"] and not refunded["holds"]), "charged": charged, "refunded": refunded,
            "p_value": charged["p_value"], "mean_quit": float(q.mean()) if len(q) else None,
            "mean_persist": float(p.mean()) if len(p) else None, "n_persist": len(p)}
