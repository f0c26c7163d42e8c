"""AuditWrapper / Recorder / Records against episodes computed by hand.

``Counter`` is a ToolEnv whose every reward and tool status follows from the actions played, and
``Script`` is a plain gymnasium.Env that replays a given list of step results, so each expected
value below is read off the env's design, not off what the wrapper printed.
"""

from __future__ import annotations

import itertools
import math

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from envaudit import AuditWrapper, Recorder, Records, ToolEnv, ToolOutput, Transition, wrap
from envaudit.recording import EPISODE_COLUMNS, STEP_COLUMNS

ADD1, ADD2, BROKEN, SLOW, SUBMIT, EXPLODE = range(6)


class Counter(ToolEnv):
    """Add up to the target 3, then submit.

    Rewards: a successful add earns +0.25; a failed tool call -0.5 (and ends the episode when
    ``end_on_failure``); submit pays +1 when the total is 3, else -1, and ends the episode.
    "broken" raises ValueError("backend down"); "slow" reports 5 s of latency against a 0.5 s
    deadline (a timeout); "explode" makes ``transition`` raise (an env exception).
    """

    def __init__(self, max_steps: int = 6, end_on_failure: bool = False) -> None:
        super().__init__(max_steps=max_steps)
        self.end_on_failure = end_on_failure
        self.observation_space = gym.spaces.Discrete(100)
        self.add_tool("add", lambda x: x, deadline_s=1.0)
        self.add_tool("broken", self._broken, deadline_s=1.0)
        self.add_tool("slow", lambda: ToolOutput("late", latency_s=5.0), deadline_s=0.5)
        self.add_tool("submit", lambda: None, deadline_s=None)
        self.add_call("add 1", "add", x=1)
        self.add_call("add 2", "add", x=2)
        self.add_call("broken", "broken")
        self.add_call("slow", "slow")
        self.add_call("submit", "submit")
        self.add_call("explode", "submit")

    @staticmethod
    def _broken():
        raise ValueError("backend down")

    def reset_task(self, options):
        self.total = 0
        return 0

    def transition(self, call, result):
        if call.label == "explode":
            raise RuntimeError("state corrupted")
        if not result.ok:
            return Transition(self.total, -0.5, terminated=self.end_on_failure)
        if call.tool == "add":
            self.total += result.value
            return Transition(self.total, 0.25)
        solved = self.total == 3
        return Transition(self.total, 1.0 if solved else -1.0, terminated=True, success=solved)


class Script(gym.Env):
    """Replays ``steps``: a list of (reward, terminated, truncated, info) per step."""

    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Discrete(100)

    def __init__(self, steps):
        self.steps = steps
        self.returned = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        reward, terminated, truncated, info = self.steps[self.t]
        self.t += 1
        out = (np.array([self.t]), reward, terminated, truncated, info)
        self.returned.append(out)
        return out


def play(env, actions, seed=0):
    env.reset(seed=seed)
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            return
    raise AssertionError("episode did not end")


def test_success_episode_every_column():
    env = wrap(Counter())
    play(env, [ADD1, ADD2, SUBMIT], seed=7)
    rec = env.records
    assert list(rec.steps.columns) == STEP_COLUMNS
    assert list(rec.episodes.columns) == EPISODE_COLUMNS
    s = rec.steps
    assert s["episode_id"].tolist() == [0, 0, 0]
    assert s["step"].tolist() == [0, 1, 2]
    assert s["action"].tolist() == [ADD1, ADD2, SUBMIT]
    assert s["action_label"].tolist() == ["add 1", "add 2", "submit"]
    assert s["reward"].tolist() == [0.25, 0.25, 1.0]
    assert s["terminated"].tolist() == [False, False, True]
    assert s["truncated"].tolist() == [False, False, False]
    assert s["tool_name"].tolist() == ["add", "add", "submit"]
    assert s["tool_status"].tolist() == ["ok", "ok", "ok"]
    assert ((s["latency_s"] >= 0) & (s["latency_s"] < 1.0)).all()
    assert s["error"].isna().all()
    assert s["injected"].tolist() == [False, False, False]
    e = rec.episodes.iloc[0]
    assert e["episode_id"] == 0 and e["seed"] == 7 and e["length"] == 3
    assert e["return"] == 1.5
    assert (e["end_reason"], e["outcome"], e["success"]) == ("terminated", "success", True)
    assert (e["n_tool_calls"], e["n_tool_errors"], e["n_tool_timeouts"], e["n_injected"]) == (3, 0, 0, 0)
    assert pd.isna(e["error"])


def test_failure_truncation_tool_error_tool_timeout_and_exception():
    env = wrap(Counter(max_steps=4, end_on_failure=False))
    play(env, [ADD2, SUBMIT], seed=1)  # total 2: submit fails
    play(env, [ADD1, BROKEN, SLOW, ADD1], seed=2)  # failures do not end it; step 4 truncates
    ep = env.records.episodes
    assert ep["end_reason"].tolist() == ["terminated", "truncated"]
    assert ep["outcome"].tolist() == ["failure", "timeout"]
    assert ep["return"].tolist() == [0.25 - 1.0, 0.25 - 0.5 - 0.5 + 0.25]
    assert ep["success"].tolist() == [False, False]  # ToolEnv says False on truncation
    assert ep["n_tool_errors"].tolist() == [0, 1] and ep["n_tool_timeouts"].tolist() == [0, 1]
    steps = env.records.steps[env.records.steps["episode_id"] == 1]
    assert steps["tool_status"].tolist() == ["ok", "error", "timeout", "ok"]
    assert steps["error"].iloc[1] == "ValueError: backend down"
    assert "deadline" in steps["error"].iloc[2]
    assert steps["latency_s"].iloc[2] >= 5.0
    assert steps["truncated"].tolist() == [False, False, False, True]

    strict = wrap(Counter(end_on_failure=True))
    play(strict, [ADD1, BROKEN])
    play(strict, [SLOW])
    ep = strict.records.episodes
    assert ep["end_reason"].tolist() == ["tool_error", "tool_timeout"]
    assert ep["outcome"].tolist() == ["error", "timeout"]
    assert ep["return"].tolist() == [-0.25, -0.5]
    assert ep["length"].tolist() == [2, 1]

    crash = wrap(Counter())
    crash.reset(seed=3)
    crash.step(ADD1)
    with pytest.raises(RuntimeError, match="state corrupted"):
        crash.step(EXPLODE)
    e = crash.records.episodes.iloc[0]
    assert (e["end_reason"], e["outcome"], e["length"]) == ("env_exception", "error", 2)
    assert e["error"] == "RuntimeError: state corrupted"
    assert pd.isna(e["success"])
    last = crash.records.steps.iloc[-1]
    assert math.isnan(last["reward"]) and last["error"] == "RuntimeError: state corrupted"
    assert last["action_label"] == "explode" and pd.isna(last["tool_name"])
    # The return is what was earned before the crash (ADD1 pays 0.25), not NaN.
    assert e["return"] == 0.25


def test_unknown_outcome_threshold_and_custom_success():
    script = [(1.0, False, False, {}), (2.0, True, False, {"solved": 1, "score": 0.2})]
    assert wrap(Script(script)).__class__ is AuditWrapper
    envs = {
        "none": wrap(Script(script)),
        "threshold_hit": wrap(Script(script), success_threshold=3.0),
        "threshold_miss": wrap(Script(script), success_threshold=3.5),
        "key": wrap(Script(script), success="solved"),
        "callable": wrap(Script(script), success=lambda info: info["score"] > 0.5),
    }
    outcomes = {}
    for name, env in envs.items():
        play(env, [0, 0])
        outcomes[name] = env.records.episodes.iloc[0][["outcome", "success"]].tolist()
    assert outcomes["none"][0] == "unknown" and pd.isna(outcomes["none"][1])
    assert outcomes["threshold_hit"][0] == "success" and pd.isna(outcomes["threshold_hit"][1])
    assert outcomes["threshold_miss"][0] == "failure"
    assert outcomes["key"] == ["success", True]
    assert outcomes["callable"] == ["failure", False]


def test_end_reason_of_a_plain_env_with_tool_info():
    tool = lambda status: {"tool": {"name": "search", "status": status}}  # noqa: E731
    cases = [
        ([(0.0, True, False, tool("timeout"))], "tool_timeout", "timeout"),
        ([(0.0, True, False, tool("error"))], "tool_error", "error"),
        ([(0.0, False, True, tool("error"))], "truncated", "timeout"),
        ([(0.0, True, True, {"success": True})], "terminated", "success"),
        ([(0.0, True, False, tool("crashed") | {"success": True})], "tool_error", "error"),
    ]
    for script, reason, outcome in cases:
        env = wrap(Script(script))
        play(env, [0])
        row = env.records.episodes.iloc[0]
        assert (row["end_reason"], row["outcome"]) == (reason, outcome), script
    env = wrap(Script([(0.0, True, False, {"call": {"name": "x", "status": "timeout"}})]),
               tool_key="call")
    play(env, [0])
    assert env.records.steps["tool_name"].tolist() == ["x"]
    assert env.records.episodes["end_reason"].tolist() == ["tool_timeout"]


def test_five_tuple_passes_through_unchanged():
    info = {"tool": {"name": "t", "status": "ok"}, "extra": object()}
    inner = Script([(0.5, False, False, info), (1.0, True, False, {"success": True})])
    env = wrap(inner)
    first = env.reset(seed=0)
    out = env.step(1)
    sent = inner.returned[0]
    assert len(out) == 5 and all(a is b for a, b in zip(out, sent, strict=True))
    assert out[4] is info and set(info) == {"tool", "extra"}  # nothing added to info
    assert first[1] == {}
    out = env.step(np.int64(2))
    assert all(a is b for a, b in zip(out, inner.returned[1], strict=True))


def test_episode_ids_abandoned_resets_and_tags():
    env = wrap(Counter())
    play(env, [SUBMIT])  # id 0
    env.reset(seed=1)  # id 1, abandoned after one step
    env.step(ADD1)
    env.set_tags(group=4, policy="random")
    play(env, [ADD1, ADD2, SUBMIT], seed=2)  # id 2
    rec = env.records
    assert rec.episodes["episode_id"].tolist() == [0, 2]
    assert rec.episodes["seed"].tolist() == [0, 2]
    assert env.recorder.abandoned == 1 and len(env.recorder) == 2
    assert sorted(set(rec.steps["episode_id"])) == [0, 2]  # the abandoned episode left no rows
    assert rec.episodes["group"].tolist()[1] == 4 and rec.episodes["policy"].tolist()[1] == "random"
    assert pd.isna(rec.episodes["group"].tolist()[0])

    ids = itertools.count(100)
    shared_a, shared_b = Recorder(ids=ids), Recorder(ids=ids)
    a, b = wrap(Counter(), recorder=shared_a), wrap(Counter(), recorder=shared_b)
    play(a, [SUBMIT])
    play(b, [SUBMIT])
    play(a, [SUBMIT])
    assert a.records.episodes["episode_id"].tolist() == [100, 102]
    assert b.records.episodes["episode_id"].tolist() == [101]


def test_step_after_end_and_open_episode_are_not_recorded():
    env = wrap(Counter())
    play(env, [SUBMIT])
    with pytest.raises(gym.error.ResetNeeded):
        env.step(ADD1)
    assert len(env.records.steps) == 1 and len(env.records.episodes) == 1
    env.reset(seed=5)
    env.step(ADD1)  # an episode still running is not in the tables yet
    assert len(env.records.steps) == 1 and len(env.records.episodes) == 1


def test_action_kinds_and_labels():
    env = wrap(Counter(max_steps=20))
    env.reset(seed=0)
    for a in [np.int64(ADD1), np.array(ADD1), np.array([ADD1]), 0.0]:
        env.step(a)
    steps = env.records.steps
    assert len(steps) == 0  # still running
    env.step(SUBMIT)
    steps = env.records.steps
    assert steps["action"].tolist() == [ADD1, ADD1, "[0]", 0.0, SUBMIT]
    labels = steps["action_label"].tolist()
    assert labels[:2] == ["add 1", "add 1"] and labels[4] == "submit"
    assert steps["action_label"].iloc[2:4].isna().all()
    plain = wrap(Script([(0.0, True, False, {})]))
    play(plain, [1])
    assert plain.labels is None and plain.records.steps["action_label"].isna().all()


def test_save_load_round_trip(tmp_path):
    env = wrap(Counter(end_on_failure=True))
    env.set_tags(group=1)
    play(env, [ADD1, ADD2, SUBMIT])
    play(env, [BROKEN])
    env.reset(seed=9)
    with pytest.raises(RuntimeError):
        env.step(EXPLODE)
    rec = env.records
    assert str(rec.episodes["success"].dtype) == "boolean"
    rec.save(tmp_path / "run")
    back = Records.load(tmp_path / "run")
    pd.testing.assert_frame_equal(back.steps, rec.steps)
    pd.testing.assert_frame_equal(back.episodes, rec.episodes)
    assert str(back.episodes["success"].dtype) == "boolean"
    assert back.episodes["success"].isna().tolist() == [False, False, True]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["episodes.parquet", "steps.parquet"]


def test_save_mixed_actions_and_empty(tmp_path):
    env = wrap(Script([(0.0, False, False, {}), (0.0, False, False, {}), (1.0, True, False, {})]))
    play(env, [1, 0.5, np.array([1, 2])])
    env.records.save(tmp_path)
    back = Records.load(tmp_path)
    assert back.steps["action"].tolist() == ["1", "0.5", "[1, 2]"]
    pd.testing.assert_frame_equal(back.episodes, env.records.episodes)  # no flag: success is <NA>
    assert str(back.episodes["success"].dtype) == "boolean" and back.episodes["success"].isna().all()

    empty = Recorder().records()
    empty.save(tmp_path / "empty")
    loaded = Records.load(tmp_path / "empty")
    assert list(loaded.steps.columns) == STEP_COLUMNS and len(loaded.episodes) == 0


def test_load_missing_folder_names_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"steps\.parquet.*envaudit scan"):
        Records.load(tmp_path)


def test_concat_keeps_every_row():
    a, b = wrap(Counter()), wrap(Counter(), recorder=Recorder(ids=itertools.count(10)))
    play(a, [SUBMIT])
    play(b, [ADD1, SUBMIT])
    both = Records.concat([a.records, None, b.records])
    assert both.episodes["episode_id"].tolist() == [0, 10]
    assert len(both.steps) == 3
    assert len(Records.concat([]).episodes) == 0


def test_tags_may_not_overwrite_episode_columns():
    env = wrap(Counter())
    with pytest.raises(ValueError, match=r"tags \['seed'\] would overwrite episode columns"):
        env.set_tags(seed=3)


def test_of_episodes_keeps_the_steps_and_episodes_of_those_ids_only():
    steps = pd.DataFrame({"episode_id": [4, 4, 5, 6, 6, 6], "step": [0, 1, 0, 0, 1, 2]})
    episodes = pd.DataFrame({"episode_id": [4, 5, 6], "length": [2, 1, 3]})
    part = Records(steps, episodes).of_episodes(iter([6, 4, 9]))
    assert part.steps["episode_id"].tolist() == [4, 4, 6, 6, 6] and part.steps["step"].tolist() == [0, 1, 0, 1, 2]
    assert part.episodes["length"].tolist() == [2, 3]
    assert Records(steps, episodes).of_episodes([]).episodes.empty
