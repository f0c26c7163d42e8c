"""The enumeration under the properties' defaults: which plans it plays, in which order, how pairs
are confirmed; and regressions for clean envs it once failed."""

import random

import gymnasium as gym
import pytest

from envaudit.families import clean_case
from envaudit.testing import (
    PropertyFailed,
    assert_failures_not_rewarded,
    assert_no_reward_after_failure,
    assert_replayable,
)
from envaudit.testing.explore import CONFIRM_SEEDS, SEEDS, Explorer, sign_test
from envaudit.testing.trajectory import EnvSession
from tests.fixtures import support_desk as sd


def test_the_tree_holds_every_short_plan_shortest_first():
    # Five actions; resolve_ticket and escalate end the episode, the three searches go on: plans of
    # d steps are 5 * 3 ** (d - 1), and 5 + 25 + 125 = 155 <= 400 per seed gives depth 3.
    with EnvSession(sd.clean) as session:
        ex = Explorer(session)
        assert ex.depth == 3 and ex.seeds == list(range(SEEDS))
        tree = ex.tree()
        per_depth = [sum(1 for n in tree if n.depth == d) for d in (1, 2, 3)]
        assert per_depth == [SEEDS * 5, SEEDS * 15, SEEDS * 45]
        assert [n.depth for n in tree] == sorted(n.depth for n in tree)
        ended = [n for n in tree if n.depth < 3 and n.episode.finished]
        assert ended and all(n.episode.steps[-1].label in ("resolve_ticket", "escalate") for n in ended)
        plays = ex.plays
        ex.tree()
        assert ex.plays == plays  # cached


def test_depth_follows_the_plan_budget():
    with EnvSession("envaudit/FlakySearch-v0") as session:  # 8 actions: 8 + 64 <= 400 < 8 + 64 + 512
        assert Explorer(session).depth == 2
        assert Explorer(session, depth=1).depth == 1
        assert Explorer(session, seed=5).seeds == [5, 6, 7, 8]
        assert Explorer(session, seeds=[3, 9]).confirm_seeds() == list(range(10, 10 + CONFIRM_SEEDS))


def test_the_sign_test_needs_a_one_sided_majority():
    assert sign_test([1.0] * 7, 1e-9)["p_value"] < 0.01
    assert sign_test([1.0] * 6, 1e-9) is None  # 2 ** -6 > 0.01
    assert sign_test([1.0] * 10 + [-1.0] * 10, 1e-9) is None
    assert sign_test([-1.0] * 20, 1e-9) is None
    assert sign_test([0.0] * 20 + [1.0] * 8, 1e-9)["ties"] == 20


def test_a_confirmation_counts_only_working_calls():
    with EnvSession(sd.resolve_after_failure) as session:
        ex = Explorer(session)
        # Resolving after a failed billing search, against after the same search working: higher on
        # every seed whose ticket is not billing, tied on billing tickets, never lower.
        labels = (session.action("search_kb_billing"), session.action("resolve_ticket"))
        ev = ex.confirm(labels, 0, "error", lambda f, n: f.episode_return - n.episode_return, 1e-9)
        assert ev is not None and ev["lower"] == 0 and ev["higher"] > 0 and ev["pairs"] <= CONFIRM_SEEDS
        assert ev["higher"] + ev["ties"] == ev["pairs"]


@pytest.mark.parametrize("prop", [assert_failures_not_rewarded, assert_no_reward_after_failure],
                         ids=lambda p: p.__name__)
def test_potential_shaping_and_skipped_draws_are_not_flaws(prop):
    # A clean generated env with potential shaping (an ending step takes the potential back) and
    # flaky tools (a forced fault skips the tool's random draws): both once read as flaws.
    prop(clean_case(0, 7).make_env)


class SuccessCoin(gym.Env):
    """One step ends the episode with reward 0; the success flag comes from Python's global random."""

    action_space = gym.spaces.Discrete(1)
    observation_space = gym.spaces.Discrete(1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 0, 0.0, True, False, {"success": random.random() < 0.5}


def test_a_replay_that_differs_only_in_its_success_flag_is_caught():
    with pytest.raises(PropertyFailed, match="a different success flag"):
        assert_replayable(SuccessCoin, max_examples=5, interpreters=False)


def test_each_plan_is_played_once_and_cached():
    with EnvSession(sd.clean) as session:
        ex = Explorer(session, depth=2)
        tree = ex.tree()
        assert ex.plays == len(tree) == SEEDS * (5 + 15)
        assert all(n.plan.seed in ex.seeds and n.episode.seed == n.plan.seed for n in tree)
        node = tree[-1]
        assert ex.play(node.plan) is node.episode and ex.forced(node.plan, 0, None) is node.episode
        assert ex.plays == len(tree)
        forced = ex.forced(node.plan, 0, "timeout")
        assert ex.plays == len(tree) + 1 and forced.steps[0].status == "timeout" and forced.steps[0].injected


def test_depth_and_seed_rules():
    from envaudit.testing.explore import _depth_for, _seed_list

    assert [_depth_for(n, 400) for n in (1, 5, 7, 8, 19, 20, 400)] == [3, 3, 3, 2, 2, 1, 1]
    assert _depth_for(4, 20) == 2 and _depth_for(4, 19) == 1  # 4 + 16 plans fit in 20, not in 19
    assert _seed_list(None, 3) == [3, 4, 5, 6] and _seed_list(9, 0) == [9] and _seed_list([2, 5], 0) == [2, 5]
    assert _seed_list(range(2), 7) == [0, 1] and _seed_list(object(), 7) == [7, 8, 9, 10]


def test_sign_test_evidence():
    ev = sign_test([2.0] * 10 + [0.0, -1.0], 1e-9)
    assert (ev["pairs"], ev["higher"], ev["lower"], ev["ties"]) == (12, 10, 1, 1)
    assert ev["mean_diff"] == pytest.approx(19 / 12) and ev["p_value"] == pytest.approx(12 / 2048)
    assert sign_test([2.0] * 9 + [-1.0], 1e-9) is None  # 11 / 1024 > 0.01


class Lock(gym.Env):
    """A five-step combination among 11 buttons, then ``submit`` (action 11): success when the
    whole combination was entered. A wrong button does nothing; the observation is the progress
    alone. ``lenient`` pays the success's reward for submitting after three of the five."""

    PATH = (7, 2, 9, 0, 4)
    SUBMIT = 11

    def __init__(self, lenient: bool = False):
        self.lenient = lenient
        self.action_space = gym.spaces.Discrete(12)
        self.observation_space = gym.spaces.Box(0, 5, (1,))
        self.progress = 0

    def _obs(self):
        import numpy as np

        return np.array([self.progress], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.progress = 0
        return self._obs(), {}

    def step(self, action):
        if action == self.SUBMIT:
            success = self.progress == len(self.PATH)
            paid = success or (self.lenient and self.progress >= 3)
            return self._obs(), 1.0 if paid else 0.0, True, False, {"success": success}
        if self.progress < len(self.PATH) and action == self.PATH[self.progress]:
            self.progress += 1
        return self._obs(), 0.0, False, False, {}


def test_a_success_past_the_enumerated_depth_is_found_one_state_at_a_time():
    # 12 actions: the tree stops at depth 2 (12 + 144 <= 400 < 12 + 144 + 1728). The deeper search
    # keeps one plan per observation and depth: at depth d the progress is 0..d-1, so d distinct
    # states are extended, 12 * (1 + 2 + ... + 6) = 252 plays per seed reach the success at depth 6.
    with EnvSession(Lock) as session:
        ex = Explorer(session)
        assert ex.depth == 2 and not any(n.episode.success for n in ex.tree())
        before = ex.plays
        found = ex.deep_successes()
        assert ex.plays - before == 4 * 252
        assert [(e.seed, e.actions) for e in found] == [(s, Lock.PATH + (Lock.SUBMIT,)) for s in range(SEEDS)]
        assert ex.successes() == found  # no oracle, no short success: the deep ones


def test_the_deep_search_stops_at_its_budget():
    with EnvSession(Lock) as session:
        ex = Explorer(session)
        assert ex.deep_successes(budget=251) == [] and ex.plays == 251  # one play short of seed 0's success
        ex2 = Explorer(session)
        found = ex2.deep_successes(budget=252 + 12)
        assert [e.seed for e in found] == [0] and ex2.plays == 264


def test_properties_compare_with_a_success_only_a_deeper_search_reaches():
    from envaudit.testing import assert_no_reward_without_success

    # Submitting after three of the five buttons pays 1.0 with success false: only plans of four
    # steps or more show it, and the tree holds two; the deeper search's own plays hold it.

    with pytest.raises(PropertyFailed, match="success false"):
        assert_no_reward_without_success(lambda: Lock(lenient=True))
    assert_no_reward_without_success(Lock)  # the clean twin: nothing unsuccessful is paid
