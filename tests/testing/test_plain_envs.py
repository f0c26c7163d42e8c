"""Properties on plain Gymnasium envs whose faults cannot be forced, and no other action calls the
same tool: they decide by replaying the same actions under other seeds, and say so when they
cannot decide. ``SingleRoute``'s rewards are parameters, so every expected number is one."""

import numpy as np
import pytest

from envaudit.stats import MIN_SAMPLES
from envaudit.testing import (
    PropertyFailed,
    PropertyNotExercised,
    assert_failures_not_rewarded,
    assert_no_timeout_reward,
)
from envaudit.testing.matched import ALPHA, MatchedPool, stratified_test
from envaudit.testing.trajectory import EnvSession, Plan
from tests.testing.toy_envs import SingleRoute

# A timed-out fetch ends the episode paying TIMEOUT_PAY; a failed one ends it paying 0.
TIMEOUTS = {"error_rate": 0.25, "timeout_rate": 0.25, "end_on_fault": True}
TIMEOUT_PAY = 0.5
# A failed fetch pays ERROR_PAY on its step; a successful one 0.
FAILURES = {"error_rate": 0.4}
ERROR_PAY = 0.2


def test_timed_out_episodes_that_pay_more_than_failures_are_caught():
    with pytest.raises(PropertyFailed) as info:
        assert_no_timeout_reward(lambda: SingleRoute(**TIMEOUTS, timeout_reward=TIMEOUT_PAY))
    found = info.value.counterexample
    assert "timed-out fetch calls" in str(info.value) and "outright failures (status 'error')" in str(info.value)
    assert "stratified Mann-Whitney (van Elteren)" in str(info.value) and "Replay it: envaudit.testing.play(" in str(info.value)
    last = found.episode.steps[-1]
    assert (last.label, last.status, last.reward, last.terminated) == ("fetch", "timeout", TIMEOUT_PAY, True)
    (_, failed), = found.compared
    assert failed.steps[last.index].status == "error" and failed.episode_return == 0.0
    ev = found.evidence
    assert ev["diff"] == pytest.approx(TIMEOUT_PAY) and ev["n_timeout"] >= MIN_SAMPLES and ev["p_value_holm"] < ALPHA


def test_timeouts_of_the_short_plans_are_judged_when_the_search_draws_none():
    # One generated case cannot gather a matched comparison; the enumeration's own timed-out
    # fetches (every plan of up to three steps from four seeds) are replayed across seeds instead.
    with pytest.raises(PropertyFailed) as info:
        assert_no_timeout_reward(lambda: SingleRoute(**TIMEOUTS, timeout_reward=TIMEOUT_PAY), max_examples=1)
    assert "timed-out fetch calls" in str(info.value) and "after 1 generated case" not in str(info.value)
    assert info.value.counterexample.evidence["diff"] == pytest.approx(TIMEOUT_PAY)


def test_timeouts_paying_like_failures_pass():
    assert_no_timeout_reward(lambda: SingleRoute(**TIMEOUTS))


def test_failed_steps_that_pay_more_than_ok_steps_of_the_same_tool_are_caught():
    with pytest.raises(PropertyFailed) as info:
        assert_failures_not_rewarded(lambda: SingleRoute(**FAILURES, error_reward=ERROR_PAY))
    found = info.value.counterexample
    assert "failed fetch calls paid on the step +0.2 on average" in str(info.value)
    step = next(s for s in found.episode.steps if s.status == "error")
    assert step.label == "fetch" and step.reward == ERROR_PAY
    (_, ok), = found.compared
    assert ok.steps[step.index].status == "ok" and ok.steps[step.index].reward == 0.0
    assert found.evidence["diff"] == pytest.approx(ERROR_PAY) and found.evidence["n_error"] >= MIN_SAMPLES


def test_failed_steps_paying_like_ok_steps_pass():
    assert_failures_not_rewarded(lambda: SingleRoute(**FAILURES))


@pytest.mark.parametrize("prop,flaw,clean", [
    (assert_no_timeout_reward, {**TIMEOUTS, "timeout_reward": 0.3}, TIMEOUTS),
    (assert_failures_not_rewarded, {**FAILURES, "error_reward": 0.1}, FAILURES),
], ids=["timeouts", "failures"])
def test_noisy_rewards_are_decided_by_the_test_not_by_one_episode(prop, flaw, clean):
    # Every reward carries N(0, 0.1) noise: one flawed step can pay less than one clean step.
    with pytest.raises(PropertyFailed, match="van Elteren"):
        prop(lambda: SingleRoute(**flaw, reward_noise=0.1))
    prop(lambda: SingleRoute(**clean, reward_noise=0.1))


def test_stratified_test_counts_a_shared_control_arm_once():
    rng = np.random.default_rng(0)
    # Twenty faulted values against one control value: every faulted value is higher, yet
    # with one control the comparison is underpowered and the p-value is not tiny.
    lone = stratified_test([([1.0] * 20, [0.0])], rng)
    assert lone["underpowered"] and lone["p_value"] > ALPHA
    # Eight strata, each one faulted value above its control arm: decided.
    shifted = stratified_test([([1.0 + k], [0.0 + k, 0.5 + k]) for k in range(8)], rng)
    assert not shifted["underpowered"] and shifted["p_value"] < ALPHA and shifted["diff"] == pytest.approx(0.75)
    # Ties everywhere: no evidence at all.
    assert stratified_test([([0.0] * 9, [0.0] * 9)], rng)["p_value"] == 1.0


def test_an_env_that_never_times_out_fails_the_timeout_property_with_why():
    # No timeout rate and a step limit (100) beyond the 50 steps played: nothing ever times out.
    with pytest.raises(PropertyNotExercised) as info:
        assert_no_timeout_reward(lambda: SingleRoute(error_rate=0.3))
    text = str(info.value)
    assert text.startswith("assert_no_timeout_reward could not exercise its subject on SingleRoute: "
                           "in 50 generated cases (max_examples=50, seed=0), no timeout ever happened")
    assert "make the env an envaudit.ToolEnv" in text and "rather than passing vacuously" in text
    assert info.value.seen["faulted"] == {} and info.value.seen["truncated"] == 0
    assert not isinstance(info.value, PropertyFailed) and isinstance(info.value, AssertionError)


def test_an_env_whose_tools_never_fail_fails_the_failure_property_with_why():
    with pytest.raises(PropertyNotExercised, match="no failure ever happened \\(0 tool calls failed\\)"):
        assert_failures_not_rewarded(lambda: SingleRoute(timeout_rate=0.3), max_examples=20)


def test_too_few_comparable_calls_decide_nothing():
    # Only a fetch at the first step fails, always: no successful fetch from the same state to
    # compare it with, on any seed, so there are no matched pairs at all.
    with pytest.raises(PropertyNotExercised) as info:
        assert_failures_not_rewarded(lambda: SingleRoute(fail_first=True, error_reward=ERROR_PAY))
    text = str(info.value)
    assert text.startswith("assert_failures_not_rewarded could not decide on SingleRoute: ")
    assert "matched 0 failed calls with 0 successful calls" in text
    assert f"fewer than the {MIN_SAMPLES} of each needed to decide" in text
    assert info.value.seen["matched"] == (0, 0) and info.value.seen["faulted"]["fetch"] > 0


def test_matched_pool_pairs_faulted_calls_with_the_same_state_only():
    # need (1 or 2) is in the observation, so a stratum never mixes tasks.
    with EnvSession(lambda: SingleRoute(**FAILURES, error_reward=ERROR_PAY)) as session:
        pool = MatchedPool(session, seed=0, purpose="test", subject="error", control_sets=[("ok",)])
        plan = Plan(0, (0, 0, 0))
        episode = session.play(plan)
        for step in episode.steps:
            pool.add(plan, episode, step)
        verdict = pool.verdict(1e-9)
    assert verdict.matching == "the same action prefix and observation before the call"
    assert all(a.state == b.state and a.index == b.index for a, b in [verdict.example])
    assert verdict.evidence["diff"] == pytest.approx(ERROR_PAY)


def test_failures_of_a_rarely_drawn_tool_are_taken_from_the_enumerated_plans():
    # attempt-credit-0-8: a plain Gymnasium env of six actions where only call_fetch_page calls the
    # flaky tool (34% errors) and a failed fetch pays +0.1085 against -0.0104 for a working one.
    # Hypothesis's 50 cases call it twice and never see it fail; the exhaustive short plans see 81
    # failures, and the matched replays across seeds decide.
    from dataclasses import replace

    from envaudit.families import flawed_case
    from envaudit.families.case import Case

    case = flawed_case(0, 8, kind="attempt-credit")
    with pytest.raises(PropertyFailed) as info:
        assert_failures_not_rewarded(case.make_env)
    assert "fetch_page" in str(info.value)
    twin = Case("twin", replace(case.spec, flaw=None))
    assert_failures_not_rewarded(twin.make_env)


def test_an_ending_step_is_compared_only_with_a_step_that_ends_alike():
    # clean-1-24 (a ToolEnv with potential shaping): a working submit of a wrong answer ends the
    # episode and pays the potential back (-0.0499); the same submit failing leaves the episode
    # running and pays 0. The failed step pays more only because the other arm settled its shaping.
    from envaudit.families import clean_case

    assert_failures_not_rewarded(clean_case(1, 24).make_env)
