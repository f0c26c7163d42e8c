"""``envaudit scan --plan``: the env steps each probe will take, before the scan pays for them.

On ``CountedWalk`` every episode is exactly ``LENGTH`` steps, so exploration's predicted steps must
equal what the real scan counts, exactly, and GRPO's (a cap: its runs stop once settled) must be at
least what it counts and exactly its configured work; on a bundled env whose episodes vary in
length the predicted episodes bound the real ones and the steps are of the same order.
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
    report = run_scan(TARGET, config)
    real = report.cost["probes"]
    predicted = {p.name: (p.env_steps, p.episodes) for p in plan.probes}
    assert predicted["explore"] == (real["explore"]["env_steps"], real["explore"]["episodes"])
    assert predicted["grpo"][0] >= real["grpo"]["env_steps"] and predicted["grpo"][1] >= real["grpo"]["episodes"]
    # The cap is exactly the configured work: every run's iterations of 4 groups of G, and its evaluation.
    notes = next(p for p in report.probes if p.name == "grpo").notes
    work = sum((n * 4 + notes["eval_groups"]) * SMALL["group_size"] for n in notes["iterations"].values())
    assert predicted["grpo"] == (work * LENGTH, work)
    played = sum((r["iterations"] * 4 * SMALL["group_size"] + r["eval_episodes"]) for r in notes["runs"].values())
    assert played == real["grpo"]["episodes"]  # what the runs say they played is what the scan counted
    grpo_line = next(line for line in plan.lines() if line.startswith("grpo"))
    assert grpo_line.endswith("(at most: a run with nothing left to learn stops early)")
    assert "if no probe stops early" in next(line for line in plan.lines() if line.startswith("total"))
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
        if p.cap:
            assert p.episodes >= real[p.name]["episodes"]
        else:
            assert p.episodes == real[p.name]["episodes"]
            assert abs(p.env_steps - real[p.name]["env_steps"]) <= TOLERANCE * real[p.name]["env_steps"]


def test_cli_plan_prints_the_table_and_writes_no_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["scan", TARGET, "--plan", "--probes", "grpo", "--quick", "--episodes", "8", "--group-size", "2",
                 "--workers", "3", "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert "grpo" in out and "--workers 3" in out
    assert not (tmp_path / "out").exists() and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("options", [SMALL, dict(seed=0, quick=True, episodes=64, group_size=8, fail_on="never")])
def test_the_replay_probe_declares_its_episodes_exactly_on_a_fixed_length_env(options):
    # Units (three plays each) up to what exploration played or MIN_STEPS of replays take, two plays per
    # branch, and the other interpreters' episodes: all of them LENGTH steps long here.
    config = ScanConfig(probes=("replay",), **options)
    plan = plan_scan(TARGET, config, workers=1)
    real = run_scan(TARGET, config).cost["probes"]["replay"]
    predicted = next(p for p in plan.probes if p.name == "replay")
    assert (predicted.episodes, predicted.env_steps) == (real["episodes"], real["env_steps"]) and not predicted.cap


def test_the_replay_plan_of_short_episodes_caps_its_units_and_has_no_branches():
    import pandas as pd

    from envaudit.probes.replay import planned_episodes

    config = ScanConfig(seed=0)  # 256 episodes explored; 16 first units, 200 steps of replays, 8 branches
    pilot = lambda *lengths: pd.DataFrame({"length": list(lengths)})  # noqa: E731
    # one-step episodes: 200 units wanted, 4 x 16 allowed; no branch fits in one step; 2 x 7 elsewhere
    assert planned_episodes(config, pilot(1, 1), False) == 3 * 64 + 0 + 14
    assert planned_episodes(config, pilot(), False) == 3 * 64 + 14  # no pilot episode: one step each
    assert planned_episodes(config, pilot(2, 2), False) == 3 * 64 + 2 * 8 + 14  # two steps: branches
    assert planned_episodes(config, pilot(10, 30), False) == 3 * 16 + 2 * 8 + 14  # long: the first units only
    few = ScanConfig(seed=0, episodes=12, group_size=4)  # 12 explored: at most 12 units
    assert planned_episodes(few, pilot(1), False) == 3 * 12 + 14
