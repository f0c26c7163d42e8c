"""AuditWrapper's tables against a plain reference recorder, on the same stream of steps.

``Reference`` records the obvious way: every step converted and parsed on the spot into a full
row, every episode summed up when it ends (it is the AuditWrapper of before the per-step cost was
cut, kept here as the specification). It wraps the AuditWrapper under test, so both see exactly
the same actions, 5-tuples and exceptions, including tool latencies measured by the clock; their
steps and episodes tables must be identical, column types included.
"""

from __future__ import annotations

import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from envaudit import AuditWrapper, FaultInjector, ToolEnv, ToolOutput, Transition
from envaudit.protocol import (
    END_ENV_EXCEPTION,
    TOOL_ERROR,
    TOOL_OK,
    TOOL_STATUSES,
    TOOL_TIMEOUT,
    end_reason,
    outcome_class,
)
from envaudit.recording import EPISODE_COLUMNS, STEP_COLUMNS, action_labels_of


def plain_action(action: Any) -> Any:
    if type(action) in (int, float, str):
        return action
    if isinstance(action, np.str_):
        return str(action)
    if isinstance(action, np.integer):
        return int(action)
    if isinstance(action, np.floating):
        return float(action)
    arr = np.asarray(action)
    if arr.shape == () and np.issubdtype(arr.dtype, np.integer):
        return int(arr)
    if arr.shape == () and np.issubdtype(arr.dtype, np.floating):
        return float(arr)
    return repr(action.tolist() if hasattr(action, "tolist") else action)


def tool_record(info: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    raw = info.get(key)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise TypeError(f"info[{key!r}] must be a mapping")
    status = str(raw.get("status", TOOL_OK))
    error = raw.get("error")
    if status not in TOOL_STATUSES:
        error = f"unknown tool status {status!r}" + (f": {error}" if error else "")
        status = TOOL_ERROR
    latency = raw.get("latency_s")
    return {"name": str(raw.get("name", "")), "status": status,
            "latency_s": float(latency) if latency is not None else None,
            "error": None if error is None else str(error), "injected": bool(raw.get("injected", False))}


class Reference(gym.Wrapper):
    """Records like AuditWrapper, one full row per step."""

    def __init__(self, env, *, success=None, success_threshold=None, tool_key="tool"):
        super().__init__(env)
        key = success if isinstance(success, str) else "success"
        self.success = success if callable(success) else (lambda info: info.get(key))
        self.success_threshold, self.tool_key = success_threshold, tool_key
        self.labels, self.label_of = action_labels_of(env), getattr(env.unwrapped, "label_of", None)
        self.steps: list[dict] = []
        self.episodes: list[dict] = []
        self.tags: dict[str, Any] = {}
        self.open, self.abandoned, self.next_id = False, 0, 0

    def set_tags(self, **tags):
        self.tags = dict(tags)

    def reset(self, *, seed=None, options=None):
        self.abandoned += self.open
        self.open = False
        out = self.env.reset(seed=seed, options=options)
        self.open, self.seed, self.rows = True, seed, []
        self.episode_id, self.next_id = self.next_id, self.next_id + 1
        return out

    def step(self, action):
        try:
            out = self.env.step(action)
        except Exception as exc:
            if self.open:
                message = f"{type(exc).__name__}: {exc}"
                self.rows.append(dict(action=plain_action(action), reward=float("nan"), terminated=False,
                                      truncated=False, tool=None, error=message))
                self.end(None, message)
            raise
        _, reward, terminated, truncated, info = out
        if self.open:
            tool = tool_record(info, self.tool_key) if isinstance(info, Mapping) and self.tool_key in info else None
            self.rows.append(dict(action=plain_action(action), reward=float(reward), terminated=bool(terminated),
                                  truncated=bool(truncated), tool=tool, error=None))
            if terminated or truncated:
                self.end(info, None)
        return out

    def end(self, info, exception):
        self.open = False
        flag = self.success(info) if isinstance(info, Mapping) else None
        success = None if flag is None else bool(flag)
        total = 0.0
        for row in self.rows[:-1] if exception else self.rows:
            total += row["reward"]
        counts = dict(calls=0, errors=0, timeouts=0, injected=0)
        for t, row in enumerate(self.rows):
            tool = row["tool"] or {}
            if callable(self.label_of):
                label = self.label_of(row["action"])
            elif self.labels is not None and type(row["action"]) is int and 0 <= row["action"] < len(self.labels):
                label = self.labels[row["action"]]
            else:
                label = None
            counts["calls"] += bool(tool)
            counts["errors"] += tool.get("status") == TOOL_ERROR
            counts["timeouts"] += tool.get("status") == TOOL_TIMEOUT
            counts["injected"] += tool.get("injected", False)
            self.steps.append(dict(
                episode_id=self.episode_id, step=t, action=row["action"], action_label=label,
                reward=row["reward"], terminated=row["terminated"], truncated=row["truncated"],
                tool_name=tool.get("name"), tool_status=tool.get("status"), latency_s=tool.get("latency_s"),
                error=row["error"] or tool.get("error"), injected=tool.get("injected", False)))
        last = self.rows[-1]
        reason = END_ENV_EXCEPTION if exception else end_reason(
            terminated=last["terminated"], truncated=last["truncated"],
            tool_status=(last["tool"] or {}).get("status"), success=success)
        outcome = outcome_class(reason, success=success, episode_return=total,
                                success_threshold=self.success_threshold)
        self.episodes.append(dict(
            episode_id=self.episode_id, seed=self.seed, length=len(self.rows), **{"return": total},
            end_reason=reason, outcome=outcome, success=success, n_tool_calls=counts["calls"],
            n_tool_errors=counts["errors"], n_tool_timeouts=counts["timeouts"], n_injected=counts["injected"],
            error=exception, tags=dict(self.tags)))

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        steps = pd.DataFrame({c: [row[c] for row in self.steps] for c in STEP_COLUMNS}, columns=STEP_COLUMNS)
        episodes = pd.DataFrame({c: [row[c] for row in self.episodes] for c in EPISODE_COLUMNS},
                                columns=EPISODE_COLUMNS)
        tags = [row["tags"] for row in self.episodes]
        if tags:
            frame = pd.DataFrame(tags, index=episodes.index)
            for column in frame.columns:
                episodes[column] = frame[column]
        episodes["success"] = episodes["success"].astype("boolean")
        return steps, episodes


def _tool_info(rng: np.random.Generator) -> Any:
    tool: dict[str, Any] = {}
    for key, options in {
        "name": ["search", "db", 7, None],
        "status": ["ok", "ok", "error", "timeout", "OK", "crashed", 3],
        "latency_s": [0.25, 1, None, "0.5", np.float32(0.1)],
        "error": [None, "backend down", ValueError("bad"), ""],
        "injected": [True, False, 1, 0, np.bool_(True)],
    }.items():
        if rng.random() < 0.8:
            tool[key] = options[rng.integers(len(options))]
    kind = rng.integers(10)
    return OrderedDict(tool) if kind == 0 else types.MappingProxyType(tool) if kind == 1 else tool


class Chaos(gym.Env):
    """Random 5-tuples of every shape the info protocol allows (and some it does not)."""

    action_space = gym.spaces.Discrete(4)
    observation_space = gym.spaces.Discrete(1)

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        rng = self.rng
        if rng.random() < 0.03:
            raise RuntimeError(f"state corrupted at {rng.integers(100)}")
        rewards = [0.1, 0.2, 1 / 3, -1.0, 2, np.float32(0.3), np.float64(-0.7), np.int64(3), -0.0]
        reward = rewards[rng.integers(len(rewards))]
        terminated, truncated = bool(rng.random() < 0.1), bool(rng.random() < 0.05)
        if rng.random() < 0.3:
            terminated, truncated = np.bool_(terminated), np.bool_(truncated)
        kind = rng.integers(12)
        info: Any = {}
        if kind < 5:
            info = {"tool": _tool_info(rng)}
        elif kind == 5:
            info = {"tool": None}
        elif kind == 6:
            info = [("tool", {"name": "x"})]  # not a mapping: breaks the API, recorded anyway
        elif kind == 7:
            info = types.MappingProxyType({"tool": {"name": "ro", "status": "timeout"}, "success": True})
        if isinstance(info, dict) and rng.random() < 0.5:
            info["success"] = [True, False, None, np.bool_(False), 1][rng.integers(5)]
            info["solved"] = bool(rng.random() < 0.5)
        return 0, reward, terminated, truncated, info


def _chaos_action(rng: np.random.Generator, t: int) -> Any:
    kinds = [lambda: int(t % 4), lambda: np.int64(t % 4), lambda: np.int32(1), lambda: np.uint8(2),
             lambda: 0.5, lambda: np.float32(0.1), lambda: np.float64(2.0), lambda: True, lambda: np.bool_(False),
             lambda: "call search", lambda: np.str_("2"), lambda: np.array(2), lambda: np.array(1.5),
             lambda: np.array([1, 2]), lambda: [3, "x"], lambda: np.int64(-1), lambda: 9]
    if rng.random() < 0.6:  # mostly the one kind a Discrete policy hands over
        return kinds[1]()
    return kinds[rng.integers(len(kinds))]()


class Adder(ToolEnv):
    """Tools that succeed, fail, report latencies and time out; ``explode`` raises in transition."""

    def __init__(self) -> None:
        super().__init__(max_steps=12)
        self.observation_space = gym.spaces.Discrete(100)
        self.add_tool("add", lambda x: x, deadline_s=1.0)
        self.add_tool("broken", self._broken, deadline_s=1.0)
        self.add_tool("slow", lambda: ToolOutput("late", latency_s=5.0), deadline_s=0.5)
        self.add_tool("submit", lambda: None)
        for label, tool, args in [("add 1", "add", {"x": 1}), ("add 2", "add", {"x": 2}), ("broken", "broken", {}),
                                  ("slow", "slow", {}), ("submit", "submit", {}), ("explode", "submit", {})]:
            self.add_call(label, tool, **args)

    @staticmethod
    def _broken():
        raise ValueError("backend down")

    def reset_task(self, options):
        self.total = 0
        return 0

    def transition(self, call, result):
        if call.label == "explode":
            raise RuntimeError("state corrupted")
        if call.tool == "add" and result.ok:
            self.total += result.value
            return Transition(self.total, 0.25)
        if call.tool == "submit":
            return Transition(self.total, 1.0 if self.total == 3 else -1.0, terminated=True, success=self.total == 3)
        return Transition(self.total, -0.5)


def drive(env: Reference, actions, *, episodes: int, seed: int) -> None:
    """Play ``episodes`` episodes through ``env`` with actions from ``actions(rng, t)``, abandoning
    some half-way and retagging some, as a scan's runners do."""
    rng = np.random.default_rng(seed)
    for episode in range(episodes):
        if episode % 7 == 3:
            tags = {"policy": f"p{episode}", "group": episode // 7}
            env.set_tags(**tags)
            env.env.set_tags(**tags)
        env.reset(seed=int(rng.integers(1000)) if episode % 5 else None)
        for t in range(40):
            if episode % 11 == 5 and t == 2:
                break  # abandoned: the next reset starts over
            action = actions(rng, t)
            try:
                *_, terminated, truncated, _ = env.step(action)
            except (RuntimeError, ValueError, TypeError):
                break
            if isinstance(action, np.ndarray) and action.ndim:
                action += 1  # a policy reusing its buffer: what was played is what is recorded
            if terminated or truncated:
                break


def assert_same_tables(env: Reference) -> None:
    steps, episodes = env.tables()
    got = env.env.recorder.records()
    assert len(episodes) > 5 and len(steps) > len(episodes)
    pd.testing.assert_frame_equal(got.steps, steps, check_exact=True)
    pd.testing.assert_frame_equal(got.episodes, episodes, check_exact=True)
    assert env.env.recorder.abandoned == env.abandoned and len(env.env.recorder) == len(episodes)


@pytest.mark.parametrize("options", [{}, {"success": "solved"}, {"success_threshold": 1.0},
                                     {"success": lambda info: info.get("solved") and info.get("success")}])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_protocol_streams_record_as_the_reference(seed, options):
    env = Reference(AuditWrapper(Chaos(seed), **options), **options)
    drive(env, _chaos_action, episodes=60, seed=seed)
    assert_same_tables(env)


def test_tool_env_with_injected_faults_records_as_the_reference():
    env = Reference(AuditWrapper(FaultInjector(Adder(), error_rate=0.2, timeout_rate=0.1, seed=3)))
    drive(env, lambda rng, t: [np.int64, int][t % 2](rng.integers(6)), episodes=60, seed=4)
    assert_same_tables(env)
    assert env.env.records.episodes["n_injected"].sum() > 0  # the injected path was exercised


def test_bundled_envs_record_as_the_reference():
    text = gym.make("envaudit/CodeFix-Text-v0")
    texts = list(text.unwrapped.call_texts)
    env = Reference(AuditWrapper(text))  # the env names its labels (label_of) and takes text
    drive(env, lambda rng, t: [texts[rng.integers(len(texts))], "no call", np.int64(rng.integers(len(texts)))][t % 3],
          episodes=25, seed=5)
    assert_same_tables(env)
    for env_id in ("envaudit/FlakySearch-FailurePenalty-v0", "CartPole-v1"):
        made = gym.make(env_id)
        env = Reference(AuditWrapper(made))
        drive(env, lambda rng, t, space=made.action_space: space.sample(), episodes=20, seed=6)
        assert_same_tables(env)
