"""DeadlineWorker: values and exceptions come back, a stuck call is abandoned on time."""

from __future__ import annotations

import signal
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


# -- time spent waiting for a CPU is not the call's time ----------------------------------------
class _Clock:
    """Stands in for the kernel's per-thread run-delay counters: the threads named in
    ``starved`` are reported as runnable-but-waiting for their whole wall time since the test
    began (as on a machine whose cores other processes hold), every other thread as never
    waiting."""

    def __init__(self, starved_names: set[str]) -> None:
        self.t0 = time.monotonic()
        self.starved_names = starved_names

    def delay(self, tid: int) -> float:
        name = next((t.name for t in threading.enumerate() if t.native_id == tid), "")
        return time.monotonic() - self.t0 if name in self.starved_names else 0.0


@pytest.fixture
def starve(monkeypatch):
    from envaudit import deadline

    def install(*names: str) -> None:
        clock = _Clock(set(names))
        # read by a deadline thread about itself, at the start of each call
        monkeypatch.setattr(deadline, "_read_delay_s", lambda fd: clock.delay(threading.get_native_id()))
        monkeypatch.setattr(deadline, "_run_delay_s", clock.delay)
        monkeypatch.setattr(deadline, "_SCHEDSTAT", True)

    return install


def test_a_call_slowed_only_by_waiting_for_a_cpu_is_not_a_hang(starve):
    starve("test-starved")
    w = DeadlineWorker("test-starved")
    try:
        # 0.3 s of wall time against a 0.1 s deadline, all of it spent waiting for a CPU
        assert w.call(lambda: time.sleep(0.3) or "done", 0.1) == "done"
    finally:
        w.close()


def test_a_call_that_had_the_cpu_and_overran_is_abandoned_on_time(starve):
    starve()  # nobody waits for a CPU: the whole wall time was the call's own
    w = DeadlineWorker("test-own-time")
    release = threading.Event()
    try:
        with pytest.raises(DeadlineExceeded):
            w.call(lambda: release.wait(10.0), 0.1)
    finally:
        release.set()
        w.close()


def test_a_starved_call_is_still_abandoned_after_max_stretch_deadlines(starve):
    from envaudit.deadline import MAX_STRETCH

    starve("test-stretch")
    w = DeadlineWorker("test-stretch")
    release = threading.Event()
    try:
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            w.call(lambda: release.wait(30.0), 0.05)
        assert time.monotonic() - start >= MAX_STRETCH * 0.05 * 0.99  # it waited the stretch, not 30 s
    finally:
        release.set()
        w.close()


def test_a_nested_call_waiting_for_a_cpu_does_not_count_against_the_outer_call(starve):
    """A step whose tool call sat waiting for a CPU: the step is not a hang either."""
    starve("test-inner")
    outer, inner = DeadlineWorker("test-outer"), DeadlineWorker("test-inner")
    try:
        step = lambda: inner.call(lambda: time.sleep(0.3) or "tool ok", 1.0)  # noqa: E731
        assert outer.call(step, 0.1) == "tool ok"
    finally:
        outer.close()
        inner.close()


def test_a_watched_call_is_over_only_past_its_deadline_less_the_time_its_process_waited(monkeypatch):
    """The pool's and the Ray watchdog's backstop: deadline 1 s, grace 0.25 s, call started at 100."""
    from envaudit import deadline

    waited = {"s": 10.0}
    monkeypatch.setattr(deadline, "process_run_delay_s", lambda pid=None: waited["s"])
    watch = deadline.CallWatch()
    assert not watch.over("w", 1, 100.0, 1.0, 0.25, 100.1)  # first sight: waiting so far is the base
    assert watch.over("w", 1, 100.0, 1.0, 0.25, 101.3)  # 1.3 s of its own time: over
    waited["s"] = 11.0  # it waited a second for a CPU meanwhile
    assert not watch.over("w", 1, 100.0, 1.0, 0.25, 101.3)
    assert watch.over("w", 1, 100.0, 1.0, 0.25, 102.3)
    waited["s"] = 100.0  # starved throughout, but past MAX_STRETCH deadlines it is over anyway
    assert not watch.over("w", 1, 100.0, 1.0, 0.25, 100.0 + deadline.MAX_STRETCH)
    assert watch.over("w", 1, 100.0, 1.0, 0.25, 100.0 + deadline.MAX_STRETCH + 0.3)
    assert not watch.over("w", 1, 200.0, 1.0, 0.25, 200.5)  # a new call: a new base


def test_process_run_delay_is_reported_for_a_live_process():
    import os

    from envaudit.deadline import process_run_delay_s

    assert process_run_delay_s(os.getpid()) is not None or not os.path.exists("/proc/self/task")


# -- a whole item on the worker thread, each marked call under its own deadline -----------------
def test_a_watched_item_runs_in_one_handoff_and_gives_back_its_value_or_error(worker):
    def item():
        assert worker.watching()
        with worker.marked(1.0, "step()", "step", 0):
            inside = threading.get_ident()
        with worker.marked(1.0, "step()", "step", 1):
            pass
        return inside

    assert worker.watch(item, 1.0) not in (threading.get_ident(), None)
    assert not worker.watching()  # the caller's thread is not the item's

    def broken():
        with worker.marked(1.0, "reset()", "reset"):
            raise ValueError("reset failed")

    with pytest.raises(ValueError, match="reset failed"):
        worker.watch(broken, 1.0)
    assert worker.watch(lambda: "still usable", 1.0) == "still usable"


def test_a_marked_call_that_overruns_is_abandoned_on_time_and_the_item_stops_there():
    worker = DeadlineWorker("test-watch-stuck")
    release, after = threading.Event(), []

    def item():
        with worker.marked(1.0, "step()", "step", 0):
            pass
        time.sleep(0.2)  # between calls (the policy acting): no deadline runs
        with worker.marked(0.05, "step()", "step", 1):
            release.wait(10.0)
        after.append("went on")  # never: an abandoned item stops when its call returns

    try:
        start = time.perf_counter()
        with pytest.raises(DeadlineExceeded, match=r"step\(\) did not return within 0\.05 s") as info:
            worker.watch(item, 0.05)  # polled as often as the shortest deadline
        assert 0.2 <= time.perf_counter() - start < 1.0
        assert (info.value.call, info.value.step) == ("step", 1)
        assert worker.watch(lambda: 7, 1.0) == 7  # a fresh thread serves the next item
    finally:
        release.set()
    time.sleep(0.2)
    assert after == []
    worker.close()


def test_a_marked_call_slowed_only_by_waiting_for_a_cpu_is_not_a_hang(starve):
    starve("test-watch-starved")
    w = DeadlineWorker("test-watch-starved")

    def item():
        with w.marked(0.1, "step()", "step", 0):
            time.sleep(0.3)  # 0.3 s of wall time, all of it waiting for a CPU
        return "done"

    try:
        assert w.watch(item, 0.1) == "done"
    finally:
        w.close()


def test_a_call_nested_in_a_marked_call_runs_on_its_own_thread_under_its_own_deadline():
    outer, inner = DeadlineWorker("test-watch-outer"), DeadlineWorker("test-watch-inner")
    release = threading.Event()

    def item():
        with outer.marked(5.0, "step()", "step", 0):
            with pytest.raises(DeadlineExceeded):  # a real tool's timeout inside the step
                inner.call(lambda: release.wait(10.0), 0.05, what="tool 'x'")
            return "step went on"

    try:
        assert outer.watch(item, 5.0) == "step went on"
    finally:
        release.set()
        outer.close()
        inner.close()


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize("how", ["call", "watch"])
def test_a_signal_another_thread_took_still_interrupts_the_main_threads_wait_promptly(how):
    """Ctrl-C is handled on the main thread, but the kernel may hand the signal to any thread (the
    one that sent it, say): the main thread, waiting on a call with a long deadline, must still
    run the handler within a slice, not when the deadline ends."""
    assert threading.current_thread() is threading.main_thread()

    def handler(signum, frame):
        raise _Interrupted

    previous = signal.signal(signal.SIGUSR1, handler)
    w, release = DeadlineWorker("test-signal"), threading.Event()

    def stuck():
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # to this thread, not the main one
        release.wait(20.0)

    def item():
        with w.marked(30.0, "step()", "step", 0):
            stuck()

    try:
        start = time.perf_counter()
        with pytest.raises(_Interrupted):
            w.call(stuck, 30.0) if how == "call" else w.watch(item, 30.0)
        assert time.perf_counter() - start < 5.0
    finally:
        release.set()
        signal.signal(signal.SIGUSR1, previous)
        w.close()
