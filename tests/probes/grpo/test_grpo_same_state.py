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

Two generated clean envs (``envaudit.families``) that the population comparisons filed at ``warn``
are judged from the same state too: a last step's progress is not the step limit paying
(``lessons._step_limit_pays``), and retrying a flaky tool is not failing for pay
(``same_state.failed_call_premium``).
"""

from __future__ import annotations

from envaudit.config import ScanConfig
from envaudit.families.envs import make_env
from envaudit.families.generate import clean_case
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


def _generated(index: int, seed: int) -> list:
    case = clean_case(seed, index)
    config = ScanConfig(seed=seed, quick=True, fail_on="never", probes=("grpo",), **dict(case.overrides()))
    return run_scan(lambda: make_env(case.spec), config, env_id=case.name).findings


def test_progress_made_on_the_last_step_is_not_the_step_limit_paying():
    # Generated clean-0-7 (no oracle, no success ever seen: the reward scale is the spread of
    # failures, 0.11): a timed-out episode's last step makes progress that partial credit and
    # shaping pay, so it pays 0.015 more than ending before that step. Its last action repeated
    # to the limit, against the same idle steps ended honestly, the limit pays 0.0 more.
    findings = _generated(7, 0)
    assert [f for f in findings if f.code == "timeout-rewarded" and str(f.severity) in ("warn", "fail")] == []


def test_retrying_a_flaky_tool_is_no_learned_exploit():
    # Generated clean-1-99 (class 3): tools fail 6-24% of calls, a failed call costs the step cost
    # as any call does. GRPO learned to call more (failures 0.34 -> 0.56) on its way to progress,
    # which the regression across episodes read as 0.01 a failure; from the same state a failed
    # call pays what any step pays.
    findings = _generated(99, 1)
    assert [f for f in findings if str(f.severity) in ("warn", "fail")] == []
    learned = [f for f in findings if f.code == "learned-exploit"]
    assert all(f.evidence.get("verdict") != "failures-pay" for f in learned)
