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
