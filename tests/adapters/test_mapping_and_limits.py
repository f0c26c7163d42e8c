"""Regression tests of the two bugs found while building the adapters.

1. ``envaudit.wrap(env, success=..., tool_key=...)`` is how DESIGN.md says to map an env's own
   keys, and the scan's runner used to re-wrap with the default keys, so a mapped env read as
   "never sets info['success']".
2. An episode whose last step has ``terminated`` *and* ``truncated`` set (GEM at its turn limit,
   ``TimeLimit`` on a terminating step) was read as terminated, hiding step-limit payoffs.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import envaudit
from envaudit.protocol import END_TERMINATED, END_TRUNCATED, end_reason
from envaudit.recording import AuditWrapper
from envaudit.rollout import RandomPolicy, Runner, SequencePolicy
from envaudit.scan import run_scan


class OwnKeysEnv(gym.Env):
    """One step: action 1 solves the task, action 0 does not. The env reports success as
    ``info["solved"]`` and its tool call as ``info["call"]`` (not the protocol's keys)."""

    def __init__(self) -> None:
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Discrete(1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        solved = int(action) == 1
        info = {"solved": solved, "call": {"name": "submit", "status": "ok" if solved else "error"}}
        return 0, float(solved), True, False, info


def mapped_env() -> gym.Env:
    return envaudit.wrap(OwnKeysEnv(), success="solved", tool_key="call")


def test_runner_honours_the_users_wrap_mapping():
    runner = Runner(mapped_env)
    result = runner.run(RandomPolicy(), range(12), rng=np.random.default_rng(0))
    eps, steps = result.records.episodes, result.records.steps
    # Every episode ends on one step that sets "solved": the flag is known for all of them.
    assert eps["success"].notna().all()
    assert (eps["success"].astype(bool) == (eps["return"] == 1.0)).all()
    # The mapped tool key is read too: an unsolved episode ends on a failed call (outcome error).
    assert (eps["outcome"] == np.where(eps["return"] == 1.0, "success", "error")).all()
    assert steps["tool_name"].eq("submit").all()
    assert set(steps.loc[steps["reward"] == 1.0, "tool_status"]) == {"ok"}
    assert set(steps.loc[steps["reward"] == 0.0, "tool_status"]) == {"error"}


def test_scan_reads_the_mapped_success_flag():
    report = run_scan(mapped_env, env_id="own-keys", probes=["intent"], quick=True, seed=0)
    titles = [f.title for f in report.findings]
    assert "No success flag: reward without success not checked" not in titles
    assert report.records.episodes["success"].notna().all()


class LimitEnv(gym.Env):
    """Runs ``limit`` steps; the last one returns terminated AND truncated, like GEM at its turn
    limit. ``succeed`` says whether that last step also completed the task."""

    def __init__(self, limit: int = 3, succeed: bool = False) -> None:
        self.action_space = gym.spaces.Discrete(1)
        self.observation_space = gym.spaces.Discrete(1)
        self.limit, self.succeed = limit, succeed

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        last = self.t >= self.limit
        info = {"success": self.succeed} if last else {}
        return 0, 0.5 if last else 0.0, last, last, info


def _one_episode(env: gym.Env):
    wrapped = AuditWrapper(env)
    wrapped.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = wrapped.step(0)
        done = terminated or truncated
    return wrapped.records.episodes.iloc[0]


def test_terminated_and_truncated_at_the_limit_is_a_timeout():
    ep = _one_episode(LimitEnv(succeed=False))
    assert ep["end_reason"] == END_TRUNCATED
    assert ep["outcome"] == "timeout"


def test_a_success_on_the_last_allowed_step_stays_a_success():
    ep = _one_episode(LimitEnv(succeed=True))
    assert ep["end_reason"] == END_TERMINATED
    assert ep["outcome"] == "success"


def test_end_reason_rule():
    assert end_reason(terminated=True, truncated=True, tool_status=None) == END_TRUNCATED
    assert end_reason(terminated=True, truncated=True, tool_status=None, success=False) == END_TRUNCATED
    assert end_reason(terminated=True, truncated=True, tool_status=None, success=True) == END_TERMINATED
    assert end_reason(terminated=True, truncated=False, tool_status=None) == END_TERMINATED


def test_runner_counts_the_limit_as_timeout_too():
    result = Runner(lambda: LimitEnv(limit=2)).run(SequencePolicy([0]), [1, 2, 3], rng=np.random.default_rng(0))
    assert list(result.records.episodes["outcome"]) == ["timeout"] * 3
