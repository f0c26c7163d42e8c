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
from envaudit.scan import run_scan
from tests.fixtures.counterfactual_envs import PartialCredit


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
