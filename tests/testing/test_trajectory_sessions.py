"""EnvSession and play: naming, step limits, labels, policies, observations and candidate actions."""

import functools

import gymnasium as gym
import numpy as np
import pytest

import envaudit  # noqa: F401 - registers the bundled envs
from envaudit.policies import CallablePolicy
from envaudit.rollout import RandomPolicy, SequencePolicy
from envaudit.testing import play
from envaudit.testing.trajectory import (
    EnvSession,
    FaultSchedule,
    Plan,
    _plain,
    _snapshot,
    resolve_target,
    step_limit,
)
from tests.testing.toy_envs import CLAIM, FETCH, MIRROR, SUBMIT, WAIT, FetchTask, OneState, PingTool


class Bare(gym.Env):
    """No labels, no step limit, no success flag: reward 1 per step, a `close` that fails."""

    action_space = gym.spaces.Discrete(3, start=1)
    observation_space = gym.spaces.Box(0, 1, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        return np.ones(1, dtype=np.float32), 1.0, int(action) == 3, False, {}

    def close(self):
        raise RuntimeError("broken close")


class Texty(OneState):
    """A Text action space whose env also has labels: text actions are never turned into indices."""

    action_space = gym.spaces.Text(max_length=8)
    action_labels = ["go", "stop"]

    def step(self, action):
        return 0, float(action == "stop"), action == "stop", False, {"success": action == "stop"}


def make_fetch():
    return FetchTask(max_steps=4)


# -- names and limits ---------------------------------------------------------------------------
def test_targets_are_named_by_spec_id_function_or_class():
    assert resolve_target(make_fetch) == ("make_fetch", make_fetch)
    name, factory = resolve_target("envaudit/FlakySearch-v0")
    assert name == "envaudit/FlakySearch-v0" and factory().spec.id == "envaudit/FlakySearch-v0"
    assert resolve_target(functools.partial(FetchTask))[0] == "partial"
    with EnvSession(make_fetch) as s:
        assert s.name == "make_fetch"
    with EnvSession(lambda: FetchTask()) as s:
        assert s.name == "FetchTask"  # "<lambda>" is no name: the env's class is
    with EnvSession(lambda: gym.make("envaudit/FlakySearch-v0")) as s:
        assert s.name == "envaudit/FlakySearch-v0"
    with pytest.raises(TypeError, match="^make_env must be a zero-argument factory.*got int$"):
        resolve_target(3)
    with pytest.raises(TypeError, match=r"^target must be a zero-argument factory or an env id, got an env instance \(FetchTask\)"):
        resolve_target(FetchTask(), what="target")


def test_step_limit_is_the_smallest_positive_limit():
    assert step_limit(FetchTask(max_steps=6)) == 6
    assert step_limit(gym.make("envaudit/FlakySearch-v0", max_episode_steps=2)) == 2  # the spec's limit
    assert step_limit(gym.make("envaudit/FlakySearch-v0", max_episode_steps=99)) == gym.make(
        "envaudit/FlakySearch-v0").unwrapped.max_steps
    assert step_limit(FetchTask(max_steps=0)) is None and step_limit(Bare()) is None
    assert step_limit(FetchTask(max_steps=np.int64(5))) == 5


def test_sessions_read_the_env_and_cap_its_episodes():
    with EnvSession(FetchTask, max_steps=np.int64(30)) as s:
        assert s.max_steps == 30 and type(s.max_steps) is int and s.limit == 6
        assert not s.tool_env and s.tools == [] and not s.injects
    with EnvSession(Bare, max_steps=9) as s:
        assert s.limit == 9 and s.labels is None
        ep = s.play(Plan(0, (), then_repeat=1))
        assert ep.length == 9 and ep.end_reason == "truncated"  # no limit of its own: cut at max_steps
    with EnvSession(lambda: FetchTask(max_steps=100), max_steps=3) as s:
        ep = s.play(Plan(0, (), then_repeat=WAIT))
        assert ep.length == 3 and not ep.finished  # a longer limit of its own: left unfinished
    with EnvSession(PingTool) as s:
        assert s.tool_env and s.tools == ["done", "ping"] and s.injects
    with EnvSession(PingTool, faults=False) as s:
        assert s.tool_env and not s.injects


@pytest.mark.parametrize("bad", [0, -2, True, 2.0, "5"])
def test_max_steps_must_be_a_positive_int(bad):
    with pytest.raises(ValueError) as info:
        EnvSession(FetchTask, max_steps=bad)
    assert str(info.value) == f"max_steps must be a positive int, got {bad!r}"


def test_a_factory_must_make_an_env():
    def make_list():
        return [1]

    with pytest.raises(TypeError) as info:
        EnvSession(make_list)
    assert str(info.value) == "make_list made a list, not a gymnasium.Env"
    EnvSession(Bare, max_steps=1).close()  # a failing close is swallowed


# -- actions and labels -------------------------------------------------------------------------
def test_actions_and_labels():
    with EnvSession(FetchTask) as s:
        assert s.action("claim") == CLAIM and s.action(2) == 2
        assert s.label(np.int64(SUBMIT)) == "submit" and s.label(np.array(0)) == "fetch"
        assert s.label(5) is None and s.label(-1) is None and s.label(4) == "claim"
        assert s.label(np.array([1, 2])) is None and s.label("fetch") is None and s.label(None) is None
    with EnvSession(Bare) as s:
        assert s.label(1) is None and s.action("x") == "x"
    with EnvSession(Texty) as s:
        assert s.action("go") == "go"  # text, not label 0
        ep = s.play(Plan(0, ("go", "stop")))
        assert ep.actions == ("go", "stop") and ep.success is True and ep.episode_return == 1.0


def test_candidate_actions_are_all_of_a_small_discrete_space_else_a_seeded_sample():
    with EnvSession(Bare) as s:
        assert s.candidate_actions() == [1, 2, 3]
        assert len(s.candidate_actions(limit=3)) == 3 and s.candidate_actions(limit=3) == [1, 2, 3]
        sample = s.candidate_actions(limit=2, samples=5, seed=1)
        assert len(sample) == 5 and all(a in (1, 2, 3) for a in sample)
        assert sample == s.candidate_actions(limit=2, samples=5, seed=1)
        assert len(s.candidate_actions(limit=2)) == 8
    with EnvSession(lambda: gym.make("Pendulum-v1")) as s:
        boxes = s.candidate_actions(seed=3)
        again = s.candidate_actions(seed=3)
        assert len(boxes) == 8 and all(s.space.contains(a) for a in boxes)
        assert all(np.array_equal(a, b) for a, b in zip(boxes, again, strict=True))
        assert not all(np.array_equal(a, b) for a, b in zip(boxes, s.candidate_actions(seed=4), strict=True))


# -- playing ------------------------------------------------------------------------------------
def test_a_policy_plays_from_the_plan_seed():
    solve = SequencePolicy([MIRROR, MIRROR, SUBMIT])
    with EnvSession(FetchTask) as s:
        ep = s.play(Plan(5, (FETCH,)), policy=solve)  # the policy, not the plan's actions, decides
        assert ep.actions == (MIRROR, MIRROR, SUBMIT) and ep.success is True and ep.episode_return == 1.0
        first = s.play(Plan(7), policy=RandomPolicy())
        assert s.play(Plan(7), policy=RandomPolicy()).actions == first.actions  # rng from the plan's seed
        mine = s.play(Plan(7), policy=RandomPolicy(), rng=np.random.default_rng(7))
        assert mine.actions == first.actions
        runs = {s.play(Plan(7), policy=RandomPolicy(), rng=np.random.default_rng(k)).actions for k in range(6)}
        assert len(runs) > 1  # the rng given is the one used


def test_steps_record_tool_calls_and_their_indices():
    with EnvSession(FetchTask) as s:
        ep = s.play(Plan(0, (WAIT, MIRROR, CLAIM)))
        assert [st.tool for st in ep.steps] == [None, "fetch", "claim"]
        assert [st.status for st in ep.steps] == [None, "ok", "ok"]
        assert [st.call for st in ep.steps] == [None, None, None]  # no injector: no call indices
        assert [st.injected for st in ep.steps] == [False] * 3 and [st.error for st in ep.steps] == [None] * 3
        assert [st.index for st in ep.steps] == [0, 1, 2] and [st.label for st in ep.steps] == ["wait", "fetch_mirror",
                                                                                               "claim"]
        assert ep.observations is None  # kept only when asked
        assert (ep.end_reason, ep.outcome, ep.success) == ("terminated", "failure", False)
    ep = play(PingTool, ["ping", "ping", "done"], faults={0: "error"}, seed=0)
    assert [st.call for st in ep.steps] == [0, 1, 2]
    assert ep.steps[0].injected and ep.steps[0].status == "error" and ep.steps[0].error
    assert ep.steps[1].error is None and not ep.steps[1].injected


def test_the_end_of_an_episode():
    unflagged = play(lambda: FetchTask(report_success=False), ["submit"])
    assert unflagged.finished and unflagged.success is None and unflagged.outcome == "unknown"
    error = play(PingTool, ["ping"], faults={0: "error"}, then_repeat="ping", max_steps=60)
    assert error.finished and error.end_reason == "truncated" and error.length == 5  # PingTool's max_steps
    nothing = play(FetchTask, [])
    assert nothing.length == 0 and not nothing.finished and nothing.success is None
    assert nothing.seed == 0 and nothing.faults is None


def test_play_defaults_to_seed_zero_and_keeps_numpy_actions_plain():
    ep = play(Bare, [np.int64(1), np.int32(3)])
    assert ep.seed == 0 and ep.actions == (1, 3) and all(type(a) is int for a in ep.actions)
    assert ep.episode_return == 2.0 and ep.end_reason == "terminated"
    assert play(FetchTask, ["submit"]).steps[0].reward == play(FetchTask, ["submit"], seed=0).steps[0].reward
    needs = {int(play(FetchTask, ["wait"], seed=s).observations[0][1]) for s in range(12)}
    assert needs == {1, 2}  # the seed is passed to reset


def test_plain_and_snapshot_helpers():
    assert _plain(np.int64(3)) == 3 and type(_plain(np.int64(3))) is int
    assert type(_plain(np.float32(0.5))) is float and _plain(np.float32(0.5)) == 0.5
    arr = np.array([1, 2])
    assert _plain(arr) is arr
    assert _plain("go") == "go" and _plain((1, 2)) == (1, 2) and _plain({"a": 1}) == {"a": 1}
    obs = np.array([1.0])
    copy = _snapshot(obs)
    obs[0] = 5.0
    assert copy[0] == 1.0
    nested = {"a": [1]}
    snap = _snapshot(nested)
    nested["a"].append(2)
    assert snap == {"a": [1]}

    class NoCopy:
        def __deepcopy__(self, memo):
            raise TypeError("cannot copy")

    odd = NoCopy()
    assert _snapshot(odd) is odd


def test_play_keeps_observations_that_later_steps_do_not_change():
    ep = play(FetchTask, ["fetch_mirror", "fetch_mirror", "submit"], seed=1)
    assert [o[0] for o in ep.observations] == [0, 1, 2, 2]  # facts after each step
    assert ep.success is True


class BothEnds(OneState):
    """Action 1 succeeds on a step that is both terminated and truncated (GEM at its turn limit)."""

    action_space = gym.spaces.Discrete(2)

    def step(self, action):
        return 0, 1.0, True, True, {"success": bool(action)}


def test_a_success_on_a_step_that_is_also_truncated_ends_terminated():
    won = play(BothEnds, [1])
    assert won.steps[0].terminated is True and won.steps[0].truncated is True
    assert (won.end_reason, won.outcome, won.success) == ("terminated", "success", True)
    lost = play(BothEnds, [0])
    assert (lost.end_reason, lost.outcome, lost.success) == ("truncated", "timeout", False)


def test_steps_carry_the_action_the_end_flags_and_the_env_name():
    ep = play(FetchTask, ["wait", "submit"], seed=2)
    assert [st.action for st in ep.steps] == [WAIT, SUBMIT] and ep.env == "FetchTask"
    assert [(st.terminated, st.truncated) for st in ep.steps] == [(False, False), (True, False)]
    assert all(type(st.terminated) is bool and type(st.truncated) is bool for st in ep.steps)
    assert ep.render(title="Mine").startswith("Mine: reset(seed=2)")
    faulted = play(PingTool, ["ping", "done"], faults=FaultSchedule({0: "error"}))
    assert faulted.faults == FaultSchedule({0: "error"})


def test_the_policy_sees_each_observation_and_info():
    seen = []

    def mirror_then_submit(obs, info):
        seen.append(dict(info))
        facts, need, _ = obs
        return SUBMIT if facts >= need else MIRROR

    for seed in range(4):
        with EnvSession(FetchTask) as s:
            ep = s.play(Plan(seed), policy=CallablePolicy(mirror_then_submit))
        assert ep.success is True and ep.length in (2, 3)  # need (1 or 2) mirrors, then submit
    assert seen[0] == {} and {"name": "fetch", "status": "ok"} in [i.get("tool") for i in seen]


def test_the_reset_seed_decides_the_task():
    needs = [[int(play(FetchTask, ["wait"], seed=s).observations[0][1]) for s in range(12)] for _ in range(2)]
    assert needs[0] == needs[1] and set(needs[0]) == {1, 2}


def test_an_empty_schedule_is_no_schedule_and_tool_filters_see_the_tool():
    with EnvSession(FetchTask) as s:
        assert s.play(Plan(0, (WAIT,), None, FaultSchedule())).faults is None  # plain envs accept it
    with EnvSession(PingTool) as s:
        ep = s.play(Plan(0, ("ping", "done")))  # an injector, no schedule: nothing is forced
        assert ep.statuses == ["ok", "ok"] and not any(st.injected for st in ep.steps)
        assert [st.call for st in ep.steps] == [0, 1]
        only = s.play(Plan(0, ("ping", "ping", "done"), None, FaultSchedule({0: "timeout", 2: "error"}, tools=["ping"])))
        assert only.statuses == ["timeout", "ok", "ok"] and [st.injected for st in only.steps] == [True, False, False]
    assert EnvSession(make_fetch).factory is make_fetch


def test_step_limit_of_one_counts():
    assert step_limit(FetchTask(max_steps=1)) == 1
    assert play(lambda: FetchTask(max_steps=1), ["wait", "wait"]).length == 1


def test_candidate_actions_limit_default_and_shared_subspaces():
    with EnvSession(lambda: Bare()) as s:
        s.space = gym.spaces.Discrete(64)
        assert s.candidate_actions() == list(range(64))
        s.space = gym.spaces.Discrete(65)
        assert len(s.candidate_actions()) == 8 and s.candidate_actions() == s.candidate_actions(seed=0)
        inner = gym.spaces.Discrete(1000)
        inner.seed(11)
        before = inner.np_random.bit_generator.state
        s.space = gym.spaces.Dict({"k": inner})
        assert len(s.candidate_actions()) == 8
        assert s.space["k"].np_random.bit_generator.state == before  # the env's own space is not reseeded


def test_numpy_scalars_that_are_neither_int_nor_float_stay_as_they_are():
    assert _plain(np.True_) is np.True_
    assert _plain(np.str_("go")) == "go"
