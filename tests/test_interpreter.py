"""Episodes played in another interpreter: the same episodes as here for a replayable env, the hash
seed the child ran under, and a reason (never an exception) when the child cannot play."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from envaudit.interpreter import Elsewhere, other_hash_seed, other_hash_seeds, play_plans
from tests.fixtures import support_desk as sd

PLANS = [(0, [0, 0, 0, 0]), (5, [1, 1, 1]), (None, [])]  # searches: every step a tool call


def rows(episodes):
    return [(e.seed, repr(e.reset_obs), [(a, repr(o), r, t, u, s, x) for a, o, r, t, u, s, x in e.steps])
            for e in episodes]


def test_a_replayable_env_plays_the_same_there_as_here():
    here = play_plans(lambda: gym.make("envaudit/FlakySearch-v0"), PLANS[:2])
    there = Elsewhere("envaudit/FlakySearch-v0", None, PLANS[:2]).result()
    assert there is not None and rows(there) == rows(here)
    assert [len(e.steps) for e in here] == [4, 3] and all(e.steps[0][5] for e in here)  # tool status kept


def test_hash_seeded_state_differs_there():
    plans = [(seed, [0]) for seed in range(6)]
    here, elsewhere = play_plans(sd.hashed_queue, plans), Elsewhere(None, sd.hashed_queue, plans)
    there = elsewhere.result()
    assert elsewhere.hash_seed == other_hash_seed() != os.environ.get("PYTHONHASHSEED")
    assert there is not None and len(there) == 6
    assert any(not np.array_equal(a.reset_obs, b.reset_obs) for a, b in zip(here, there, strict=True))
    clean = play_plans(sd.clean, plans)
    assert rows(Elsewhere(None, sd.clean, plans).result()) == rows(clean)


@pytest.mark.parametrize("current, other", [(None, "1"), ("0", "1"), ("1", "2"), ("7", "1")])
def test_the_other_hash_seed_is_fixed_and_never_this_ones(monkeypatch, current, other):
    if current is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", current)
    assert other_hash_seed() == other


def test_a_step_that_raises_ends_that_episode_with_the_exception_name():
    class Raises(gym.Env):
        observation_space, action_space = gym.spaces.Discrete(2), gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            if action == 1:
                raise ValueError("boom")
            return 0, 0.0, False, False, {}

    (episode,) = Elsewhere(None, Raises, [(0, [0, 1, 0])]).result()
    assert [(s[0], s[6]) for s in episode.steps] == [(0, None), (1, "ValueError")]


def test_a_child_that_cannot_build_the_env_gives_a_reason():
    here = os.environ.get("PYTHONHASHSEED")

    def make():
        if os.environ.get("PYTHONHASHSEED") != here:
            raise RuntimeError("no licence server in this process")
        return sd.clean()

    elsewhere = Elsewhere(None, make, PLANS[:1])
    assert elsewhere.result() is None
    assert elsewhere.reason.startswith("the other interpreter exited with 1: RuntimeError: no licence server")


def test_an_unknown_target_and_a_factory_that_cannot_be_sent_give_reasons():
    unknown = Elsewhere("envaudit/NoSuchEnv-v0", None, PLANS[:1])
    assert unknown.result() is None and "exited with 1" in unknown.reason and "NoSuchEnv" in unknown.reason

    class Unsendable:
        def __reduce__(self):
            raise TypeError("holds a socket")

    lock = Unsendable()
    unsendable = Elsewhere(None, lambda: (lock, sd.clean())[1], PLANS[:1])
    assert unsendable.result() is None
    assert unsendable.reason == "the env factory could not be sent to another interpreter (TypeError: holds a socket)"


def test_a_child_past_its_time_is_stopped_with_a_reason():
    def slow():
        import time

        time.sleep(60)
        return sd.clean()

    elsewhere = Elsewhere(None, slow, PLANS[:1], timeout_s=0.5)
    assert elsewhere.result() is None and elsewhere.reason == "the other interpreter did not finish within 0.5 s"
    cancelled = Elsewhere(None, slow, PLANS[:1])
    cancelled.cancel()
    assert cancelled._process.poll() is not None


class Scripted(gym.Env):
    """0 goes on (its info's tool entry is not a mapping), 1 ends, 2 is cut, 3 raises; 4 goes on with
    a tool status in an info that is a mapping, 5 with no info mapping at all."""

    observation_space, action_space = gym.spaces.Discrete(10), gym.spaces.Discrete(6)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return 0, {}

    def step(self, action):
        if action == 3:
            raise KeyError("lost")
        self.t += 1
        info = {0: {"tool": "search"}, 4: {"tool": {"status": "error"}}}.get(action, {})
        return self.t, float(action), action == 1, action == 2, info if action != 5 else ["not", "a", "dict"]


@pytest.mark.parametrize("plan, expected", [
    ((3, [0, 4, 1, 0]), [(0, 1, 0.0, False, False, None, None), (4, 2, 4.0, False, False, "error", None),
                         (1, 3, 1.0, True, False, None, None)]),
    ((4, [5, 2, 0]), [(5, 1, 5.0, False, False, None, None), (2, 2, 2.0, False, True, None, None)]),
    ((None, [0, 3, 0]), [(0, 1, 0.0, False, False, None, None), (3, None, None, None, None, None, "KeyError")]),
])
def test_an_episode_is_recorded_step_by_step_until_it_ends_is_cut_or_raises(plan, expected):
    (episode,) = play_plans(Scripted, [plan])
    assert episode.seed == plan[0] and episode.reset_obs == 0
    assert episode.steps == expected


@pytest.mark.parametrize("current, others", [(None, ["1", "2", "3"]), ("2", ["1", "3", "4"]), ("1", ["2", "3", "4"])])
def test_other_hash_seeds_are_distinct_fixed_and_never_this_ones(monkeypatch, current, others):
    if current is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", current)
    assert other_hash_seeds(3) == others and other_hash_seeds(1) == [other_hash_seed()]


def test_a_child_with_workers_plays_its_plans_at_once_in_plan_order():
    import threading
    import time

    threads = set()

    class Slow(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            threads.add(threading.current_thread().name)
            return 0, {}

        def step(self, action):
            time.sleep(0.05)
            return int(action), float(action), True, False, {}

    plans = [(s, [s % 2]) for s in range(6)]
    serial, at_once = play_plans(Slow, plans), play_plans(Slow, plans, workers=3)
    assert rows(at_once) == rows(serial) and [e.seed for e in at_once] == list(range(6))
    assert len([t for t in threads if t.startswith("envaudit-elsewhere")]) == 3
    there = Elsewhere("envaudit/FlakySearch-v0", None, PLANS[:2], workers=4).result()
    assert rows(there) == rows(play_plans(lambda: gym.make("envaudit/FlakySearch-v0"), PLANS[:2]))
