"""The length probe's logged half (``envaudit logs``): a correlation in the run's own episodes is
``info``; successes delayed within a logged GRPO group that earn more than the fastest success from
the same start are ``fail``. Numbers come from the hand-built runs below."""

from __future__ import annotations

import pytest

from envaudit.findings import Severity
from envaudit.probes.length import probe
from envaudit.probes.length.logged import analyse
from envaudit.protocol import FAILURE, SUCCESS
from tests.fixtures.frames import FakeContext, episode, records

GROUPS = 12


def grouped(late_pay: float, fast_pay: float = 1.0):
    """GROUPS logged groups, each a fast success (2 steps, ``fast_pay``), a late one (5 steps, its
    last step ``late_pay``) and two failures (2 steps, 0)."""
    specs, groups = [], []
    for g in range(GROUPS):
        specs += [episode(SUCCESS, [(0, 0.0), (1, fast_pay)], success=True),
                  episode(SUCCESS, [(0, 0.0)] * 4 + [(1, late_pay)], success=True),
                  episode(FAILURE, [(0, 0.0), (2, 0.0)], success=False),
                  episode(FAILURE, [(0, 0.0), (2, 0.0)], success=False)]
        groups += [g] * 4
    recs = records(*specs)
    recs.episodes["group"] = groups
    recs.episodes["iteration"] = 0
    return recs


def test_delayed_successes_that_pay_more_in_logged_groups_fail():
    ctx = FakeContext(grouped(late_pay=1.5))
    found = analyse(ctx)
    delays = [f for f in found if f.evidence.get("behaviour") == "delay-success"]
    assert len(delays) == 1
    f = delays[0]
    assert f.severity == Severity.FAIL and f.code == "length-bias" and f.probe == "length"
    assert f.evidence["n_groups"] == GROUPS and f.evidence["extra_steps"] == 3
    assert f.evidence["delayed_vs_fastest"]["mean_delayed"] == pytest.approx(1.5)
    assert f.evidence["delayed_vs_fastest"]["mean_fastest"] == pytest.approx(1.0)
    assert f.evidence["fastest_success"] == {"length": 2, "return": 1.0}
    assert "delays a success it could reach at once" in f.summary
    assert ctx.notes["delayed_success"]["holds"]


def test_a_delayed_success_that_pays_the_same_is_quiet():
    ctx = FakeContext(grouped(late_pay=1.0))
    assert [f for f in analyse(ctx) if f.severity > Severity.INFO] == []
    assert not ctx.notes["delayed_success"]["holds"] and ctx.notes["delayed_success"]["n_sets"] == GROUPS


def test_return_rising_with_length_is_an_info_correlation_and_needs_enough_episodes():
    specs = [episode(FAILURE, [(0, 0.1)] * n, success=False) for n in range(1, 21)]
    specs += [episode(SUCCESS, [(0, 0.0), (1, 1.0)], success=True) for _ in range(10)]
    ctx = FakeContext(records(*specs))
    [f] = analyse(ctx)
    assert f.severity == Severity.INFO and f.title == "Return rises with episode length in the logged run"
    assert f.evidence["length_effect"]["estimate"] == pytest.approx(0.1, abs=1e-6)
    assert f.evidence["behaviour"] == "stall" and f.evidence["source"] == "logs"
    flat = FakeContext(records(*[episode(FAILURE, [(0, 0.0)] * n, success=False) for n in range(1, 21)]))
    assert analyse(flat) == []
    few = FakeContext(records(*specs[:5]))
    assert analyse(few) == [] and few.notes["skipped"].startswith("only 5 logged episodes")


def test_the_probe_registers_its_logged_half_with_the_columns_it_needs():
    assert probe.analyse is analyse and probe.analyse_needs == ("length",)
