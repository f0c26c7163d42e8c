"""A tool whose working call costs by its own effect (an undo that takes back the progress bonus)
is no failure reward: failing it pays what an ordinary step pays, and the step after it pays what
it pays where the call was never made.

The generated clean base ``clean-0-14`` (``envaudit.families``) has a ``step_back`` tool that
charges back the forward bonus (0.0356) the step forward paid. A failed ``step_back`` pays 0, more
than the working one (-0.0356), and the next path call then pays the bonus that the working undo
would have taken away; before the ordinary-step and never-made-call yardsticks both properties
failed on it (benchmarks/properties.py, 2026-12-07)."""

from __future__ import annotations

import envaudit.testing as T
from envaudit.families import clean_case


def test_a_failed_undo_is_not_a_rewarded_failure():
    case = clean_case(0, 14)
    assert case.spec.step_back and case.spec.forward_bonus > 0 and case.spec.base == "toolenv"
    T.assert_failures_not_rewarded(case.make_env)
    T.assert_no_reward_after_failure(case.make_env)
    T.assert_failures_not_rewarded(clean_case(2, 24).make_env)  # the same, found by the generated cases
