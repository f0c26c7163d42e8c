import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from envaudit.testing import FaultSchedule, action_sequences, actions, episodes, fault_schedules
from tests.testing.toy_envs import FetchTask, PingTool

SPACES = [
    gym.spaces.Discrete(5, start=2),
    gym.spaces.MultiBinary(3),
    gym.spaces.MultiDiscrete([2, 5, 3]),
    gym.spaces.Box(-1.0, 2.0, shape=(2, 2), dtype=np.float32),
    gym.spaces.Box(low=np.array([0.0, -np.inf]), high=np.array([1.0, np.inf]), dtype=np.float64),
    gym.spaces.Box(0, 9, shape=(3,), dtype=np.int64),
    gym.spaces.Text(max_length=4, min_length=1),
    gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, shape=(1,), dtype=np.float32))),
    gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.MultiBinary(2)}),
    gym.spaces.Sequence(gym.spaces.Discrete(2)),  # no native strategy: falls back to seeded sample()
]
FAST = settings(max_examples=25, deadline=None, database=None)


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_actions_are_in_the_space(space):
    @FAST
    @given(actions(space))
    def check(action):
        assert space.contains(action), action

    check()


def test_actions_shrink_to_the_lowest_and_accept_envs():
    assert find(actions(gym.spaces.Discrete(5, start=2)), lambda a: True) == 2
    assert find(actions(PingTool()), lambda a: True) == 0
    with pytest.raises(InvalidArgument, match="needs a gymnasium.spaces.Space or an env, got int"):
        actions(3)


def test_action_sequences_shrink_toward_short_simple_prefixes():
    assert find(action_sequences(FetchTask), lambda seq: len(seq) >= 2) == [0, 0]
    assert find(action_sequences(FetchTask), lambda seq: 2 in seq) == [2]

    @FAST
    @given(action_sequences(FetchTask, min_size=1))
    def bounded(seq):
        assert 1 <= len(seq) <= 6  # FetchTask's max_steps is the default max_size

    bounded()
    with pytest.raises(InvalidArgument, match="max_size=1 is below min_size=2"):
        action_sequences(FetchTask, min_size=2, max_size=1)


def test_fault_schedules_shrink_to_no_faults_then_to_early_ones():
    assert find(fault_schedules(), lambda s: True) == FaultSchedule()
    assert find(fault_schedules(), lambda s: "timeout" in dict(s.faults).values()) == FaultSchedule({0: "timeout"})


@pytest.mark.parametrize("max_rate,max_calls", [(0.25, 8), (1.0, 3), (0.0, 10)])
def test_fault_schedules_respect_the_rate_and_kinds(max_rate, max_calls):
    @FAST
    @given(fault_schedules(["search"], max_rate=max_rate, max_calls=max_calls, kinds=["timeout"]))
    def check(schedule):
        faults = dict(schedule.faults)
        assert len(faults) <= math.ceil(max_rate * max_calls)
        assert all(0 <= k < max_calls for k in faults) and set(faults.values()) <= {"timeout"}
        assert schedule.tools == {"search"}

    check()


@pytest.mark.parametrize("kwargs,message", [
    ({"max_rate": 2}, "max_rate must be a fraction of tool calls in \\[0, 1\\], got 2"),
    ({"kinds": ["crash"]}, "kinds must be a non-empty list of 'error' and/or 'timeout'"),
    ({"tools": "search"}, "tools must be a list of tool names"),
    ({"tools": FetchTask()}, "not an envaudit.ToolEnv"),
    ({"max_calls": -1}, "max_calls must be an int >= 0"),
])
def test_fault_schedules_name_bad_arguments(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        fault_schedules(**kwargs)


def test_episodes_are_recorded_finished_and_faulted_only_where_possible():
    @FAST
    @given(episodes(PingTool, faults=True))
    def tool_env(episode):
        assert episode.finished and episode.length <= 5  # finish=True plays to PingTool's step limit
        injected = {s.call for s in episode.steps if s.injected}
        assert injected <= {k for k, _ in episode.faults.faults} if episode.faults else not injected
        assert episode.records.episodes["return"].iloc[0] == pytest.approx(episode.episode_return)

    @FAST
    @given(episodes(FetchTask, faults=True, seeds=[4, 5]))
    def plain_env(episode):
        assert episode.faults is None and episode.seed in (4, 5)

    tool_env()
    plain_env()


def test_episodes_take_fixed_values_or_strategies():
    @FAST
    @given(episodes(PingTool, actions=["ping", "done"], faults={0: "error"}, seeds=st.just(1), finish=False))
    def fixed(episode):
        assert episode.seed == 1 and episode.statuses == ["error", "ok"]
        assert episode.outcome == "failure"  # one ping was lost, and PingTool needs 1 or 2

    fixed()
    with pytest.raises(InvalidArgument, match="FetchTask is not an envaudit.ToolEnv"):
        find(episodes(FetchTask, faults={0: "error"}), lambda e: True)
    with pytest.raises(InvalidArgument, match="seeds must be an int, a non-empty list of ints or a strategy"):
        episodes(PingTool, seeds="zero")
