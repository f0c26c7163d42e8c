"""The policy/engine seam: what the GRPO loop needs from a policy, and nothing more.

An engine does two things: ``sample`` actions with their log-probabilities for a batch of
observations, and ``update`` itself from a batch of trajectories that carry group-relative
advantages. The embedded torch MLP (``torch_engine``) and the language-model engine on vLLM
(``lm_engine``) both plug into the same loop through this protocol. ``grpo_loss`` is the clipped
objective both use (per step for the MLP, per token for the language model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass
class ActionSample:
    """What ``sample`` returns for a batch of n observations."""

    actions: np.ndarray
    """(n,) int actions from the env's catalogue, or (an object array of) text tool calls for a
    text env (``envaudit.textmode``)."""
    logprobs: np.ndarray
    """(n,) log-probability of each action under the policy that sampled it (of a text action: the
    sum over its tokens; the engine keeps per-token values in ``states``)."""
    states: list[Any]
    """Per observation, the engine's own encoding (features, token ids), handed back in ``update``."""


@dataclass
class Trajectory:
    """One rollout as the update sees it: every step, and the rollout's advantage."""

    states: list[Any]
    actions: np.ndarray
    logprobs: np.ndarray
    """Log-probabilities at sampling time (the 'old' policy of the ratio)."""
    advantage: float

    def __len__(self) -> int:
        return len(self.actions)


@runtime_checkable
class PolicyEngine(Protocol):
    """A trainable policy over a discrete action catalogue (or writing text tool calls)."""

    def sample(self, observations: Sequence[Any], step_fractions: Sequence[float],
               rng: np.random.Generator, *, greedy: bool = False) -> ActionSample:
        """Actions for a batch of observations; ``step_fractions`` is t / step limit per row."""
        ...

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One GRPO update from trajectories with advantages; returns statistics such as
        ``loss``, ``entropy``, ``kl`` (to the initial policy) and ``clip_fraction``."""
        ...


def grpo_loss(
    new_logprobs: Any,
    old_logprobs: Any,
    advantages: Any,
    trajectory_index: Any,
    n_trajectories: int,
    *,
    clip_coef: float,
    aggregation: str,
) -> tuple[Any, Any]:
    """The clipped policy-gradient objective over every step of every trajectory (a loss to minimise).

    All tensors are per step; ``advantages`` repeats each trajectory's advantage on its steps and
    ``trajectory_index`` says which trajectory a step belongs to. ``aggregation="trajectory"``
    averages each trajectory's steps and then the trajectories (GRPO); ``"step"`` averages all steps.
    Returns ``(loss, clip_fraction)``.
    """
    import torch

    ratio = torch.exp(new_logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    per_step = -torch.minimum(unclipped, clipped)
    clip_fraction = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return aggregate(per_step, trajectory_index, n_trajectories, aggregation), clip_fraction


def aggregate(per_step: Any, trajectory_index: Any, n_trajectories: int, aggregation: str) -> Any:
    """Average a per-step quantity as the loss does (per trajectory first, or over all steps)."""
    import torch

    if aggregation == "step":
        return per_step.mean()
    sums = torch.zeros(n_trajectories, dtype=per_step.dtype, device=per_step.device).index_add_(
        0, trajectory_index, per_step)
    counts = torch.bincount(trajectory_index, minlength=n_trajectories).clamp(min=1).to(per_step.dtype)
    return (sums / counts).mean()
