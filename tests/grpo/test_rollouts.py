import time

import gymnasium as gym
import numpy as np
import pytest

from envaudit.grpo.engine import ActionSample
from envaudit.grpo.rollouts import LockstepCollector, step_limit
from tests.grpo.envs import CheckSubmit

CHECK, SUBMIT, WAIT = 0, 1, 2


class Scripted:
    """A PolicyEngine stub that always takes one action."""

    def __init__(self, action: int) -> None:
        self.action = action

    def sample(self, observations, step_fractions, rng, *, greedy=False):
        n = len(observations)
        self.fractions = list(step_fractions)
        return ActionSample(np.full(n, self.action), np.zeros(n), [np.zeros(1)] * n)

    def update(self, trajectories):
        return {}


class Breaks(gym.Env):
    """Raises on step 2 of odd seeds, sleeps past any deadline on step 1 when ``hang`` is set."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, hang: bool = False) -> None:
        self.hang = hang

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_value, self.t = seed, 0
        return 0, {}

    def step(self, action):
        self.t += 1
        if self.hang:
            time.sleep(0.5)
        if self.t == 2 and self.seed_value % 2:
            raise RuntimeError("backend crashed")
        return 0, 1.0, self.t >= 3, False, {"success": True}


def test_lockstep_episodes_are_recorded_with_outcomes_and_every_step_kept():
    collector = LockstepCollector(CheckSubmit, 4, ids=iter(range(100, 200)))
    try:
        out = collector.collect(Scripted(WAIT), [1, 1, 2, 2], np.random.default_rng(0),
                                tags=[{"group": i // 2} for i in range(4)])
    finally:
        collector.close()
    episodes = out.records.episodes
    # Waiting never submits: every episode runs to CheckSubmit's 6-step limit and times out.
    assert episodes["outcome"].tolist() == ["timeout"] * 4
    assert episodes["length"].tolist() == [6] * 4 and out.env_steps == 24
    assert sorted(episodes["episode_id"]) == [100, 101, 102, 103]
    assert episodes["group"].tolist() == [0, 0, 1, 1]
    assert {len(s.actions) for s in out.steps.values()} == {6} and out.stopped is None


def test_step_fraction_counts_up_to_the_env_step_limit():
    engine = Scripted(WAIT)
    collector = LockstepCollector(CheckSubmit, 1)
    try:
        collector.collect(engine, [0], np.random.default_rng(0))
    finally:
        collector.close()
    assert engine.fractions == [5 / 6]  # the last decision of a 6-step episode
    assert step_limit(gym.wrappers.TimeLimit(Breaks(), 7), 500) == 7
    assert step_limit(CheckSubmit(max_steps=9), 500) == 9
    assert step_limit(Breaks(), 500) == 500


def test_an_env_that_raises_is_recorded_as_an_error_and_rebuilt():
    made = []
    collector = LockstepCollector(lambda: made.append(1) or Breaks(), 2, max_steps=10)
    try:
        out = collector.collect(Scripted(0), [1, 2], np.random.default_rng(0))
        again = collector.collect(Scripted(0), [4, 6], np.random.default_rng(0))
    finally:
        collector.close()
    by_seed = out.records.episodes.set_index("seed")
    assert by_seed.loc[1, "outcome"] == "error" and by_seed.loc[1, "end_reason"] == "env_exception"
    assert by_seed.loc[2, "outcome"] == "success"
    assert [p.kind for p in out.problems] == ["exception"] and "backend crashed" in out.problems[0].message
    assert len(made) == 3  # the broken slot got a fresh env for the next collection
    assert again.records.episodes["outcome"].tolist() == ["success", "success"]


def test_a_hanging_env_stops_collection_within_its_step_timeout():
    collector = LockstepCollector(lambda: Breaks(hang=True), 2, step_timeout_s=0.05, max_steps=10)
    start = time.monotonic()
    try:
        out = collector.collect(Scripted(0), [0, 2], np.random.default_rng(0))
        later = collector.collect(Scripted(0), [0, 2], np.random.default_rng(0))
    finally:
        collector.close()
    assert time.monotonic() - start < 0.5 + 0.4  # one round's deadline (2 envs x 0.05 s), not a sleep each
    assert out.stopped == "hang" and out.problems[0].kind == "hang" and out.records.episodes.empty
    assert later.stopped == "hang" and collector.dead


def test_a_past_deadline_stops_before_stepping():
    collector = LockstepCollector(CheckSubmit, 2)
    try:
        out = collector.collect(Scripted(WAIT), [0, 1], np.random.default_rng(0), deadline=time.monotonic() - 1)
    finally:
        collector.close()
    assert out.stopped == "deadline" and out.env_steps == 0 and out.records.episodes.empty


def test_more_seeds_than_slots_is_refused():
    collector = LockstepCollector(CheckSubmit, 1)
    with pytest.raises(AssertionError, match="2 seeds for 1 env slots"):
        collector.collect(Scripted(0), [0, 1], np.random.default_rng(0))
    collector.close()
