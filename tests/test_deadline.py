"""DeadlineWorker: values and exceptions come back, a stuck call is abandoned on time."""

from __future__ import annotations

import threading
import time

import pytest

from envaudit.deadline import DeadlineExceeded, DeadlineWorker


@pytest.fixture
def worker():
    w = DeadlineWorker("test-deadline")
    yield w
    w.close()


def test_returns_values_and_reraises_exceptions(worker):
    assert worker.call(lambda: 42, 1.0) == 42
    marker = ValueError("bad input")

    def boom():
        raise marker

    with pytest.raises(ValueError) as info:
        worker.call(boom, 1.0)
    assert info.value is marker  # the very exception, not a wrapper
    assert worker.call(lambda: "still usable", 1.0) == "still usable"


def test_stuck_call_is_abandoned_within_deadline_and_worker_stays_usable():
    worker = DeadlineWorker("test-stuck")
    release = threading.Event()
    try:
        start = time.perf_counter()
        with pytest.raises(DeadlineExceeded, match=r"tool 'x' did not return within 0\.05 s") as info:
            worker.call(lambda: release.wait(10.0), 0.05, what="tool 'x'")
        assert time.perf_counter() - start < 1.0
        assert info.value.deadline_s == 0.05
        start = time.perf_counter()
        assert worker.call(threading.get_ident, 1.0) != threading.get_ident()
        assert time.perf_counter() - start < 0.5
        # the replacement thread is a new one: the stuck thread is still waiting
        names = [t.name for t in threading.enumerate()].count("test-stuck")
        assert names == 2
    finally:
        release.set()
        worker.close()


def test_deadline_none_runs_inline(worker):
    assert worker.call(threading.get_ident, None) == threading.get_ident()
    assert worker.call(threading.get_ident, 1.0) != threading.get_ident()


def test_threads_are_daemons_and_close_stops_them():
    w = DeadlineWorker("test-close")
    w.call(lambda: None, 1.0)
    threads = [t for t in threading.enumerate() if t.name == "test-close"]
    assert len(threads) == 1 and threads[0].daemon
    w.close()
    threads[0].join(1.0)
    assert not threads[0].is_alive()
    assert w.call(lambda: 7, 1.0) == 7  # a closed worker starts a fresh thread on demand
    w.close()
