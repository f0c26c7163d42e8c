"""Issue 25, class 4: oscillation farming, judged by the counterfactual engine.

``Pacing`` (length 5, bonus 0.1, step limit 50) pays 0.1 for each step forward and nothing for a
step back: one forward-back lap pays 0.1 and comes back to the cell it started from, so ``k`` more
laps then 'finish' pay ``0.1 k`` more than finishing at once from the same state. With about 23
laps that is over 2, more than the oracle's honest success (5 steps forward, then finish: 1.5):
``length-bias`` at ``fail``. The clean twin charges 0.1 for the step back: a lap nets 0, no
window pays, no cycle finding.
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.scan import run_scan
from tests.fixtures.counterfactual_envs import Pacing


def _cycle_findings(back_cost: float) -> list:
    report = run_scan(lambda: Pacing(back_cost=back_cost), ScanConfig(seed=0, fail_on="never", probes=("length",)),
                      env_id="pacing")
    return [f for f in report.findings if f.code == "length-bias" and "cycle" in f.evidence]


def test_pacing_forward_and_back_for_a_bonus_is_farming_at_fail():
    (found,) = _cycle_findings(0.0)
    assert str(found.severity) == "fail"
    e = found.evidence
    assert sorted(e["cycle"]) == ["back", "forward"] and e["returns_to_same_observation"] == 1.0
    assert e["cycle_vs_end_now"]["mean"] == pytest.approx(0.1 * e["laps"])
    assert e["success_source"] == "the env's oracle on the same seeds" and e["mean_success"] == pytest.approx(1.5)
    assert e["replay_steps"] > 0 and found.examples


def test_a_step_back_that_costs_what_the_step_forward_paid_is_quiet():
    assert _cycle_findings(0.1) == []
