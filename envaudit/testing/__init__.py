"""Property-based testing for environments: Hypothesis strategies, incentive properties, a pytest plugin.

Two levels, like Rich's ``track`` and ``Progress``. The properties are one call each and search
the env with Hypothesis for a counterexample; the strategies are the building blocks for your own
``@given`` tests::

    from hypothesis import given
    from envaudit.testing import assert_no_timeout_reward, episodes

    def test_timeouts_never_pay():
        assert_no_timeout_reward("envaudit/CodeFix-v0")

    @given(episodes("envaudit/CodeFix-v0", faults=True))
    def test_no_reward_without_success(episode):
        assert episode.success or episode.episode_return <= 0

A failing property raises ``PropertyFailed`` (an ``AssertionError``) whose message shows the
shrunk counterexample as a trajectory table and a ``play(...)`` call that replays it. A property
that could not exercise its subject on the env (no timeout ever seen, no comparable call) raises
``PropertyNotExercised`` (also an ``AssertionError``) instead of passing. The same ``seed`` gives
the same verdict in plain Python and under pytest, whatever plugins or Hypothesis profile are loaded. The pytest
plugin (``envaudit.testing.pytest_plugin``, registered under ``pytest11``) adds the
``envaudit_scan`` marker and fixture, which gate a test on a full ``envaudit scan``.
"""

from envaudit.testing.baselines import assert_canaries_at_floor, assert_floor_below_oracle
from envaudit.testing.incentives import (
    assert_no_delayed_success_reward,
    assert_no_failure_penalty,
    assert_no_length_reward,
    assert_no_reward_after_failure,
)
from envaudit.testing.properties import assert_failures_not_rewarded, assert_no_timeout_reward
from envaudit.testing.replay import assert_replayable
from envaudit.testing.search import Counterexample, PropertyFailed, PropertyNotExercised
from envaudit.testing.strategies import action_sequences, actions, episodes, fault_schedules
from envaudit.testing.success import assert_no_reward_without_success
from envaudit.testing.trajectory import Episode, FaultSchedule, Step, play

__all__ = [
    "Counterexample",
    "Episode",
    "FaultSchedule",
    "PropertyFailed",
    "PropertyNotExercised",
    "Step",
    "action_sequences",
    "actions",
    "assert_canaries_at_floor",
    "assert_failures_not_rewarded",
    "assert_floor_below_oracle",
    "assert_no_delayed_success_reward",
    "assert_no_failure_penalty",
    "assert_no_length_reward",
    "assert_no_reward_after_failure",
    "assert_no_reward_without_success",
    "assert_no_timeout_reward",
    "assert_replayable",
    "episodes",
    "fault_schedules",
    "play",
]
