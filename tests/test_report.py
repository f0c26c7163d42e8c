"""The report shows and judges incentives, not raw findings: groups in report.json, report.md, the
terminal table and report.html; verdicts (worst, reaches, counts) by group; schema 1 still read.

The findings are what the probes report on ``CodeFix-TimeoutPasses`` (one planted timeout flaw
seen by four probes) plus one unrelated info fact, so the right answer is two groups, one loud.
"""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from envaudit.findings import Finding, Severity
from envaudit.report import SCHEMA_VERSION, Report
from envaudit.reporting import render_markdown, write_folder
from envaudit.reporting.html import render_html
from envaudit.reporting.load import load_report
from tests.reporting import synthetic
from tests.reporting.dom import parse


def F(code, severity, probe, title, **evidence):
    return Finding(code=code, severity=severity, title=title, summary=f"{title}.", evidence=evidence,
                   examples=[0, 2], fix=f"fix {code}", probe=probe)


def planted() -> list[Finding]:
    return [
        F("learned-exploit", "warn", "grpo", "GRPO learned timeouts up", source="grpo",
          moves=[{"behaviour": "timeouts up", "exploit": True}]),
        F("timeout-rewarded", "warn", "grpo", "GRPO learned to time out", source="grpo"),
        F("exploit-policy", "fail", "exploits", "exploit pays: always run the suite", ending="tool_timeout"),
        F("failure-rewarded", "fail", "failures", "a timed-out suite run pays", status="timeout"),
        F("timeout-rewarded", "fail", "timeouts", "Timing out pays as much as succeeding"),
        F("length-bias", "info", "length", "A step cost shortens episodes", length_effect={"estimate": -0.01}),
    ]


@pytest.fixture
def report() -> Report:
    return synthetic.full_report(planted())


def test_verdicts_go_by_group(report):
    assert len(report.findings) == 6
    assert report.counts() == {"fail": 1, "warn": 0, "info": 1}
    assert report.worst() is Severity.FAIL
    (loud,) = report.reaches("warn")
    assert loud.code == "timeout-rewarded" and loud.headline.probe == "timeouts" and len(loud.members) == 5
    assert report.reaches("fail") == [loud] and len(report.reaches("info")) == 2 and report.reaches(None) == []


def test_report_json_keeps_every_finding_and_lists_the_groups(report, tmp_path):
    write_folder(report, tmp_path / "r")
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert len(data["findings"]) == 6 and data["counts"] == {"fail": 1, "warn": 0, "info": 1}
    loud, quiet = data["groups"]
    assert (loud["code"], loud["behaviour"], loud["reward_path"], loud["severity"]) == (
        "timeout-rewarded", "timeout", "env", "fail")
    assert data["findings"][loud["headline"]]["probe"] == "timeouts" and loud["members"][0] == loud["headline"]
    assert sorted(loud["members"] + quiet["members"]) == list(range(6))
    assert {data["findings"][i]["code"] for i in loud["members"]} == {
        "timeout-rewarded", "failure-rewarded", "exploit-policy", "learned-exploit"}
    assert (quiet["code"], quiet["behaviour"], quiet["severity"]) == ("length-bias", "quit", "info")
    loaded = Report.load(tmp_path / "r")
    assert loaded.to_dict() == report.to_dict()
    assert [g.headline.to_dict() for g in loaded.finding_groups()] == [
        g.headline.to_dict() for g in report.finding_groups()]


def test_a_schema_1_report_is_read_and_grouped_on_load(report, tmp_path):
    write_folder(report, tmp_path / "r")
    path = tmp_path / "r" / "report.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 1
    del data["groups"]
    path.write_text(json.dumps(data))
    loaded = load_report(tmp_path / "r")
    assert [(g.code, str(g.severity), len(g.members)) for g in loaded.groups] == [
        ("timeout-rewarded", "fail", 5), ("length-bias", "info", 1)]
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"schema_version 99 is not one this envaudit reads \(1, 2\)"):
        load_report(tmp_path / "r")


def test_groups_that_miss_a_finding_are_refused_and_later_findings_are_regrouped(report):
    with pytest.raises(ValueError, match="every finding must be in exactly one group"):
        Report("x", {}, {}, planted(), [], {}, "t", 0.0, "0", groups=report.finding_groups())
    report.findings.append(F("non-replayable", "fail", "replay", "Same seed, another episode"))
    assert report.counts() == {"fail": 2, "warn": 0, "info": 1}


def test_markdown_reads_one_section_per_incentive_with_its_corroboration(report):
    text = render_markdown(report)
    assert text.count("\n## 1. ") == 1 and text.count("\n## 3. ") == 0
    assert "## 1. [FAIL] `timeout-rewarded` — Timing out pays as much as succeeding" in text
    assert "## 2. [INFO] `length-bias` — A step cost shortens episodes" in text
    corroboration = text.split("Corroborated by:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert corroboration == [
        "- failures (failure-rewarded, fail): a timed-out suite run pays",
        "- exploits (exploit-policy, fail): exploit pays: always run the suite",
        "- grpo (timeout-rewarded, warn): GRPO learned to time out",
        "- grpo (learned-exploit, warn): GRPO learned timeouts up",
    ]
    assert "1 fail, 0 warn, 1 info (6 findings)" in text


def test_terminal_table_has_a_row_per_incentive(report):
    buffer = io.StringIO()
    Console(file=buffer, width=120, color_system=None).print(report)
    text = buffer.getvalue()
    rows = [line for line in text.splitlines() if line.startswith("│ ") and line[2].isdigit()]
    assert [r.split("│")[1].strip() for r in rows] == ["1", "2"]
    assert "also seen by: failures failure-rewarded (fail); exploits exploit-policy (fail)" in " ".join(text.split())
    assert "1 fail, 0 warn, 1 info (6 findings), grouped by incentive" in " ".join(text.split())


def test_html_shows_groups_with_their_members(report):
    root, problems = parse(render_html(report, plots={}))
    assert problems == []
    sections = root.find_all("section", class_="finding")
    assert [(s.attrs["data-code"], s.attrs["data-severity"], s.attrs["data-members"]) for s in sections] == [
        ("timeout-rewarded", "fail", "5"), ("length-bias", "info", "1")]
    members = sections[0].find_all("li", class_="member")
    assert [(m.attrs["data-probe"], m.attrs["data-code"]) for m in members] == [
        ("failures", "failure-rewarded"), ("exploits", "exploit-policy"), ("grpo", "timeout-rewarded"),
        ("grpo", "learned-exploit")]
    assert "1 fail, 0 warn, 1 info" in root.find_all("section", id="summary")[0].text()


def test_terminal_table_says_each_incentives_fix(report):
    """The fix is what a user acts on: the terminal names it, not only report.md and report.html."""
    buffer = io.StringIO()
    Console(file=buffer, width=120, color_system=None).print(report)
    text = " ".join(buffer.getvalue().replace("│", " ").split())
    headlines = [g.headline for g in report.finding_groups()]
    assert [h.code for h in headlines] == ["timeout-rewarded", "length-bias"]
    assert "fix: fix timeout-rewarded" in text and "fix: fix length-bias" in text
    assert text.index("fix: fix timeout-rewarded") < text.index("also seen by:")  # the fix, then corroboration
