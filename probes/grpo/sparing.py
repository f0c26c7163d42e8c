"""What the ``grpo`` probe need not play: the success search where the natural run stands in for it,
and the ceilings that stop a targeted run once its verdict is decided.

Both save env steps without changing what a verdict reads:

- **The natural run stands in for the success search** when it settled with every evaluated
  episode a success and the pipeline paid every rollout of the run its env return. The success
  search pays a success its env return and anything else less than any return, so on every policy
  its objective is at most the env return's, with equality for a policy that always succeeds: the
  natural run's policy, which maximised the env return, already holds what the search would climb
  to from the uniform explorer. Where success is not the best-paying ending (an exploit pays more,
  a pipeline reshapes the rewards), the natural run does not always succeed, or not under the env
  return, and the search runs.
- **Ceilings** (``envaudit.grpo.search.Ceiling``): a targeted run's episodes matter to a verdict only
  from some return up: reward without success only where it comes within the ladder's margin of what
  honest success pays (below that ``decide_reward_without_success`` returns nothing, and the replay
  of what the searches met is not tried), timing out only where it clears failing outright by the
  margin (the ladder's ``warn``). A run whose best return through those behaviours stays below the
  ceiling and has stopped rising is decided: more iterations would not reach a rung.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from envaudit.grpo.search import Ceiling, Reference, SearchResult, reach_of
from envaudit.probes.grpo.lessons import MIN_EFFECT, Honest
from envaudit.protocol import SUCCESS
from envaudit.stats import MIN_SAMPLES, reward_scale

STAND_IN = "natural"
"""The run that can stand in for the success search."""


def stands_in_for_success(natural: SearchResult | None) -> bool:
    """Whether the natural run already holds what the success search would reach (module docstring):
    it settled, every episode of its evaluation succeeded, and on every rollout of the run (training
    and evaluation) the pipeline paid the env return."""
    if natural is None or not natural.training.settled or natural.stopped is not None:
        return False
    evaluated, trained = natural.episodes, natural.training.episodes
    if evaluated.empty or not (evaluated["outcome"] == SUCCESS).all():
        return False
    return all(_paid_as_is(e) for e in (evaluated, trained))


def _paid_as_is(episodes: pd.DataFrame) -> bool:
    """Every episode kept in training with its env return as its training reward."""
    if "training_reward" not in episodes or episodes.empty:
        return False
    paid, returns = episodes["training_reward"].to_numpy(float), episodes["return"].to_numpy(float)
    return bool(episodes["trained"].all() and np.allclose(paid, returns, rtol=0.0, atol=1e-12))


def stand_in_reach(natural: SearchResult, reference: Reference) -> dict:
    """What the success search would report, read from the natural run's evaluation."""
    return {**reach_of(natural.episodes, "success", reference),
            "via": "the natural run standing in: it succeeded on every evaluation seed"}


def ceilings(behaviour: str, honest: Honest, explored_returns: np.ndarray) -> tuple[Ceiling, ...]:
    """The ceilings of the targeted run toward ``behaviour``, from honest play seen so far; none
    (never decided early) where honest success has not been seen, as the rung is then unknown, and
    none for the success search itself, which no verdict bounds."""
    success = honest.success[np.isfinite(honest.success)]
    if behaviour == "success" or not len(success):
        return ()
    margin = MIN_EFFECT * reward_scale(success, honest.failure, explored_returns)
    # Below both the mean (the ladder's non-inferiority) and the median (the replay's threshold).
    found = [Ceiling("no_success", min(float(success.mean()), float(np.median(success))) - margin, margin)]
    if behaviour == "timeout" and len(honest.failure) >= MIN_SAMPLES:
        found.append(Ceiling("timeout", float(np.mean(honest.failure)) + margin, margin))
    return tuple(found)


__all__ = ["STAND_IN", "ceilings", "stand_in_reach", "stands_in_for_success"]
