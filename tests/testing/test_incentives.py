"""The enumerating properties on generated envs: each fails on its flaw with numbers from the
spec (envaudit.families: FLAW_DOCS), and passes on the same spec with the flaw removed."""

from dataclasses import replace

import gymnasium as gym
import pytest

from envaudit.families import flawed_case, make_env
from envaudit.testing import (
    PropertyFailed,
    assert_failures_not_rewarded,
    assert_no_delayed_success_reward,
    assert_no_failure_penalty,
    assert_no_length_reward,
    assert_no_reward_after_failure,
    assert_no_reward_without_success,
    assert_no_timeout_reward,
)

TOOLENV, GYM = 7, 0  # flawed_case indices at seed 0: a ToolEnv (8-step path) and a plain env, both unshaped


def spec_of(kind, index):
    spec = flawed_case(0, index, kind=kind).spec
    assert spec.shaping == "none" and spec.base == ("toolenv" if index == TOOLENV else "gym")
    return spec


def failure(prop, spec, **options):
    with pytest.raises(PropertyFailed) as info:
        prop(lambda: make_env(spec), **options)
    return info.value.counterexample


def twin(spec):
    return lambda: make_env(replace(spec, flaw=None))


def test_quitting_after_a_failure_pays_on_a_tool_env():
    spec = spec_of("failure-conditioned-quit", TOOLENV)
    found = failure(assert_no_reward_after_failure, spec)
    failed, quit_ = found.episode.steps[-2:]
    assert failed.status in ("error", "timeout") and failed.injected and quit_.label == "give_up"
    assert quit_.reward == pytest.approx(spec.flaw.amount - spec.step_cost)
    (_, working), = found.compared
    assert working.steps[-1].label == "give_up" and working.steps[-1].reward == pytest.approx(-spec.step_cost)
    assert found.evidence["lower"] == 0 and found.evidence["p_value"] < 0.01
    assert_no_reward_after_failure(twin(spec))


def test_quitting_after_a_failure_pays_on_a_plain_env():
    spec = spec_of("failure-conditioned-quit", GYM)
    found = failure(assert_no_reward_after_failure, spec)
    assert found.episode.steps[-1].label == "give_up" and found.episode.steps[-2].status in ("error", "timeout")
    assert found.evidence["diff"] > 0 and found.evidence["p_value_holm"] < 0.01
    assert_no_reward_after_failure(twin(spec))


@pytest.mark.parametrize("index", [TOOLENV, GYM], ids=["toolenv", "gym"])
def test_a_failure_charged_beyond_its_time(index):
    spec = spec_of("failure-cost", index)
    found = failure(assert_no_failure_penalty, spec)
    failed = found.episode.steps[-1]
    assert failed.status in ("error", "timeout") and not failed.terminated
    assert failed.reward == pytest.approx(-spec.step_cost - spec.flaw.amount)
    assert found.evidence["cheapest_working"] == pytest.approx(-spec.step_cost)
    assert found.evidence["seeds"] >= 2
    assert_no_failure_penalty(twin(spec))


def test_farming_a_tool_keeps_paying():
    spec = spec_of("step-farming", TOOLENV)
    found = failure(assert_no_length_reward, spec)
    farmed = {s.label for s in found.episode.steps}
    assert farmed == {f"call_{spec.flaw.tool}"}
    paid = [s.reward for s in found.episode.steps if s.status == "ok"]
    assert paid and all(r == pytest.approx(spec.flaw.amount - spec.step_cost) for r in paid)
    assert_no_length_reward(twin(spec))


@pytest.mark.parametrize("index", [TOOLENV, GYM], ids=["toolenv", "gym"])
def test_a_brevity_bonus(index):
    spec = spec_of("brevity-bonus", index)
    found = failure(assert_no_length_reward, spec)
    assert [s.label for s in found.episode.steps] == ["give_up"]
    assert found.episode.episode_return == pytest.approx(spec.flaw.amount - spec.step_cost)
    (_, later), = found.compared
    quit_later = later.steps[-1]
    assert quit_later.label == "give_up"
    assert quit_later.reward == pytest.approx(-spec.step_cost + spec.flaw.amount * (1 - 2 / spec.max_steps))
    assert_no_length_reward(twin(spec))


def test_delaying_a_success_pays():
    spec = spec_of("delayed-success", TOOLENV)
    found = failure(assert_no_delayed_success_reward, spec)
    (_, success), = found.compared
    assert found.episode.success and success.success and found.episode.length == success.length + 2
    # Two wrong submissions inserted, each paying the format score less the step cost.
    assert found.episode.episode_return - success.episode_return == pytest.approx(
        2 * (spec.flaw.amount - spec.step_cost))
    assert_no_delayed_success_reward(twin(spec))


def test_a_timeout_graded_as_a_pass_on_a_family():
    spec = spec_of("timeout-passes", TOOLENV)
    found = failure(assert_no_timeout_reward, spec)
    assert found.episode.steps[-1].label == f"call_{spec.flaw.tool}" and found.episode.steps[-1].status == "timeout"
    assert found.episode.length == 1 and found.episode.episode_return == pytest.approx(spec.flaw.amount - spec.step_cost)
    assert found.compared[0][1].episode_return == pytest.approx(-spec.step_cost)


def test_attempt_credit_on_a_family():
    spec = spec_of("attempt-credit", TOOLENV)
    found = failure(assert_failures_not_rewarded, spec)
    failed = found.episode.steps[-1]
    assert failed.status == "error" and failed.reward == pytest.approx(spec.flaw.amount - spec.step_cost)


def test_a_lenient_grader_pays_what_a_success_pays():
    spec = spec_of("lenient-grader", TOOLENV)
    found = failure(assert_no_reward_without_success, spec)
    assert found.episode.success is False and found.episode.length == 1
    (_, success), = found.compared
    assert success.success and found.episode.episode_return >= success.episode_return
    assert_no_reward_without_success(twin(spec))


def test_depth_is_checked():
    with pytest.raises(ValueError, match="depth must be a positive int"):
        assert_no_length_reward(twin(spec_of("brevity-bonus", TOOLENV)), depth=0)


class Milestone(gym.Env):
    """Eight steps of one action; the fifth pays +1 once (a milestone, bounded), the rest 0."""

    action_space = gym.spaces.Discrete(1)
    observation_space = gym.spaces.Discrete(9)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        reward = 1.0 if self.t == 5 else 0.0
        return self.t, reward, False, self.t >= 8, {"success": False} if self.t >= 8 else {}


def test_a_reward_paid_once_late_in_a_run_is_not_farming():
    # The second half of the run (steps 4-7) holds one paying step: bounded progress, not farming.
    assert_no_length_reward(Milestone)


def test_a_reward_paid_on_every_step_is_farming():
    class Farm(Milestone):
        def step(self, action):
            obs, _, terminated, truncated, info = super().step(action)
            return obs, 0.1, terminated, truncated, info

    with pytest.raises(PropertyFailed, match="kept paying"):
        assert_no_length_reward(Farm)
