"""Small envs for testing ``envaudit.testing``, with incentives known by construction.

``FetchTask`` is a plain ``gymnasium.Env`` (not a ``ToolEnv``) that speaks the info protocol;
``PingTool`` is a tiny ``ToolEnv``. Each reward is a constructor parameter, so a test derives the
numbers it expects from the parameters, and the flawed settings have clean twins (the defaults).
"""

from __future__ import annotations

import random
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.toolenv import ToolEnv, ToolOutput, Transition

FETCH, MIRROR, SUBMIT, WAIT, CLAIM = range(5)
LABELS = ["fetch", "fetch_mirror", "submit", "wait", "claim"]


class FetchTask(gym.Env):
    """Fetch ``need`` facts (1 or 2, drawn at reset), then submit.

    - ``fetch`` calls tool ``fetch``: ``"ok"`` adds a fact; ``"error"`` with ``error_rate`` pays
      ``error_reward``; ``"timeout"`` with ``timeout_rate`` pays ``timeout_reward``.
    - ``fetch_mirror`` calls the same tool ``fetch`` by a route that never fails (no reward).
    - every fact gained pays ``fact_reward`` (progress, paid mid-episode and on the last step alike).
    - ``submit`` (tool ``submit``) ends the episode: success iff enough facts; pays 1 or 0.
    - ``wait`` calls no tool. ``claim`` (tool ``claim``) ends the episode unsuccessfully, paying
      ``claim_reward``.
    - reaching ``max_steps`` truncates the episode and adds ``truncation_reward``.
    - ``unseeded`` draws ``need`` from Python's global ``random`` (not replayable).
    """

    metadata: dict[str, Any] = {"render_modes": []}
    action_labels = LABELS

    def __init__(self, *, max_steps: int = 6, error_rate: float = 0.0, error_reward: float = 0.0,
                 timeout_rate: float = 0.0, timeout_reward: float = 0.0, truncation_reward: float = 0.0,
                 claim_reward: float = 0.0, unseeded: bool = False, report_success: bool = True,
                 fact_reward: float = 0.0) -> None:
        self.max_steps, self.fact_reward = max_steps, fact_reward
        self.error_rate, self.error_reward = error_rate, error_reward
        self.timeout_rate, self.timeout_reward = timeout_rate, timeout_reward
        self.truncation_reward, self.claim_reward = truncation_reward, claim_reward
        self.unseeded, self.report_success = unseeded, report_success
        self.action_space = gym.spaces.Discrete(len(LABELS))
        self.observation_space = gym.spaces.Box(0, 10, shape=(3,), dtype=np.float32)

    def _obs(self) -> np.ndarray:
        return np.array([self.facts, self.need, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.need = random.randint(1, 2) if self.unseeded else int(self.np_random.integers(1, 3))
        self.facts, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        self.t += 1
        reward, terminated, info = 0.0, False, {}
        if action == FETCH:
            u = self.np_random.random()
            status = "error" if u < self.error_rate else "timeout" if u < self.error_rate + self.timeout_rate else "ok"
            reward = {"error": self.error_reward, "timeout": self.timeout_reward}.get(status, self.fact_reward)
            self.facts += status == "ok"
            info["tool"] = {"name": "fetch", "status": status}
        elif action == MIRROR:
            self.facts += 1
            reward = self.fact_reward
            info["tool"] = {"name": "fetch", "status": "ok"}
        elif action == SUBMIT:
            info["tool"] = {"name": "submit", "status": "ok"}
            terminated, success = True, self.facts >= self.need
            reward = 1.0 if success else 0.0
        elif action == CLAIM:
            info["tool"] = {"name": "claim", "status": "ok"}
            terminated, success, reward = True, False, self.claim_reward
        truncated = not terminated and self.t >= self.max_steps
        if truncated:
            reward += self.truncation_reward
            success = False
        if (terminated or truncated) and self.report_success:
            info["success"] = success
        return self._obs(), reward, terminated, truncated, info


class PingTool(ToolEnv):
    """A tiny ``ToolEnv``: ``ping`` until it answered ``need`` times, then ``done``.

    A failed ping pays ``error_reward``, a timed-out one ``timeout_reward`` (and ends the episode
    when ``end_on_timeout``); a successful ``done`` pays 1, an early one 0.
    """

    def __init__(self, *, max_steps: int = 5, error_reward: float = 0.0, timeout_reward: float = 0.0,
                 end_on_timeout: bool = False) -> None:
        super().__init__(max_steps=max_steps)
        self.error_reward, self.timeout_reward, self.end_on_timeout = error_reward, timeout_reward, end_on_timeout
        self.add_tool("ping", lambda: ToolOutput("pong", 0.01), deadline_s=1.0)
        self.add_tool("done", lambda: None, deadline_s=1.0)
        self.add_call("ping", "ping")
        self.add_call("done", "done")
        self.observation_space = gym.spaces.Box(0, 10, shape=(2,), dtype=np.float32)

    def reset_task(self, options) -> np.ndarray:
        self.need, self.pongs = int(self.np_random.integers(1, 3)), 0
        return np.array([self.pongs, self.need], dtype=np.float32)

    def transition(self, call, result) -> Transition:
        if call.tool == "ping":
            self.pongs += result.ok
            obs = np.array([self.pongs, self.need], dtype=np.float32)
            if result.status == "timeout":
                return Transition(obs, self.timeout_reward, terminated=self.end_on_timeout, success=False)
            return Transition(obs, self.error_reward if result.status == "error" else 0.0)
        success = self.pongs >= self.need
        return Transition(np.array([self.pongs, self.need], dtype=np.float32), float(success), True, success)




class SingleRoute(gym.Env):
    """A plain ``gymnasium.Env`` where one action, and only one, calls each tool: a fault of the
    ``fetch`` tool comes from the env's own randomness and cannot be forced or avoided by another
    action calling the same tool, so only replays under other seeds show what the call would pay.

    Actions: ``fetch`` (tool ``fetch``: ``"error"`` with ``error_rate``, paying ``error_reward``;
    ``"timeout"`` with ``timeout_rate``, paying ``timeout_reward``; else ``"ok"``, one more fact),
    ``submit`` (tool ``submit``; ends the episode, success iff ``need`` facts, pays 1 or 0) and
    ``wait``. With ``end_on_fault`` a failed or timed-out fetch ends the episode (unsuccessfully).
    ``fail_first``: a fetch as the first step always fails, so no call from that state succeeds.
    ``reward_noise``: the standard deviation of Gaussian noise added to every reward, so that no
    single comparison decides.
    ``max_steps`` truncates; the default 100 is beyond the 50 steps a property plays, so episodes
    are never truncated there. Every reward is a parameter; the defaults are the clean twin.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    action_labels = ["fetch", "submit", "wait"]

    def __init__(self, *, error_rate: float = 0.0, error_reward: float = 0.0, timeout_rate: float = 0.0,
                 timeout_reward: float = 0.0, end_on_fault: bool = False, max_steps: int = 100,
                 fail_first: bool = False, reward_noise: float = 0.0) -> None:
        self.error_rate, self.error_reward, self.fail_first = error_rate, error_reward, fail_first
        self.reward_noise = reward_noise
        self.timeout_rate, self.timeout_reward = timeout_rate, timeout_reward
        self.end_on_fault, self.max_steps = end_on_fault, max_steps
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.spaces.Box(0, 200, shape=(3,), dtype=np.float32)

    def _obs(self) -> np.ndarray:
        return np.array([self.facts, self.need, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.need, self.facts, self.t = int(self.np_random.integers(1, 3)), 0, 0
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        self.t += 1
        reward, terminated, success, info = 0.0, False, False, {}
        if action == 0:
            u = self.np_random.random()
            status = "error" if u < self.error_rate else "timeout" if u < self.error_rate + self.timeout_rate else "ok"
            if self.fail_first and self.t == 1:
                status = "error"
            reward = {"error": self.error_reward, "timeout": self.timeout_reward}.get(status, 0.0)
            self.facts += status == "ok"
            terminated = self.end_on_fault and status != "ok"
            info["tool"] = {"name": "fetch", "status": status}
        elif action == 1:
            info["tool"] = {"name": "submit", "status": "ok"}
            terminated, success = True, self.facts >= self.need
            reward = 1.0 if success else 0.0
        if self.reward_noise:
            reward += float(self.np_random.normal(0.0, self.reward_noise))
        truncated = not terminated and self.t >= self.max_steps
        if terminated or truncated:
            info["success"] = success
        return self._obs(), reward, terminated, truncated, info


class HandoffAfterFailure(ToolEnv):
    """A user-written booking ``ToolEnv`` (issue 10): ``search`` fails with ``search_failure_rate``
    (the env's own draw), every step costs ``step_cost``, ``book`` after a successful search
    succeeds (+1), and ``handoff`` right after a failed search pays ``handoff_reward`` without
    success: a reward conditioned on a preceding tool failure (0 in the clean twin)."""

    def __init__(self, *, search_failure_rate: float = 0.3, step_cost: float = 0.01,
                 handoff_reward: float = 0.8) -> None:
        super().__init__(max_steps=10)
        self.failure_rate, self.step_cost, self.handoff_reward = search_failure_rate, step_cost, handoff_reward
        self.add_tool("search", self._search)
        self.add_tool("book", lambda: ToolOutput("booked", 0.01))
        self.add_tool("handoff", lambda: ToolOutput("handed off", 0.01))
        for name in ("search", "book", "handoff"):
            self.add_call(name, name)
        self.observation_space = gym.spaces.Box(0, 1, shape=(2,), dtype=np.float32)

    def _search(self) -> ToolOutput:
        if self.np_random.random() < self.failure_rate:
            raise RuntimeError("search backend unavailable")
        return ToolOutput("3 rooms", 0.01)

    def _obs(self) -> np.ndarray:
        return np.array([self.found, self.last_failed], dtype=np.float32)

    def reset_task(self, options) -> np.ndarray:
        self.found, self.last_failed = 0, 0
        return self._obs()

    def transition(self, call, result) -> Transition:
        if call.tool == "search":
            self.found |= int(result.ok)
            self.last_failed = int(not result.ok)
            return Transition(self._obs(), -self.step_cost)
        if call.tool == "book":
            return Transition(self._obs(), float(self.found) - self.step_cost, True, bool(self.found))
        pay = self.handoff_reward if self.last_failed else 0.0
        return Transition(self._obs(), pay - self.step_cost, True, False)


class OneState(gym.Env):
    """A one-state env for tests that only need ``step``: subclasses set ``action_space`` and
    ``step``; ``reset`` seeds and returns observation 0."""

    observation_space = gym.spaces.Discrete(1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}
