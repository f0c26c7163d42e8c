"""The replay probe's decision functions on values and trajectories whose answers are known.

When are two plays "the same" as the agent sees them (floats to the stated tolerance, everything
else exactly), where is the first difference, which seeds and actions are replayed, and what does
the finding say was most likely the cause.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envaudit.probes import replay as R
from envaudit.protocol import FAILURE
from envaudit.rollout import Problem
from tests.fixtures.frames import FakeContext, episode, records


@pytest.mark.parametrize("a, b, expected", [
    (None, None, True), (None, 0, False), (0, None, False),
    (1, 1, True), (1, 2, False), (True, True, True), (True, False, False),
    ("ab", "ab", True), ("ab", "ac", False), (b"x", b"x", True), ("1", 1, False), (1, "1", False),
    (1.0, 1.0 + 1e-10, True), (1.0, 1.0 + 1e-8, False), (0.0, 1e-13, True), (0.0, 1e-11, False),
    (float("nan"), float("nan"), True),
    ([1, 2], (1, 2), True), ([1, 2], [1, 2, 3], False), ([1, [2.0]], [1, [2.0 + 1e-12]], True), ([1], 1, False),
    (1, [1], False), ({"a": 1}, {"a": 1}, True), ({"a": 1}, {"b": 1}, False), ({"a": 1.0}, {"a": 1.5}, False),
    ({"a": 1}, 1, False), (1, {"a": 1}, False),
    (np.zeros((2, 2)), np.zeros((2, 2)), True), (np.zeros(2), np.zeros(3), False), (np.zeros(2), np.ones(2), False),
    (np.array([1, 2]), np.array([1, 2]), True), (np.array([1, 2]), np.array([1, 3]), False),
    (np.array(["a", 1], dtype=object), np.array(["a", 1], dtype=object), True),
    (np.array(["a", 1], dtype=object), np.array(["a", 2], dtype=object), False),
    (np.array([1.0]), np.array([1]), True),
])
def test_same_is_equality_as_the_agent_sees_it(a, b, expected):
    assert R.same(a, b) is expected
    assert R.same(b, a) is expected


def test_same_falls_back_to_equality_for_what_numpy_cannot_hold():
    class Odd:
        def __init__(self, v):
            self.v = v

        def __eq__(self, other):
            return isinstance(other, Odd) and other.v == self.v

        def __array__(self, *args, **kwargs):
            raise TypeError("no array")

    assert R.same(Odd(1), Odd(1)) and not R.same(Odd(1), Odd(2))


def test_show_is_short():
    assert R.shown(np.float32(0.5)) == "0.5" and R.shown("ab") == "'ab'"
    assert R.shown("x" * 100) == "'" + "x" * 76 + "..." and len(R.shown("x" * 100)) == 80
    assert R.shown("x" * 78) == "'" + "x" * 78 + "'"  # 80 characters: kept whole
    assert R.shown(np.arange(3)) == "[0 1 2]"
    assert R.shown(np.arange(20)).startswith("[ 0  1  2 ...")


def traj(seed, reset_obs, *steps, instance=None):
    return R.Trajectory(seed, reset_obs, instance, [R.Step(**s) for s in steps])


def step(action=0, observation=0, reward=0.0, terminated=False, truncated=False, tool_status=None, exception=None):
    return {"action": action, "observation": observation, "reward": reward, "terminated": terminated,
            "truncated": truncated, "tool_status": tool_status, "exception": exception}


def test_reset_difference():
    assert R.reset_difference(traj(3, [1, 2]), traj(3, [1, 2]), R.RESET_SAME) is None
    d = R.reset_difference(traj(3, 1), traj(4, 2), R.RESET_FRESH)
    assert d == R.Divergence(R.RESET_FRESH, 3, None, "observation", "1", "2")


@pytest.mark.parametrize("field, label, u, v", [
    ("observation", "observation", 1, 2), ("reward", "reward", 0.5, 0.25), ("terminated", "terminated", False, True),
    ("truncated", "truncated", False, True), ("tool_status", "tool status", "ok", "timeout"),
    ("exception", "exception", None, "KeyError")])
def test_episode_difference_names_the_first_field_that_differs(field, label, u, v):
    a = traj(7, 0, step(), step(**{field: u}), step(reward=5.0))
    b = traj(7, 0, step(), step(**{field: v}), step(reward=6.0))
    assert R.episode_difference(a, b, R.EPISODE_SAME) == R.Divergence(R.EPISODE_SAME, 7, 1, label, R.shown(u), R.shown(v))


def test_episode_difference_of_length_and_of_nothing():
    a, b = traj(1, 0, step(), step()), traj(1, 0, step())
    assert R.episode_difference(a, b, R.BRANCH) == R.Divergence(R.BRANCH, 1, 1, "episode length", "2", "1")
    assert R.episode_difference(b, a, R.BRANCH).step == 1
    assert R.episode_difference(a, traj(1, 0, step(reward=1e-13), step()), R.BRANCH) is None
    assert R.Divergence(R.BRANCH, 1, 2, "reward", "0", "1").to_dict() == {
        "check": R.BRANCH, "seed": 1, "step": 2, "field": "reward", "values": ["0", "1"]}


def test_is_int_excludes_bools():
    assert R.is_int(3) and R.is_int(np.int64(3)) and not R.is_int(True) and not R.is_int(np.bool_(True))
    assert not R.is_int(3.0) and not R.is_int("3")


def test_plans_prefer_distinct_exploration_seeds_with_their_actions():
    explored = records(episode(FAILURE, [(0, 0), (1, 0)], seed=5), episode(FAILURE, [(2, 0)], seed=5),
                       episode(FAILURE, [(1, 0), (1, 0), (0, 0)], seed=6))
    ctx = FakeContext(explored)
    out = R.plans(ctx, 2)
    assert sorted(s for s, _, _ in out) == [5, 6]  # one of each seed before a second of any
    by_seed = dict((s, a) for s, a, _ in out)
    assert by_seed[6] == [1, 1, 0] and by_seed[5] in ([0, 1], [2])  # each seed with its episode's actions
    assert [f for _, _, f in out] == ctx.seeds(2, "actions")
    assert len(R.plans(ctx, 3)) == 3 and len(R.plans(ctx, 9)) == 3
    assert {tuple(a) for _, a, _ in R.plans(ctx, 3)} == {(0, 1), (2,), (1, 1, 0)}


def test_plans_without_integer_actions_draw_fresh_seeds():
    explored = records(episode(FAILURE, [(np.array([0.5]), 0)], seed=5))
    ctx = FakeContext(explored)
    assert R.plans(ctx, 2) == [(s, [], f) for s, f in zip(ctx.seeds(2, "episodes"), ctx.seeds(2, "actions"), strict=True)]
    assert R.plans(FakeContext(records()), 1) == [(ctx.seeds(1, "episodes")[0], [], ctx.seeds(1, "actions")[0])]
    no_seed = records(episode(FAILURE, [(0, 0)]))
    no_seed.episodes["seed"] = None
    assert R.plans(FakeContext(no_seed), 1)[0][1] == []


def test_scripted_plays_its_actions_then_its_own_seeded_space():
    p = R.Scripted([2, 0], seed=11)
    env = gym.make("CartPole-v1")
    p.reset(env, np.random.default_rng(0))
    first = [p(None, {}) for _ in range(6)]
    p.reset(env, np.random.default_rng(99))
    assert first[:2] == [2, 0] and [p(None, {}) for _ in range(6)] == first  # not the run's generator


def test_tally_counts_replays_and_divergences():
    t = R.Tally()
    d = R.Divergence(R.BRANCH, 1, 0, "reward", "0", "1")
    assert t.compare(R.BRANCH, None) is False and t.compare(R.BRANCH, d) is True
    assert t.replays[R.BRANCH] == 2 and t.diverged[R.BRANCH] == 1 and t.divergences == [d]


def tally(*divs, replays=10):
    t = R.Tally()
    for c in R.CHECKS:
        t.replays[c] = replays
    for d in divs:
        t.diverged[d.check] += 1
        t.divergences.append(d)
    return t


def div(check, field="reward", step=3):
    return R.Divergence(check, 9, None if field == "reset" else step, "observation" if field == "reset" else field, "a", "b")


def test_fix_names_the_most_likely_cause():
    assert R._fix(tally(div(R.EPISODE_FRESH, "tool status"))).startswith("Most likely a tool's real latency")
    assert R._fix(tally(div(R.EPISODE_SAME))).startswith("Most likely reset() leaves state")
    assert R._fix(tally(div(R.RESET_SAME, "reset"))).startswith("Most likely reset() leaves state")
    assert R._fix(tally(div(R.RESET_FRESH, "reset"))).startswith("Most likely reset() draws")
    assert R._fix(tally(div(R.RESET_SAME, "reset"), div(R.BRANCH))).startswith("Most likely reset() draws")
    fix = R._fix(tally(div(R.EPISODE_FRESH)))
    assert fix.startswith("Most likely step() draws") and "(the first difference is at step 3)" in fix
    assert R._fix(tally(div(R.EPISODE_SAME), div(R.EPISODE_FRESH))).startswith("Most likely step() draws")


def test_finding_counts_and_describes_the_first_divergence():
    t = tally(div(R.EPISODE_FRESH), div(R.BRANCH, "observation"), div(R.BRANCH), replays=0)
    t.replays[R.EPISODE_FRESH], t.replays[R.BRANCH] = 4, 4
    t.examples = [3, 3, 4, 5, 6, 7, 8, 9]
    f = R.decide_non_replayable(t)
    assert f.evidence["replays"] == 8 and f.evidence["diverged"] == 3 and f.evidence["fraction_diverged"] == 3 / 8
    assert f.evidence["by_check"] == {R.EPISODE_FRESH: {"replays": 4, "diverged": 1},
                                      R.BRANCH: {"replays": 4, "diverged": 2}}
    assert f.evidence["first_field_counts"] == {"reward": 2, "observation": 1}
    assert f.evidence["tolerance"] == {"rtol": 1e-9, "atol": 1e-12} and list(f.examples) == [3, 4, 5, 6, 7, 8]
    assert f.summary.startswith("3 of 8 replays (38%) diverged: replaying seed 9 with the same actions, the reward "
                                "at step 3 was a once and b the other time (episode, fresh instance)")
    reset = R.decide_non_replayable(tally(div(R.RESET_SAME, "reset")))
    assert "the observation of reset(seed=9) was a once and b on the same instance" in reset.summary
    assert "on a fresh instance" in R.decide_non_replayable(tally(div(R.RESET_FRESH, "reset"))).summary


def test_hang_finding_names_the_call_and_where():
    f = R.decide_env_error(Problem(kind="hang", where="step", seed=4, step=2, message="no answer", episode_id=12), 5.0)
    assert f.title == "step() hangs during replays" and "at seed 4, step 2" in f.summary and "within 5 s" in f.summary
    assert list(f.examples) == [12] and f.evidence["behaviour"] == "env-error"
    f = R.decide_env_error(Problem(kind="hang", where="reset", seed=4, step=None, message="x", episode_id=None), 2.5)
    assert "at reset(seed=4)" in f.summary and list(f.examples) == []


def test_fix_and_finding_texts_in_full():
    assert R._fix(tally(div(R.EPISODE_FRESH, "tool status"))) == (
        "Most likely a tool's real latency sits close to its deadline, so whether a call times out depends on "
        "machine load; simulate latency (return envaudit.ToolOutput(value, latency_s=...)) or move the deadline "
        "well away from the typical latency.")
    assert R._fix(tally(div(R.EPISODE_SAME))) == (
        "Most likely reset() leaves state from the previous episode behind (a counter, a cache, a buffer): a "
        "fresh instance replays but a used one does not. Reset every attribute an episode changes in reset().")
    assert R._fix(tally(div(R.RESET_FRESH, "reset"))) == (
        "Most likely reset() draws from Python's `random`, `time` or an unseeded generator instead of "
        "`self.np_random`; call super().reset(seed=seed) first and draw every random choice from self.np_random.")
    assert R._fix(tally(div(R.EPISODE_FRESH))) == (
        "Most likely step() draws from Python's `random`, `time` or an unseeded generator instead of "
        "`self.np_random` (the first difference is at step 3); pass seed to super().reset(seed=seed) and draw "
        "every random choice from self.np_random.")
    # one divergence in a fresh and one in a branch check: not "same instance only"
    assert R._fix(tally(div(R.EPISODE_SAME), div(R.BRANCH))).startswith("Most likely step() draws")
    assert R._fix(tally(div(R.EPISODE_SAME), div(R.RESET_FRESH, "reset"))).startswith("Most likely reset() draws")
    f = R.decide_non_replayable(tally(div(R.EPISODE_FRESH)))
    assert f.title == "Same seed and actions give a different episode" and f.fix == R._fix(tally(div(R.EPISODE_FRESH)))
    assert f.summary.endswith("; GRPO groups that share a reset seed are then not comparable.")
    assert f.evidence["behaviour"] == "non-replayable" and f.code == "non-replayable"
    h = R.decide_env_error(Problem(kind="hang", where="step", seed=4, step=2, message="m", episode_id=1), 5.0)
    assert h.fix == ("Put a deadline on every blocking call inside step(); most likely a tool call or a backend "
                     "sometimes never answers.")
    assert h.summary == ("step() did not return within 5 s at seed 4, step 2 while replaying recorded actions; a "
                         "rollout worker calling it blocks for good.")
    assert h.evidence == {"seed": 4, "step": 2, "message": "m", "behaviour": "env-error"} and h.code == "env-error"


def test_tally_counts_every_divergence():
    t = R.Tally()
    d = R.Divergence(R.BRANCH, 1, 0, "reward", "0", "1")
    t.compare(R.BRANCH, d)
    t.compare(R.BRANCH, d)
    assert t.diverged[R.BRANCH] == 2 and t.replays[R.BRANCH] == 2


def test_show_prints_floats_to_12_digits_and_eight_items():
    assert R.shown(np.array([1 / 3])) == "[0.333333333333]"
    assert R.shown(np.arange(9)).startswith("[0 1 2 ...")  # more than 8 items: summarised
    assert R.shown(np.arange(8)) == "[0 1 2 3 4 5 6 7]"
