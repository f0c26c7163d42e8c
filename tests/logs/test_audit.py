"""``envaudit logs`` on trainer dumps with no end_reason column: a run whose return rises while its
success falls is filed, its clean twin is not, and what the dump could not check is said at warn.

The runs are ``trainer_runs``' (their design is there): ``hacked`` trades success (0.39 → 0.13)
for a hack paying ``HACK_SCORE`` = 0.9 (a solved rollout pays 1.0, a failed one 0), so the last
quarter's unsuccessful rollouts earn about 0.8 against about 0.2 for the first quarter's failures:
clearly more than failing did, and short of success by more than the ladder's margin (a tenth of
the 0.8 success-minus-failure gap): ``learned-exploit`` at ``warn``. With the hack paying 1.2 they
earn about as much as success: ``fail``. ``clean`` raises return with success: nothing at warn or fail but the
"could not check" finding (no dump has a step table, so ``failures`` never runs).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from envaudit.cli import main
from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.logs.audit import read_log, run_logs
from tests.logs import trainer_runs
from tests.logs.trainer_runs import WRITERS

FORMATS = ("verl", "trl")


def _audit(folder, *args: str) -> tuple[int, dict]:
    """Exit code and report.json of ``envaudit logs FOLDER ARGS``; ``_episodes``: its episode table."""
    out = folder.parent / f"report-{len(args)}"
    rc = main(["logs", str(folder), "--out", str(out), "--no-progress", "--force", *args])
    data = json.loads((out / "report.json").read_text())
    frame = pd.read_parquet(out / "episodes.parquet")
    data["_episodes"] = {int(r.episode_id): r for r in frame.itertuples()}
    return rc, data


def _learned(data: dict) -> list[dict]:
    return [f for f in data["findings"] if f["code"] == "learned-exploit" and f["severity"] in ("warn", "fail")]


def _incentives(data: dict) -> list[dict]:
    """Findings at warn/fail other than the audit's own "could not check"."""
    return [f for f in data["findings"] if f["severity"] in ("warn", "fail") and f["probe"] != "logs"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return {(fmt, kind): WRITERS[fmt](tmp_path_factory.mktemp(f"{fmt}-{kind}"), kind)
            for fmt in FORMATS for kind in ("hacked", "clean")}


@pytest.mark.parametrize("fmt", FORMATS)
def test_return_up_while_success_falls_is_filed_and_exits_non_zero(dumps, fmt):
    rc, data = _audit(dumps[fmt, "hacked"])
    assert data["fingerprint"]["source"] == fmt
    assert rc == 4  # a warn under --fail-on fail: the exit says incomplete, never 0
    [finding] = _learned(data)
    assert finding["severity"] == "warn"
    assert finding["evidence"]["verdict"] == "paid-without-success"
    assert finding["evidence"]["learned"] == "return up while success fell"
    assert finding["evidence"]["success_before"] > finding["evidence"]["success_after"] + 0.15
    assert "return rose while its success fell" in finding["title"]
    # the examples are unsuccessful rollouts of the last quarter
    eps = data["_episodes"]
    assert finding["examples"] and all(eps[i].success is False or eps[i].success == False  # noqa: E712
                                       for i in finding["examples"])
    assert all(eps[i].iteration > 22 for i in finding["examples"])


def test_fail_on_warn_exits_1_on_the_hacked_run(dumps, tmp_path):
    rc = main(["logs", str(dumps["trl", "hacked"]), "--out", str(tmp_path / "r"), "--no-progress", "--fail-on",
               "warn", "--format", "trl"])
    assert rc == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_clean_twin_files_nothing_but_what_it_could_not_check(dumps, fmt):
    rc, data = _audit(dumps[fmt, "clean"])
    assert rc == 4
    assert _incentives(data) == []
    assert not [f for f in data["findings"] if f["code"] in ("learned-exploit", "reward-without-success")]
    [unchecked] = [f for f in data["findings"] if f["probe"] == "logs"]
    assert unchecked["severity"] == "warn" and unchecked["summary"].startswith("could not check: ")


def test_a_hack_that_pays_as_much_as_success_fails(tmp_path):
    report = run_logs(read_log([WRITERS["verl"](tmp_path, "hacked", hack_score=1.2)]), ScanConfig())
    [finding] = [f for f in report.findings if f.code == "learned-exploit"]
    assert finding.severity == Severity.FAIL and finding.evidence["verdict"] == "at-least-success"
    assert report.reaches(Severity.FAIL)  # exit 1 under the default --fail-on fail
    # intent on return + success alone (no steps, no actions): hacks paid 1.2 reach the median success
    # return (1.0) without success, a fact at info that names no behaviour
    [fact] = [f for f in report.findings if f.code == "reward-without-success"]
    assert fact.severity == Severity.INFO and fact.probe == "intent"
    eps = report.records.episodes.set_index("episode_id")
    assert fact.evidence["median_success"] == pytest.approx(1.0, abs=0.01)
    assert all(eps.loc[i, "success"] is False or not eps.loc[i, "success"] for i in fact.examples)
    assert all(eps.loc[i, "return"] >= 1.1 for i in fact.examples)


def test_map_fills_the_columns_a_dump_names_its_own_way(dumps):
    report = run_logs(read_log([dumps["verl", "clean"]]), ScanConfig())
    unchecked = {(i["probe"], i["skipped"]) for i in report.incomplete}
    # tool_timeouts is read unasked (the schema's own name), so timeouts and pipeline ran
    assert ("timeouts", "the whole analysis") not in unchecked and ("length", "the whole analysis") in unchecked
    assert {("drift", "length moves"), ("drift", "failure moves"), ("drift", "takeover moves"),
            ("failures", "the whole analysis")} <= unchecked and ("drift", "timeout moves") not in unchecked
    [note] = [f for f in report.findings if f.probe == "logs"]
    assert "num_turns" in note.fix and "--map KEY=length" in note.fix  # the dump's keys, listed for --map
    mapped = run_logs(read_log([dumps["verl", "clean"]], mapping={"num_turns": "length"}), ScanConfig())
    unchecked = {(i["probe"], i["skipped"]) for i in mapped.incomplete}
    assert ("length", "the whole analysis") not in unchecked and ("drift", "length moves") not in unchecked
    assert {p.name: p.status for p in mapped.probes}["length"] == "ok"
    assert mapped.records.episodes["length"].tolist() == trainer_runs.rollouts("clean")["num_turns"].tolist()
    assert not [f for f in mapped.findings if f.severity >= Severity.WARN and f.probe != "logs"]


def test_the_timeout_class_is_derived_from_success_and_the_timeout_count(dumps):
    run = read_log([dumps["trl", "hacked"]], fmt="trl")
    report = run_logs(run, ScanConfig())
    eps = report.records.episodes
    timed = eps["n_tool_timeouts"] > 0
    assert set(eps.loc[timed & eps["success"].eq(False).fillna(False), "outcome"]) == {"timeout"}
    assert set(eps.loc[timed & eps["success"].eq(True).fillna(False), "outcome"]) == {"success"}
    assert set(eps.loc[~timed, "outcome"]) == {"success", "failure"}
    assert eps["n_tool_timeouts"].sum() == run.episodes["tool_timeouts"].sum()


def test_holm_corrects_across_the_analyses_of_one_audit(dumps, monkeypatch):
    """Three analyses each filing a warn at p 0.02, 0.03, 0.04: one at a time each passes alpha
    0.05, but Holm over the three needs 0.05/3 for the smallest, so all three become info."""
    from envaudit.findings import Finding
    from envaudit.logs import analyses

    def filing(p):
        def analyse(ctx, converted):
            return [Finding("timeout-rewarded", Severity.WARN, f"planted at p {p}", "s", {"p_value": p}, [], "f")]
        return analyse, ()

    planted = {name: filing(p) for name, p in zip(("timeouts", "pipeline", "length"), (0.02, 0.03, 0.04),
                                                   strict=True)}
    monkeypatch.setattr(analyses, "ANALYSES", {**analyses.ANALYSES, **planted})
    report = run_logs(read_log([dumps["verl", "clean"]]), ScanConfig())
    got = {f.title: f for f in report.findings if f.title.startswith("planted")}
    assert len(got) == 3 and all(f.severity == Severity.INFO for f in got.values())
    assert got["planted at p 0.02"].evidence["p_adjusted"] == pytest.approx(0.06)
    assert all(f.evidence["tests_in_scan"] == 3 for f in got.values())
