"""The GRPO probe's runs in waves (``training.waves``): a wave's runs read only the waves before it,
so they play side by side on a shared executor and report what they report one after another."""

import itertools
import threading
from types import SimpleNamespace

import pandas as pd
import pytest

from envaudit.execution import ThreadExecutor
from envaudit.probes.grpo.training import Plan, run
from envaudit.probes.grpo.waves import play_wave, side_by_side, strided_ids, waves
from tests.fixtures.context import explore
from tests.grpo.ladder_envs import Booking


def test_natural_runs_first_then_the_success_search_then_the_other_targets():
    plans = [Plan("natural", "natural", 3), Plan("faults", "faults", 3), Plan("target-success", "target", 2, "success"),
             Plan("target-timeout", "target", 2, "timeout"), Plan("target-no_success", "target", 2, "no_success")]
    assert [[p.name for p in w] for w in waves(plans)] == [
        ["natural", "faults"], ["target-success"], ["target-timeout", "target-no_success"]]
    assert [[p.name for p in w] for w in waves([plans[0], plans[3]])] == [["natural"], ["target-timeout"]]
    assert waves([]) == []


def test_strided_ids_never_meet_and_start_at_the_next_id():
    ids = itertools.count(7)
    strides = strided_ids(ids, 3)
    drawn = [[next(s) for _ in range(4)] for s in strides]
    assert drawn == [[7, 10, 13, 16], [8, 11, 14, 17], [9, 12, 15, 18]]
    assert [s.last for s in strides] == [16, 17, 18]
    assert next(ids) == 8  # the caller advances ``ids`` past what the wave used


def _probe_on(executor):
    ctx = explore(Booking, probe="grpo", episodes=32, quick=True, timeout_handling="drop")
    ctx.shared.executor = executor
    findings = run(ctx, only=("natural", "faults", "target-success", "target-timeout", "target-no_success"))
    return ctx, [f.to_dict() for f in findings], next(ctx.ids)


def test_a_waves_runs_side_by_side_report_what_they_report_one_after_another():
    """Booking is a tool env: natural and faults share the first wave, timeout and no_success the
    third; on 4 threads they play at once, inline one after another, with the same curves, targets,
    findings and ids."""
    inline_ctx, inline, inline_next = _probe_on(None)
    threads_ctx, threads, threads_next = _probe_on(ThreadExecutor(4))
    pd.testing.assert_frame_equal(inline_ctx.tables["curves"], threads_ctx.tables["curves"])
    pd.testing.assert_frame_equal(inline_ctx.tables["targets"], threads_ctx.tables["targets"])
    assert inline == threads and inline_next == threads_next
    assert {"natural", "faults", "target-timeout", "target-no_success"} <= set(inline_ctx.notes["runs"])
    kept = pd.concat([r.episodes for r in threads_ctx.kept])
    assert kept["episode_id"].is_unique and threads_next > kept["episode_id"].max()


def _ctx(executor, engine="torch", start=0):
    return SimpleNamespace(executor=executor, config=SimpleNamespace(engine=engine), ids=itertools.count(start))


def test_runs_play_side_by_side_only_on_shared_workers_with_the_torch_policy():
    threads = ThreadExecutor(4)
    assert side_by_side(_ctx(threads), 2) and side_by_side(_ctx(threads), 5)
    assert not side_by_side(_ctx(threads), 1)  # one run plays on the probe's own thread
    assert not side_by_side(_ctx(None), 3)  # inline (and processes, Ray: no shared places)
    assert not side_by_side(_ctx(threads, engine="vllm"), 3)  # one language model for every run


@pytest.mark.parametrize("n", [2, 8])
def test_a_wave_plays_its_runs_at_once_each_with_its_own_ids(n):
    """Every run waits for all the others (a barrier of n): that passes only if they play at once,
    all n of them (more than a default-sized pool of this machine's threads would hold)."""
    barrier = threading.Barrier(n, timeout=10)
    ctx = _ctx(ThreadExecutor(2), start=100)

    def run(k):
        def play(ids):
            barrier.wait()
            return threading.current_thread().name, [next(ids) for _ in range(k + 1)]
        return play

    out = play_wave(ctx, [run(k) for k in range(n)])
    assert all(name.startswith("envaudit-grpo-run") for name, _ in out)
    assert [drawn for _, drawn in out] == [[100 + k + n * j for j in range(k + 1)] for k in range(n)]
    assert next(ctx.ids) == 100 + (n - 1) + n * (n - 1) + 1  # past the highest id handed out


def test_a_wave_played_in_order_runs_on_the_callers_thread_and_an_idle_wave_draws_one_id():
    ctx, order = _ctx(None, start=5), []

    def run(k):
        def play(ids):
            order.append((k, threading.current_thread() is threading.main_thread()))
            return k
        return play

    assert play_wave(ctx, [run(k) for k in range(3)]) == [0, 1, 2]
    assert order == [(0, True), (1, True), (2, True)]
    assert next(ctx.ids) == 6  # no run drew an id: only the first was taken
