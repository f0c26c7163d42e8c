"""The grpo probe's deciding functions (``envaudit.probes.grpo.decide_<code>``) on measurements
written by hand: each severity follows from DESIGN.md's ladder and the rung or level handed over."""

from __future__ import annotations

import pandas as pd
import pytest

from envaudit.findings import Severity
from envaudit.probes import grpo
from envaudit.probes.grpo.drift import Move
from envaudit.probes.grpo.lessons import Verdict
from tests.fixtures.grpo_runs import honest

MOVE = Move("timeouts up", "timeout", 0.1, 0.6, 0.001, exploit=True)
HONEST = honest([1.0] * 4, [0.0] * 4)


def verdict(kind: str, at_least: bool) -> Verdict:
    return Verdict(MOVE, at_least, kind, "timeout", "it pays", pd.DataFrame({"episode_id": [3]}))


def trained(v: Verdict):
    return grpo.decide_learned_exploit("trained", {
        "evidence": {"verdict": v.kind}, "examples": [3], "verdict": v, "moves": [MOVE],
        "drift": {"success_before": 0.5, "success_after": 0.5}, "trajectory": "", "pipeline": "keep"})


@pytest.mark.parametrize(("kind", "at_least", "rung", "severity"), [
    ("timeout", True, 2, Severity.FAIL),
    ("at-least-success", True, 2, Severity.FAIL),
    ("failure-conditioned", False, 1, Severity.WARN),
    ("failures-pay", False, 1, Severity.WARN),
    ("failure-shortcut", False, 1, Severity.WARN),
    ("exploration-collapse", False, 0, Severity.INFO),
    ("unexplained", False, 0, Severity.INFO),
])
def test_a_learned_behaviour_is_graded_by_its_rung(kind, at_least, rung, severity):
    v = verdict(kind, at_least)
    assert v.rung == rung
    f = trained(v)
    assert (f.code, f.severity, f.probe, f.examples) == ("learned-exploit", severity, "grpo", [3])
    assert "timeouts up (0.10 → 0.60): it pays. Success went 0.50 → 0.50." in f.summary
    assert ("pays less than success" in f.title or "exploration hint" in f.title) == (severity == Severity.INFO)


def test_a_behaviour_that_no_mechanism_pays_and_earns_less_than_success_is_a_fact():
    f = trained(verdict("exploration-collapse", False))
    assert f.title == "GRPO collapsed to ending early: an exploration hint, not an exploit"
    assert f.fix.startswith("Nothing to fix in the env")


def targeted(level, premium=None):
    return {"evidence": {"ladder": {"level": level}, "ending_premium": premium}, "examples": [7],
            "mean_return": 0.8, "replayed": None, "honest": HONEST, "sentences": "Best return reachable"}


def test_timing_out_reached_by_the_search_is_graded_by_the_ladder_and_its_ending():
    at_least = grpo.decide_timeout_rewarded("targeted", targeted("at_least_success"))
    assert at_least.severity == Severity.FAIL and "as much as honest success" in at_least.title
    above = grpo.decide_timeout_rewarded("targeted", targeted("above_alternative", {"holds": True}))
    assert above.severity == Severity.WARN and "more than failing outright" in above.title
    assert above.summary.endswith("(honest success 1.00, failing outright 0.00). Best return reachable.")
    assert grpo.decide_timeout_rewarded("targeted", targeted(None)) is None
    assert grpo.decide_timeout_rewarded("targeted", targeted("at_least_success", {"holds": False})) is None


def test_timing_out_learned_under_keep_pays_only_when_its_ending_does():
    measured = {"examples": [1], "move": MOVE, "pipeline": "keep"}
    paid = grpo.decide_timeout_rewarded("learned", {**measured, "evidence": {"ending_premium": {"holds": True}}})
    assert paid.severity == Severity.WARN and "timeout rate 0.10 → 0.60" in paid.summary
    assert grpo.decide_timeout_rewarded("learned", {**measured, "evidence": {"ending_premium": {"holds": False}}}) is None
    dropped = grpo.decide_timeout_drop_incentive({**measured, "pipeline": "rllm", "evidence": {}})
    assert dropped.severity == Severity.WARN and "'rllm' pipeline drops timeouts" in dropped.title


def test_reward_without_success_is_only_ever_a_fail():
    assert grpo.decide_reward_without_success(targeted("above_alternative")) is None
    found = grpo.decide_reward_without_success({**targeted("at_least_success"),
                                                "replayed": {"run": "exploration", "actions": "`a`, `b`"}})
    assert found.severity == Severity.FAIL
    assert found.summary.startswith("Replaying a sequence of calls that exploration met (`a`, `b`) ended without "
                                    "success and earned 0.80, as much as honest success")


def test_a_failure_shortcut_is_a_fail_only_where_it_earns_as_much_as_success():
    evidence = {"failure_cost": {"cost_per_failure": 0.5}, "length_before": 6.0, "length_after": 1.0,
                "failed_calls_before": 2.0, "failed_calls_after": 0.0, "typical_trajectory": ""}
    measured = {"evidence": evidence, "examples": [2], "where": "", "early_returns": [0.0],
                "persist_returns": [-1.0], "success_returns": [1.0]}
    warn = grpo.decide_failure_shortcut({**measured, "verdict": verdict("failure-shortcut", False)})
    fail = grpo.decide_failure_shortcut({**measured, "verdict": verdict("failure-shortcut", True)})
    assert (warn.severity, fail.severity) == (Severity.WARN, Severity.FAIL)
    assert "mean length 6.0 → 1.0, failed calls per episode 2.00 → 0.00" in warn.summary


def test_an_unknown_basis_is_named():
    with pytest.raises(ValueError, match="learned-exploit has no basis 'natural'"):
        grpo.decide_learned_exploit("natural", {"evidence": {}})
    with pytest.raises(ValueError, match="timeout-rewarded has no basis 'replay'"):
        grpo.decide_timeout_rewarded("replay", {"evidence": {"ending_premium": None}})
