"""Runner: hang protection, fresh envs after exceptions, step limits; and the bundled policies."""

from __future__ import annotations

import itertools
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from envaudit.rollout import Problem, RandomPolicy, Runner, SequencePolicy, limit_steps


class Walk(gym.Env):
    """Reward +1 per step, terminates after ``length`` steps with success; optionally misbehaves.

    ``raise_at`` makes step number k (0-based) raise in the *first* instance the factory builds
    only; ``hang_at`` makes step k block (on an event, for at most 10 s) in every instance.
    """

    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Discrete(1000)

    def __init__(self, length=3, raise_at=None, hang_at=None, release=None, instance=0):
        self.length, self.raise_at, self.hang_at = length, raise_at, hang_at
        self.release, self.instance = release, instance
        self.closed = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return int(self.np_random.integers(1000)), {}

    def step(self, action):
        if self.raise_at == self.t and self.instance == 0:
            raise RuntimeError(f"broken at step {self.t}")
        if self.hang_at == self.t:
            self.release.wait(10.0)
        self.t += 1
        done = self.t >= self.length
        return int(action), 1.0, done, False, ({"success": True} if done else {})

    def close(self):
        self.closed = True


class Factory:
    def __init__(self, **kw):
        self.kw, self.made = kw, []

    def __call__(self):
        env = Walk(instance=len(self.made), **self.kw)
        self.made.append(env)
        return env


def test_env_that_raises_gets_a_fresh_instance_and_a_problem():
    make = Factory(raise_at=1)
    result = Runner(make, step_timeout_s=2.0).run(RandomPolicy(), [10, 11, 12], rng=np.random.default_rng(0))
    assert len(make.made) == 2 and make.made[0].closed
    raised_at = f"{__file__}:{_line_of('raise RuntimeError(')}"  # the env's own line, in the user's code
    assert result.problems == [Problem("exception", "step", "RuntimeError: broken at step 1", 10, 1, 0, raised_at)]
    ep = result.records.episodes
    assert ep["seed"].tolist() == [10, 11, 12]
    assert ep["end_reason"].tolist() == ["env_exception", "terminated", "terminated"]
    assert ep["outcome"].tolist() == ["error", "success", "success"]
    assert ep["length"].tolist() == [2, 3, 3]
    assert not result.stopped_early and not result.hung


def test_env_that_hangs_is_reported_within_step_timeout_and_the_run_stops():
    release = threading.Event()
    make = Factory(hang_at=1, release=release)
    runner = Runner(make, step_timeout_s=0.2)
    try:
        start = time.perf_counter()
        result = runner.run(RandomPolicy(), [1, 2, 3], rng=np.random.default_rng(0))
        elapsed = time.perf_counter() - start
    finally:
        release.set()
    assert elapsed < 1.5, f"a 0.2 s step timeout took {elapsed:.2f} s"
    assert result.hung and result.stopped_early and runner.dead
    [problem] = result.problems
    assert (problem.kind, problem.where, problem.seed, problem.step) == ("hang", "step", 1, 1)
    assert "step() did not return within 0.2 s" in problem.message
    assert len(make.made) == 1 and len(result.records.episodes) == 0
    again = runner.run(RandomPolicy(), [4], rng=np.random.default_rng(0))
    assert again.stopped_early and len(again.records.episodes) == 0  # a dead runner runs nothing


def test_reset_exception_and_factory_exception():
    class BadReset(Walk):
        def reset(self, *, seed=None, options=None):
            raise OSError("no disk")

    result = Runner(BadReset).run(RandomPolicy(), [5, 6], rng=np.random.default_rng(0))
    assert [(p.kind, p.where, p.seed) for p in result.problems] == [
        ("reset_exception", "reset", 5), ("reset_exception", "reset", 6)]
    assert "OSError: no disk" in result.problems[0].message

    def broken_factory():
        raise ImportError("missing dependency")

    result = Runner(broken_factory).run(RandomPolicy(), [5, 6], rng=np.random.default_rng(0))
    assert result.stopped_early
    assert [(p.kind, p.where) for p in result.problems] == [("exception", "make")]


def test_limit_steps_only_when_the_env_has_no_limit():
    bare = Walk()
    limited = limit_steps(bare, 7)
    assert isinstance(limited, gym.wrappers.TimeLimit) and limited.unwrapped is bare
    cartpole = gym.make("CartPole-v1")  # its spec says 500
    assert limit_steps(cartpole, 7) is cartpole

    class OwnLimit(Walk):
        max_steps = 50

    own = OwnLimit()
    assert limit_steps(own, 7) is own

    endless = Factory(length=10**9)
    result = Runner(endless, max_steps=4).run(RandomPolicy(), [0], rng=np.random.default_rng(0))
    ep = result.records.episodes.iloc[0]
    assert (ep["length"], ep["end_reason"], ep["outcome"]) == (4, "truncated", "timeout")


def test_policies_tags_ids_and_determinism():
    ids = itertools.count(50)
    runner = Runner(Factory(length=4), ids=ids)
    seq = SequencePolicy([2, 1], name="two-one")
    result = runner.run(seq, [0, 1], rng=np.random.default_rng(0), tags={"policy": "two-one", "group": 3})
    steps = result.records.steps
    assert steps.groupby("episode_id")["action"].apply(list).tolist() == [[2, 1, 1, 1], [2, 1, 1, 1]]
    ep = result.records.episodes
    assert ep["episode_id"].tolist() == [50, 51]
    assert ep["policy"].tolist() == ["two-one"] * 2 and ep["group"].tolist() == [3, 3]

    fallback = SequencePolicy([0], fallback=RandomPolicy())
    res = Runner(Factory(length=30)).run(fallback, [0], rng=np.random.default_rng(1))
    actions = res.records.steps["action"].tolist()
    assert actions[0] == 0 and len(set(actions[1:])) == 3  # 29 uniform draws over 3 actions

    def random_actions(seed):
        res = Runner(Factory(length=20)).run(RandomPolicy(), [0, 1], rng=np.random.default_rng(seed))
        return res.records.steps["action"].tolist()

    assert random_actions(3) == random_actions(3)
    assert random_actions(3) != random_actions(4)


def test_past_deadline_stops_before_the_first_episode():
    result = Runner(Factory()).run(RandomPolicy(), [0, 1], rng=np.random.default_rng(0),
                                   deadline=time.monotonic() - 1)
    assert result.stopped_early and len(result.records.episodes) == 0 and not result.problems


def test_a_broken_policy_is_the_probe_s_error_not_the_env_s():
    class Broken(RandomPolicy):
        name = "broken"

        def act(self, obs, info):
            raise ZeroDivisionError("oops")

    with pytest.raises(RuntimeError, match="policy 'broken' failed at step 0: oops"):
        Runner(Factory()).run(Broken(), [0], rng=np.random.default_rng(0))


def test_env_with_a_longer_limit_of_its_own_runs_to_that_limit():
    # MountainCarContinuous truncates at 999 steps; a scan cap of 50 must not cut (and drop) it.
    runner = Runner(lambda: gym.make("MountainCarContinuous-v0"), max_steps=50)
    result = runner.run(SequencePolicy([np.zeros(1, np.float32)]), [0], rng=np.random.default_rng(0))
    episodes = result.records.episodes
    assert len(episodes) == 1 and not result.problems
    assert episodes["length"].iloc[0] == 999 and episodes["end_reason"].iloc[0] == "truncated"


def test_env_that_ignores_its_own_limit_is_a_problem_not_a_silent_drop():
    class Endless(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(1)
        max_steps = 5  # claims a limit it never enforces

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return 0, {}

        def step(self, action):
            return 0, 0.0, False, False, {}

    result = Runner(Endless, max_steps=50).run(SequencePolicy([0]), [0], rng=np.random.default_rng(0))
    assert result.records.episodes.empty
    assert [p.message for p in result.problems] == ["the episode did not end within its step limit of 5 steps"]


def _line_of(text: str) -> int:
    from pathlib import Path

    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)
