"""A probe that plays beside the others (``Probe.beside``, ``envaudit.scan``): at the same time as
them where the executor's workers are shared (threads, asyncio), in its place elsewhere, with the
same report either way: its own id block, exploration's hangs only."""

import threading
import time

import numpy as np
import pytest

import envaudit.scan as scan_module
from envaudit import Finding, Probe, ScanConfig
from envaudit.cost import STEPS_CAP_REASON
from envaudit.coverage import ReturnTally
from envaudit.execution import ExecutionConfig, InlineExecutor, ProcessExecutor, ThreadExecutor
from envaudit.execution.aio import AsyncioExecutor
from envaudit.rollout import RandomPolicy
from envaudit.scan import BESIDE_IDS, _plays_beside, run_scan
from tests.fixtures.user_envs import CoinEnv


def _with_probes(monkeypatch, *probes):
    registry = {p.name: p for p in probes}
    monkeypatch.setattr(scan_module, "probe_names", lambda: sorted(registry))
    monkeypatch.setattr(scan_module, "registered_probes",
                        lambda names=None: {n: p for n, p in registry.items() if names is None or n in names})


def _players(started: threading.Event):
    """An ordered probe that waits (2 s at most) for the beside probe to have started, and a beside
    probe that says it started; each plays a run and reports the ids it got."""

    def first(ctx):
        met = started.wait(2.0)
        ids = ctx.run(RandomPolicy(), ctx.seeds(4, "a")).episode_ids
        return [Finding(code="length-bias", severity="info", title=f"met={met}", summary=str(ids))]

    def beside(ctx):
        started.set()
        ids = ctx.run(RandomPolicy(), ctx.seeds(4, "b")).episode_ids
        return [Finding(code="length-bias", severity="info", title="beside", summary=str(ids))]

    return Probe("first", first, "ordered", order=1), Probe("second", beside, "beside", order=2, beside=True)


@pytest.mark.parametrize("executor", ["threads", "inline"])
def test_a_beside_probe_plays_with_the_others_under_threads_and_after_them_inline(monkeypatch, executor):
    started = threading.Event()
    _with_probes(monkeypatch, *_players(started))
    report = run_scan(CoinEnv, ScanConfig(episodes=8, group_size=4), execution=ExecutionConfig(executor, workers=2))
    by_title = {f.probe: f for f in report.findings}
    assert by_title["first"].title == f"met={executor == 'threads'}"  # inline: it ran after the first
    # The ordered probe's ids follow exploration's; the beside probe's come from its own block.
    assert eval(by_title["first"].summary) == [8, 9, 10, 11]
    assert eval(by_title["second"].summary) == [BESIDE_IDS + i for i in range(4)]
    assert [p.name for p in report.probes] == ["first", "second"]
    assert list(report.cost["probes"]) == ["explore", "first", "second"]
    assert report.cost["probes"]["second"]["episodes"] == 4


def test_a_beside_probe_stops_when_the_scan_is_interrupted(monkeypatch):
    state = {}

    def interrupted(ctx):
        state["beside_running"].wait(5.0)
        raise KeyboardInterrupt

    def waits(ctx):
        state["beside_running"].set()
        start = time.monotonic()
        while ctx.time_left() > 0 and time.monotonic() - start < 20:
            time.sleep(0.01)
        state["stopped_after"] = time.monotonic() - start
        return []

    state["beside_running"] = threading.Event()
    _with_probes(monkeypatch, Probe("first", interrupted, "interrupted", order=1),
                 Probe("second", waits, "beside", order=2, beside=True))
    with pytest.raises(KeyboardInterrupt):
        run_scan(CoinEnv, ScanConfig(episodes=8, group_size=4), execution=ExecutionConfig("threads", workers=2))
    assert state["stopped_after"] < 5.0  # the safety cap was pulled in, not waited out


def test_probes_play_beside_only_where_the_workers_are_shared():
    ordered, beside = Probe("a", lambda ctx: [], "a", order=1), Probe("b", lambda ctx: [], "b", order=2, beside=True)
    config = ScanConfig()
    assert _plays_beside([ordered, beside], config, ThreadExecutor(2), None) == {"b"}
    assert _plays_beside([ordered, beside], config, AsyncioExecutor(2), None) == {"b"}
    assert _plays_beside([ordered, beside], config, InlineExecutor(), None) == set()
    assert _plays_beside([ordered, beside], ScanConfig(max_env_steps=1000), ThreadExecutor(2), None) == set()
    assert _plays_beside([beside], config, ThreadExecutor(2), None) == set()
    assert _plays_beside([ordered, ordered], config, ThreadExecutor(2), None) == set()
    pool = ProcessExecutor.__new__(ProcessExecutor)  # its kind alone decides; no workers started
    assert _plays_beside([ordered, beside], config, pool, None) == set()


def test_a_tally_kept_beside_adds_up_with_the_scans():
    import pandas as pd

    def episodes(returns, successes, seeds):
        return pd.DataFrame({"return": returns, "success": successes, "seed": seeds})

    mine, other = ReturnTally(), ReturnTally()
    mine.add(episodes([1.0, 2.0], [True, None], [5, 5]))
    other.add(episodes([-1.0, np.nan, 3.0], [False, True, True], [7, 8, 9]))
    mine.merge(other)
    assert (mine.n, mine.n_success, mine.low, mine.high) == (4, 3, -1.0, 3.0)
    assert len(mine.seeds) >= 2


def test_a_probe_the_unit_cap_skips_is_listed_with_the_reason_and_nothing_else(monkeypatch):
    _with_probes(monkeypatch, *_players(threading.Event()))
    report = run_scan(CoinEnv, ScanConfig(episodes=8, group_size=4, max_env_steps=1))
    statuses = {p.name: p for p in report.probes}
    reason = STEPS_CAP_REASON.format(cap=1)
    for name in ("first", "second"):
        p = statuses[name]
        assert (p.status, p.seconds, p.findings, p.error) == ("skipped", 0.0, 0, reason)
    assert report.incomplete == [{"probe": name, "skipped": "the whole probe", "reason": reason}
                                 for name in ("first", "second")]
    assert not [f for f in report.findings if f.probe in ("first", "second")]


def test_a_failure_of_the_scan_itself_beside_reaches_the_caller(monkeypatch):
    """A probe's own exception is a finding (``_run_probe``); anything that breaks the scan's
    handling of a beside probe is raised where the scan was called, not lost on its thread."""
    _with_probes(monkeypatch, *_players(threading.Event()))
    real = scan_module._run_probe

    def broken(probe, ctx, host=None):
        if probe.beside:
            raise RuntimeError("the scan's own bug")
        return real(probe, ctx, host)

    monkeypatch.setattr(scan_module, "_run_probe", broken)
    with pytest.raises(RuntimeError, match="the scan's own bug"):
        run_scan(CoinEnv, ScanConfig(episodes=8, group_size=4), execution=ExecutionConfig("threads", workers=2))
