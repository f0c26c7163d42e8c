"""The incentive properties end to end on named toy factories: the property's name, the target in
the replay line and the options reach every message; the oracle and the deeper search supply
successes; where a delay is inserted and how it is confirmed; the matched path's second look."""

import gymnasium as gym
import numpy as np
import pytest

from envaudit.testing import (
    PropertyFailed,
    PropertyNotExercised,
    assert_no_delayed_success_reward,
    assert_no_failure_penalty,
    assert_no_length_reward,
    assert_no_reward_after_failure,
)
from envaudit.testing.explore import Explorer
from envaudit.testing.incentives import _brevity, _delay
from envaudit.testing.trajectory import EnvSession, Plan
from tests.testing.test_explore import Lock, SuccessCoin
from tests.testing.test_incentives import Milestone
from tests.testing.test_incentives_rules import Brief, Farm
from tests.testing.test_paired_pairs import Dial
from tests.testing.toy_envs import FetchTask

PROPERTIES = [assert_no_delayed_success_reward, assert_no_failure_penalty, assert_no_length_reward,
              assert_no_reward_after_failure]


def farm():
    return Farm()


def dear():
    return Dial(look_ok=-0.125, look_error=-0.5)


def after():
    return Dial(finish_ok=0.25, after_error=0.75)


class Stall(gym.Env):
    """``prep`` then ``solve`` succeeds (``solve`` alone fails, ending the episode); ``wait`` goes
    on. A success pays 1, plus ``late`` per step before ``solve`` beyond the one ``prep`` needs
    (``-late`` from reset seeds ``sour`` and above), plus ``bonus`` per ``wait`` before it, plus
    ``early`` per step before ``prep``. From seeds ``strict`` and above a ``solve`` later than step
    2 fails, paying ``late_fail``."""

    observation_space = gym.spaces.Discrete(64)
    action_labels = ["prep", "solve", "wait"]
    action_space = gym.spaces.Discrete(3)

    def __init__(self, *, late=0.0, sour=None, bonus=0.0, early=0.0, strict=None, late_fail=0.0):
        self.late, self.sour, self.bonus, self.early = late, sour, bonus, early
        self.strict, self.late_fail = strict, late_fail

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.seed, self.prepped_at, self.waits = 0, seed or 0, None, 0
        return 0, {}

    def step(self, action):
        a = int(action)
        self.t += 1
        if a == 1:
            if self.prepped_at is None:
                return self.t, 0.0, True, False, {"success": False}
            if self.strict is not None and self.seed >= self.strict and self.t > 2:
                return self.t, self.late_fail, True, False, {"success": False}
            late = -self.late if self.sour is not None and self.seed >= self.sour else self.late
            pay = 1.0 + late * (self.t - 2) + self.bonus * self.waits + self.early * self.prepped_at
            return self.t, pay, True, False, {"success": True}
        if a == 0 and self.prepped_at is None:
            self.prepped_at = self.t - 1
        self.waits += a == 2
        return self.t, 0.0, False, self.t >= 20, {}


def delay(**kw):
    with EnvSession(lambda: Stall(**kw)) as session:
        ex = Explorer(session)
        return _delay(ex, ex.play(Plan(0, (0, 1))), 1e-9)


def test_a_delay_before_the_first_step_is_tried_too():
    # Waiting before prep pays 0.5 a step; waiting between prep and solve does not.
    found = delay(early=0.5)
    assert found.actions == (2, 2, 0, 1) and "inserted before step 0" in found.summary


def test_a_failed_delayed_success_counts_against_however_much_it_pays():
    # From seed 4 on the delayed solve fails, paying 2: more than the success, but not a success.
    assert delay(late=0.125, strict=4, late_fail=2.0) is None


def test_a_delay_that_costs_elsewhere_is_not_confirmed():
    # The delay pays on seed 0 and costs on seeds 4..27: 1 higher, 24 lower.
    assert delay(late=0.125, sour=4) is None


def test_the_next_pad_is_tried_after_one_that_is_not_confirmed():
    # prep as the pad: 0.25 more on seed 0, 0.25 less from seed 4 on (not confirmed); wait as the
    # pad: 1.0 more for the two waits besides, everywhere.
    found = delay(late=0.125, sour=4, bonus=0.5)
    assert found.actions == (0, 2, 2, 1) and "two more steps of wait (inserted before step 1)" in found.summary


def test_brevity_rules_at_their_edges():
    with EnvSession(SuccessCoin) as session:  # every action ends the episode: no pad
        assert _brevity(Explorer(session), 1e-9) is None
    with EnvSession(Milestone) as session:  # no action ends it: nothing to compare
        assert _brevity(Explorer(session, depth=1), 1e-9) is None
    with EnvSession(lambda: Brief(pads=(-0.125, -0.0625))) as session:
        # The allowance is the dearest working step's cost (0.125 a step), not the last one seen.
        assert _brevity(Explorer(session), 1e-9) is None


@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda p: p.__name__)
def test_an_unknown_option_names_the_property(prop):
    with pytest.raises(TypeError, match=rf"^{prop.__name__}\(\) got an unexpected option 'deepth'; did you mean "
                                        r"'depth'\?"):
        prop(FetchTask, deepth=1)


@pytest.mark.parametrize("prop,make_env,target", [
    (assert_no_length_reward, farm, "farm"),
    (assert_no_failure_penalty, dear, "dear"),
    (assert_no_reward_after_failure, after, "after"),
], ids=lambda x: getattr(x, "__name__", x))
def test_a_failure_names_the_property_the_target_and_the_search(prop, make_env, target):
    with pytest.raises(PropertyFailed) as info:
        prop(make_env, seeds=[5, 6], depth=2)
    text = str(info.value)
    assert info.value.property == prop.__name__ and text.startswith(f"{prop.__name__} failed on ")
    assert f"Replay it: envaudit.testing.play({target}, " in text
    assert "exhaustive: every action sequence of up to 2 steps from reset seeds 5..6, shortest first, " in text
    assert info.value.counterexample.episode.seed in (5, 6)


def test_the_seed_option_picks_the_reset_seeds():
    with pytest.raises(PropertyFailed, match="from reset seeds 3..6, shortest first"):
        assert_no_length_reward(farm, seed=3)


def stall():
    return Stall(late=0.125)


def test_a_delayed_success_names_the_property_and_target():
    with pytest.raises(PropertyFailed) as info:
        assert_no_delayed_success_reward(stall)
    assert info.value.property == "assert_no_delayed_success_reward"
    assert str(info.value).startswith("assert_no_delayed_success_reward failed on stall: succeeding after two more")
    assert "Replay it: envaudit.testing.play(stall, " in str(info.value)


class NoisyLock(Lock):
    """``Lock`` whose observation carries a digest of every action so far, so the deeper search
    never sees a state twice and cannot reach the combination; a success pays 1 plus 0.25 per step
    before ``submit`` beyond the six it needs. Actions are labelled ``b0``..``b10`` and ``submit``."""

    action_labels = [f"b{i}" for i in range(11)] + ["submit"]

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(0, 5, (2,))

    def _obs(self):
        return np.array([self.progress, self.trace], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        self.t, self.trace = 0, 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.t += 1
        self.trace = (self.trace * 31 + int(action) + 1) % 1_000_003
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward * (1.0 + 0.25 * (self.t - 6)), terminated, truncated, info

    def combination(self):
        return [f"b{i}" for i in self.PATH] + ["submit"]


def test_an_oracle_supplies_the_success_no_search_reaches():
    with pytest.raises(PropertyFailed, match="delaying a success pays"):
        assert_no_delayed_success_reward(NoisyLock, oracle=lambda env: env.unwrapped.combination(), depth=1,
                                         seeds=[0])


def test_not_exercised_names_the_property():
    for prop, make_env in ((assert_no_delayed_success_reward, lambda: Farm(length=3)),
                           (assert_no_failure_penalty, FetchTask), (assert_no_reward_after_failure, FetchTask)):
        with pytest.raises(PropertyNotExercised) as info:
            prop(make_env, depth=1)
        assert info.value.property == prop.__name__ and str(info.value).startswith(
            f"{prop.__name__} could not exercise its subject on ")


class RareFault(gym.Env):
    """``call`` (tool ``api``) fails (gets ``status``) from reset seeds 1 mod ``period``, else works, paying nothing;
    ``end`` ends the episode paying 0.5 after a failed call, 0 otherwise. Few of the first replays
    fail: only the extra seeds decide."""

    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(1)
    action_labels = ["call", "end"]

    def __init__(self, status="error", period=16):
        self.status, self.period = status, period

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed, self.failed = seed or 0, False
        return 0, {}

    def step(self, action):
        if int(action) == 0:
            self.failed = self.seed % self.period == 1
            return 0, 0.0, False, False, {"tool": {"name": "api", "status": self.status if self.failed else "ok"}}
        return 0, 0.5 if self.failed else 0.0, True, False, {"success": not self.failed}


def rare():
    return RareFault()


def test_a_rare_failure_is_decided_after_more_seeds():
    with pytest.raises(PropertyFailed) as info:
        assert_no_reward_after_failure(rare, depth=2)
    text = str(info.value)
    assert text.startswith("assert_no_reward_after_failure failed on rare: after a failed api call, the plan")
    assert "Counterexample (matched across reset seeds, not shrunk):" in text
    assert "Replay it: envaudit.testing.play(rare, " in text and info.value.property == "assert_no_reward_after_failure"


def test_a_rare_timeout_is_judged_when_no_call_failed_outright():
    with pytest.raises(PropertyFailed, match="after a timed-out api call, the plans going on with end returned"):
        assert_no_reward_after_failure(lambda: RareFault("timeout", period=4), depth=2)


def test_clean_tool_env_twins_pass():
    assert_no_reward_after_failure(Dial)
    assert_no_failure_penalty(Dial)
    assert_no_length_reward(Dial)


def test_a_plain_env_without_failures_is_told_to_become_a_tool_env():
    with pytest.raises(PropertyNotExercised) as info:
        assert_no_failure_penalty(FetchTask, depth=1)
    assert str(info.value).endswith("plays). It fails rather than passing vacuously. Make it an envaudit.ToolEnv so "
                                    "faults can be forced.")


def test_farming_compares_with_one_step_from_the_same_seed():
    with EnvSession(lambda: Farm(paying=(2, 3))) as session:
        from envaudit.testing.incentives import _farming

        found = _farming(Explorer(session), 1e-9)
    assert "against +0.125 for one step of it (on 2 of 4 seeds)" in found.summary
    assert found.compared[0][1].seed == 2


class Crash(Brief):
    """``Brief`` with a fourth action, ``crash``: it ends the episode at once paying -5 (a working
    step that ends: no part of the allowance)."""

    action_labels = ["pad_a", "pad_b", "quit", "crash"]
    action_space = gym.spaces.Discrete(4)

    def step(self, action):
        if int(action) == 3:
            self.t += 1
            return self.t, -5.0, True, False, {"success": False}
        return super().step(action)


def test_an_ending_step_is_no_part_of_the_allowance():
    with EnvSession(lambda: Crash(decay=0.125)) as session:
        found = _brevity(Explorer(session, depth=2), 1e-9)
    assert found is not None and "more than two steps cost (+0.25)" in found.summary
