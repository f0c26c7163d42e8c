"""Rollouts on executors: env crashes isolated in worker processes, results independent of workers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envaudit.execution import ExecutionConfig, InlineExecutor, ProcessExecutor, ThreadExecutor
from envaudit.rollout import RandomPolicy, Runner
from tests.fixtures import crash_envs
from tests.fixtures.crash_envs import BREAK_AT, EXIT_CODE, CleanWalk

# A fresh worker holds well under 100 MiB of its own (it forks from a server that did the imports):
# the cap leaves room for that and stops LeakWalk long before its LEAK_LIMIT_MB.
CAP_MB = 250
SEEDS = list(range(24))


def _runner(name: str, executor, **kw) -> Runner:
    return Runner(getattr(crash_envs, name), ids=iter(range(10**6)), executor=executor,
                  spec=f"tests.fixtures.crash_envs:{name}", step_timeout_s=20.0, **kw)


def _triggered(seeds, rng_seed=0) -> list[int]:
    """Indices of the episodes whose random opening is the trigger, played in-process on the clean twin."""
    result = Runner(CleanWalk).run(RandomPolicy(), seeds, rng=np.random.default_rng(rng_seed))
    steps = result.records.steps
    out = []
    for i, (_, ep) in enumerate(steps.groupby("episode_id", sort=True)):
        if ep["action"].tolist()[:2] == [crash_envs.TRIGGER] * 2 and len(ep) > BREAK_AT:
            out.append(i)
    return out


@pytest.fixture(scope="module")
def pool():
    executor = ProcessExecutor(2, memory_cap_bytes=CAP_MB * 2**20, recycle_items=1000)
    yield executor
    executor.close()


@pytest.mark.parametrize("name, kind, says", [
    ("SegfaultWalk", "crash", "SIGSEGV"),
    ("ExitWalk", "crash", f"exited with code {EXIT_CODE}"),
    ("LeakWalk", "memory", f"past the memory cap of {CAP_MB} MiB"),
])
def test_a_dying_env_costs_one_episode_each_time(pool, name, kind, says):
    triggered = _triggered(SEEDS)
    assert triggered, "the seeds must include trigger openings for this test to mean anything"
    result = _runner(name, pool).run(RandomPolicy(), SEEDS, rng=np.random.default_rng(0))
    lost = [p for p in result.problems if p.kind in ("crash", "memory")]
    # Every triggered episode dies at the designed call, and every other episode is recorded.
    assert [SEEDS.index(p.seed) for p in lost] == triggered
    assert all(p.kind == kind and p.where == "step" and p.step == BREAK_AT and says in p.message for p in lost)
    assert len(result.records.episodes) == len(SEEDS) - len(triggered)
    assert not result.stopped_early


def test_the_same_run_gives_the_same_records_on_every_executor():
    seeds = [7] * 4 + list(range(12))
    outs = []
    for executor in (InlineExecutor(), ThreadExecutor(3), ProcessExecutor(3)):
        try:
            result = Runner(CleanWalk, ids=iter(range(100, 200)), executor=executor).run(
                RandomPolicy(), seeds, rng=np.random.default_rng(5), tags={"probe": "t"})
        finally:
            executor.close()
        outs.append(result.records)
    for other in outs[1:]:
        assert outs[0].episodes.equals(other.episodes)
        assert outs[0].steps.equals(other.steps)
    # Ids follow the seed order; the four episodes from seed 7 differ only by their own randomness.
    assert outs[0].episodes["episode_id"].tolist() == list(range(100, 100 + len(seeds)))


def test_a_run_that_hangs_stops_at_the_same_episode_on_every_executor():
    from tests.fixtures.broken_envs import SleepsForever

    outs = []
    for executor in (InlineExecutor(), ProcessExecutor(2)):
        try:
            runner = Runner(SleepsForever, ids=iter(range(50)), executor=executor, step_timeout_s=0.5)
            outs.append(runner.run(RandomPolicy(), range(6), rng=np.random.default_rng(1)))
            assert runner.dead
        finally:
            executor.close()
    for result in outs:
        assert result.hung and result.stopped_early
        assert [(p.kind, p.where, p.seed) for p in result.problems] == [("hang", "step", 0)]
        assert result.records.episodes.empty


def _scan_dying(tmp_path, name: str, probes: str) -> tuple[int, dict]:
    from envaudit.cli import main

    out = tmp_path / name
    # A generous step deadline: on a loaded machine the leak must reach the cap before it.
    rc = main(["scan", f"tests.fixtures.crash_envs:{name}", "--episodes", "32", "--group-size", "4",
               "--probes", probes, "--workers", "2", "--memory-cap", str(CAP_MB), "--out", str(out),
               "--step-timeout", "60", "--no-progress"])
    return rc, json.loads((out / "report.json").read_text())


def _check_dying_report(rc: int, report: dict) -> None:
    lost = [f for f in report["findings"] if f["code"] == "env-error" and f["probe"] == "scan"]
    assert len(lost) == 1
    cases = lost[0]["evidence"]["cases"]
    assert cases and all(c["call"] == "step" and c["step"] == BREAK_AT for c in cases)
    assert report["incomplete"] == [] and not report.get("broken")
    assert rc == 1  # the env-error finding is a fail; the audit itself completed (not 3, not 4)


def test_scan_of_a_segfaulting_env_reports_env_error_and_completes(tmp_path):
    _check_dying_report(*_scan_dying(tmp_path, "SegfaultWalk", ""))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SegfaultWalk", "ExitWalk", "LeakWalk"])
def test_scan_with_a_probe_of_each_dying_env_reports_env_error_and_completes(tmp_path, name):
    _check_dying_report(*_scan_dying(tmp_path, name, "length"))


def _strip_timings(report: dict) -> dict:
    report = dict(report)
    for key in ("created", "seconds"):
        report.pop(key, None)
    report["config"] = {k: v for k, v in report["config"].items() if k != "out"}  # where, not what
    report["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report.get("probes", [])]
    return report


def test_one_worker_and_four_workers_write_the_same_report(tmp_path):
    from envaudit.cli import main

    reports = []
    for workers in (1, 4):
        out = tmp_path / f"w{workers}"
        main(["scan", "envaudit/FlakySearch-v0", "--quick", "--episodes", "128", "--probes", "length,timeouts",
              "--seed", "3",
              "--workers", str(workers), "--out", str(out), "--no-progress"])
        reports.append(_strip_timings(json.loads((out / "report.json").read_text())))
    assert reports[0] == reports[1]


def test_every_probe_writes_the_same_report_at_1_8_and_32_workers(tmp_path):
    # A flawed tool env, so every probe runs and findings are made; threads at 1, 8 and 32
    # workers, and 8 worker processes: what the scan says cannot depend on how it was spread.
    from envaudit.cli import main

    reports = {}
    for executor, workers in (("threads", 1), ("threads", 8), ("threads", 32), ("processes", 8)):
        out = tmp_path / f"{executor}{workers}"
        main(["scan", "envaudit/FlakySearch-AnswerAll-v0", "--quick", "--episodes", "32", "--group-size", "4",
              "--seed", "2", "--executor", executor, "--workers", str(workers), "--out", str(out), "--no-progress"])
        reports[executor, workers] = _strip_timings(json.loads((out / "report.json").read_text()))
    first = reports["threads", 1]
    assert first["findings"] and {p["status"] for p in first["probes"]} == {"ok"}
    assert first["cost"]["env_steps"] > 0
    for key, report in reports.items():
        assert report == first, key


def test_execution_config_says_what_is_wrong():
    with pytest.raises(ValueError, match="executor must be one of processes, threads, asyncio, inline, ray, got .dask."):
        ExecutionConfig(executor="dask")
    with pytest.raises(ValueError, match="workers must be 0"):
        ExecutionConfig(workers=-1)


def test_workers_resolve_a_relative_file_spec_from_the_scanning_process_cwd(tmp_path, monkeypatch):
    from envaudit.scan import run_scan

    (tmp_path / "my_walk.py").write_text("from tests.fixtures.crash_envs import CleanWalk\n\n"
                                         "def make_env():\n    return CleanWalk()\n")
    monkeypatch.chdir(tmp_path)  # after the pool's server started elsewhere: workers must follow
    report = run_scan("my_walk.py:make_env", episodes=8, group_size=4, probes=(),
                      execution=ExecutionConfig("processes", workers=2))
    assert report.broken is None and report.exploration["episodes"] == 8


def test_a_run_of_one_policy_per_seed_fans_out_and_plays_each_seed_its_own():
    from envaudit.policies import BySeed
    from envaudit.rollout import SequencePolicy

    plans = {s: [s % 3] * 4 + [2] for s in range(9)}  # each seed its own actions
    outs = []
    for executor in (InlineExecutor(), ThreadExecutor(3), ProcessExecutor(3)):
        policy = BySeed({s: SequencePolicy(a, name=f"seq {s}") for s, a in plans.items()})
        try:
            result = Runner(CleanWalk, ids=iter(range(100, 200)), executor=executor).run(
                policy, list(reversed(plans)), rng=np.random.default_rng(5), tags={"probe": "t"})
        finally:
            executor.close()
        steps = result.records.steps
        for episode_id, seed in zip(result.records.episodes["episode_id"], result.records.episodes["seed"], strict=True):
            mine = steps[steps["episode_id"] == episode_id].sort_values("step")["action"].tolist()
            assert mine[:5] == plans[int(seed)] and set(mine[5:]) <= {2}  # the last action repeats
        outs.append(result.records)
    for other in outs[1:]:
        assert outs[0].episodes.equals(other.episodes) and outs[0].steps.equals(other.steps)
