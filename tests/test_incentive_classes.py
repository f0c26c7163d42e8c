"""Issue 25's false-alarm classes in whole scans: each clean twin of ``counterfactual_envs`` is quiet
under every probe at once (the per-probe tests beside each probe check the flawed twins' codes).

- ``PartialCredit`` (class 1): partial credit on every unfinished ending, the step limit included;
- ``TemplateAnswer`` (class 2): a template answer that ends the episode at 0, cheaper than failing
  slowly by the research it saves;
- ``FlakyLookup`` (class 3 and 7's twin): a lookup that fails half the time and must be retried,
  a failed call paying nothing;
- ``Pacing`` with the step back charged what the step forward paid (class 4's twin);
- ``LuckyGuess`` paying a wrong answer nothing (class 6's twin): random play's successes are
  mostly lucky first guesses.

A ``warn`` or ``fail`` on any of them is a false alarm: the scan's own headline, whatever probe
files it.
"""

from __future__ import annotations

import pytest

from envaudit.config import ScanConfig
from envaudit.scan import run_scan
from tests.fixtures import counterfactual_envs as ce

CLEAN = {
    "partial-credit": ce.PartialCredit,
    "template-answer": ce.TemplateAnswer,
    "flaky-lookup": ce.FlakyLookup,
    "pacing-charged-back": lambda: ce.Pacing(back_cost=0.1),
    "lucky-guess-wrong-unpaid": lambda: ce.LuckyGuess(wrong=0.0),
}


@pytest.mark.parametrize("name", CLEAN)
def test_a_clean_twin_gets_no_warn_or_fail_from_any_probe(name):
    report = run_scan(CLEAN[name], ScanConfig(seed=0, quick=True, fail_on="never"), env_id=name)
    loud = [f"{f.code}:{f.severity}:{f.probe}: {f.summary}" for f in report.findings
            if str(f.severity) in ("warn", "fail")]
    assert loud == []
    assert not report.incomplete, report.incomplete
