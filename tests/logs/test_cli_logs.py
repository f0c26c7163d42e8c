"""``envaudit logs``: the report folder, exit codes and --fail-on of ``scan``, from a log on disk."""

from __future__ import annotations

import json

import pytest

from envaudit.cli import main
from envaudit.testing.logs import Drift, generate_log, write_log


@pytest.fixture(scope="module")
def drifting_log(tmp_path_factory):
    folder = tmp_path_factory.mktemp("log")
    return write_log(generate_log(drift=Drift("stall", start=4), iterations=16, groups=16), folder, kind="jsonl")


def test_a_drifting_log_under_drop_fails_on_warn(drifting_log, tmp_path):
    out = tmp_path / "report"
    rc = main(["logs", *drifting_log, "--timeout-handling", "drop", "--fail-on", "warn", "--out", str(out),
               "--no-progress"])
    assert rc == 1
    data = json.loads((out / "report.json").read_text())
    codes = {data["findings"][i]["code"] for g in data["groups"] for i in g["members"]}
    assert "learned-exploit" in codes and data["groups"][0]["behaviour"] == "timeout"
    assert (out / "report.html").exists() and (out / "grpo_curves.png").exists()
    assert (out / "grpo_curves.parquet").exists() and (out / "episodes.parquet").exists()
    # The same folder again: refused without --force (before any work).
    assert main(["logs", *drifting_log, "--out", str(out), "--no-progress"]) == 2


def test_usage_errors_exit_2(drifting_log, tmp_path, capsys):
    assert main(["logs", drifting_log[0], "--map", "score", "--out", str(tmp_path / "r")]) == 2
    assert "expected LOG_COLUMN=SCHEMA_COLUMN" in capsys.readouterr().err
    assert main(["logs", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_missing_columns_are_named_in_the_report(drifting_log, tmp_path):
    import pandas as pd

    eps = pd.read_json(drifting_log[0], lines=True).drop(columns=["success"])
    path = tmp_path / "episodes.jsonl"
    eps.to_json(path, orient="records", lines=True)
    out = tmp_path / "report"
    # Analyses that could not run make the report incomplete (exit 4), never a clean pass.
    assert main(["logs", str(path), "--out", str(out), "--no-progress"]) == 4
    data = json.loads((out / "report.json").read_text())
    reasons = {p["name"]: p["error"] for p in data["probes"]}
    assert "success" in reasons["timeouts"] and "steps" in reasons["failures"]
    assert "success" in data["exploration"]["missing"]
    skipped = {(i["probe"], i["skipped"]) for i in data["incomplete"]}
    assert {("timeouts", "the whole analysis"), ("pipeline", "the whole analysis"),
            ("intent", "the whole analysis"), ("failures", "the whole analysis")} <= skipped
    assert ("length", "the whole analysis") not in skipped  # the generated log has its length
    [unchecked] = [f for f in data["findings"] if f["title"].startswith("Could not check")]
    assert unchecked["severity"] == "warn" and "could not check: timeouts" in unchecked["summary"]
    assert "--map KEY=success" in unchecked["fix"]
    # Replaced with --force; the could-not-check warn reaches --fail-on warn.
    assert main(["logs", str(path), "--out", str(out), "--force", "--fail-on", "warn", "--no-progress"]) == 1


DATA = __import__("pathlib").Path(__file__).parent / "data"


@pytest.mark.parametrize("dump, reader", [("verl/rollout", "verl"), ("trl/completions", "trl"),
                                          ("prime-rl/rollouts", "prime-rl"), ("skyrl", "skyrl"),
                                          ("openrlhf", "openrlhf")])
def test_a_trainers_dump_is_read_by_its_own_reader(dump, reader, tmp_path):
    out = tmp_path / "r"
    # No trainer dump carries every column (none has a step table): incomplete, never a clean 0.
    assert main(["logs", str(DATA / dump), "--out", str(out), "--no-progress"]) == 4
    data = json.loads((out / "report.json").read_text())
    assert data["fingerprint"]["source"] == reader  # picked by sniffing, not read as the generic schema
    assert ("failures", "the whole analysis") in {(i["probe"], i["skipped"]) for i in data["incomplete"]}


def test_reader_options_reach_the_reader_and_generic_options_do_not(tmp_path, capsys):
    verl = str(DATA / "verl" / "rollout")
    assert main(["logs", verl, "--reader-arg", "bogus=1", "--out", str(tmp_path / "a")]) == 2
    assert "the verl reader takes success_field" in capsys.readouterr().err
    assert main(["logs", verl, "--steps", verl, "--out", str(tmp_path / "b")]) == 2
    assert "--steps is for logs in the generic schema" in capsys.readouterr().err
    assert main(["logs", verl, "--reader-arg", "success_field=acc", "--out", str(tmp_path / "c"),
                 "--no-progress"]) == 4
