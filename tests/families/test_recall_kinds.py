"""Recall on the generated flaw kinds the probes used to miss, and silence on their clean twins.

Each flawed instance's twin is the same spec with ``flaw=None`` (``envaudit.families``: the
generator first made the base able to carry the flaw, so the twin differs by exactly the planted
incentive). Severities follow from the generator's design, not from what a scan printed:

- ``lenient-grader``: every wrong answer pays ``amount`` >= the success reward plus all shaping, so
  with honest successes to compare with (an env with an ``oracle()``) the ending is ``fail``; without
  any success seen it still clearly beats an ending paid like a typical step (``warn``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from envaudit.families import Case, flawed_case
from envaudit.families.evaluate import evaluate_case

SEED = 3
LENIENT = [flawed_case(SEED, i, "lenient-grader") for i in range(6)]


def twin(case: Case) -> Case:
    return Case(f"twin-{case.name}", replace(case.spec, flaw=None, label=f"twin-{case.name}"),
                scan_overrides=case.scan_overrides)


def scan(case: Case, probes: tuple[str, ...]):
    return evaluate_case(case, seed=SEED, quick=True, probes=probes, baseline=False)


def loud(result, code: str) -> list:
    return [f for f in result.incentive_flags if f.code == code]


def test_the_lenient_instances_include_rare_success_envs():
    # The class that was missed: exploration never sees a success there.
    assert any(c.spec.regime == "rare" for c in LENIENT)
    assert any(not c.spec.has_oracle for c in LENIENT) and any(c.spec.has_oracle for c in LENIENT)


@pytest.mark.parametrize("case", LENIENT, ids=lambda c: c.name)
def test_a_grader_that_pays_every_answer_is_named_and_its_twin_is_silent(case):
    result = scan(case, ("intent",))
    found = loud(result, "reward-without-success")
    assert found, f"{case.name}: {result.flags}"
    if case.spec.has_oracle:
        assert any(f.severity == "fail" for f in found), found
    assert not scan(twin(case), ("intent",)).incentive_flags
