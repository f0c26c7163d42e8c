"""``assert_replayable``'s options and messages on small envs that diverge by design: the name,
target and plan count in a failure, ``depth`` and ``seed``, observations compared on every run, and
the fresh interpreter's answers read only when the child exited cleanly."""

import os

import gymnasium as gym
import pytest

from envaudit.testing import PropertyFailed, assert_replayable
from envaudit.testing import replay as rp
from envaudit.testing.trajectory import EnvSession, Plan
from tests.testing.test_explore_units import Coin
from tests.testing.test_replay_runs import FakeRun
from tests.testing.toy_envs import MIRROR, SUBMIT, WAIT, FetchTask


class Drift(gym.Env):
    """Two actions, five steps; every step pays how many episodes this instance has reset."""

    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(8)

    def __init__(self):
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets, self.t = self.resets + 1, 0
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t, float(self.resets), False, self.t >= 5, {"success": False} if self.t >= 5 else {}


def drift():
    return Drift()


class Badge(gym.Env):
    """One step ends the episode paying nothing; the first observation is the instance's number."""

    action_space = gym.spaces.Discrete(1)
    observation_space = gym.spaces.Discrete(1000)
    built = 0

    def __init__(self):
        Badge.built += 1
        self.number = Badge.built

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.number, {}

    def step(self, action):
        return 0, 0.0, True, False, {"success": False}


@pytest.mark.parametrize("depth,plans", [(None, 4 * (2 + 4 + 8) + 8), (1, 4 * 2 + 8)])
def test_a_failure_names_the_property_the_target_and_the_plans(depth, plans):
    with pytest.raises(PropertyFailed) as info:
        assert_replayable(drift, max_examples=1, interpreters=False, **({} if depth is None else {"depth": depth}))
    text, ce = str(info.value), info.value.counterexample
    assert info.value.property == "assert_replayable" and text.startswith("assert_replayable failed on drift: ")
    assert f"Counterexample (exhaustive over short plans, {plans} plans):" in text
    assert "Replay it: envaudit.testing.play(drift, " in text
    # The first run is the counterexample; the replay on the same instance paid one reset more.
    assert ce.compared[0][1].steps[0].reward == ce.episode.steps[0].reward + 1


def test_the_seed_option_picks_the_reset_seeds():
    with pytest.raises(PropertyFailed) as info:
        assert_replayable(drift, max_examples=1, interpreters=False, seed=3)
    assert info.value.counterexample.episode.seed == 3


def test_an_unknown_option_names_the_property():
    with pytest.raises(TypeError, match=r"^assert_replayable\(\) got an unexpected option 'deepth'; did you mean"):
        assert_replayable(FetchTask, deepth=1)


def test_observations_are_compared_on_every_run():
    with pytest.raises(PropertyFailed, match=r"a different first observation after reset \(\d+ vs \d+\) "
                                             r"\(the replay on a fresh env instance\)"):
        assert_replayable(Badge, max_examples=1, interpreters=False)


def test_more_equality_rules():
    assert not rp.same_value({"a": 1}, 5) and not rp.same_value(5, {"a": 1})
    assert not rp.same_value((1, 2), 5) and not rp.same_value(5, [1, 2])
    assert rp._fmt(("fetch", None)) == "fetch → None"
    assert len(rp._short(list(range(100)))) == 60


def test_summaries_are_played_to_the_step_limit_given():
    (obs, steps, success), = rp.play_summaries(FetchTask, [Plan(0, (), WAIT)], 3)
    assert len(steps) == 3 and len(obs) == 4 and success is None


def test_oracle_plans_from_labels_callables_and_policies():
    with EnvSession(FetchTask) as session:
        assert rp._oracle_plans(session, [0], ["fetch_mirror", "submit"], 0) == [Plan(0, (MIRROR, SUBMIT))]
        assert rp._oracle_plans(session, [1], lambda env: env.unwrapped.action_labels[1:3], 0) == [
            Plan(1, (MIRROR, SUBMIT))]
        seeds = list(range(6))
        assert rp._oracle_plans(session, seeds, Coin(), 3) == rp._oracle_plans(session, seeds, Coin(), 3)
        assert rp._oracle_plans(session, seeds, Coin(), 3) != rp._oracle_plans(session, seeds, Coin(), 4)


def flip_first(make_env, plans, max_steps):
    out = rp.play_summaries(make_env, plans, max_steps)
    obs, steps, success = out[0]
    return [(obs, steps, not success)] + out[1:]


def test_the_child_is_read_only_when_it_exited_cleanly(monkeypatch):
    fake = FakeRun(flip_first, returncode=1)
    monkeypatch.setattr(rp.subprocess, "run", fake)
    with EnvSession(FetchTask) as session:
        assert rp._other_interpreter(FetchTask, session, [Plan(0, (SUBMIT,))], 50) is None
    assert len(fake.calls) == 2
    assert all(kwargs["env"]["PATH"] == os.environ["PATH"] for _, kwargs in fake.calls)  # the rest of the environment is kept


def test_a_child_that_answered_fewer_plans_is_compared_on_those(monkeypatch):
    monkeypatch.setattr(rp.subprocess, "run", FakeRun(lambda m, plans, s: rp.play_summaries(m, plans[:1], s)))
    with EnvSession(FetchTask) as session:
        assert rp._other_interpreter(FetchTask, session, [Plan(0, (SUBMIT,)), Plan(1, (MIRROR,))], 50) is None
    monkeypatch.setattr(rp.subprocess, "run", FakeRun(lambda m, plans, s: flip_first(m, plans[:1], s)))
    with EnvSession(FetchTask) as session:
        assert rp._other_interpreter(FetchTask, session, [Plan(0, (SUBMIT,)), Plan(1, (MIRROR,))], 50) is not None
