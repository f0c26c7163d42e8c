"""``benchmarks/scan_steps.py``: a real scan of the trivial env, read back from its report as the
table prints it, and the before/after line's verdict comparison."""

from __future__ import annotations

from tests.fixtures.benchmark_scripts import load_benchmark
from tests.fixtures.cost_envs import LENGTH

steps = load_benchmark("scan_steps")


def test_a_quick_scan_of_the_trivial_env_is_read_back_per_probe():
    row = steps.scan(steps.TRIVIAL, quick=True, seed=0)
    assert "error" not in row, row
    assert row["env_steps"] == sum(row["probes"].values()) and row["probes"]["explore"] == 64 * LENGTH
    # Its GRPO runs, each in a few characters; the natural run always succeeds, so it stands in.
    assert row["runs"]["target-success"] == "<natural"
    assert row["runs"]["natural"][-1] in "bsd-" and row["runs"]["natural"][:-1].isdigit()
    line = steps.line({"target": steps.TRIVIAL, "after": row, "before": {**row, "env_steps": 2 * row["env_steps"]}})
    assert "(0.50x)" in line and line.endswith(" same")


def test_a_changed_verdict_and_an_error_are_said_so():
    after = {"env_steps": 10, "probes": {"explore": 10}, "runs": {}, "flagged": ["a:fail"]}
    before = {**after, "env_steps": 20, "flagged": []}
    assert steps.line({"target": "t", "after": after, "before": before}).endswith("DIFFER (before -)")
    assert steps.line({"target": "t", "after": {"target": "t", "error": "boom"}}).endswith("error: boom")
    assert steps.run_word({"iterations": 11, "barren": False, "settled": False, "decided": True}) == "11d"
    assert steps.run_word({"iterations": 24}) == "24-"
