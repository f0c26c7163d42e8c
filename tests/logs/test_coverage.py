"""The "could not check" finding: every gap the log's columns leave, at warn, with the --map that
fills it; nothing when everything ran."""

from __future__ import annotations

import pandas as pd

from envaudit.findings import Severity
from envaudit.logs.coverage import decide_exploit_policy, gap, incomplete_entries
from envaudit.logs.schema import LoggedRun


def _run(fields: pd.DataFrame | None = None) -> LoggedRun:
    eps = pd.DataFrame({"episode_id": ["a"], "iteration": [0], "return": [1.0]})
    return LoggedRun(eps, None, "verl" if fields is not None else "generic", fields=fields)


def test_nothing_unchecked_is_no_finding():
    assert decide_exploit_policy([], _run()) is None


def test_each_gap_is_named_with_its_codes_and_the_map_that_fills_it():
    gaps = [gap("timeouts", "the whole analysis", "the log has no end_reason column", ["end_reason"],
                ["timeout-rewarded"]),
            gap("drift", "length moves", "no length column", ["length"], ["learned-exploit"])]
    finding = decide_exploit_policy(gaps, _run(pd.DataFrame({"tool_timeouts": [0], "num_turns": [3]})))
    assert finding.severity == Severity.WARN and finding.code == "exploit-policy"
    assert finding.evidence["behaviour"] == "exploration" and "p_value" not in finding.evidence
    assert finding.summary.startswith("could not check: timeouts (the whole analysis: the log has no end_reason "
                                      "column; timeout-rewarded unchecked); drift (length moves")
    assert "map them with --map KEY=COLUMN (end_reason, length)" in finding.summary
    assert "--map KEY=tool_timeouts" in finding.fix and "--map KEY=length" in finding.fix
    assert finding.fix.endswith("The verl dump's keys: tool_timeouts, num_turns.")
    assert finding.title == "Could not check 2 parts of the logged run"
    assert incomplete_entries(gaps) == [
        {"probe": "timeouts", "skipped": "the whole analysis", "reason": "the log has no end_reason column"},
        {"probe": "drift", "skipped": "length moves", "reason": "no length column"}]


def test_a_generic_log_lists_no_dump_keys():
    finding = decide_exploit_policy([gap("length", "the whole analysis", "no length", ["length"], [])], _run())
    assert "dump's keys" not in finding.fix and "unchecked" not in finding.summary


def test_the_finding_in_full_for_one_gap_without_columns_or_codes():
    run = _run()
    finding = decide_exploit_policy([gap("drift", "the whole analysis", "the log holds a single iteration", [], [])],
                                    run)
    assert finding.probe == "logs"
    assert finding.title == "Could not check 1 part of the logged run"
    assert finding.summary == ("could not check: drift (the whole analysis: the log holds a single iteration). A "
                               "report without other findings does not mean the run is clean; map them with "
                               "--map KEY=COLUMN.")
    assert finding.fix == "Audit a log of more iterations."
    assert finding.evidence == {
        "behaviour": "exploration", "reward_path": "env", "source": "generic",
        "unchecked": [{"probe": "drift", "skipped": "the whole analysis", "reason": "the log holds a single iteration",
                       "columns": [], "codes": []}],
        "columns": [], "dump_keys": []}


def test_a_column_without_a_hint_gets_the_plain_map_and_keys_are_listed_once():
    fields = pd.DataFrame({"acc": [1], "turns": [2]})
    finding = decide_exploit_policy([gap("x", "all", "no seed", ["seed"], ["non-replayable"]),
                                     gap("y", "all", "no seed", ["seed"], [])], _run(fields))
    assert finding.fix == ("Give the log the columns it lacks, then audit it again: seed: --map KEY=seed. "
                           "The verl dump's keys: acc, turns.")
    assert finding.evidence["columns"] == ["seed"] and finding.evidence["dump_keys"] == ["acc", "turns"]
    assert finding.summary.startswith("could not check: x (all: no seed; non-replayable unchecked); y (all: no seed). ")
