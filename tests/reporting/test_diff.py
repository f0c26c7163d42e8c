import json

import pytest

from envaudit.cli import main
from envaudit.grouping import group_findings
from envaudit.reporting import write_folder
from envaudit.reporting.diff import (
    FIXED,
    INFO,
    NEW,
    SETTINGS,
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
    # Forced, it compares; the plain scan ran no probe, so the flawed env's group is down to that.
    assert main(["diff", str(plain_folder), str(flawed_folder), "--force"]) == 0
    assert "1 changed with the settings" in " ".join(capsys.readouterr().out.split())
    forced = diff_reports(plain_folder, flawed_folder, force=True)
    assert [c.reason for c in forced.with_settings] == ["probe length did not run in the other scan"]
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


# -- settings: a setting change is not the env getting better or worse ---------------------------
PIPELINE_ENV = "envaudit/Helpdesk-v0"
"""The clean helpdesk: its tools time out and a failed ticket costs, so a pipeline that drops
timed-out rollouts lets a losing attempt escape its negative advantage (timeout-drop-incentive);
keeping them does not. Enough groups (episodes) for the pipeline probe's sign test."""


@pytest.fixture(scope="module")
def keep_and_drop(tmp_path_factory):
    from envaudit.config import ScanConfig
    from envaudit.scan import run_scan

    folders = {}
    for handling in ("keep", "drop"):
        config = ScanConfig(seed=0, episodes=128, probes=("pipeline",), timeout_handling=handling)
        folders[handling] = write_folder(run_scan(PIPELINE_ENV, config), tmp_path_factory.mktemp(handling) / "report")
    return folders


def test_a_pipeline_incentive_that_comes_with_drop_is_a_setting_change_not_new(keep_and_drop, capsys):
    diff = diff_reports(keep_and_drop["keep"], keep_and_drop["drop"])
    assert [(c.key, c.old, c.new) for c in diff.settings] == [("timeout_handling", "keep", "drop")]
    assert diff.settings_line() == "Settings differ: timeout_handling keep → drop."
    assert _statuses(diff) == {(SETTINGS, "timeout-drop-incentive")}
    assert diff.with_settings[0].reason == "timeout_handling keep → drop"
    assert diff.new == [] and diff.exit_code == 0
    assert "1 changed with the settings" in diff.verdict()
    back = diff_reports(keep_and_drop["drop"], keep_and_drop["keep"])
    assert _statuses(back) == {(SETTINGS, "timeout-drop-incentive")} and back.fixed == []
    assert main(["diff", str(keep_and_drop["keep"]), str(keep_and_drop["drop"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.index("Settings differ: timeout_handling keep → drop") < out.index("timeout-drop-incentive")
    assert "changed with the settings" in out and "0 new" in out
    assert json.loads(json.dumps(diff.to_dict()))["settings"][0]["kind"] == "pipeline"


def test_same_settings_say_so_and_a_new_group_stays_new(flawed_folder, clean_folder):
    diff = diff_reports(clean_folder, flawed_folder)
    assert diff.settings == [] and diff.settings_line() == "Same settings in both scans."
    assert PLANTED in [c.finding.code for c in diff.new]


def _with(report, *, probes=None, **config):
    if probes is not None:
        report.probes = [p for p in report.probes if p.name in probes]
        config["probes"] = list(probes)
    report.config = {**report.config, **config}
    return report


def test_a_group_whose_probe_ran_on_one_side_only_changed_with_the_settings():
    exploit = F("exploit-policy", "warn", probe="exploits", evidence={"p_value": 0.001, "behaviour": "quit"})
    failure = F("failure-rewarded", "warn", probe="failures", evidence={"p_value": 0.001})
    old = _with(synthetic.full_report([]), probes=("failures", "pipeline", "grpo"))
    new = _with(synthetic.full_report([exploit, failure]), probes=("failures", "pipeline", "grpo", "exploits"))
    diff = diff_reports(old, new)
    assert _statuses(diff) == {(SETTINGS, "exploit-policy"), (NEW, "failure-rewarded")}
    assert diff.with_settings[0].reason == "probe exploits did not run in the other scan"
    assert diff.exit_code == 1  # the failures probe ran in both: its group is new
    assert [c.key for c in diff.settings] == ["probes"]


def test_sampling_differences_are_stated_but_do_not_reclassify():
    old = _with(synthetic.full_report([]), quick=True, episodes=256)
    new = _with(synthetic.full_report([F("failure-rewarded", "warn")]), quick=False, seed=4, episodes=256)
    diff = diff_reports(old, new)
    assert [c.text() for c in diff.settings] == ["seed 3 → 4", "quick true → false"]
    assert "Sampling differs" in diff.settings_line()
    assert _statuses(diff) == {(NEW, "failure-rewarded")}
    # Where the folder went or when the scan exits 1 is not a setting of what was measured.
    same = diff_reports(_with(synthetic.full_report([]), out="a", fail_on="warn"), _with(synthetic.full_report([]), out="b"))
    assert same.settings == []


def test_what_grpo_learned_under_another_pipeline_changed_with_the_settings():
    learned = F("timeout-rewarded", "fail", probe="grpo", evidence={"p_value": 0.001, "source": "grpo"})
    env = F("failure-rewarded", "fail", probe="failures", evidence={"p_value": 0.001})
    old = _with(synthetic.full_report([learned, env]), timeout_handling="keep")
    new = _with(synthetic.full_report([env]), timeout_handling="drop")
    diff = diff_reports(old, new)
    assert _statuses(diff) == {(SETTINGS, "timeout-rewarded"), (UNCHANGED, "failure-rewarded")}
    # The same change with the pipeline unchanged is a fix.
    assert _statuses(diff_reports(_with(synthetic.full_report([learned, env])), synthetic.full_report([env]))) == {
        (FIXED, "timeout-rewarded"), (UNCHANGED, "failure-rewarded")}
