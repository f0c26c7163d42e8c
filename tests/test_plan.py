"""``envaudit scan --plan``: the env steps each probe will take, before the scan pays for them.

On ``CountedWalk`` every episode is exactly ``LENGTH`` steps, so a declared probe's predicted steps
must equal what the real scan counts, exactly; on a bundled env whose episodes vary in length the
predicted episodes are exact and the steps within the stated tolerance.
"""

from __future__ import annotations

import pytest

from envaudit.cli import main
from envaudit.config import ScanConfig
from envaudit.plan import plan_scan
from envaudit.scan import run_scan
from tests.fixtures.cost_envs import LENGTH

TARGET = "tests.fixtures.cost_envs:CountedWalk"
SMALL = dict(seed=1, quick=True, episodes=8, group_size=2, fail_on="never")
TOLERANCE = 0.5
"""A bundled env's predicted steps are within this share of the real count: the trained policies'
episodes are not the random explorer's length (the plan's mean), but the same order."""


def test_plan_predicts_a_fixed_length_envs_steps_exactly():
    config = ScanConfig(probes=("grpo",), **SMALL)
    plan = plan_scan(TARGET, config, workers=2)
    real = run_scan(TARGET, config).cost["probes"]
    predicted = {p.name: (p.env_steps, p.episodes) for p in plan.probes}
    assert predicted == {name: (v["env_steps"], v["episodes"]) for name, v in real.items()}
    assert plan.mean_length == LENGTH and plan.undeclared == []
    assert plan.serial_s() > 0 and plan.lines()[-1].endswith("at --workers 2 (if every probe's episodes fan out)")


def test_undeclared_probes_make_the_total_a_lower_bound():
    plan = plan_scan(TARGET, ScanConfig(probes=("api", "grpo"), **SMALL), workers=1)
    assert plan.undeclared == ["api"]
    total = next(line for line in plan.lines() if line.startswith("total"))
    assert "at least what the scan will step" in total


@pytest.mark.slow
def test_plan_on_a_bundled_env_within_tolerance():
    config = ScanConfig(seed=0, quick=True, probes=("grpo",), fail_on="never")
    plan = plan_scan("envaudit/Helpdesk-v0", config, workers=1)
    real = run_scan("envaudit/Helpdesk-v0", config).cost["probes"]
    for p in plan.probes:
        assert p.episodes == real[p.name]["episodes"]
        assert abs(p.env_steps - real[p.name]["env_steps"]) <= TOLERANCE * real[p.name]["env_steps"]


def test_cli_plan_prints_the_table_and_writes_no_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["scan", TARGET, "--plan", "--probes", "grpo", "--quick", "--episodes", "8", "--group-size", "2",
                 "--workers", "3", "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert "grpo" in out and "--workers 3" in out
    assert not (tmp_path / "out").exists() and not (tmp_path / "reports").exists()
