"""The api probe's decision functions on values and tables whose answers are known.

Which value is non-finite, which observation is outside its space, which info['tool'] is
malformed, which recorded problem is which defect, and what the finding says about the first
time it showed up.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from envaudit.config import ScanConfig
from envaudit.findings import Severity
from envaudit.probes import api as A
from envaudit.probes.api import defects as AD
from envaudit.probes.api import rollouts as AR
from envaudit.protocol import FAILURE
from envaudit.rollout import Problem
from tests.fixtures.frames import episode, records


@pytest.mark.parametrize("value, expected", [
    (None, None), (float("nan"), None), (3, 3), (3.7, 3), (np.int64(4), 4), ("5", 5), ("x", None), ([1], None)])
def test_int_or_none(value, expected):
    assert AD._int(value) == expected


@pytest.mark.parametrize("value, expected", [
    (1.0, False), (float("nan"), True), (float("inf"), True), (np.array([1.0, np.nan]), True),
    (np.array([1, 2]), False), ({"a": [1.0, float("-inf")]}, True), ({"a": 1.0}, False), ((0.0, float("nan")), True),
    ([0.0, 1.0], False), ("nan", False), (b"inf", False), (object(), False), (np.float32("nan"), True)])
def test_nonfinite(value, expected):
    assert AR._nonfinite(value) is expected


def test_in_space_is_false_when_contains_raises():
    box = gym.spaces.Box(0.0, 1.0, (2,))
    assert AR._in_space(box, np.array([0.5, 0.5], dtype=np.float32))
    assert not AR._in_space(box, np.array([2.0, 0.5], dtype=np.float32))
    assert not AR._in_space(gym.spaces.Discrete(3), "x")
    assert not AR._in_space(SimpleNamespace(contains=lambda o: 1 / 0), 1)


def test_check_obs_reports_nonfinite_before_outside_the_space():
    t = AD.Tally()
    box = gym.spaces.Box(0.0, 1.0, (1,))
    AR._check_obs(t, box, np.array([np.nan], dtype=np.float32), 3, 4)
    AR._check_obs(t, box, np.array([5.0], dtype=np.float32), 3, 5)
    AR._check_obs(t, box, np.array([0.5], dtype=np.float32), 3, 6)
    assert set(t.seen) == {"nonfinite_obs", "obs_outside_space"}
    assert t.seen["nonfinite_obs"] == [AD.Seen("api rollouts", 3, 4, "observation array([nan], dtype=float32)")]
    (s,) = t.seen["obs_outside_space"]
    assert s.step == 5 and s.message == f"observation array([5.], dtype=float32) is not in {box}"


@pytest.mark.parametrize("info, message", [
    ([], "info is a list"), ({"tool": "x"}, "info['tool'] is a str"),
    ({"tool": {"status": "ok"}}, "info['tool'] lacks name: {'status': 'ok'}"),
    ({"tool": {"name": "a"}}, "info['tool'] lacks status: {'name': 'a'}"),
    ({"tool": {"name": "a", "status": "slow"}}, "unknown tool status 'slow'")])
def test_check_info_names_what_is_malformed(info, message):
    t = AD.Tally()
    AR._check_info(t, info, 1, 2)
    ((key, (seen,)),) = t.seen.items()
    assert key == ("info_not_dict" if isinstance(info, list) else "bad_tool_info") and seen.message == message
    assert (seen.source, seen.seed, seen.step) == ("api rollouts", 1, 2)


def test_check_info_accepts_a_good_tool_or_none():
    t = AD.Tally()
    for info in ({}, {"tool": None}, {"tool": {"name": "a", "status": "ok"}}, {"tool": {"name": "a", "status": "timeout"}},
                 {"tool": {"name": "a", "status": "error"}}):
        AR._check_info(t, info, 1, 2)
    assert t.seen == {}


def test_short():
    assert AR._short("x" * 10) == "'" + "x" * 10 + "'"
    assert AR._short("x" * 200) == "'" + "x" * 116 + "..." and len(AR._short("x" * 200)) == 120
    assert AR._short("x" * 118) == "'" + "x" * 118 + "'"


def test_tally_keeps_every_sighting_and_the_messages():
    t = AD.Tally()
    t.add("nan_reward", "exploration", np.int64(3), 2.0, "reward nan", episode_id=float("nan"))
    t.add("nan_reward", "exploration", 4, None, "reward inf", episode_id=7)
    t.add("step_hang", "api rollouts", None, 1, "reward nan")
    assert t.seen["nan_reward"] == [AD.Seen("exploration", 3, 2, "reward nan", None), AD.Seen("exploration", 4, None,
                                                                                             "reward inf", 7)]
    assert t.messages() == {"reward nan", "reward inf"}


def ctx_with(problems=(), recs=None):
    return SimpleNamespace(exploration_problems=list(problems), exploration=recs or records(),
                           config=ScanConfig(seed=0, step_timeout_s=2.5))


def test_exploration_problems_become_defects():
    problems = [Problem("hang", "reset", "timed out", 1), Problem("hang", "close", "timed out", 2),
                Problem("reset_exception", "reset", "boom", 3), Problem("exception", "step", "KeyError", 4, 2, 11),
                Problem("exception", "step", "info['tool'] must be a mapping with 'name' and 'status', got 1", 5, 0),
                Problem("exception", "", "died", 6), Problem("crash", "make", "gone", 7)]
    t = AD.Tally()
    AR.from_exploration(ctx_with(problems), t)
    # a close() hang and an exception between calls are no defect of their own: step exceptions
    assert {k: [s.seed for s in v] for k, v in t.seen.items()} == {
        "reset_hang": [1], "step_exception": [2, 4, 6], "reset_exception": [3], "bad_tool_info": [5],
        "make_exception": [7]}
    assert t.seen["step_exception"][1] == AD.Seen("exploration", 4, 2, "KeyError", 11)
    assert t.episodes == 0 and t.steps == 0  # no steps recorded


def test_nonfinite_rewards_in_exploration_except_the_step_that_raised():
    recs = records(episode(FAILURE, [(0, 0.0), (0, float("nan")), (0, 1.0)], seed=40),
                   episode(FAILURE, [(0, float("inf"))], seed=41),
                   episode(FAILURE, [(0, 0.0), (0, float("nan"))], seed=42))
    recs.episodes.loc[2, "end_reason"] = "env_exception"  # its NaN is the exception's, not a reward
    recs.steps["error"] = [None, None, None, "unknown tool status 'slow'", None, None]
    t = AD.Tally()
    AR.from_exploration(ctx_with(recs=recs), t)
    assert [(s.seed, s.step, s.message, s.episode_id) for s in t.seen["nan_reward"]] == [
        (40, 1, "reward nan", 0), (41, 0, "reward inf", 1)]
    assert [(s.seed, s.message) for s in t.seen["bad_tool_info"]] == [(41, "unknown tool status 'slow'")]
    assert t.episodes == 3 and t.steps == 6


def test_finding_says_where_it_first_showed_up():
    t = AD.Tally(episodes=8, steps=100)
    for seed, step, msg, eid in ((3, 2, "KeyError: 'x'", 11), (4, 0, "KeyError: 'x'", 11), (5, 1, "IndexError", 12)):
        t.add("step_exception", "exploration" if seed < 5 else "api rollouts", seed, step, msg, eid)
    f = A.decide_env_error("defect", key="step_exception", seen=t.seen["step_exception"], tally=t,
                           step_timeout_s=ctx_with().config.step_timeout_s)
    assert f.severity == Severity.FAIL and f.title == "step() raises an exception"
    assert f.summary == ("step() raised 3 time(s), first at seed 3, step 2: KeyError: 'x'; a training run crashes "
                         "or silently loses those rollouts.")
    assert f.evidence["messages"] == ["KeyError: 'x'", "IndexError"] and f.evidence["count"] == 3
    assert f.evidence["by_source"] == {"exploration": 2, "api rollouts": 1} and list(f.examples) == [11, 12]
    assert f.evidence["episodes_checked"] == 8 and f.evidence["steps_checked"] == 100
    t.add("reset_hang", "exploration", 9, None, "timed out")
    hang = A.decide_env_error("defect", key="reset_hang", seen=t.seen["reset_hang"], tally=t,
                              step_timeout_s=ctx_with().config.step_timeout_s)
    assert hang.summary.startswith("reset() did not return in time (2.5 s deadline) at reset(seed=9)")
    assert list(hang.examples) == []


def test_defects_on_the_severity_ladder():
    fails = {k for k, d in AD.DEFECTS.items() if d.severity == "fail"}
    assert {"obs_outside_space", "nonbool_done", "bad_tool_info"} == set(AD.DEFECTS) - fails
    assert {d.severity for d in AD.DEFECTS.values()} == {"fail", "warn"}
