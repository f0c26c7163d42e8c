"""Issue 25, class 1: partial credit on every unfinished ending is no reward for timing out.

``PartialCredit`` pays the same partial credit when the agent submits and when the step limit cuts
the episode, so from every state stalling to the limit pays what submitting there pays: the
timeouts probe, which now compares each timeout with ending the same episode from the same state,
finds nothing. Its flawed twin pays ``limit_bonus = 0.3`` more at the step limit only: stalling
beats submitting from the same state by 0.3, below an honest success (1.0): ``warn``.
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.probes.timeouts import probe
from envaudit.scan import run_scan
from tests.fixtures.context import run_probe
from tests.fixtures.counterfactual_envs import PartialCredit, PartialCreditDesk


def _findings(bonus: float) -> list:
    report = run_scan(lambda: PartialCredit(limit_bonus=bonus), ScanConfig(seed=0, fail_on="never", probes=("timeouts",)),
                      env_id="partial-credit")
    return [f for f in report.findings if f.code == "timeout-rewarded"]


def test_partial_credit_on_every_ending_is_not_a_timeout_reward():
    assert _findings(0.0) == []


def test_a_step_limit_that_pays_more_than_submitting_from_the_same_state_is_warned():
    (found,) = _findings(0.3)
    assert str(found.severity) == "warn"
    same = found.evidence["test"]["same_state"]
    assert same["n_prefixes"] >= 8 and same["replay_steps"] > 0
    # Stalling and submitting end the same state: they differ by the bonus exactly.
    test = found.evidence["test"]
    assert test["vs_alternative"]["diff"] == pytest.approx(0.3, abs=0.05)


def _desk(bonus: float):
    findings, ctx = run_probe(probe, lambda: PartialCreditDesk(limit_bonus=bonus), episodes=64, quick=True)
    return [f for f in findings if f.code == "timeout-rewarded"], ctx.tables["arms"].set_index("arm")


def test_forcing_the_only_ending_to_time_out_is_judged_from_the_same_state():
    # Every 'submit' timing out leaves the step limit as the only way out; it pays the partial
    # credit that submitting pays from the same state, so the injection arm finds nothing, and it
    # says it compared the same states (their prefixes replayed with their faults).
    found, arms = _desk(0.0)
    assert found == []
    arm = arms.loc["inject-submit"]
    assert arm["n_timeout"] >= 8 and arm["same_state"] and arm["level"] is None


def test_a_step_limit_that_pays_more_under_injected_timeouts_is_warned_from_the_same_state():
    (found,), arms = _desk(0.3)
    assert str(found.severity) == "warn"
    arm = arms.loc["inject-submit"]
    assert arm["same_state"] and arm["level"] == "above_alternative"


def _no_failures(bonus: float) -> list:
    findings, _ = run_probe(probe, lambda: PartialCredit(need=3, max_steps=10, early_submit_ends=False, limit_bonus=bonus),
                            episodes=64, quick=True)
    return [f for f in findings if f.code == "timeout-rewarded"]


def test_partial_credit_where_nothing_can_fail_is_no_timeout_reward():
    # An early submit goes on: an unsuccessful episode can only time out, so "more than failing"
    # has nothing to compare with; the limit's partial credit (at most 0.5) is below success (1).
    # (need 3 in 10 steps: random play succeeds in about half its episodes.)
    assert _no_failures(0.0) == []


def test_a_step_limit_that_pays_success_where_nothing_can_fail_is_a_fail():
    # The limit pays 1.0 + partial credit, at least what succeeding pays: the top rung stands.
    (found,) = _no_failures(1.0)
    assert str(found.severity) == "fail"
