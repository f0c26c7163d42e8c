"""report.md reads as text: short lines, small tables, nested evidence summarised with a pointer
into report.json that resolves to the whole structure."""

import re

from envaudit.reporting.markdown import CELL, render_markdown, summary_of
from tests.reporting import synthetic

F = synthetic._finding
LINE = 240
"""No line of report.md longer than this (the issue: evidence cells of ~2,000 characters)."""

VS_SUCCESS = {"mean_exploit": 1.0, "mean_success": 1.0, "n_exploit": 32, "n_success": 33, "diff": 0.0,
              "diff_ci": [8.3e-17, 8.3e-17], "p_value": 6.615540875623761e-16, "effect_size": 1.0,
              "underpowered": False, "margin": 0.1, "noninferior": True}
TEST = {"scale": 1.0, "min_effect": 0.1, "vs_success": VS_SUCCESS, "above_alternative": True,
        "vs_alternative": {**VS_SUCCESS, "p_value": 2.5e-34}, "level": "at_least_success",
        "p_value": 6.615540875623761e-16, "ending_premium": {"diff": 1.0, "holds": True}}
ARMS = [{"arm": name, "what": f"every '{name}' call forced to time out, random actions " * 3,
         "level": "above_alternative", "p_value": 1e-19, "mean_timeout": 0.52, "n_episodes": 256,
         "examples": list(range(40))} for name in ("exploration", "stall", "repeat-run_full_suite", "inject-read_file",
                                                   "inject-apply_patch", "inject-submit", "inject-run_tests")]
LONG_POLICY = "repeat 'run_full_suite' " * 30


def _big_report():
    timeout = F("timeout-rewarded", "fail", probe="timeouts", evidence={
        "p_value": 6.6e-16, "policy": LONG_POLICY, "mean_timeout": 1.0, "n_success": 33, "test": TEST,
        "arms": ARMS, "success_sources": {"n_exploration": 19, "oracle_policy": "read, patch, test " * 20}})
    grpo = F("reward-without-success", "warn", probe="grpo", evidence={
        "source": "grpo", "run": "natural", "p_value": 3e-13,
        "ladder": {**TEST, "level": "at_least_success", "p_value": 3e-13},
        "reach": {"timeout": {"best": 1.0, "n": 64}, "fail": {"best": 0.0, "n": 64}},
        "marginal": [float(i) / 7 for i in range(50)]})
    length = F("length-bias", "info", probe="length", evidence={
        "p_value": 0.002, "behaviour": "delay-success", "regression": {"estimate": -0.01, "se": 0.001, "p_value": 0.002, "n": 256,
                                         "rows": [{"k": i, "coef": 0.1} for i in range(30)]}})
    return synthetic.full_report([timeout, grpo, length])


def _cells(line):
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_every_line_is_short_and_every_cell_small():
    text = render_markdown(_big_report())
    assert max(len(line) for line in text.splitlines()) <= LINE
    cells = [c for line in text.splitlines() if line.startswith("|") for c in _cells(line)]
    assert cells and max(len(c) for c in cells) <= CELL + 2  # + the escape of a '|'
    assert '{"scale"' not in text and "[{" not in text  # no JSON blob dumped into the text


def test_nested_evidence_is_one_line_with_its_result_and_a_pointer_that_resolves():
    report = _big_report()
    text = render_markdown(report)
    data = report.to_dict()
    pointers = re.findall(r"`findings\[(\d+)\]\.evidence\.(\w+)`", text)
    assert {key for _, key in pointers} == {"test", "arms", "success_sources", "ladder", "reach", "marginal",
                                            "regression"}
    for i, key in pointers:  # each names the finding that holds it, in report.json's list
        assert data["findings"][int(i)]["evidence"][key] == report.findings[int(i)].evidence[key]
    line = next(line for line in text.splitlines() if "evidence.test`" in line)
    assert "at_least_success" in line and "p = 6.616e-16" in line
    ladder = next(line for line in text.splitlines() if "evidence.ladder`" in line)
    assert "at_least_success" in ladder and "p = 3e-13" in ladder
    arms = next(line for line in text.splitlines() if "evidence.arms`" in line)
    assert "7 records (exploration, stall, repeat-run_full_suite, inject-read_file, …)" in arms
    regression = next(line for line in text.splitlines() if "evidence.regression`" in line)
    assert "p = 0.002" in regression and "estimate -0.01" in regression
    assert "50 values" in next(line for line in text.splitlines() if "evidence.marginal`" in line)
    assert '\n  "seed": 3\n' in text  # the config keeps its JSON indentation


def test_scalar_evidence_is_a_small_table_and_long_text_is_cut():
    text = render_markdown(_big_report())
    assert "| p_value | 6.6e-16 |" in text and "| mean_timeout | 1 |" in text and "| n_success | 33 |" in text
    policy = next(line for line in text.splitlines() if line.startswith("| policy |"))
    assert policy.endswith("… |") and len(policy) < LINE


def test_summary_of_a_mapping_leads_with_its_conclusion():
    assert summary_of({"level": "above_alternative", "p_value": 0.01, "diff": 0.5}) == \
        "above_alternative (p = 0.01; diff 0.5)"
    assert summary_of({"a": 1}) == "a 1"
    assert summary_of([{"policy": "stall", "x": 1}, {"policy": "quit"}]) == "2 records (stall, quit)"
