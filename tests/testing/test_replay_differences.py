"""``envaudit.testing.replay``'s comparisons, on episodes edited one field at a time: where two plays
first differ and the words for it, observation equality, and the summary a fresh interpreter sends."""

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from envaudit.testing import play
from envaudit.testing.replay import (
    _fmt,
    _seeded_globals,
    _summary,
    _summary_difference,
    first_difference,
    play_summaries,
    same_value,
)
from envaudit.testing.trajectory import Plan
from tests.testing.toy_envs import FETCH, MIRROR, SUBMIT, WAIT, FetchTask


def base():
    # Seed 1 needs one fact (need 1): fetch, wait, submit succeeds and pays 1. Observations are
    # [facts, need, t] after reset and after each step.
    ep = play(FetchTask, [FETCH, WAIT, SUBMIT], seed=1)
    assert ep.length == 3 and ep.observations is not None and len(ep.observations) == 4
    return ep


def edit_step(ep, i, **changes):
    steps = list(ep.steps)
    steps[i] = replace(steps[i], **changes)
    return replace(ep, steps=tuple(steps))


def edit_obs(ep, i, value):
    obs = list(ep.observations)
    obs[i] = value
    return replace(ep, observations=tuple(obs))


def test_the_same_play_has_no_difference():
    a = base()
    assert first_difference(a, base()) is None and first_difference(a, a) is None


def test_a_different_first_observation():
    a = base()
    b = edit_obs(a, 0, np.array([9.0, 9.0, 9.0], dtype=np.float32))
    assert first_difference(a, b) == ("a different first observation after reset "
                                      "([0., 1., 0.] vs [9., 9., 9.])")


def test_observations_are_compared_only_where_both_runs_kept_them():
    a = base()
    b = edit_obs(edit_obs(a, 0, np.zeros(3)), 2, np.zeros(3))
    assert first_difference(a, replace(b, observations=None)) is None
    assert first_difference(replace(a, observations=None), b) is None
    c = edit_obs(a, 2, np.zeros(3))  # the first observation kept alike, a later one not
    assert first_difference(a, replace(c, observations=c.observations[:1])) is None
    assert first_difference(replace(c, observations=c.observations[:2]), a) is None


def test_an_episode_that_ends_early_on_either_side():
    a = base()
    short = replace(a, steps=a.steps[:2])
    assert first_difference(short, a) == "an episode that ended after 2 steps on the first run but went on on the replay"
    assert first_difference(a, short) == "an episode that ended after 2 steps on the replay but went on on the first run"


def test_each_field_of_a_step_in_order():
    a = base()
    assert first_difference(a, edit_step(a, 0, status="error")) == "a different tool call at step 0 (fetch → ok vs fetch → error)"
    assert first_difference(a, edit_step(a, 1, tool="fetch", status="ok")) == \
        "a different tool call at step 1 (no tool vs fetch → ok)"
    assert first_difference(a, edit_step(a, 1, reward=0.5)) == "a different reward at step 1 (+0 vs +0.5)"
    assert first_difference(a, edit_step(a, 2, terminated=False)) == \
        "a different terminated flag at step 2 (True vs False)"
    assert first_difference(a, edit_step(a, 2, truncated=True)) == "a different truncated flag at step 2 (False vs True)"
    # The earliest difference is reported, and the tool call before the reward within a step.
    both = edit_step(edit_step(a, 2, reward=3.0), 1, reward=2.0)
    assert first_difference(a, both) == "a different reward at step 1 (+0 vs +2)"
    assert first_difference(a, edit_step(a, 0, reward=2.0, status="timeout")).startswith("a different tool call at step 0")


def test_a_different_observation_after_a_step():
    a = base()
    b = edit_obs(a, 2, np.array([7.0, 1.0, 2.0], dtype=np.float32))
    assert first_difference(a, b) == ("a different observation after step 1 ([1., 1., 2.] vs [7., 1., 2.])")
    # The last observation too (after the last step).
    c = edit_obs(a, 3, np.array([7.0, 1.0, 3.0], dtype=np.float32))
    assert first_difference(a, c).startswith("a different observation after step 2 ")


def test_a_different_success_flag_last():
    a = base()
    assert a.success is True
    assert first_difference(a, replace(a, success=False)) == "a different success flag (True vs False)"
    assert first_difference(replace(a, success=None), a) == "a different success flag (None vs True)"


def test_same_value_on_observations():
    nan = float("nan")
    assert same_value(np.array([1.0, nan]), np.array([1.0, nan]))
    assert not same_value(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    assert not same_value(np.zeros(2), np.zeros((1, 2)))  # same values, another shape
    assert same_value(np.array(["a", "b"]), np.array(["a", "b"])) and not same_value(np.array(["a"]), np.array(["b"]))
    assert same_value(np.array([1, 2]), [1, 2]) and same_value([1, 2], np.array([1, 2]))
    assert same_value(nan, nan) and not same_value(nan, 1.0) and not same_value(1.0, nan)
    assert same_value({"a": [1, np.ones(2)]}, {"a": [1, np.ones(2)]})
    assert not same_value({"a": 1}, {"a": 1, "b": 2}) and not same_value({"a": 1}, {"b": 1})
    assert not same_value({"a": np.ones(2)}, {"a": np.zeros(2)})
    assert same_value((1, 2), [1, 2]) and not same_value((1, 2), (1, 2, 3)) and not same_value([1, 2], [1, 3])
    assert same_value("x", "x") and not same_value("x", "y") and not same_value(1, "1")

    class Loud:
        def __eq__(self, other):
            raise RuntimeError("cannot compare")

    assert not same_value(Loud(), Loud())


def test_fmt():
    assert _fmt(("fetch", "ok")) == "fetch → ok" and _fmt((None, None)) == "no tool"
    assert _fmt(0.5) == "+0.5" and _fmt(-1.0) == "-1" and _fmt(True) == "True" and _fmt((1, 2, 3)) == "(1, 2, 3)"


def test_the_summary_a_fresh_interpreter_sends():
    a = base()
    obs, steps, success = _summary(a)
    assert len(obs) == 4 and all(isinstance(o, str) and len(o) == 16 for o in obs)
    assert obs[0] != obs[1] and _summary(base()) == (obs, steps, success)
    assert steps == ((0.0, False, False, "fetch", "ok"), (0.0, False, False, None, None),
                     (1.0, True, False, "submit", "ok")) and success is True
    assert _summary(replace(a, observations=None))[0] == ()
    assert play_summaries(FetchTask, [Plan(1, (FETCH, WAIT, SUBMIT)), Plan(2, (MIRROR,))], 50) == [
        _summary(a), _summary(play(FetchTask, [MIRROR], seed=2))]


def test_summary_differences_in_words():
    a = _summary(base())
    obs, steps, success = a
    other_obs = ("x" * 16,) + obs[1:]
    assert _summary_difference(a, (other_obs, steps, success)) == "a different first observation after reset"
    assert _summary_difference(a, (obs, steps[:2], success)) == "an episode of 3 steps here and 2 there"
    assert _summary_difference((obs, steps[:1], success), a) == "an episode of 1 steps here and 3 there"
    changed = (steps[0], (0.5,) + steps[1][1:], steps[2])
    assert _summary_difference(a, (obs, changed, success)) == (
        "a different step 1 (reward, ending, tool, status: (0.0, False, False, None, None) here, "
        "(0.5, False, False, None, None) there)")
    assert _summary_difference(a, (obs[:2] + ("y" * 16,) + obs[3:], steps, success)) == \
        "a different observation after step 1"
    assert _summary_difference(a, (obs[:3] + ("y" * 16,), steps, success)) == "a different observation after step 2"
    assert _summary_difference(a, (obs, steps, False)) == "a different success flag (True here, False there)"


def test_the_global_generators_are_seeded_for_the_block_and_restored():
    random.seed(123)
    np.random.seed(456)
    outside = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(456)
    with _seeded_globals(7):
        inside = (random.random(), np.random.random())
    assert (random.random(), np.random.random()) == outside  # restored: as if the block never drew
    random.seed(7)
    np.random.seed(7)
    assert inside == (random.random(), np.random.random())
    with _seeded_globals(2**32 + 7):  # NumPy's seed is taken modulo 2 ** 32
        assert np.random.random() == inside[1]
    with pytest.raises(ValueError), _seeded_globals(1):
        raise ValueError("restored even when the block raises")
    assert not math.isnan(random.random())
