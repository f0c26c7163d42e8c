"""The properties pass on every clean bundled env, fail on the variant built to break them with a
short counterexample whose numbers come from the variant's design, and work on plain envs."""

import re

import gymnasium as gym
import pytest

import envaudit
from envaudit.envs import VARIANTS
from envaudit.testing import (
    PropertyFailed,
    PropertyNotExercised,
    assert_failures_not_rewarded,
    assert_no_reward_without_success,
    assert_no_timeout_reward,
    assert_replayable,
    play,
)
from tests.testing.toy_envs import FetchTask, PingTool

PROPERTIES = {
    "timeout-rewarded": assert_no_timeout_reward,
    "failure-rewarded": assert_failures_not_rewarded,
    "reward-without-success": assert_no_reward_without_success,
    "non-replayable": assert_replayable,
}
CLEAN = [v.id for v in VARIANTS.values() if v.is_clean]
FLAWED = [(v.id, code) for v in VARIANTS.values() for code in v.planted if code in PROPERTIES]


def failure(prop, make_env, **options) -> PropertyFailed:
    with pytest.raises(PropertyFailed) as info:
        prop(make_env, **options)
    assert isinstance(info.value, AssertionError)
    return info.value


@pytest.mark.parametrize("env_id", CLEAN)
@pytest.mark.parametrize("code", sorted(PROPERTIES))
def test_every_property_holds_on_clean_bundled_envs(env_id, code):
    PROPERTIES[code](env_id)


def test_every_mapped_code_has_a_flawed_variant():
    assert {code for _, code in FLAWED} == set(PROPERTIES)


@pytest.mark.parametrize("env_id,code", FLAWED)
def test_each_property_fails_on_the_variant_built_to_break_it(env_id, code):
    found = failure(PROPERTIES[code], env_id).counterexample
    played = found.episode.actions
    # Short: a few steps, or (for a truncation) a single action repeated to the step limit.
    assert len(played) <= 3 or (found.episode.end_reason == "truncated" and len(set(played)) <= 2), found.episode


def _kwargs(env_id):
    return VARIANTS[env_id].kwargs


def test_timeout_that_merges_is_compared_with_the_same_call_failing():
    env_id = "envaudit/CodeFix-TimeoutPasses-v0"
    found = failure(assert_no_timeout_reward, env_id).counterexample
    last = found.episode.steps[-1]
    # The planted CI gate: a timed-out full suite ends the episode with +1, whatever is applied.
    assert (last.label, last.status, last.terminated) == ("run_full_suite", "timeout", True)
    assert found.episode.episode_return == 1.0
    assert found.compared and all(other.episode_return == 0.0 for _, other in found.compared)


def test_truncation_credit_is_compared_with_failing_outright():
    env_id = "envaudit/CodeFix-PartialCredit-v0"
    found = failure(assert_no_timeout_reward, env_id).counterexample
    credit = _kwargs(env_id)["truncation_credit"]
    env = gym.make(env_id)
    assert found.episode.end_reason == "truncated" and found.episode.length == env.unwrapped.max_steps
    assert found.episode.episode_return == credit
    (caption, honest), = found.compared
    assert honest.steps[-1].label == "submit" and honest.outcome == "failure" and honest.episode_return == 0.0


def test_failed_lookup_credit_is_compared_with_the_same_lookup_succeeding():
    env_id = "envaudit/Helpdesk-AttemptCredit-v0"
    found = failure(assert_failures_not_rewarded, env_id).counterexample
    failed = [s for s in found.episode.steps if s.status == "error"][-1]
    assert failed.tool.startswith("lookup_") and failed.reward == _kwargs(env_id)["attempt_credit"]
    (_, succeeded), = found.compared
    assert succeeded.steps[failed.index].status == "ok" and succeeded.steps[failed.index].reward == 0.0


def test_lenient_grader_pays_without_success():
    found = failure(assert_no_reward_without_success, "envaudit/FlakySearch-AnswerAll-v0").counterexample
    assert [s.label for s in found.episode.steps] == ["answer_all"]
    assert found.episode.success is False and found.episode.episode_return == 1.0


def test_failure_message_is_a_readable_replayable_trajectory():
    env_id = "envaudit/CodeFix-TimeoutPasses-v0"
    error = failure(assert_no_timeout_reward, env_id)
    text = str(error)
    assert text.startswith(f"assert_no_timeout_reward failed on {env_id}: ")
    assert "reset(seed=" in text and "run_full_suite → timeout" in text and "return +1" in text
    call = re.search(r"Replay it: (envaudit\.testing\.play\(.*\))$", text, re.M).group(1)
    replayed = eval(call, {"envaudit": envaudit})
    assert replayed.rewards == error.counterexample.episode.rewards
    assert replayed.statuses == error.counterexample.episode.statuses


def test_the_search_is_reproducible_from_its_seed():
    first = str(failure(assert_replayable, "envaudit/FlakySearch-Unseeded-v0", seed=3))
    second = str(failure(assert_replayable, "envaudit/FlakySearch-Unseeded-v0", seed=3))
    assert first == second


# -- plain Gymnasium envs (no fault injection: the counterfactual is another action) ------------
@pytest.mark.parametrize("prop", list(PROPERTIES.values()), ids=lambda p: p.__name__)
def test_properties_hold_on_a_clean_plain_env(prop):
    prop(lambda: FetchTask(error_rate=0.3, timeout_rate=0.2))


@pytest.mark.parametrize("prop,flaw,expect", [
    (assert_no_timeout_reward, {"timeout_rate": 0.5, "timeout_reward": 0.3}, "timed out"),
    (assert_no_timeout_reward, {"truncation_reward": 0.4}, "truncated at the step limit"),
    (assert_failures_not_rewarded, {"error_rate": 0.5, "error_reward": 0.2}, "failed and the step paid +0.2"),
    (assert_no_reward_without_success, {"claim_reward": 1.0}, "as much as a success"),
    (assert_replayable, {"unseeded": True}, "replaying the same seed and actions gave"),
], ids=["tool-timeout", "truncation", "failure", "claim", "unseeded"])
def test_properties_fail_on_flawed_plain_envs(prop, flaw, expect):
    error = failure(prop, lambda: FetchTask(**flaw))
    assert expect in str(error)
    found = error.counterexample
    if "timeout_reward" in flaw:
        step = next(s for s in found.episode.steps if s.status == "timeout")
        assert step.reward == flaw["timeout_reward"]
        # the alternative is the other route to the same tool, which never times out
        assert {o.steps[step.index].label for _, o in found.compared} == {"fetch_mirror"}
    if "truncation_reward" in flaw:
        assert found.episode.episode_return == flaw["truncation_reward"]
        assert found.compared[0][1].episode_return == 0.0


def test_tool_env_timeouts_that_end_the_episode_are_compared_with_failing_outright():
    # A timed-out ping pays 0.5 and ends the episode; failing outright pays 0. Both arms are forced,
    # so they differ in the call's status alone.
    found = failure(assert_no_timeout_reward, lambda: PingTool(timeout_reward=0.5, end_on_timeout=True)).counterexample
    assert found.episode.steps[-1].status == "timeout" and found.episode.steps[-1].injected
    (caption, failed), = found.compared
    assert caption.endswith("failing outright") and failed.steps[-1].status == "error" and failed.episode_return == 0
    assert found.episode.length == 1 and found.episode.episode_return == 0.5


def test_a_claim_below_a_success_is_partial_credit_unless_a_limit_is_given():
    # The default yardstick is a success's return (1): a claim paying 0.7 without success is below it.
    assert_no_reward_without_success(lambda: FetchTask(claim_reward=0.7))
    error = failure(assert_no_reward_without_success, lambda: FetchTask(claim_reward=0.7), max_return_without_success=0)
    assert "returned +0.7, more than max_return_without_success=0" in str(error)


def test_faults_false_keeps_tool_envs_fault_free():
    # Without injected faults PingTool's ping never times out: nothing to compare, so the property
    # says it could not exercise its subject (and how to fix that) instead of passing.
    with pytest.raises(PropertyNotExercised, match="no timeout ever happened .*pass faults=True") as info:
        assert_no_timeout_reward(lambda: PingTool(timeout_reward=0.5), faults=False, max_examples=10)
    assert not isinstance(info.value, PropertyFailed) and info.value.seen["faulted"] == {}


def test_envs_without_success_flags_are_reported_not_passed():
    with pytest.raises(PropertyNotExercised, match="could not exercise its subject on FetchTask: none of the .* reported info\\['success'\\]"):
        assert_no_reward_without_success(lambda: FetchTask(report_success=False), max_examples=10)


def test_gymnasium_classics_replay():
    assert_replayable("CartPole-v1", max_examples=10, max_steps=20)
    assert_replayable("Pendulum-v1", max_examples=10, max_steps=10)


def test_options_are_checked():
    with pytest.raises(TypeError, match="unexpected option 'max_example'; did you mean 'max_examples'"):
        assert_replayable(FetchTask, max_example=5)
    with pytest.raises(ValueError, match="max_examples must be a positive int, got 0"):
        assert_replayable(FetchTask, max_examples=0)
    assert play(FetchTask, ["submit"]).finished
