"""The scan's cost in env units: every probe's env steps and episodes, counted where the env is
stepped, the same at any number of workers, and ``--max-env-steps`` as a unit cap.

``CountedWalk`` writes a line per reset and step in whatever process steps it, so the report's
counts are checked against what the env itself saw, not against another count of ours.
"""

from __future__ import annotations

import json

import pytest

from envaudit.cli import main
from envaudit.cost import EnvCost, cost_line
from envaudit.execution import ExecutionConfig
from envaudit.scan import run_scan
from tests.fixtures.cost_envs import LENGTH, calls

TARGET = "tests.fixtures.cost_envs:CountedWalk"
SMALL = dict(seed=3, quick=True, episodes=16, group_size=4)


def _scan(tmp_path, monkeypatch, name, execution, **overrides):
    path = tmp_path / f"{name}.calls"
    report = run_scan(TARGET, execution=execution, env_args={"calls": str(path)}, **{**SMALL, **overrides})
    return report, calls(path)


@pytest.mark.parametrize("probes", [("api", "replay", "timeouts")])
def test_cost_equals_what_the_env_counted_at_one_and_two_workers(tmp_path, monkeypatch, probes):
    one, seen_one = _scan(tmp_path, monkeypatch, "one", ExecutionConfig("processes", workers=1), probes=probes)
    two, seen_two = _scan(tmp_path, monkeypatch, "two", ExecutionConfig("processes", workers=2), probes=probes)
    assert one.cost == two.cost
    assert seen_one == seen_two
    assert (one.cost["env_steps"], one.cost["episodes"]) == (seen_one["steps"], seen_one["resets"])
    per = one.cost["probes"]
    assert list(per) == ["explore", *probes]  # every probe listed, in the order it ran
    assert sum(p["env_steps"] for p in per.values()) == one.cost["env_steps"]
    # Exploration: quick scans a quarter of 16 episodes, each the env's full LENGTH steps.
    assert per["explore"] == {"env_steps": 4 * LENGTH, "episodes": 4}
    # The api probe steps its own env (check_env): counted too, resets included.
    assert per["api"]["episodes"] >= 1 and per["api"]["env_steps"] >= 1
    assert json.loads(json.dumps(one.to_dict()))["cost"] == one.cost


def test_inline_and_threads_count_the_same_as_processes(tmp_path, monkeypatch):
    inline, seen = _scan(tmp_path, monkeypatch, "inline", None, probes=("replay", "exploits"))
    threads, _ = _scan(tmp_path, monkeypatch, "threads", ExecutionConfig("threads", workers=2),
                       probes=("replay", "exploits"))
    assert inline.cost == threads.cost
    assert (inline.cost["env_steps"], inline.cost["episodes"]) == (seen["steps"], seen["resets"])


@pytest.mark.slow
def test_every_probe_counted_against_the_env(tmp_path, monkeypatch):
    one, seen_one = _scan(tmp_path, monkeypatch, "one", ExecutionConfig("processes", workers=1))
    two, seen_two = _scan(tmp_path, monkeypatch, "two", ExecutionConfig("processes", workers=2))
    assert one.cost == two.cost
    assert (two.cost["env_steps"], two.cost["episodes"]) == (seen_two["steps"], seen_two["resets"])
    assert one.cost["probes"]["grpo"]["env_steps"] > 0


def test_max_env_steps_stops_starting_work_and_says_what_it_skipped(tmp_path, monkeypatch):
    # Exploration's 40 steps, then the api probe's own few; replay starts under 100 steps and
    # plays its runs whole; after it the cap is reached and timeouts is skipped whole.
    report, seen = _scan(tmp_path, monkeypatch, "capped", None, probes=("api", "replay", "timeouts"),
                         max_env_steps=100)
    assert report.cost["max_env_steps"] == 100
    assert report.cost["env_steps"] == seen["steps"] >= 100
    skipped = {g["probe"]: g for g in report.incomplete}
    assert skipped["timeouts"]["skipped"] == "the whole probe"
    assert "--max-env-steps cap of 100 env steps" in skipped["timeouts"]["reason"]
    assert report.cost["probes"]["timeouts"] == {"env_steps": 0, "episodes": 0}
    status = {p.name: p.status for p in report.probes}
    assert status["timeouts"] == "skipped"
    again, _ = _scan(tmp_path, monkeypatch, "again", None, probes=("api", "replay", "timeouts"), max_env_steps=100)
    assert again.cost == report.cost and again.incomplete == report.incomplete


def test_cli_max_env_steps_exits_4_and_last_line_gives_the_cost(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(["scan", TARGET, "--episodes", "16", "--group-size", "4", "--quick", "--seed", "3",
               "--probes", "replay,timeouts", "--max-env-steps", "50", "--executor", "inline", "--env-arg", f"calls={tmp_path / 'cli.calls'}",
               "--fail-on", "never", "--out", "out", "--no-progress"])
    assert rc == 4
    last = capsys.readouterr().out.strip().splitlines()[-1]
    seen = calls(tmp_path / "cli.calls")
    assert last.startswith(f"cost: {seen['steps']:,} env steps, {seen['resets']:,} episodes")
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["cost"]["env_steps"] == seen["steps"]


def test_a_max_env_steps_below_one_is_a_usage_error(capsys):
    assert main(["scan", TARGET, "--max-env-steps", "0"]) == 2
    assert "max_env_steps must be at least 1" in capsys.readouterr().err


def test_env_cost_adds_per_probe_and_names_the_cap():
    cost = EnvCost(cap=30)
    cost.add("explore", 20, 2)
    assert not cost.reached()
    cost.add("replay", 10, 1)
    assert cost.reached() and cost.section() == {
        "env_steps": 30, "episodes": 3, "max_env_steps": 30,
        "probes": {"explore": {"env_steps": 20, "episodes": 2}, "replay": {"env_steps": 10, "episodes": 1}}}
    assert cost_line(cost.section(), 2.0, 4) == "cost: 30 env steps, 3 episodes in 2.0 s on 4 workers, 15 env steps/s"


def test_a_registered_envs_checker_calls_are_counted_and_the_env_passes_the_checker(tmp_path):
    # Registered envs carry a spec, which Gymnasium's check_env reads through the counting wrapper.
    import gymnasium as gym

    path = tmp_path / "registered.calls"
    env_id = "envaudit-test/CountedWalk-v0"
    gym.register(env_id, entry_point="tests.fixtures.cost_envs:CountedWalk", kwargs={"calls": str(path)})
    try:
        report = run_scan(env_id, probes=("api",), **SMALL)
    finally:
        gym.registry.pop(env_id)
    assert [f.code for f in report.findings if f.code == "env-error"] == []
    seen = calls(path)
    assert (report.cost["env_steps"], report.cost["episodes"]) == (seen["steps"], seen["resets"])
