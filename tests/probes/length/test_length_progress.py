"""Progress shaping that a random staller keeps collecting late is not step farming.

``ProgressPath``: call ``n`` tools in a fixed order, then ``submit`` (+1, success; before the path is
done it ends the episode with 0). Each call that advances the path pays ``bonus`` once (progress
shaping, nothing given back); a call that does not advance pays ``idle_pay``. Random play that never
submits keeps advancing by chance late into the episode, so the second half of its episodes pays
(the old tail check read that as stalling). Standing still is a repeated call: it never advances
(the tools on the path are distinct), so with ``idle_pay`` = 0 (clean) each idle step adds exactly 0
and there is nothing to farm; with ``idle_pay`` > 0 (the flawed twin) each adds ``idle_pay``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from envaudit.findings import Severity
from envaudit.probes.length import CODE, probe
from envaudit.rollout import Policy, SequencePolicy
from tests.fixtures.context import flagged, run_probe

SEEDS = range(3)


class ProgressPath(gym.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, *, n: int = 6, bonus: float = 0.1, idle_pay: float = 0.0, max_steps: int = 30) -> None:
        self.n, self.bonus, self.idle_pay, self.max_steps = n, bonus, idle_pay, max_steps
        self.path = [(3 * k + 1) % n for k in range(n)] if n % 3 else list(range(n))[::-1]
        self.action_labels = tuple(f"call_{k}" for k in range(n)) + ("submit",)
        self.action_space = gym.spaces.Discrete(n + 1)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)

    def _obs(self) -> np.ndarray:
        return np.array([self.progress / self.n], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.progress, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        action, reward, terminated, info = int(action), 0.0, False, {}
        if action == self.n:
            terminated = True
            info["success"] = self.progress == self.n
            reward = 1.0 if info["success"] else 0.0
        else:
            info["tool"] = {"name": f"tool_{action}", "status": "ok"}
            if self.progress < self.n and self.path[self.progress] == action:
                self.progress += 1
                reward = self.bonus
            else:
                reward = self.idle_pay
        truncated = not terminated and self.t >= self.max_steps
        if truncated:
            info["success"] = False
        return self._obs(), float(reward), terminated, truncated, info

    def oracle(self) -> Policy:
        return SequencePolicy([*self.path, self.n], name="oracle")


def test_the_path_has_distinct_tools_so_a_repeated_call_never_advances():
    env = ProgressPath()
    assert sorted(env.path) == list(range(env.n))


@pytest.mark.parametrize("seed", SEEDS)
def test_progress_a_staller_keeps_making_is_not_farming(seed):
    findings, _ = run_probe(probe, ProgressPath, episodes=64, seed=seed, quick=True)
    assert flagged(findings) == [], [f.summary for f in findings]
    for f in findings:
        marginal = f.evidence.get("marginal")
        if marginal is not None and marginal["method"].startswith("replay"):
            # a repeated call adds exactly nothing with progress held fixed
            assert marginal["mean_tail_pay"] == pytest.approx(0.0) and not marginal["pays"]


@pytest.mark.parametrize("seed", SEEDS)
def test_idle_calls_that_pay_are_still_farming(seed):
    idle_pay = 0.05
    findings, _ = run_probe(probe, lambda: ProgressPath(idle_pay=idle_pay), episodes=64, seed=seed, quick=True)
    caught = [f for f in findings if f.code == CODE and f.severity >= Severity.WARN]
    assert len(caught) == 1, [f.summary for f in findings]
    # Idle calls also pay for delaying a success: when that heads the one finding, farming's
    # evidence is folded into it.
    farming = caught[0].evidence.get("farming", caught[0].evidence)
    assert farming["behaviour"] == "stall" and farming["mean_strategy"] > farming["mean_failure"]
    marginal = farming["marginal"]
    assert marginal["method"].startswith("replay") and marginal["pays"]
    # every idle step after the same prefix pays idle_pay, whatever the prefix
    assert marginal["pay_per_tail_step"] == pytest.approx(idle_pay)
