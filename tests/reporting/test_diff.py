import json

import pytest

from envaudit.cli import main
from envaudit.grouping import group_findings
from envaudit.reporting.diff import (
    FIXED,
    INFO,
    NEW,
    UNCHANGED,
    DifferentEnvsError,
    diff_reports,
    evidence_numbers,
    group_key,
    match,
)
from tests.reporting import synthetic
from tests.reporting.conftest import PLANTED

F = synthetic._finding


def _statuses(diff):
    return {(c.status, c.finding.code) for c in diff.changes}


def test_flawed_vs_clean_twin_lists_the_planted_finding_as_fixed(flawed_folder, clean_folder):
    diff = diff_reports(flawed_folder, clean_folder)
    assert PLANTED in [c.finding.code for c in diff.fixed]
    assert diff.new == [] and diff.exit_code == 0
    assert "same class" in diff.env_note
    fixed = next(c for c in diff.fixed if c.finding.code == PLANTED)
    numbers = dict((k, (o, n)) for k, o, n in fixed.numbers())
    assert numbers["p_value"][0] is not None and numbers["p_value"][1] is None
    # The scans' own numbers move as designed: the clean twin pays no reply bonus, so exploration
    # of the same seeds earns less at the same lengths.
    scan = {k: (o, n) for k, o, n in diff.numbers}
    assert scan["exploration mean length"][0] == scan["exploration mean length"][1]
    assert scan["exploration mean return"][1] < scan["exploration mean return"][0]


def test_clean_to_flawed_is_a_new_finding_and_exits_1(flawed_folder, clean_folder):
    diff = diff_reports(clean_folder, flawed_folder)
    assert PLANTED in [c.finding.code for c in diff.new] and diff.exit_code == 1


def test_cli_diff_exit_codes_and_output(flawed_folder, clean_folder, capsys):
    assert main(["diff", str(flawed_folder), str(clean_folder)]) == 0
    out = capsys.readouterr().out
    assert "fixed" in out and PLANTED in out and "0 new" in out
    assert main(["diff", str(clean_folder), str(flawed_folder)]) == 1
    assert "1 new" in capsys.readouterr().out


def test_cli_diff_refuses_reports_of_different_envs_unless_forced(flawed_folder, plain_folder, capsys):
    assert main(["diff", str(plain_folder), str(flawed_folder)]) == 2
    err = capsys.readouterr().err
    assert "'CartPole-v1'" in err and "Helpdesk" in err and "--force" in err
    assert main(["diff", str(plain_folder), str(flawed_folder), "--force"]) == 1
    with pytest.raises(DifferentEnvsError):
        diff_reports(plain_folder, flawed_folder)


def test_cli_diff_and_report_name_a_missing_folder(tmp_path, capsys):
    assert main(["diff", str(tmp_path / "old"), str(tmp_path)]) == 2
    assert "OLD" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "has no report.json" in capsys.readouterr().err


def test_groups_match_by_behaviour_reward_path_and_headline_code():
    farming = {"p_value": 0.01, "length_effect": {"estimate": 0.2}}
    old = group_findings([F("length-bias", title="pays 0.2 per step", evidence=farming), F("timeout-rewarded")])
    # A reworded title, another probe at the head, a corroborating finding added: the same incentive.
    new = group_findings([F("timeout-rewarded", probe="grpo"), F("exploit-policy", evidence={"behaviour": "timeout"}),
                          F("length-bias", title="pays 0.1 per step", evidence={**farming, "p_value": 0.02})])
    pairs = match(old, new)
    assert len(pairs) == 2 and all(o is not None and n is not None and group_key(o) == group_key(n) for o, n in pairs)
    # Same code, another behaviour (a brevity bonus is not step farming): not the same incentive.
    brevity = group_findings([F("length-bias", evidence={"p_value": 0.01, "length_effect": {"estimate": -0.2}})])
    pairs = match(group_findings([F("length-bias", evidence=farming)]), brevity)
    assert sorted((o is None, n is None) for o, n in pairs) == [(False, True), (True, False)]
    # Same behaviour, another reward path: the pipeline's incentive is another one.
    pairs = match(group_findings([F("timeout-rewarded")]), group_findings([F("timeout-rewarded", evidence={
        "p_value": 0.01, "reward_path": "pipeline"})]))
    assert len(pairs) == 2


def test_statuses_follow_the_warn_line():
    # The exploit heads the tool-failure group in OLD (failure-rewarded only corroborates it at info),
    # failure-rewarded heads it in NEW: another headline code, so one is fixed and one is new.
    exploit = F("exploit-policy", "warn", evidence={"p_value": 0.001, "behaviour": "tool-failure"})
    old = synthetic.full_report([F("length-bias", "fail"), F("timeout-rewarded", "warn"),
                                 F("failure-rewarded", "info"), F("non-replayable", "info"), exploit])
    new = synthetic.full_report([F("length-bias", "warn"), F("timeout-rewarded", "info"),
                                 F("failure-rewarded", "warn"), F("non-replayable", "info"), F("env-error", "fail")])
    diff = diff_reports(old, new)
    assert _statuses(diff) == {(UNCHANGED, "length-bias"), (FIXED, "timeout-rewarded"), (NEW, "failure-rewarded"),
                               (INFO, "non-replayable"), (FIXED, "exploit-policy"), (NEW, "env-error")}
    assert next(c for c in diff.unchanged).severity_move == "fail → warn"
    assert diff.exit_code == 1
    # New first, then fixed, unchanged, info.
    assert [c.status for c in diff.changes] == [NEW, NEW, FIXED, FIXED, UNCHANGED, INFO]
    json.dumps(diff.to_dict())  # plain JSON


def test_evidence_numbers_flatten_nested_tests_and_keep_intervals():
    numbers = evidence_numbers({"p_value": 0.01, "n": 8, "ok": True, "label": "x", "ci": [0.1, 0.4],
                                "test": {"diff": 0.5, "inner": {"z": 2.0, "deeper": {"w": 1}}},
                                "arms": [{"a": 1}], "nan": "nan"})
    assert numbers["p_value"] == 0.01 and numbers["n"] == 8.0 and numbers["ci"] == (0.1, 0.4)
    assert numbers["test.diff"] == 0.5 and numbers["test.inner.z"] == 2.0
    assert "ok" not in numbers and "label" not in numbers and "arms" not in numbers
    assert "test.inner.deeper.w" not in numbers  # two levels deep at most
    assert numbers["nan"] != numbers["nan"]
