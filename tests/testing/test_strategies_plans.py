"""action_sequences, fault_schedules, seeds, plans and episodes: sizes, defaults and argument errors."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, NoSuchExample

from envaudit.testing import FaultSchedule, action_sequences, episodes, fault_schedules
from envaudit.testing.strategies import DEFAULT_SEEDS, plans, seeds_strategy
from envaudit.testing.trajectory import EnvSession
from tests.testing.toy_envs import SUBMIT, WAIT, FetchTask, PingTool

FIND = settings(max_examples=100, database=None, deadline=None, derandomize=True)
NEVER = settings(max_examples=40, database=None, deadline=None, derandomize=True)
FAST = settings(max_examples=20, database=None, deadline=None, derandomize=True)


def first(strategy, condition=lambda x: True):
    return find(strategy, condition, settings=FIND)


def never(strategy, condition):
    with pytest.raises(NoSuchExample):
        find(strategy, condition, settings=NEVER)


# -- action sequences ---------------------------------------------------------------------------
def test_sequences_default_to_the_step_limit_or_min_size_when_larger():
    never(action_sequences(FetchTask), lambda s: len(s) > 6)
    assert len(first(action_sequences(FetchTask), lambda s: len(s) == 6)) == 6
    assert first(action_sequences(FetchTask, min_size=8)) == [0] * 8  # min_size beats the limit
    never(action_sequences(FetchTask, min_size=8), lambda s: len(s) > 8)
    assert first(action_sequences(FetchTask, max_size=2), lambda s: len(s) == 2) == [0, 0]
    never(action_sequences(FetchTask, max_size=2), lambda s: len(s) > 2)
    assert first(action_sequences(FetchTask, min_size=0, max_size=0)) == []


def test_numpy_int_sizes_are_accepted_like_ints():
    # the validation accepts numpy ints; before the fix st.lists refused them when drawn
    assert first(action_sequences(FetchTask, min_size=np.int64(1), max_size=np.int64(2)), lambda s: len(s) == 2) == [0, 0]


def test_sequence_sizes_are_checked_by_name():
    for kwargs, text in [({"min_size": -1}, "min_size must be an int >= 0, got -1"),
                         ({"min_size": True}, "min_size must be an int >= 0, got True"),
                         ({"min_size": None}, "min_size must be an int >= 0, got None"),
                         ({"max_size": 1.5}, "max_size must be an int >= 0 or None, got 1.5"),
                         ({"max_size": -1}, "max_size must be an int >= 0 or None, got -1")]:
        with pytest.raises(InvalidArgument) as info:
            action_sequences(FetchTask, **kwargs)
        assert str(info.value) == text
    action_sequences(FetchTask, min_size=3, max_size=3)  # equal sizes are fine
    with pytest.raises(TypeError, match="zero-argument factory"):
        action_sequences(42)


def test_a_factory_that_makes_no_env_fails_when_drawn():
    def make_list():
        return [1]

    strategy = action_sequences(make_list)  # built lazily
    with pytest.raises(InvalidArgument, match="^make_list made a list, not a gymnasium.Env$"):
        first(strategy)


# -- fault schedules ----------------------------------------------------------------------------
def test_at_most_ceil_rate_times_calls_faults():
    strategy = fault_schedules(max_rate=0.3, max_calls=5)  # ceil(1.5) = 2
    assert len(first(strategy, lambda s: len(s.faults) == 2).faults) == 2
    never(strategy, lambda s: len(s.faults) > 2 or any(k >= 5 for k, _ in s.faults))
    assert 4 in dict(first(strategy, lambda s: any(k == 4 for k, _ in s.faults)).faults)
    assert first(fault_schedules(max_rate=1, max_calls=2), lambda s: len(s.faults) == 2).faults == (
        (0, "error"), (1, "error"))


def test_a_zero_budget_gives_only_the_empty_schedule_with_its_tools():
    for strategy in (fault_schedules(["a"], max_rate=0.0), fault_schedules(["a"], max_calls=0)):
        assert first(strategy) == FaultSchedule(tools=["a"])
        never(strategy, lambda s: not s.empty)


def test_kinds_order_the_preference_and_tools_restrict():
    assert first(fault_schedules(kinds=("timeout", "error")), lambda s: not s.empty) == FaultSchedule({0: "timeout"})
    assert first(fault_schedules(kinds=["error", "timeout"]), lambda s: not s.empty) == FaultSchedule({0: "error"})
    never(fault_schedules(kinds=["error"]), lambda s: "timeout" in dict(s.faults).values())
    assert first(fault_schedules(PingTool())).tools is None  # a ToolEnv: every tool
    assert first(fault_schedules(("b", "a"))).tools == frozenset({"a", "b"})


@pytest.mark.parametrize("kwargs,text", [
    ({"max_rate": True}, "max_rate must be a fraction of tool calls in [0, 1], got True"),
    ({"max_rate": -0.1}, "max_rate must be a fraction of tool calls in [0, 1], got -0.1"),
    ({"max_rate": 1.01}, "max_rate must be a fraction of tool calls in [0, 1], got 1.01"),
    ({"max_rate": "0.5"}, "max_rate must be a fraction of tool calls in [0, 1], got '0.5'"),
    ({"max_calls": True}, "max_calls must be an int >= 0, got True"),
    ({"kinds": []}, "kinds must be a non-empty list of 'error' and/or 'timeout', got []"),
    ({"kinds": ("error", "crash")}, "kinds must be a non-empty list of 'error' and/or 'timeout', got ['error', 'crash']"),
    ({"tools": 3}, "tools must be a list of tool names, a ToolEnv, or None (every tool), got 3"),
    ({"tools": []}, "tools must name at least one tool, as strings, got []"),
    ({"tools": ["a", 1]}, "tools must name at least one tool, as strings, got ['a', 1]"),
    ({"tools": FetchTask()}, "fault_schedules(tools=...) got a FetchTask, which is not an envaudit.ToolEnv; "
                             "faults can only be injected into ToolEnvs"),
])
def test_bad_schedule_arguments_are_named(kwargs, text):
    with pytest.raises(InvalidArgument) as info:
        fault_schedules(**kwargs)
    assert str(info.value) == text


def test_rate_bounds_are_inclusive():
    fault_schedules(max_rate=0)
    fault_schedules(max_rate=1.0)


# -- seeds --------------------------------------------------------------------------------------
def test_seeds_from_none_an_int_a_list_or_a_strategy():
    assert seeds_strategy(None) is DEFAULT_SEEDS and first(DEFAULT_SEEDS) == 0
    assert first(DEFAULT_SEEDS, lambda s: s >= 65535) == 65535
    never(DEFAULT_SEEDS, lambda s: s > 65535 or s < 0)
    assert first(seeds_strategy(7)) == 7 and type(first(seeds_strategy(np.int64(7)))) is int
    assert first(seeds_strategy([5, np.int32(9)]), lambda s: s != 5) == 9
    never(seeds_strategy([5, 9]), lambda s: s not in (5, 9))
    mine = st.integers(3, 4)
    assert seeds_strategy(mine) is mine


@pytest.mark.parametrize("bad", [True, [], [1, True], [1, "2"], "3", 2.0, (1.0,)])
def test_bad_seeds_are_named(bad):
    with pytest.raises(InvalidArgument) as info:
        seeds_strategy(bad, name="reset_seeds")
    assert str(info.value) == f"reset_seeds must be an int, a non-empty list of ints or a strategy, got {bad!r}"


# -- plans --------------------------------------------------------------------------------------
def test_plans_size_finish_and_faults_follow_the_session():
    with EnvSession(PingTool, max_steps=3) as s:  # PingTool's limit is 5; the session cuts at 3

        @FAST
        @given(plans(s, faults=True), plans(s, max_size=4, finish=True), plans(s, finish=False))
        def bounded(plan, longer, unfinished):
            assert len(plan.actions) <= 3 and all(k < 3 for k, _ in plan.faults.faults)
            assert len(longer.actions) <= 4 and longer.then_repeat is not None
            assert unfinished.then_repeat is None and unfinished.faults is None

        bounded()


def test_plans_shrink_toward_not_repeating():
    with EnvSession(PingTool, max_steps=3) as s:
        assert first(plans(s, actions=[], seeds=0)).then_repeat is None  # finish=None: not repeating first
        assert first(plans(s, actions=[], seeds=0), lambda p: p.then_repeat is not None).then_repeat == 0


def test_plans_of_an_env_with_a_lower_limit_use_it():
    with EnvSession(PingTool) as s:  # the env's limit (5) is below the session's cap
        assert len(first(plans(s, seeds=0, finish=False), lambda p: len(p.actions) >= 5).actions) == 5

        @FAST
        @given(plans(s, faults=True))
        def capped(plan):
            assert len(plan.actions) <= 5 and all(k < 5 for k, _ in plan.faults.faults)

        capped()


def test_plans_take_fixed_or_generated_actions_and_faults():
    fixed = {"seeds": 4, "finish": False}
    with EnvSession(PingTool) as s:
        plan = first(plans(s, actions=[1, 0], **fixed))
        assert plan.actions == (1, 0) and plan.seed == 4 and plan.faults is None
        assert first(plans(s, actions=st.just([1]), **fixed)).actions == (1,)
        assert first(plans(s, actions=[], faults=st.just(["timeout"]), **fixed)).faults == FaultSchedule({0: "timeout"})
        every = first(plans(s, actions=[], faults=FaultSchedule(every="error"), **fixed))
        assert every.faults == FaultSchedule(every="error")
        with pytest.raises(InvalidArgument) as info:
            plans(s, actions="ping")
        assert str(info.value) == "actions must be None, a list of actions or a strategy of lists, got 'ping'"
        with pytest.raises(InvalidArgument, match=r"^faults: faults\[0\] must be 'error' or 'timeout', got 'x'$"):
            plans(s, faults={0: "x"})
        with pytest.raises(InvalidArgument, match="^faults: faults must be a FaultSchedule"):
            plans(s, faults=3.5)
    with EnvSession(FetchTask) as s:
        assert first(plans(s, actions=[], faults=True, **fixed)).faults is None  # plain env: "where possible"
        with pytest.raises(InvalidArgument) as info:
            plans(s, faults=st.none())
        assert str(info.value) == ("FetchTask is not an envaudit.ToolEnv, so faults cannot be injected; drop faults= "
                                   "(or pass faults=True to inject only where possible)")
        with pytest.raises(InvalidArgument) as info:
            plans(s, faults=[None, "error"])
        assert str(info.value) == ("FetchTask is not an envaudit.ToolEnv, so the fault schedule "
                                   "FaultSchedule({1: 'error'}) cannot be injected")


# -- episodes -----------------------------------------------------------------------------------
def test_episodes_validate_early_and_respect_max_steps():
    with pytest.raises(InvalidArgument, match="^finish must be True or False, got 1$"):
        episodes(FetchTask, finish=1)
    with pytest.raises(TypeError, match="zero-argument factory"):
        episodes(3)

    @FAST
    @given(episodes(lambda: FetchTask(max_steps=100), actions=[WAIT] * 6, finish=False, max_steps=4, seeds=2))
    def capped(episode):
        assert episode.length == 4 and not episode.finished and episode.seed == 2

    capped()
    assert first(episodes(FetchTask, actions=[SUBMIT], finish=False)).length == 1


def test_episodes_finish_by_default():
    @FAST
    @given(episodes(FetchTask))
    def finished(episode):
        assert episode.finished

    finished()


def test_episodes_of_a_space_without_native_strategy():
    class Seq(gym.Env):
        action_space = gym.spaces.Sequence(gym.spaces.Discrete(2))
        observation_space = gym.spaces.Discrete(1)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return 0, {}

        def step(self, action):
            return 0, float(len(action)), True, False, {}

    episode = first(episodes(Seq, actions=[(1, 0, 1)]))
    assert episode.episode_return == 3.0


def test_defaults_min_size_zero_twenty_calls_and_the_seeds_name():
    assert first(action_sequences(FetchTask)) == []
    assert 19 in dict(first(fault_schedules(max_rate=1.0), lambda s: 19 in dict(s.faults)).faults)
    never(fault_schedules(max_rate=1.0), lambda s: any(k >= 20 for k, _ in s.faults))
    with pytest.raises(InvalidArgument, match="^seeds must be an int, a non-empty list of ints or a strategy, got 'x'$"):
        seeds_strategy("x")


def test_max_size_caps_plans_below_the_limit():
    with EnvSession(PingTool) as s:
        never(plans(s, max_size=1, seeds=0, finish=False), lambda p: len(p.actions) > 1)
