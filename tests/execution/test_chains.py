"""Runs in chains (consecutive episodes on one fresh instance, the chains over the workers) and the
payloads a wrapper hands back from whatever worker played: the replay probe's same-instance
replays fan out this way."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from envaudit.execution import InlineExecutor, ProcessExecutor, ThreadExecutor
from envaudit.rollout import RandomPolicy, Runner, payload_of
from tests.fixtures.crash_envs import CleanWalk
from tests.fixtures.told import Told

SEEDS = [3, 3, 3, 4, 4, 4, 5, 5, 6]
CHAINS = [2, 1, 2, 1, 3]


def test_each_chain_plays_in_order_on_one_fresh_instance_on_every_executor():
    outs = []
    for executor in (InlineExecutor(), ThreadExecutor(3), ProcessExecutor(2)):
        try:
            result = Runner(CleanWalk, ids=iter(range(40, 99)), executor=executor).run(
                RandomPolicy(), SEEDS, rng=np.random.default_rng(2), wrappers=[Told], chains=CHAINS, tags={"probe": "t"})
        finally:
            executor.close()
        told = [result.payloads[i] for i in range(len(SEEDS))]
        # Within a chain: one instance, its episodes in order (1, 2, ...); across chains: fresh ones.
        assert [t[1] for t in told] == [1, 2, 1, 1, 2, 1, 1, 2, 3]
        instance = [t[0] for t in told]
        assert instance[0] == instance[1] and instance[3] == instance[4] and instance[6] == instance[7] == instance[8]
        assert len({instance[0], instance[2], instance[3], instance[5], instance[6]}) == 5
        # Each payload is its own episode's (its steps), whatever worker played it.
        assert [t[2] for t in told] == result.records.episodes["length"].tolist()
        assert result.episode_ids == list(range(40, 49)) and result.finished == len(SEEDS)
        outs.append(result.records)
    for other in outs[1:]:  # the same records on every executor and any number of workers
        assert outs[0].episodes.equals(other.episodes) and outs[0].steps.equals(other.steps)


def test_without_chains_a_worker_keeps_its_instance_and_payloads_still_come_back():
    result = Runner(CleanWalk, executor=InlineExecutor()).run(RandomPolicy(), [1, 2, 3],
                                                             rng=np.random.default_rng(0), wrappers=[Told])
    assert [result.payloads[i][1] for i in range(3)] == [1, 2, 3]  # one instance, reused
    plain = Runner(CleanWalk).run(RandomPolicy(), [1, 2], rng=np.random.default_rng(0))
    assert plain.payloads == {} and plain.finished == 2 and len(plain.episode_ids) == 2


def test_chains_must_cover_the_seeds():
    runner = Runner(CleanWalk)
    for bad in ([2, 2], [3, 0], [4]):
        with pytest.raises(AssertionError, match="chains must be positive lengths summing to the 3 seeds"):
            runner.run(RandomPolicy(), [1, 2, 3], rng=np.random.default_rng(0), chains=bad)


def test_a_hang_in_a_chain_stops_the_run_at_that_episode():
    from tests.fixtures.broken_envs import BREAK_AT, SleepsForever

    runner = Runner(SleepsForever, ids=iter(range(10)), step_timeout_s=0.3)
    result = runner.run(RandomPolicy(), [0, 0, 1], rng=np.random.default_rng(1), chains=[2, 1], wrappers=[Told])
    assert result.hung and result.stopped_early and result.finished == 0
    assert [(p.kind, p.seed) for p in result.problems] == [("hang", 0)]
    assert result.payloads == {0: (result.payloads[0][0], 1, BREAK_AT + 1)}  # the hung episode's own, to its step


def test_payload_of_reads_the_first_wrapper_that_has_one():
    import gymnasium as gym

    env = Told(gym.wrappers.TimeLimit(Told(CleanWalk()), 5))
    env.reset(seed=0)
    assert payload_of(env)[0] == env.me and payload_of(CleanWalk()) is None
    lock = threading.Lock()  # any object without the method: walked past, not called
    assert payload_of(lock) is None


def test_an_episode_s_own_tags_override_the_run_s_of_the_same_name():
    result = Runner(CleanWalk).run(RandomPolicy(), [1, 2], rng=np.random.default_rng(0),
                                   tags={"probe": "t", "policy": "run", "arm": "a"},
                                   episode_tags=[{"policy": "first", "at": "end"}, {"at": "start"}])
    eps = result.records.episodes
    assert eps["policy"].tolist() == ["first", "run"] and eps["arm"].tolist() == ["a", "a"]
    assert eps["at"].tolist() == ["end", "start"]


def test_a_chain_whose_worker_dies_is_one_problem_and_the_run_goes_on():
    from envaudit.policies import ByIndex
    from envaudit.rollout import SequencePolicy
    from tests.fixtures.crash_envs import BREAK_AT, TRIGGER, SegfaultWalk

    dies, lives = SequencePolicy([TRIGGER] * 8, name="dies"), SequencePolicy([0, 1] * 8, name="lives")
    executor = ProcessExecutor(2)
    try:
        result = Runner(SegfaultWalk, ids=iter(range(10)), executor=executor, step_timeout_s=20.0,
                        spec="tests.fixtures.crash_envs:SegfaultWalk").run(
            ByIndex([lives, dies, lives, lives]), [0, 0, 1, 2], rng=np.random.default_rng(0), wrappers=[Told],
            chains=[2, 1, 1])
    finally:
        executor.close()
    [problem] = result.problems
    assert (problem.kind, problem.where, problem.step, problem.seed) == ("crash", "step", BREAK_AT, 0)
    # The dead chain's two episodes left no rows and no payload; the other chains played whole.
    assert sorted(result.payloads) == [2, 3] and result.records.episodes["seed"].tolist() == [1, 2]
    assert not result.stopped_early and result.finished == 4
