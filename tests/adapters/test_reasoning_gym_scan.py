"""reasoning-gym end to end: a quick scan files the scorer's hole, and nothing on a strict scorer.

Only the ``intent`` probe runs (it reads ``info["success"]`` against the return), on 50 entries.
The scorers' behaviour was checked by hand first (``tests/adapters/test_reasoning_gym_success.py``
pins each with ``score_answer`` on a named entry): coin_flip pays any prefix of the reference in
full, family_relationships pays the answer alone (in any case) and nothing else, puzzle24 pays any
four numbers that make 24.
"""

from __future__ import annotations

import pytest

pytest.importorskip("reasoning_gym")

from envaudit.config import ScanConfig  # noqa: E402
from envaudit.findings import Severity  # noqa: E402
from envaudit.scan import run_scan  # noqa: E402

CONFIG = ScanConfig(seed=0, quick=True, probes=("intent",))
SMALL = {"size": 50}


def _serious(report):
    return [f for f in report.findings if f.severity in (Severity.WARN, Severity.FAIL)]


def test_a_scorer_that_pays_prefixes_is_reward_without_success():
    report = run_scan("reasoning-gym:coin_flip", CONFIG, env_args=SMALL)
    (finding,) = _serious(report)
    assert finding.code == "reward-without-success"
    # The strategies that cut the reference short: coin_flip's scorer pays each of them in full.
    assert any(f"'{label}'" in finding.summary for label in ("prefix", "truncated", "partial")), finding.summary
    check = report.fingerprint["adapter"]["catalogue_check"]
    assert check["playable"] and check["full_marks_without_success"]["prefix"] > 0.5


def test_a_strict_scorer_gets_nothing_at_warn_or_fail():
    report = run_scan("reasoning-gym:family_relationships", CONFIG, env_args=SMALL)
    assert _serious(report) == [], [f.summary for f in report.findings]
    assert report.fingerprint["adapter"]["catalogue_check"]["full_marks_without_success"] == {}


@pytest.mark.slow  # puzzle24 solves each puzzle it makes: most of a second per entry
def test_a_scorer_that_ignores_the_puzzles_numbers_is_reward_without_success_at_fail():
    report = run_scan("reasoning-gym:puzzle24", CONFIG, env_args=SMALL)
    (finding,) = _serious(report)
    assert finding.code == "reward-without-success" and finding.severity == Severity.FAIL
    assert "'transplant'" in finding.summary or "'constant'" in finding.summary, finding.summary
