"""The workers of an in-process executor shared by runs playing at once (``envaudit.execution.places``):
at most N env calls in flight over all of them, lockstep lanes first, a hung call's place given back."""

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from envaudit.deadline import DeadlineExceeded
from envaudit.execution import ThreadExecutor
from envaudit.execution.lanes import open_lanes
from envaudit.execution.places import Places
from envaudit.execution.slots import Slot
from envaudit.rollout import RandomPolicy, Runner


def _hold(places: Places, urgent: bool, order: list, name: str, hold_s: float = 0.0) -> threading.Thread:
    def body() -> None:
        token = places.take(True) if urgent else places.take()  # a plain take is not urgent
        order.append(name)
        time.sleep(hold_s)
        places.give(token)

    t = threading.Thread(target=body)
    t.start()
    return t


def test_no_more_places_are_taken_than_there_are():
    places = Places(3)
    inside, most, lock = [0], [0], threading.Lock()

    def body() -> None:
        for _ in range(20):
            token = places.take(urgent=bool(np.random.default_rng().integers(2)))
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.001)
            with lock:
                inside[0] -= 1
            places.give(token)

    threads = [threading.Thread(target=body) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 3 and places.free == 3


def test_urgent_takers_go_before_those_waiting_longer():
    places = Places(1)
    first = places.take()
    order: list[str] = []
    normal = _hold(places, False, order, "normal")
    time.sleep(0.05)  # the normal taker waits first
    urgent = _hold(places, True, order, "urgent")
    time.sleep(0.05)
    places.give(first)
    normal.join()
    urgent.join()
    assert order == ["urgent", "normal"]


def test_a_place_given_twice_is_given_once():
    places = Places(2)
    token = places.take()
    places.give(token)
    places.give(token)
    assert places.free == 2
    places.take()
    places.take()
    assert places.free == 0


def test_a_normal_taker_gets_a_place_an_urgent_one_left_free():
    """Two places come free while one urgent taker waits: it takes one, the normal taker the other."""
    places = Places(2)
    a, b = places.take(), places.take()
    order: list[str] = []
    urgent = _hold(places, True, order, "urgent", hold_s=0.5)
    normal = _hold(places, False, order, "normal", hold_s=0.5)
    time.sleep(0.05)
    places.give(a)
    places.give(b)
    time.sleep(0.2)
    assert sorted(order) == ["normal", "urgent"]  # both inside at once
    urgent.join()
    normal.join()


def test_a_hung_call_gives_its_place_back_when_abandoned():
    places = Places(1)
    slot = Slot("test-hang", places=places)
    release = threading.Event()
    with pytest.raises(DeadlineExceeded):
        slot.run(lambda: slot.guard(lambda: release.wait(10), 0.1, "step", 0), 0.1)
    slot.abandon()
    assert places.free == 1
    assert slot.guard(lambda: "next", 1.0, "step", 1) == "next"  # the place is usable again
    release.set()
    time.sleep(0.05)  # the abandoned call returns late: the place is not given twice
    assert places.free == 1
    slot.close()


class _Counted(gym.Env):
    """Five steps; every step records how many steps of any instance are in flight."""

    observation_space = gym.spaces.Box(0, 5, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    inside, most, lock = [0], [0], threading.Lock()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        cls = type(self)
        with cls.lock:
            cls.inside[0] += 1
            cls.most[0] = max(cls.most[0], cls.inside[0])
        time.sleep(0.005)
        with cls.lock:
            cls.inside[0] -= 1
        self.t += 1
        return np.array([self.t], np.float32), 0.0, self.t >= 5, False, {}


def test_two_runs_and_a_lane_set_at_once_share_the_executors_workers():
    """Two runs and lockstep lanes play on one 3-worker executor at the same time: never more than
    3 env steps in flight (without places they would have 9), and every episode plays out."""
    executor = ThreadExecutor(3)
    _Counted.inside[0] = _Counted.most[0] = 0
    results = []

    def run() -> None:
        runner = Runner(_Counted, step_timeout_s=5.0, max_steps=10, executor=executor)
        results.append(runner.run(RandomPolicy(), list(range(12)), rng=np.random.default_rng(0)))

    def lanes() -> None:
        envs: dict[int, gym.Env] = {}

        def fn(slot, shared, lane, request):
            env = envs.setdefault(lane, _Counted())
            return slot.guard(lambda: env.step(0) if request else env.reset(seed=lane), 5.0, "step", 0)

        opened = open_lanes(executor, fn, None, 3, 5.0)
        try:
            opened.turn([(k, False) for k in range(3)])
            for _ in range(5):
                opened.turn([(k, True) for k in range(3)])
        finally:
            opened.close()

    threads = [threading.Thread(target=run), threading.Thread(target=run), threading.Thread(target=lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [len(r.records.episodes) for r in results] == [12, 12]
    assert _Counted.most[0] == 3
    assert executor.places.free == 3
