"""The rollout pipeline model: what a trainer does to rollouts before GRPO sees their rewards.

Each episode has an outcome class (``success``, ``failure``, ``timeout``, ``error``, or
``unknown`` when the env gives no success signal). Per class the pipeline applies a *handling*:

- ``keep``: train on the env's return;
- ``zero``: train on 0;
- ``penalty``: train on ``penalty`` (a configured value);
- ``drop``: remove the rollout from the loss; with ``dropped_in_baseline`` it still counts, at
  its env return, in its group's mean and std.

Then whole-group masking (a group containing a masked class is dropped entirely), zero-variance
group filtering (a group whose trained rewards are all equal is dropped, as DAPO/verl do) and
advantage scaling (``std`` as in GRPO, ``none`` as in Dr. GRPO). ``group_advantages`` turns one
group's returns and outcome classes into the advantages the policy gradient actually sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from envaudit.protocol import ERROR, FAILURE, SUCCESS, TIMEOUT, UNKNOWN

HANDLINGS = ("keep", "zero", "penalty", "drop")
CLASSES = (SUCCESS, FAILURE, TIMEOUT, ERROR, UNKNOWN)
SCALINGS = ("std", "none")


@dataclass(frozen=True)
class Pipeline:
    """How a training pipeline turns rollouts into group-relative advantages."""

    name: str = "keep"
    handling: Mapping[str, str] = field(default_factory=dict)
    """Per outcome class, one of keep/zero/penalty/drop; classes not named are kept."""
    penalty: float = -1.0
    """Training reward of rollouts handled with ``penalty``."""
    dropped_in_baseline: bool = False
    """Whether a dropped rollout still counts (at its env return) in its group's mean and std."""
    mask_group_on: tuple[str, ...] = ()
    """Outcome classes whose presence drops the whole group from the loss."""
    filter_zero_variance: bool = False
    """Drop groups whose trained rewards are all equal (they carry no gradient under std scaling)."""
    advantage_scaling: str = "std"
    """``std``: (r - mean) / (std + eps) as in GRPO; ``none``: r - mean as in Dr. GRPO."""
    eps: float = 1e-6
    description: str = ""
    """Where this configuration comes from, for reports."""

    def __post_init__(self) -> None:
        handling = dict(self.handling)
        for cls, how in handling.items():
            if cls not in CLASSES:
                raise ValueError(f"pipeline handling names unknown outcome class {cls!r}; expected one of {CLASSES}")
            if how not in HANDLINGS:
                raise ValueError(
                    f"handling for {cls!r} is {how!r}; expected one of {', '.join(HANDLINGS)}"
                )
        object.__setattr__(self, "handling", handling)
        bad = set(self.mask_group_on) - set(CLASSES)
        if bad:
            raise ValueError(f"mask_group_on names unknown outcome classes {sorted(bad)}")
        if self.advantage_scaling not in SCALINGS:
            raise ValueError(f"advantage_scaling must be 'std' or 'none', got {self.advantage_scaling!r}")

    def handling_of(self, outcome: str) -> str:
        return self.handling.get(outcome, "keep")

    def with_timeout_handling(self, handling: str, penalty: float | None = None) -> Pipeline:
        """The same pipeline with timed-out rollouts handled as ``handling``."""
        return replace(self, handling={**self.handling, TIMEOUT: handling},
                       penalty=self.penalty if penalty is None else penalty)

    def to_dict(self) -> dict:
        return {
            "name": self.name, "handling": dict(self.handling), "penalty": self.penalty,
            "dropped_in_baseline": self.dropped_in_baseline, "mask_group_on": list(self.mask_group_on),
            "filter_zero_variance": self.filter_zero_variance,
            "advantage_scaling": self.advantage_scaling, "description": self.description,
        }


def timeout_handling_pipeline(handling: str, penalty: float = -1.0) -> Pipeline:
    """The simple form: every class kept, timed-out rollouts handled as ``handling``."""
    if handling not in HANDLINGS:
        raise ValueError(f"timeout handling must be one of {', '.join(HANDLINGS)}, got {handling!r}")
    return Pipeline(name=f"timeout-{handling}", handling={TIMEOUT: handling}, penalty=penalty,
                    description=f"timed-out rollouts: {handling}; everything else kept")


@dataclass(frozen=True)
class GroupAdvantages:
    advantages: np.ndarray
    """Per rollout; 0 where not trained."""
    trained: np.ndarray
    """Per rollout: whether it contributes to the loss."""
    training_rewards: np.ndarray
    """Per rollout, the reward after handling (NaN where dropped)."""
    group_dropped: str | None = None
    """Why the whole group left the loss (``masked``/``zero_variance``), or None."""


def group_advantages(returns: Sequence[float], outcomes: Sequence[str], pipeline: Pipeline) -> GroupAdvantages:
    """Advantages of one GRPO group (rollouts from the same reset seed) under ``pipeline``."""
    r = np.asarray(returns, dtype=float)
    assert len(r) == len(outcomes), f"{len(r)} returns but {len(outcomes)} outcome classes"
    n = len(r)
    how = [pipeline.handling_of(o) for o in outcomes]
    trained_r = np.where(
        np.array([h == "zero" for h in how]), 0.0,
        np.where(np.array([h == "penalty" for h in how]), pipeline.penalty, r),
    ) if n else r
    trained = np.array([h != "drop" for h in how], dtype=bool)
    train_values = np.where(trained, trained_r, np.nan)
    zeros = np.zeros(n)
    if n == 0 or not trained.any():
        return GroupAdvantages(zeros, np.zeros(n, bool), train_values, "masked" if n else None)
    if any(o in pipeline.mask_group_on for o in outcomes):
        return GroupAdvantages(zeros, np.zeros(n, bool), train_values, "masked")
    baseline_set = np.where(trained, trained_r, r) if pipeline.dropped_in_baseline else trained_r[trained]
    mean = float(np.mean(baseline_set))
    if pipeline.filter_zero_variance and np.ptp(baseline_set) == 0.0:
        return GroupAdvantages(zeros, np.zeros(n, bool), train_values, "zero_variance")
    adv = trained_r - mean
    if pipeline.advantage_scaling == "std":
        adv = adv / (float(np.std(baseline_set)) + pipeline.eps)
    adv = np.where(trained, adv, 0.0)
    return GroupAdvantages(adv, trained, train_values)
