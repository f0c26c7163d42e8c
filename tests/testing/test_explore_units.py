"""``envaudit.testing.explore`` piece by piece: observation and plan keys, the depth rule at its
edges, the sign test's ties, successes from a policy, the cache of observed plays, continuations,
repeated actions, the deeper search's plays, and confirmation on an env whose tool fails by seed."""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.rollout import Policy
from envaudit.testing.explore import (
    CONFIRM_SEEDS,
    SEEDS,
    Explorer,
    _depth_for,
    _key,
    _obs_key,
    sign_test,
)
from envaudit.testing.trajectory import EnvSession, Plan
from envaudit.toolenv import ToolEnv, ToolOutput, Transition
from tests.testing.toy_envs import FETCH, MIRROR, SUBMIT, WAIT, FetchTask


def test_observation_keys():
    assert _obs_key(np.zeros(2, np.float32)) == ("array", "<f4", (2,), bytes(8))
    assert _obs_key(np.zeros(2, np.int32)) != _obs_key(np.zeros(2, np.float32))
    assert _obs_key({"b": 1, "a": [2]}) == ("dict", (("'a'", ("list", (("repr", "2"),))), ("'b'", ("repr", "1"))))
    assert _obs_key({"a": 1, "b": 1}) == _obs_key({"b": 1, "a": 1})  # by key, whatever the insertion order
    assert _obs_key({"a": 1}) != _obs_key({"b": 1}) and _obs_key({"a": 1}) != _obs_key({"a": 2})
    assert _obs_key((1, 2)) == ("tuple", (("repr", "1"), ("repr", "2"))) != _obs_key([1, 2])
    assert _obs_key([1, 2]) != _obs_key([1, 3]) and _obs_key("s") == ("repr", "'s'") != _obs_key("t")
    hash(_obs_key({"x": np.ones(3), "y": (1, [2])}))


def test_plan_keys_tell_arrays_apart_by_bytes():
    assert _key([np.array([1, 2]), 3]) == (np.array([1, 2]).tobytes(), "3")
    assert _key([np.array([1.0])]) != _key([np.array([2.0])])


def test_depth_rule_at_its_edges():
    assert _depth_for(1, 2) == 2 and _depth_for(1, 1) == 1  # 1 + 1 plans fit in 2
    assert _depth_for(0, 1) == 3  # no action: one empty level each, nothing grows
    assert _depth_for(2, 14) == 3 and _depth_for(2, 13) == 2  # 2 + 4 + 8
    assert _depth_for(3, 39) == 3 and _depth_for(3, 38) == 2  # 3 + 9 + 27


def test_sign_test_ties_and_its_label():
    assert sign_test([], 1e-9) is None and sign_test([0.0] * 10, 1e-9) is None
    assert sign_test([0.5] * 10, 0.5) is None  # at the tolerance: ties
    ev = sign_test([1.0] * 10 + [-0.5] * 3, 0.5)
    assert (ev["higher"], ev["lower"], ev["ties"]) == (10, 0, 3)
    assert ev["test"] == "one-sided sign test over reset seeds"


class Coin(Policy):
    """Mirror-fetches or waits by its rng, then submits: its episodes depend on the rng it is given."""

    name = "coin"

    def act(self, obs, info):
        if self.t >= 3:
            return SUBMIT
        return MIRROR if self.rng.random() < 0.5 else WAIT


def test_successes_from_a_policy_come_first():
    class Solve(Policy):
        def act(self, obs, info):
            return MIRROR if self.t < 2 else SUBMIT

    with EnvSession(FetchTask) as session:
        ex = Explorer(session, depth=1)  # no plan of one step succeeds
        found = ex.successes(Solve())
        assert [(e.seed, e.actions) for e in found] == [(s, (MIRROR, MIRROR, SUBMIT)) for s in range(SEEDS)]
        assert ex.plays == SEEDS + SEEDS * 5
        ex2 = Explorer(session, depth=2)  # mirror then submit: the tree's own successes follow
        found = ex2.successes(Solve())
        assert [e.actions for e in found[:SEEDS]] == [(MIRROR, MIRROR, SUBMIT)] * SEEDS
        assert {e.actions for e in found[SEEDS:]} == {(MIRROR, SUBMIT), (FETCH, SUBMIT)}
        assert ex2.successes() == found[SEEDS:]


def test_a_policy_is_played_with_generators_from_the_explorers_seed():
    with EnvSession(FetchTask) as session:
        def episodes(seed):
            ex = Explorer(session, seed=seed, seeds=[0, 1, 2, 3, 4, 5], depth=1)
            assert ex.seed == seed
            return [e.actions for e in ex.successes(Coin())]

        assert episodes(3) == episodes(3) and episodes(3) != episodes(4)


def test_observed_plays_are_cached_and_kept():
    with EnvSession(FetchTask) as session:
        ex = Explorer(session)
        plan = Plan(1, (MIRROR,))
        plain = ex.play(plan)
        assert plain.observations is None and ex.plays == 1
        seen = ex._observed(plan)  # played again, to keep its observations
        assert seen.observations is not None and ex.plays == 2
        assert ex._observed(plan) is seen and ex.play(plan) is seen and ex.plays == 2
        fresh = ex._observed(Plan(2, (MIRROR,)))
        assert ex._observed(Plan(2, (MIRROR,))) is fresh and ex.plays == 3


def test_continuations_and_repeats():
    with EnvSession(FetchTask) as session:
        ex = Explorer(session)
        plan = Plan(0, (MIRROR,))
        ep = ex.play(plan)
        got = list(ex.continuations(plan, ep))
        assert got[0] == (plan, ep) and [p.actions for p, _ in got[1:]] == [(MIRROR, a) for a in range(5)]
        assert all(e.length == 2 and e.seed == 0 for _, e in got[1:]) and ex.plays == 6
        done = ex.play(Plan(0, (SUBMIT,)))
        assert list(ex.continuations(Plan(0, (SUBMIT,)), done)) == [(Plan(0, (SUBMIT,)), done)]
        short = Plan(0, (MIRROR, WAIT))  # played only as far as its first action: not extended
        assert list(ex.continuations(short, ep)) == [(short, ep)]
        repeated = dict(ex.repeated(2))
        assert list(repeated) == [0, 1, 2, 3, 4] and all(e.seed == 2 for e in repeated.values())
        assert repeated[WAIT].length == 6 and repeated[WAIT].end_reason == "truncated"  # FetchTask's limit
        assert repeated[SUBMIT].length == 1 and set(repeated[WAIT].actions) == {WAIT}


class Stairs(gym.Env):
    """``quit`` ends the episode at once (observation 99); three ``climb`` steps succeed."""

    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.height = 0
        return 0, {}

    def step(self, action):
        if int(action) == 0:
            return 99, 0.0, True, False, {"success": False}
        self.height += 1
        done = self.height == 3
        return self.height, float(done), done, False, {"success": True} if done else {}


def test_the_deeper_search_does_not_extend_an_ended_episode():
    # Per seed: quit and climb at each of three depths, only climb's plan extended: 6 plays.
    with EnvSession(Stairs) as session:
        ex = Explorer(session)
        found = ex.deep_successes()
        assert [(e.seed, e.actions) for e in found] == [(s, (1, 1, 1)) for s in range(SEEDS)]
        assert ex.plays == SEEDS * 6 and len(ex.deep_played) == SEEDS * 6


class Parity(ToolEnv):
    """``note`` (tool ``note``) pays nothing; ``probe`` (tool ``probe``) fails by itself from odd
    reset seeds and pays ``fail_pay`` failed, 0 working. From seeds divisible by 3 the first step
    ends the episode."""

    def __init__(self, fail_pay=1.0):
        super().__init__(max_steps=5)
        self.fail_pay = fail_pay
        self.add_tool("note", lambda: ToolOutput("noted", 0.01), deadline_s=1.0)
        self.add_tool("probe", self._probe, deadline_s=1.0)
        self.add_call("note", "note")
        self.add_call("probe", "probe")
        self.observation_space = gym.spaces.Box(0, 1, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        self.reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _probe(self):
        if self.reset_seed % 2:
            raise RuntimeError("probe failed")
        return ToolOutput("probed", 0.01)

    def reset_task(self, options):
        self.t = 0
        return np.zeros(1, dtype=np.float32)

    def transition(self, call, result):
        self.t += 1
        pay = self.fail_pay if call.tool == "probe" and not result.ok else 0.0
        return Transition(np.zeros(1, dtype=np.float32), pay, self.t == 1 and self.reset_seed % 3 == 0)


def test_a_confirmation_skips_seeds_where_the_call_is_not_reached_or_does_not_work():
    # Confirmation seeds 4..27: from 6, 12, ... the episode ends at the note; from odd seeds the
    # probe fails by itself; 4, 8, 10, 14, 16, 20, 22, 26 remain, each paying 1 more forced to fail.
    with EnvSession(Parity) as session:
        ex = Explorer(session)
        assert ex.confirm_seeds() == list(range(SEEDS, SEEDS + CONFIRM_SEEDS))
        ev = ex.confirm((0, 1), 1, "error", lambda f, n: f.steps[1].reward - n.steps[1].reward, 1e-9)
        assert (ev["pairs"], ev["higher"], ev["lower"], ev["ties"]) == (8, 8, 0, 0)
        assert ev["p_value"] == pytest.approx(2.0 ** -8)
        # A measure that declines to compare (None) leaves the pair out.
        assert ex.confirm((0, 1), 1, "error", lambda f, n: None, 1e-9) is None


def test_dict_observation_keys_sort_keys_of_any_type():
    assert _obs_key({1: 0, "a": 0}) == _obs_key({"a": 0, 1: 0})  # 1 and "a" do not compare: sorted by repr
    assert [k for k, _ in _obs_key({9: 0, 10: 0})[1]] == ["10", "9"]


class Dial(gym.Env):
    """A continuous action (ignored): one step ends the episode."""

    action_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    observation_space = gym.spaces.Discrete(1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 0, 0.0, True, False, {"success": False}


def test_sampled_actions_follow_the_explorers_seed():
    with EnvSession(Dial) as session:
        first, again, other = (Explorer(session, seed=s, depth=1).actions for s in (3, 3, 4))
        assert len(first) == 8 and all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
        assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_confirmation_seeds_without_enumeration_seeds_start_at_the_seed():
    with EnvSession(FetchTask) as session:
        ex = Explorer(session, seed=7, depth=1)
        ex.seeds = []
        assert ex.confirm_seeds() == list(range(7, 7 + CONFIRM_SEEDS))
