"""A small env whose every step is known from its seed, and hand-built logs of it, for replay tests.

``Corridor``: actions 0 ``wait`` (reward 0, no tool call), 1 ``search`` (a tool call, status ok,
reward -0.1) and 2 ``answer`` (ends the episode: reward 1 and ``success`` when the reset seed is
even, else reward 0 and no success). Any other action raises ``ValueError``. An episode not
answered by then is truncated after ``HORIZON`` steps. ``info["success"]`` is on every step: False
until a correct answer.

A log of it replays exactly when each logged step carries what the env gives for that action and
seed; the tests then change one logged value and know the divergence that must be reported.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pandas as pd

from envaudit.logs.records import Converted, to_records
from envaudit.logs.schema import LoggedRun, check_run

HORIZON = 3
WAIT, SEARCH, ANSWER = 0, 1, 2
LABELS = ("wait", "search", "answer")
SEARCH_REWARD = -0.1


class Corridor(gym.Env):
    def __init__(self) -> None:
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.spaces.Discrete(HORIZON + 1)
        self.seed_, self.t = 0, 0
        self.closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.seed_, self.t = int(seed or 0), 0
        return 0, {}

    def step(self, action: Any):
        if action not in (WAIT, SEARCH, ANSWER):
            raise ValueError(f"no action {action!r}")
        self.t += 1
        info: dict[str, Any] = {"success": False}
        if action == ANSWER:
            solved = self.seed_ % 2 == 0
            info["success"] = solved
            return self.t, 1.0 if solved else 0.0, True, False, info
        reward = 0.0
        if action == SEARCH:
            info["tool"] = {"name": "search", "status": "ok"}
            reward = SEARCH_REWARD
        return self.t, reward, False, self.t >= HORIZON, info

    def close(self) -> None:
        self.closed = True


class LabelledCorridor(Corridor):
    """The same env with a catalogue of action names (a tool env's ``action_labels``)."""

    action_labels = LABELS


class TextCorridor(Corridor):
    """The same env stepped with text: the action is the label itself."""

    def __init__(self) -> None:
        super().__init__()
        self.action_space = gym.spaces.Text(max_length=16)

    def step(self, action: Any):
        return super().step(LABELS.index(action) if action in LABELS else action)


def make_corridor() -> gym.Env:
    return Corridor()


def expected_steps(seed: int, actions: list[int]) -> list[dict[str, Any]]:
    """What the env gives for these actions from ``reset(seed)``, by the design above."""
    rows = []
    for k, a in enumerate(actions):
        reward = SEARCH_REWARD if a == SEARCH else (1.0 if seed % 2 == 0 else 0.0) if a == ANSWER else 0.0
        rows.append({"step": k, "action": a, "reward": reward, "tool_status": "ok" if a == SEARCH else None})
    return rows


def episode(episode_id: Any, seed: int | None, actions: list[int], **overrides: Any) -> dict[str, Any]:
    """One logged episode that replays exactly: its steps, return, end reason and success flag."""
    steps = expected_steps(seed if seed is not None else 0, actions)
    answered = bool(actions) and actions[-1] == ANSWER
    ep = {"episode_id": episode_id, "iteration": 0, "seed": seed, "steps": steps,
          "return": sum(s["reward"] for s in steps),
          "end_reason": "terminated" if answered else "truncated" if len(actions) >= HORIZON else "error",
          "success": answered and seed is not None and seed % 2 == 0}
    ep.update(overrides)
    return ep


def logged(episodes: list[dict[str, Any]], *, step_columns: tuple[str, ...] = ("reward", "action", "tool_status"),
           episode_columns: tuple[str, ...] = ("seed", "end_reason", "success")) -> Converted:
    """The episodes as a checked generic log, converted as ``envaudit logs`` converts it."""
    eps = pd.DataFrame([{k: v for k, v in ep.items() if k != "steps"} for ep in episodes])
    eps = eps[["episode_id", "iteration", "return", *episode_columns]]
    rows = [{"episode_id": ep["episode_id"], **s} for ep in episodes for s in ep["steps"]]
    steps = pd.DataFrame(rows, columns=["episode_id", "step", "action", "reward", "tool_status"])
    steps = steps[["episode_id", "step", *step_columns]]
    return to_records(check_run(LoggedRun(eps, steps if rows else None, "generic")))
