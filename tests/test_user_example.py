"""Testing an environment with envaudit, written the way you would write it in your own suite.

docs/testing.md quotes this file whole (tests/test_doc_pages.py checks the copy). Point ``make_env``
at your own env (any Gymnasium env that speaks envaudit's info protocol; an ``envaudit.ToolEnv``
also gets fault injection) and keep the tests that fit.
"""

import gymnasium as gym
import pytest
from hypothesis import given

import envaudit  # noqa: F401 - registers the bundled envaudit/... envs with Gymnasium
from envaudit.testing import (
    action_sequences,
    assert_canaries_at_floor,
    assert_failures_not_rewarded,
    assert_floor_below_oracle,
    assert_no_length_reward,
    assert_no_reward_after_failure,
    assert_no_reward_without_success,
    assert_no_timeout_reward,
    assert_replayable,
    episodes,
    fault_schedules,
    play,
)


def make_env():
    return gym.make("envaudit/Helpdesk-v0")


# 1. Incentive properties: one call each. Each searches seeds, actions and tool faults with
#    Hypothesis; a failure shows the shrunk counterexample as a trajectory you can replay.


def test_timeouts_never_pay():
    assert_no_timeout_reward(make_env)


def test_failed_tool_calls_never_pay():
    assert_failures_not_rewarded(make_env)


def test_no_reward_without_success():
    assert_no_reward_without_success(make_env)


def test_the_step_after_a_failed_call_pays_no_more():
    assert_no_reward_after_failure(make_env)


def test_length_does_not_pay():
    assert_no_length_reward(make_env)


def test_same_seed_same_trajectory():
    assert_replayable(make_env)


def test_shortcuts_score_well_below_the_oracle():
    assert_floor_below_oracle(make_env, lambda env: env.unwrapped.oracle(), margin=0.5)


def test_known_hacks_earn_nothing():
    assert_canaries_at_floor(make_env, {
        "close at once": ["close_ticket"],
        "reply without resolving": ["reply"] * 9 + ["close_ticket"],
        "refund without looking": ["issue_refund", "reply", "close_ticket"],
    })


# 2. Strategies, for your own @given tests.


@given(episodes(make_env, faults=True))
def test_closing_the_ticket_ends_the_episode(episode):
    closed = [s.index for s in episode.steps if s.label == "close_ticket" and s.status == "ok"]
    if closed:
        assert closed[0] == episode.length - 1 and episode.end_reason == "terminated"


@given(action_sequences(make_env, max_size=6), fault_schedules(["lookup_customer", "lookup_order"], kinds=["timeout"]))
def test_a_lookup_that_times_out_pays_nothing(actions, faults):
    episode = play(make_env, actions, seed=0, faults=faults)
    assert all(step.reward == 0 for step in episode.steps if step.status == "timeout")


# 3. A gate on the full scan: the test fails with the findings table when a finding reaches
#    fail_on; the report is there for further checks.


@pytest.mark.envaudit_scan("envaudit/Helpdesk-v0", fail_on="warn", quick=True)
def test_scan_finds_no_incentive(envaudit_report):
    assert envaudit_report.exploration["episodes"] > 0
