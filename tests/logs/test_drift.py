"""Drift over a logged run: generated logs whose drift is known by design.

- FlakySearch (clean) under a drop pipeline, the policy stalling to the step limit more and more
  from iteration 8 (rate 0.05 + 0.08 per iteration): a timed-out rollout leaves the loss, so a
  failing one escapes its negative advantage: ``learned-exploit`` (timeout, via the pipeline) at
  warn, starting at iteration 8.
- FlakySearch-FailurePenalty (each failed call costs 0.5) under keep, the policy giving up at once
  more and more from iteration 6: failed calls are charged beyond their step, so ending early
  beats persisting: ``learned-exploit`` (quit, failure-shortcut) at warn, length falling from 6.
- The same clean env, a stationary policy under keep: no warn or fail at all.

The start is estimated from 128 episodes per iteration in 32 groups (a group shares its reset seed,
so its oracle rollouts share their fate: 32 independent draws); the rate rises 0.08 per iteration
against a per-iteration standard error of about 0.03, so the start is located within one iteration.
"""

from __future__ import annotations

import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.logs.audit import run_logs
from envaudit.logs.drift import start_iteration
from envaudit.testing.logs import Drift, generate_log


def _learned(report):
    return [f for f in report.findings if f.code == "learned-exploit"]


@pytest.fixture(scope="module")
def stalling():
    return generate_log(drift=Drift("stall", start=8), iterations=24)


def test_timeouts_learned_under_a_drop_pipeline(stalling):
    report = run_logs(stalling, ScanConfig(timeout_handling="drop"))
    [finding] = _learned(report)
    assert finding.severity == Severity.WARN
    assert finding.evidence["behaviour"] == "timeout"
    assert finding.evidence["reward_path"] == "pipeline"
    assert finding.evidence["learned"] == "timeouts up"
    assert abs(finding.evidence["start_iteration"] - 8) <= 1
    assert "started rising at iteration" in finding.summary
    # Examples are timed-out episodes of the last iterations, distinct.
    eps = report.records.episodes.set_index("episode_id")
    assert finding.examples and len(set(finding.examples)) == len(finding.examples)
    assert all(eps.loc[i, "outcome"] == "timeout" for i in finding.examples)
    assert report.tables["grpo_curves"]["timeout_rate"].iloc[-1] > 0.5


def test_the_same_policy_under_keep_is_no_learned_exploit(stalling):
    # Under keep a stall earns 0 like a failure in clean FlakySearch: nothing paid for timing out.
    report = run_logs(stalling, ScanConfig())
    assert not [f for f in _learned(report) if f.severity >= Severity.WARN]


def test_failures_teach_shorter_episodes():
    run = generate_log("envaudit/FlakySearch-FailurePenalty-v0", drift=Drift("give_up", start=6), iterations=24)
    report = run_logs(run, ScanConfig())
    [finding] = _learned(report)
    assert finding.severity >= Severity.WARN
    assert finding.evidence["verdict"] == "failure-shortcut"
    assert finding.evidence["behaviour"] == "quit"
    assert finding.evidence["learned"] == "length down"
    assert abs(finding.evidence["start_iteration"] - 6) <= 1


def test_a_stationary_log_has_no_warn_or_fail():
    run = generate_log(drift=Drift("none"), iterations=12)
    report = run_logs(run, ScanConfig())
    assert report.reaches("warn") == []
    assert not _learned(report)


def test_start_iteration_finds_the_knot_of_a_ramp_that_saturates():
    t = np.arange(30)
    y = np.clip(0.1 + 0.08 * (t - 11), 0.1, 0.7)  # flat to 11, rising, flat again from 19
    assert start_iteration(t, y, np.ones(30)) == 11
    assert start_iteration(t, -y, np.ones(30), rising=False) == 11
    assert start_iteration(t, np.full(30, 0.3), np.ones(30)) is None


@pytest.mark.parametrize("n, first, last", [(2, [0], [1]), (3, [0], [2]), (4, [0], [3]), (5, [0, 1], [3, 4]),
                                            (8, [0, 1], [6, 7]), (9, [0, 1, 2], [6, 7, 8]),
                                            (30, list(range(8)), list(range(22, 30)))])
def test_the_windows_are_the_first_and_last_quarter(n, first, last):
    from envaudit.logs.drift import windows

    a, b = windows(np.repeat(np.arange(n), 3))  # iterations repeat once per episode
    assert a.tolist() == first and b.tolist() == last
