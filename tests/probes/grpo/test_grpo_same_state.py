"""Issue 25, class 1, in the GRPO probe: a policy that learned to stall where every unfinished
ending pays the same partial credit is not rewarded for timing out.

``PartialCredit`` (0.5 * progress / 15 on every unfinished ending, success after 15 research
steps, 20 steps): GRPO under the keep pipeline learns to research on and run into the step limit
(timeouts 0.02 -> 0.41), earning 0.5 at full progress. From the state before each timed-out
episode's last step, submitting succeeds and pays 1.0: no state pays the timeout more than ending
there, so the same-state replays veto the population comparison (0.5 against exploration's early
failures, 0.03) that filed ``timeout-rewarded`` at ``warn``. From none of those states does an
ending fail, so there is no failing pair to test; at least ``lessons.SAME_STATE_VETO`` states, all
paying more by ending at once, are enough to veto.
"""

from __future__ import annotations

from envaudit.config import ScanConfig
from envaudit.probes.grpo.lessons import SAME_STATE_VETO
from envaudit.scan import run_scan
from tests.fixtures.counterfactual_envs import PartialCredit


def test_stalling_where_every_ending_pays_the_same_credit_is_no_timeout_reward():
    report = run_scan(PartialCredit, ScanConfig(seed=0, quick=True, fail_on="never", probes=("grpo",)),
                      env_id="partial-credit")
    assert [f for f in report.findings if str(f.severity) in ("warn", "fail")] == []
    (learned,) = [f for f in report.findings if f.code == "learned-exploit"]
    premium = learned.evidence["ending_premium"]
    assert premium["same_state"] and premium["vetoed"] and not premium["holds"]
    assert premium["states"] >= SAME_STATE_VETO and premium["n_pairs"] == 0
    assert premium["mean_best_ending"] == 1.0  # submitting there succeeds
