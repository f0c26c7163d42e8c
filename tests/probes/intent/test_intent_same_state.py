"""Issue 25, classes 2 and 6: the intent probe judges an ending against the honest failure from the
same state, and against the honest policy's successes, not random play's lucky ones.

Class 2, ``TemplateAnswer`` (research costs 0.1, twice before the answer shows; a wrong answer
and the template both end at 0): giving up with the template beats failing slowly by the research
it saves, and from every state pays exactly what a wrong answer pays there: no warn or fail. Its
flawed twin pays the template 0.5: more than a wrong answer from the same state (0), less than the
oracle's success (0.8): ``warn``.

Class 6:

``LuckyGuess`` (10 answers, the hidden one never ``answer_0``): a right answer pays
``0.95 - 0.1 t``, a wrong one ``0.84 - 0.1 t`` (the flaw), ``t`` the steps before it. Random play's
successes are mostly first-step guesses (0.95); the honest policy (the oracle: look, then answer)
earns 0.85. Answering at once earns 0.84 without success: within the ladder's margin of the honest
policy, so ``fail``, whatever the lucky successes pay. The clean twin pays a wrong answer 0.
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.scan import run_scan
from tests.fixtures.counterfactual_envs import LuckyGuess, TemplateAnswer


def _findings(wrong: float | None = None, template_pay: float | None = None) -> list:
    make = (lambda: LuckyGuess(wrong=wrong)) if wrong is not None else (lambda: TemplateAnswer(template_pay=template_pay))
    report = run_scan(make, ScanConfig(seed=0, fail_on="never", probes=("intent",)), env_id="same-state")
    return [f for f in report.findings if f.code == "reward-without-success"]


def test_giving_up_that_pays_what_failing_pays_from_the_same_state_is_no_warning():
    assert [f for f in _findings(template_pay=0.0) if str(f.severity) != "info"] == []


def test_a_template_that_pays_more_than_failing_from_the_same_state_is_warned():
    (found,) = _findings(template_pay=0.5)
    assert str(found.severity) == "warn"
    test = found.evidence["test"]
    assert test["same_state"]["pick"] == "least" and test["same_state"]["unpaid_only"]
    assert test["same_state"]["replay_steps"] > 0
    assert test["vs_alternative"]["diff"] == pytest.approx(0.5)


def test_the_honest_policy_not_lucky_guesses_is_the_yardstick():
    (found,) = _findings(wrong=0.84)
    assert str(found.severity) == "fail"
    yard = found.evidence["test"]["yardstick"]
    assert yard["honest"] == "the env's oracle" and yard["mean_honest_success"] == pytest.approx(0.85)
    assert yard["mean_left_out"] > 0.85  # the successes left out: mostly first-step guesses at 0.95


def test_a_wrong_answer_that_pays_nothing_is_quiet():
    assert [f for f in _findings(wrong=0.0) if str(f.severity) != "info"] == []
