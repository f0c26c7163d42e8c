"""``--executor ray`` on one env: the episodes run on Ray actors of a local Ray instance (real ray).

The same seed gives the same report as the process executor, and an env that kills its process
costs one episode each time, as a dead worker process does. Ray starts once for the module (four
CPUs: the module's two actors and a scan's two); scans are small so the module stays in the default run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from envaudit.execution.ray_exec import RayExecutor, start_ray
from envaudit.rollout import RandomPolicy, Runner
from tests.fixtures import crash_envs
from tests.fixtures.crash_envs import BREAK_AT, TRIGGER, CleanWalk

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    started = start_ray(None, num_cpus=4)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def actors(local_ray):
    executor = RayExecutor(2, memory_cap_bytes=None)
    yield executor
    executor.close()


def _strip_timings(report: dict) -> dict:
    report = {k: v for k, v in report.items() if k not in ("created", "seconds")}
    report["config"] = {k: v for k, v in report["config"].items() if k != "out"}  # where, not what
    report["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report.get("probes", [])]
    return report


def _scan(tmp_path, target: str, executor: str, *extra: str) -> tuple[int, dict]:
    from envaudit.cli import main

    out = tmp_path / f"{executor}-{target.rsplit(':', 1)[-1].replace('/', '-')}"
    rc = main(["scan", target, "--executor", executor, "--workers", "2", "--out", str(out), "--no-progress", *extra])
    return rc, json.loads((out / "report.json").read_text())


def test_a_run_on_actors_gives_the_records_of_a_run_in_process(actors):
    # 44 episodes on 2 actors: batches of 5, so the order is put back across batches and actors.
    seeds = [7] * 4 + list(range(40))
    results = [Runner(CleanWalk, ids=iter(range(100, 200)), executor=executor).run(
        RandomPolicy(), seeds, rng=np.random.default_rng(5), tags={"probe": "t"}) for executor in (None, actors)]
    inline, on_ray = (r.records for r in results)
    assert actors._batch_size(len(seeds)) > 1
    assert inline.episodes.equals(on_ray.episodes) and inline.steps.equals(on_ray.steps)
    assert on_ray.episodes["episode_id"].tolist() == list(range(100, 100 + len(seeds)))


def test_a_segfault_costs_its_episode_and_the_others_are_played_again(actors):
    seeds = list(range(24))
    clean = Runner(CleanWalk).run(RandomPolicy(), seeds, rng=np.random.default_rng(0)).records.steps
    # The episodes the walk's design kills: those opening with TRIGGER twice that reach BREAK_AT.
    triggered = [i for i, (_, ep) in enumerate(clean.groupby("episode_id", sort=True))
                 if ep["action"].tolist()[:2] == [TRIGGER] * 2 and len(ep) > BREAK_AT]
    assert triggered, "the seeds must include trigger openings for this test to mean anything"
    started = actors.started
    result = Runner(crash_envs.SegfaultWalk, executor=actors, spec="tests.fixtures.crash_envs:SegfaultWalk",
                    step_timeout_s=20.0).run(RandomPolicy(), seeds, rng=np.random.default_rng(0))
    assert [seeds.index(p.seed) for p in result.problems] == triggered
    assert all(p.kind == "crash" and p.where == "step" and p.step == BREAK_AT and "SIGSEGV" in p.message
               for p in result.problems)
    # Every other episode is recorded as it was played in process, batch-mates of a crash included.
    assert len(result.records.episodes) == len(seeds) - len(triggered) and not result.stopped_early
    assert actors.started - started >= len(triggered) - 1  # a fresh actor after each death (but the last)


def test_a_hang_stops_the_run_at_the_same_episode_as_in_process(actors):
    from tests.fixtures.broken_envs import SleepsForever

    runner = Runner(SleepsForever, ids=iter(range(50)), executor=actors, step_timeout_s=0.5)
    result = runner.run(RandomPolicy(), range(6), rng=np.random.default_rng(1))
    assert runner.dead and result.hung and result.stopped_early and result.records.episodes.empty
    assert [(p.kind, p.where, p.seed) for p in result.problems] == [("hang", "step", 0)]


class HoldsTheGil(CleanWalk):
    """Its first step runs a regular expression that backtracks for minutes without releasing the
    GIL: the actor's own watchdog thread never runs, so only the driver can end the call."""

    def step(self, action):
        import re

        re.match(r"(a+)+$", "a" * 40 + "b")
        return super().step(action)


def test_a_call_that_holds_the_gil_is_killed_by_the_driver_as_a_hang(actors):
    runner = Runner(HoldsTheGil, ids=iter(range(50)), executor=actors, step_timeout_s=0.5)
    result = runner.run(RandomPolicy(), range(4), rng=np.random.default_rng(1))
    assert runner.dead and result.hung and result.stopped_early
    assert [(p.kind, p.where, p.seed, p.step) for p in result.problems] == [("hang", "step", 0, 0)]


def test_ray_and_processes_write_the_same_report(local_ray, tmp_path):
    args = ("--quick", "--episodes", "64", "--probes", "exploits", "--seed", "3")
    target = "envaudit/FlakySearch-AnswerAll-v0"
    reports = [_scan(tmp_path, target, executor, *args)[1] for executor in ("processes", "ray")]
    # Not two empty reports: by design (envs/registry.py) the lenient grader pays answer_all as
    # much as success, which the exploits probe catches at fail.
    assert any(f["severity"] == "fail" and f["probe"] == "exploits" for f in reports[0]["findings"])
    assert _strip_timings(reports[0]) == _strip_timings(reports[1])


def test_a_segfaulting_env_under_ray_is_an_env_error_and_the_report_is_complete(local_ray, tmp_path):
    rc, report = _scan(tmp_path, "tests.fixtures.crash_envs:SegfaultWalk", "ray", "--episodes", "32",
                       "--group-size", "4", "--probes", "", "--step-timeout", "60")
    lost = [f for f in report["findings"] if f["code"] == "env-error" and f["probe"] == "scan"]
    assert len(lost) == 1
    cases = lost[0]["evidence"]["cases"]
    assert cases and all(c["call"] == "step" and c["step"] == BREAK_AT for c in cases)
    assert report["incomplete"] == [] and not report.get("broken")
    assert rc == 1  # the env-error finding is a fail; the audit itself completed (not 3, not 4)
    assert ray.is_initialized()  # the scan joined this process's Ray instance and left it up


def test_ray_address_without_the_ray_executor_is_a_usage_error(capsys):
    from envaudit.cli import main

    assert main(["scan", "envaudit/FlakySearch-v0", "--ray-address", "auto", "--no-progress"]) == 2
    assert "add --executor ray" in capsys.readouterr().err


def test_actors_on_another_node_play_one_episode_per_call_and_a_death_names_its_episode(local_ray):
    # The driver takes itself for another node: the actors' files are out of its reach, as on a
    # cluster, so batches are single episodes and a death is told by Ray alone.
    import glob
    import os
    import tempfile

    seeds = list(range(16))
    pattern = os.path.join(tempfile.gettempdir(), "envaudit-ray-*")
    before = set(glob.glob(pattern))
    executor = RayExecutor(2)
    executor._one_node, executor._node = False, "a node that is not the actors'"
    try:
        result = Runner(crash_envs.SegfaultWalk, executor=executor, spec="tests.fixtures.crash_envs:SegfaultWalk",
                        step_timeout_s=20.0).run(RandomPolicy(), seeds, rng=np.random.default_rng(0))
        assert all(a is None or a.local is not True for a in executor._actors)  # None: not started yet
    finally:
        executor.close()
        for path in set(glob.glob(pattern)) - before:  # a dead actor's files stay on its node
            os.remove(path)
    inline = Runner(crash_envs.CleanWalk).run(RandomPolicy(), seeds, rng=np.random.default_rng(0)).records.steps
    triggered = [i for i, (_, ep) in enumerate(inline.groupby("episode_id", sort=True))
                 if ep["action"].tolist()[:2] == [TRIGGER] * 2 and len(ep) > BREAK_AT]
    assert triggered and [seeds.index(p.seed) for p in result.problems] == triggered
    assert all(p.kind == "crash" and "on another node died" in p.message for p in result.problems)
    assert len(result.records.episodes) == len(seeds) - len(triggered)
