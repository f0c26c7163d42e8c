"""Small tool envs whose incentives under GRPO are known by construction (for the trainer's tests).

``CheckSubmit`` (the timeout-drop lesson): ``check`` once reveals whether the current attempt is
good (a fresh draw at the step it is called, so rollouts of one group see different results);
``submit`` ends the episode: +1 and success when the attempt is good (checked or not), 0 otherwise;
``wait`` does nothing. After a bad check, submitting fails for sure and waiting out the step limit
times out, both at return 0. So under ``keep`` a bad attempt is a coin toss between failing and
stalling, under ``penalty`` stalling is worse than failing, and under ``drop`` a failing submit gets
a negative advantage that a stall escapes: the policy learns to stall after a bad check and the
timeout rate climbs towards P(bad check) = ``1 - good_rate``.

``WorkSubmit`` (the failure-shortcut lesson): ``work`` adds one unit of progress when its tool call
succeeds, ``submit`` ends the episode (+1 and success with at least ``need`` units, 0 otherwise),
``give_up`` ends it at 0. Every failed tool call costs ``failure_cost``. Under an injected failure
rate f on every tool, each needed successful call takes 1 / (1 - f) calls on average, so persisting
(``need + 1`` successful calls) returns about ``1 - (need + 1) * c * f / (1 - f)`` and giving up
``-c * f / (1 - f)``: with f = 0.5 and c = 1 giving up wins (-1 against -2); with c = 0 (the clean
twin) persisting wins (+1 against 0).

``TenOnes`` (the settling lesson): ten steps whatever the action, 1 for action 1, success at a
return of 5: deterministic, so a trained policy saturates on "always 1", and it never times out.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from envaudit import ToolEnv, Transition


class CheckSubmit(ToolEnv):
    def __init__(self, *, max_steps: int = 6, good_rate: float = 0.5) -> None:
        super().__init__(max_steps=max_steps)
        self.good_rate = good_rate
        for name in ("check", "submit", "wait"):
            self.add_tool(name, lambda: None, deadline_s=None)
            self.add_call(name, name)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    def reset_task(self, options):
        self.checked = self.good = False
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([self.checked, self.checked and self.good], dtype=np.float32)

    def transition(self, call, result):
        draw = self.np_random.random()  # one draw per step: the attempt drifts until checked
        if call.tool == "check" and not self.checked:
            self.checked, self.good = True, bool(draw < self.good_rate)
        if call.tool == "submit":
            good = self.good if self.checked else bool(draw < self.good_rate)
            return Transition(self._obs(), float(good), terminated=True, success=good)
        return Transition(self._obs())


class WorkSubmit(ToolEnv):
    def __init__(self, *, failure_cost: float = 0.0, need: int = 2, max_steps: int = 10) -> None:
        super().__init__(max_steps=max_steps)
        self.failure_cost, self.need = failure_cost, need
        for name in ("work", "submit", "give_up"):
            self.add_tool(name, lambda: None, deadline_s=None)
            self.add_call(name, name)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)

    def reset_task(self, options):
        self.progress = 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([min(self.progress, self.need) / self.need], dtype=np.float32)

    def transition(self, call, result):
        if not result.ok:
            return Transition(self._obs(), -self.failure_cost)
        if call.tool == "work":
            self.progress += 1
        elif call.tool == "submit":
            done = self.progress >= self.need
            return Transition(self._obs(), float(done), terminated=True, success=done)
        elif call.tool == "give_up":
            return Transition(self._obs(), 0.0, terminated=True, success=False)
        return Transition(self._obs())


class TenOnes(gym.Env):
    """Ten steps whatever the action; 1 for action 1; success when the return reaches 5."""

    observation_space = gym.spaces.Box(0, 10, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.ret = 0, 0.0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        reward = float(int(action) == 1)
        self.ret += reward
        done = self.t >= 10
        return np.array([self.t], np.float32), reward, done, False, ({"success": self.ret >= 5} if done else {})
