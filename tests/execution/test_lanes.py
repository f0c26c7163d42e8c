"""Lockstep lanes (``envaudit.execution.lanes``) under the GRPO collector and trainer: the same
result with any executor and number of workers, a dying env costs its episode only, a hang ends
the collection within its deadline."""

import time

import numpy as np
import pandas as pd
import pytest

from envaudit.execution import AsyncioExecutor, ProcessExecutor, ThreadExecutor
from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.engine import ActionSample
from envaudit.grpo.rollouts import LockstepCollector
from envaudit.grpo.trainer import train
from tests.fixtures.crash_envs import BREAK_AT, LIMIT, TRIGGER, ExitWalk
from tests.fixtures.lane_envs import REPLY_S, SLEEP_S, AsyncCheckSubmit, Sleepy
from tests.grpo.envs import CheckSubmit

STAY = 1


class Rows:
    """A PolicyEngine stub: row ``row`` plays ``TRIGGER`` while all four lanes are live, every
    other row (and every row after that) stays."""

    def __init__(self, row: int) -> None:
        self.row = row

    def sample(self, observations, step_fractions, rng, *, greedy=False):
        n = len(observations)
        actions = np.full(n, STAY)
        if self.row < n == 4:
            actions[self.row] = TRIGGER
        return ActionSample(actions, np.zeros(n), [np.zeros(1)] * n)

    def update(self, trajectories):
        return {}


@pytest.fixture
def executors():
    made = []

    def make(kind, workers):
        ex = {"threads": ThreadExecutor, "processes": ProcessExecutor, "asyncio": AsyncioExecutor}[kind](workers)
        made.append(ex)
        return ex
    yield make
    for ex in made:
        ex.close()


def comparable(curves: pd.DataFrame) -> pd.DataFrame:
    return curves.drop(columns=[c for c in curves if "time" in c])


def test_grpo_training_is_the_same_on_any_executor_and_number_of_workers(executors):
    config = GRPOConfig(group_size=4, groups_per_iteration=3, iterations=3, pipeline="drop", seed=3)
    base = train(CheckSubmit, config)
    assert base.env_steps > 0 and len(base.curves) == 3
    for kind, workers in [("threads", 1), ("threads", 4), ("processes", 4), ("asyncio", 12)]:
        other = train(CheckSubmit, config, executor=executors(kind, workers))
        pd.testing.assert_frame_equal(comparable(base.curves), comparable(other.curves), obj=f"{kind} x {workers}")
        pd.testing.assert_frame_equal(base.episodes, other.episodes, obj=f"{kind} x {workers}")
        assert other.env_steps == base.env_steps


def test_a_lane_whose_env_kills_its_worker_costs_its_episode_only(executors):
    results = []
    for workers in (1, 2):
        collector = LockstepCollector(ExitWalk, 4, ids=iter(range(100, 200)), executor=executors("processes", workers))
        try:
            results.append(collector.collect(Rows(1), [5, 6, 7, 8], np.random.default_rng(0)))
        finally:
            collector.close()
    for out in results:
        episodes = out.records.episodes
        # Lane 1 plays the trigger opening and dies at BREAK_AT; the lanes that shared its worker
        # are replayed on a fresh one and end as if nothing happened (truncated at LIMIT).
        assert sorted(episodes["seed"]) == [5, 7, 8] and set(episodes["length"]) == {LIMIT}
        [problem] = out.problems
        assert problem.kind == "crash" and problem.where == "step" and problem.step == BREAK_AT
        assert problem.seed == 6 and problem.episode_id == 101 and "exited with code" in problem.message
        assert out.stopped is None and out.env_steps == 3 * LIMIT + BREAK_AT
    pd.testing.assert_frame_equal(results[0].records.episodes, results[1].records.episodes)
    pd.testing.assert_frame_equal(results[0].records.steps, results[1].records.steps)


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_a_hanging_lane_stops_collecting_within_its_deadline(executors, kind):
    executor = executors(kind, 2)
    if kind == "processes":
        executor.warm()  # the fork server's imports are no part of the deadline
    collector = LockstepCollector(Sleepy, 4, step_timeout_s=0.1, executor=executor)
    try:
        start = time.monotonic()
        out = collector.collect(Rows(9), [0, 1, 2, 3], np.random.default_rng(0))
        took = time.monotonic() - start
    finally:
        collector.close()
    assert out.stopped == "hang" and out.problems[0].kind == "hang" and collector.dead
    assert took < SLEEP_S - 1.0  # a deadline and the kill's grace, not the sleep


def test_an_async_env_is_awaited_on_the_event_loop_many_episodes_at_once(executors):
    from envaudit.rollout import RandomPolicy, Runner

    seeds = list(range(32))
    inline = Runner(AsyncCheckSubmit).run(RandomPolicy(), seeds[:4], rng=np.random.default_rng(1))
    start = time.monotonic()
    many = Runner(AsyncCheckSubmit, executor=executors("asyncio", 32)).run(RandomPolicy(), seeds,
                                                                           rng=np.random.default_rng(1))
    took = time.monotonic() - start
    # 32 episodes of up to 6 steps at REPLY_S: 9.6 s one at a time, one episode's length at once.
    assert len(many.records.episodes) == 32 and not many.problems
    assert took < 32 * 6 * REPLY_S / 4
    pd.testing.assert_frame_equal(inline.records.episodes, many.records.episodes.head(4))


# -- through a scan: the probe worker's lanes on the scan's episode pool --------------------------
def _small_grpo(ctx):
    """A probe that trains a short GRPO run on the scan's executor, as the grpo probe does."""
    config = GRPOConfig(group_size=4, groups_per_iteration=2, iterations=2, seed=ctx.config.seed, max_steps=8)
    result = train(ctx.make_env, config, ids=ctx.ids, executor=ctx.executor)
    ctx.notes["returns"] = result.curves["return"].round(6).tolist()
    ctx.notes["env_steps"] = result.env_steps
    ctx.notes["pid"] = __import__("os").getpid()
    return []


def test_a_probe_worker_steps_its_grpo_envs_on_the_scans_workers(monkeypatch):
    import os

    import envaudit.scan as scan_module
    from envaudit import Probe, ScanConfig
    from envaudit.execution import ExecutionConfig
    from envaudit.scan import run_scan

    probe = Probe(name="small-grpo", run=_small_grpo, summary="a short GRPO run", preload=("envaudit.grpo.torch_engine",))
    monkeypatch.setattr(scan_module, "probe_names", lambda: ["small-grpo"])
    monkeypatch.setattr(scan_module, "registered_probes",
                        lambda names=None: {"small-grpo": probe} if names is None or "small-grpo" in names else {})
    config = ScanConfig(seed=2, quick=True, episodes=16, probes=("small-grpo",))
    notes = {}
    for kind, workers in (("threads", 1), ("processes", 3)):
        report = run_scan("envaudit/FlakySearch-v0", config, execution=ExecutionConfig(kind, workers=workers))
        [status] = [p for p in report.probes if p.name == "small-grpo"]
        assert status.status == "ok", status.error
        notes[kind] = status.notes
    assert notes["processes"]["pid"] != os.getpid()  # the probe ran in a probe worker
    assert notes["threads"]["returns"] == notes["processes"]["returns"] and len(notes["threads"]["returns"]) == 2
    assert notes["threads"]["env_steps"] == notes["processes"]["env_steps"] > 0


def _report(tmp_path, executor: str, workers: int) -> dict:
    import json

    from envaudit.cli import main

    out = tmp_path / f"{executor}{workers}"
    main(["scan", "envaudit/FlakySearch-v0", "--quick", "--probes", "grpo", "--seed", "1", "--executor", executor,
          "--workers", str(workers), "--out", str(out), "--no-progress", "--fail-on", "never"])
    report = json.loads((out / "report.json").read_text())
    for key in ("created", "seconds"):
        report.pop(key, None)
    report["config"] = {k: v for k, v in report["config"].items() if k not in ("out", "executor", "workers")}
    report["probes"] = [{k: v for k, v in p.items() if k != "seconds"} for p in report["probes"]]
    curves = pd.read_parquet(next(out.glob("*grpo_curves*.parquet"))) if list(out.glob("*grpo_curves*.parquet")) else None
    return {"report": report, "curves": curves}


@pytest.mark.slow
def test_the_grpo_probe_gives_the_same_curves_and_findings_with_1_and_4_workers(tmp_path):
    base = _report(tmp_path, "threads", 1)
    assert base["curves"] is not None and len(base["curves"])
    for executor, workers in (("threads", 4), ("processes", 1), ("processes", 4)):
        other = _report(tmp_path, executor, workers)
        assert other["report"] == base["report"], f"{executor} x {workers}"
        pd.testing.assert_frame_equal(other["curves"].drop(columns=[c for c in other["curves"] if "time" in c]),
                                      base["curves"].drop(columns=[c for c in base["curves"] if "time" in c]))


def test_grpo_rollouts_of_an_async_env_are_awaited_on_the_loop_with_the_same_result(executors):
    config = GRPOConfig(group_size=4, groups_per_iteration=2, iterations=2, pipeline="drop", seed=5)
    inline = train(AsyncCheckSubmit, config)
    start = time.monotonic()
    many = train(AsyncCheckSubmit, config, executor=executors("asyncio", 8))
    took = time.monotonic() - start
    pd.testing.assert_frame_equal(comparable(inline.curves), comparable(many.curves))
    pd.testing.assert_frame_equal(inline.episodes, many.episodes)
    # Every turn's 8 replies are awaited at once: about one reply per turn, not one per rollout.
    turns = many.env_steps / 8
    assert took < 4 * turns * REPLY_S + 2.0
