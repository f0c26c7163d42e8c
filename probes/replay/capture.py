"""What the agent saw in a replayed episode (``Capture``, handed back as each episode's payload)
and the scripted replays (``Scripted``)."""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.protocol import TOOL_KEY
from envaudit.rollout import Policy


@dataclass
class Step:
    action: Any
    observation: Any = None
    reward: Any = None
    terminated: Any = None
    truncated: Any = None
    tool_status: Any = None
    exception: str | None = None  # the exception's type name when step() raised


@dataclass
class Trajectory:
    seed: int | None
    reset_obs: Any
    instance: Any  # the env instance that played it (``Capture.instance``)
    steps: list[Step] = field(default_factory=list)

    @property
    def actions(self) -> list[Any]:
        return [s.action for s in self.steps]


def snapshot(x: Any) -> Any:
    """A copy the env cannot change later (some envs reuse their observation buffers)."""
    try:
        return copy.deepcopy(x)
    except Exception:
        return x


class Capture(gym.Wrapper):
    """Keep a ``Trajectory`` of the episode being played; the 5-tuple passes through unchanged.

    ``episode_payload()`` hands it back to the runner (``RunResult.payloads``), from whatever worker
    played the episode, so the replays fan out over the scan's workers; ``instance`` names this env
    instance (its process and its place there), which says whether two episodes shared one."""

    _made = itertools.count()

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.instance = (os.getpid(), next(Capture._made))
        self.current: Trajectory | None = None

    def reset(self, *, seed=None, options=None):
        self.current = None
        obs, info = self.env.reset(seed=seed, options=options)
        self.current = Trajectory(seed, snapshot(obs), self.instance)
        return obs, info

    def step(self, action):
        try:
            out = self.env.step(action)
        except Exception as exc:
            if self.current is not None:
                self.current.steps.append(Step(snapshot(action), exception=type(exc).__name__))
            raise
        if self.current is not None:
            obs, reward, terminated, truncated, info = out
            tool = info.get(TOOL_KEY) if isinstance(info, Mapping) else None
            status = tool.get("status") if isinstance(tool, Mapping) else None
            self.current.steps.append(Step(snapshot(action), snapshot(obs), snapshot(reward),
                                           terminated, truncated, status))
        return out

    def episode_payload(self) -> Trajectory | None:
        return self.current


class Scripted(Policy):
    """Play ``actions``, then sample from a copy of the action space seeded with ``seed``.

    Independent of the run's generator, so two plays of the same ``Scripted`` play the same actions
    whatever else the runs did.
    """

    name = "replay"

    def __init__(self, actions: list[Any], seed: int) -> None:
        self.actions = list(actions)
        self.seed = int(seed)

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.space = copy.deepcopy(env.action_space)
        self.space.seed(self.seed)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.actions[self.t] if self.t < len(self.actions) else self.space.sample()


__all__ = ["Capture", "Scripted", "Step", "Trajectory", "snapshot"]
