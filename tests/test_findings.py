"""Finding, Severity and rank: the shape every probe reports in."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envaudit.findings import CODES, Finding, Severity, rank


def make(code="timeout-rewarded", severity="warn", title="t", **kw):
    return Finding(code=code, severity=severity, title=title, summary="s", **kw)


def test_round_trip_through_dict_and_json():
    f = make(evidence={"p_value": 0.01, "diff_ci": [0.5, 1.5], "n": 40}, examples=[3, 7],
             fix="penalise timeouts", probe="timeouts")
    data = f.to_dict()
    assert data["severity"] == "warn" and data["examples"] == [3, 7]
    again = Finding.from_dict(json.loads(json.dumps(data)))
    assert again == f
    assert again.severity is Severity.WARN


def test_numpy_evidence_becomes_json():
    f = make(evidence={
        "mean": np.float64(1.5), "n": np.int64(12), "flag": np.bool_(True),
        "ci": np.array([0.1, 0.2]), "nested": {"x": (np.float32(0.5), float("nan"))},
        "inf": np.float64("inf"), "severity": Severity.FAIL,
    }, examples=np.array([1, 2]))
    ev = f.evidence
    text = json.dumps(f.to_dict(), allow_nan=False)  # raises on NaN/inf or numpy types
    assert json.loads(text)["evidence"] == ev
    assert ev["mean"] == 1.5 and type(ev["mean"]) is float
    assert ev["n"] == 12 and type(ev["n"]) is int
    assert ev["flag"] is True
    assert ev["ci"] == [0.1, 0.2]
    assert ev["nested"] == {"x": [0.5, "nan"]}
    assert ev["inf"] == "inf" and ev["severity"] == "fail"
    assert f.examples == [1, 2] and all(type(e) is int for e in f.examples)


def test_unknown_code_names_the_catalogue():
    with pytest.raises(ValueError) as info:
        make(code="timeout-reward")
    message = str(info.value)
    assert "unknown finding code 'timeout-reward'" in message
    assert message.endswith("expected one of " + ", ".join(CODES))


def test_severity_parse_and_order():
    assert Severity.parse("FAIL") is Severity.FAIL
    assert Severity.parse("info") is Severity.INFO
    assert Severity.parse(Severity.WARN) is Severity.WARN
    assert Severity.INFO < Severity.WARN < Severity.FAIL
    assert str(Severity.WARN) == "warn"
    with pytest.raises(ValueError, match="unknown severity 'fatal'; expected one of info, warn, fail"):
        Severity.parse("fatal")
    assert make(severity="fail").severity is Severity.FAIL


def test_rank_severity_then_catalogue_then_title():
    findings = [
        make(code="env-error", severity="info", title="a"),
        make(code="length-bias", severity="warn", title="b"),
        make(code="timeout-rewarded", severity="warn", title="z"),
        make(code="timeout-rewarded", severity="warn", title="c"),
        make(code="env-error", severity="fail", title="d"),
    ]
    got = [(f.code, str(f.severity), f.title) for f in rank(findings)]
    assert got == [
        ("env-error", "fail", "d"),
        ("timeout-rewarded", "warn", "c"),
        ("timeout-rewarded", "warn", "z"),
        ("length-bias", "warn", "b"),
        ("env-error", "info", "a"),
    ]
    assert rank(list(reversed(findings))) == rank(findings)


def test_rank_puts_measured_findings_before_trained_policy_ones_of_the_same_code():
    trained = make(code="timeout-rewarded", severity="fail", title="a", evidence={"source": "grpo"})
    measured = make(code="timeout-rewarded", severity="fail", title="b")
    assert [f.title for f in rank([trained, measured])] == ["b", "a"]


def test_severity_parse_accepts_any_case_and_rejects_non_names():
    for text, expected in (("warn", Severity.WARN), ("Warn", Severity.WARN), ("INFO", Severity.INFO),
                           ("fail", Severity.FAIL)):
        assert Severity.parse(text) is expected
    for bad in ("", "warning", "2", 2, None):
        with pytest.raises(ValueError, match="expected one of info, warn, fail"):
            Severity.parse(bad)
    assert [int(s) for s in (Severity.INFO, Severity.WARN, Severity.FAIL)] == [1, 2, 3]
    assert [str(s) for s in Severity] == ["info", "warn", "fail"]


def test_finding_is_frozen_and_copies_its_evidence():
    source = {"p_value": 0.5, "arms": {"a": [1.0]}}
    f = make(evidence=source, examples=(4.0, 5))
    source["p_value"] = 0.9
    assert f.evidence["p_value"] == 0.5
    assert f.examples == [4, 5] and all(type(e) is int for e in f.examples)
    with pytest.raises(AttributeError):
        f.code = "env-error"  # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown severity 'severe'"):
        make(severity="severe")
    assert make(severity=Severity.INFO).severity is Severity.INFO


def test_jsonable_leaves_plain_values_alone():
    f = make(evidence={"text": "abc", "none": None, "flag": False, "n": 3, "x": 0.25,
                       "neg": float("-inf"), "tuple": (1, (2, 3)), 7: "int key"})
    assert f.evidence == {"text": "abc", "none": None, "flag": False, "n": 3, "x": 0.25,
                          "neg": "-inf", "tuple": [1, [2, 3]], "7": "int key"}
    assert type(f.evidence["n"]) is int and type(f.evidence["flag"]) is bool


def test_from_dict_fills_the_optional_fields():
    minimal = {"code": "env-error", "severity": "fail", "title": "crash", "summary": "it raised"}
    f = Finding.from_dict(minimal)
    assert (f.evidence, f.examples, f.fix, f.probe) == ({}, [], "", "")
    assert f.to_dict() == {**minimal, "evidence": {}, "examples": [], "fix": "", "probe": ""}
    # Every field survives the round trip, each under its own key.
    full = make(code="length-bias", severity="info", title="T", evidence={"source": "grpo"},
                examples=[9], fix="F", probe="P").to_dict()
    assert full == {"code": "length-bias", "severity": "info", "title": "T", "summary": "s",
                    "evidence": {"source": "grpo"}, "examples": [9], "fix": "F", "probe": "P"}
    assert Finding.from_dict(full).to_dict() == full


def test_rank_orders_by_every_key_in_turn():
    # Catalogue order within a severity follows CODES, not the alphabet.
    codes = list(CODES)
    shuffled = [make(code=c, severity="warn") for c in reversed(codes)]
    assert [f.code for f in rank(shuffled)] == codes
    # Severity beats catalogue order and source; source beats title.
    findings = [
        make(code="env-error", severity="fail", title="a", evidence={"source": "grpo"}),
        make(code="timeout-rewarded", severity="warn", title="a"),
        make(code="timeout-rewarded", severity="fail", title="z"),
        make(code="timeout-rewarded", severity="fail", title="a", evidence={"source": "grpo"}),
    ]
    got = [(f.code, str(f.severity), f.title, f.evidence.get("source")) for f in rank(findings)]
    assert got == [("timeout-rewarded", "fail", "z", None), ("timeout-rewarded", "fail", "a", "grpo"),
                   ("env-error", "fail", "a", "grpo"), ("timeout-rewarded", "warn", "a", None)]
    assert rank([]) == []
