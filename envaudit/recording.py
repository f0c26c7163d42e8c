"""Instrumentation: ``AuditWrapper`` records every step and episode without changing the 5-tuple.

Records come out as two pandas DataFrames, ``steps`` (one row per step) and ``episodes`` (one row
per finished episode, with its end reason and outcome class), and save to / load from a folder as
Parquet. Recording is a few list appends per step; the tables are built only when asked for.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import reduce
from operator import add
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.atomic import atomic_parquet
from envaudit.protocol import (
    END_ENV_EXCEPTION,
    SUCCESS_KEY,
    TOOL_ERROR,
    TOOL_KEY,
    TOOL_TIMEOUT,
    end_reason,
    outcome_class,
    tool_fields,
)

SuccessFn = Callable[[Mapping[str, Any]], "bool | None"]

STEP_COLUMNS = [
    "episode_id", "step", "action", "action_label", "reward", "terminated", "truncated",
    "tool_name", "tool_status", "latency_s", "error", "injected",
]
EPISODE_COLUMNS = [
    "episode_id", "seed", "length", "return", "end_reason", "outcome", "success",
    "n_tool_calls", "n_tool_errors", "n_tool_timeouts", "n_injected", "error",
]


def action_labels_of(env: gym.Env) -> list[str] | None:
    """The env's readable action labels (``ToolEnv.action_labels``), when it has them."""
    labels = getattr(env.unwrapped, "action_labels", None)
    return list(labels) if labels is not None else None


def _plain_action(action: Any) -> Any:
    kind = type(action)
    if kind is int or kind is float or kind is str:  # str: Text actions (tool calls as text) as written
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


def _concrete(base: type) -> list[type]:
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_concrete(sub)]
    return found


# Immutable scalar actions are stored as given and made plain once per episode (``_plain_actions``);
# anything else (arrays, lists, bools: they may be mutated by the policy, or need repr) is made
# plain on its step. Each converter gives what ``_plain_action`` gives for that type.
_CONVERT: dict[type, Callable[[Any], Any] | None] = {int: None, float: None, str: None, np.str_: str}
_CONVERT.update({t: int for t in _concrete(np.integer)})
_CONVERT.update({t: float for t in _concrete(np.floating)})
_RAW_ACTIONS = frozenset(_CONVERT)


def _plain_actions(actions: list) -> list:
    """``_plain_action`` of every action of an episode (each one a type of ``_RAW_ACTIONS``)."""
    kinds = set(map(type, actions))
    if len(kinds) == 1:
        convert = _CONVERT[kinds.pop()]
        return actions if convert is None else list(map(convert, actions))
    return [a if (convert := _CONVERT[type(a)]) is None else convert(a) for a in actions]


@dataclass
class Records:
    """The steps and episodes tables of a set of recorded episodes."""

    steps: pd.DataFrame
    episodes: pd.DataFrame

    def save(self, folder: str | os.PathLike) -> None:
        """Write ``steps.parquet`` and ``episodes.parquet`` atomically into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, df in (("steps", self.steps), ("episodes", self.episodes)):
            frame = df.copy()
            # Parquet needs one type per column; actions of mixed kinds are kept as text.
            if "action" in frame and frame["action"].map(type).nunique() > 1:
                frame["action"] = frame["action"].astype(str)
            atomic_parquet(folder / f"{name}.parquet", frame)

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Records:
        folder = Path(folder)
        missing = [n for n in ("steps", "episodes") if not (folder / f"{n}.parquet").exists()]
        if missing:
            raise FileNotFoundError(
                f"{folder} has no {', '.join(m + '.parquet' for m in missing)}; "
                "is it a report folder written by `envaudit scan`?"
            )
        return cls(pd.read_parquet(folder / "steps.parquet"), pd.read_parquet(folder / "episodes.parquet"))

    def of_episodes(self, ids: Iterable[int]) -> Records:
        """The steps and episodes of the episodes ``ids`` only."""
        ids = set(ids)
        return Records(self.steps[self.steps["episode_id"].isin(ids)],
                       self.episodes[self.episodes["episode_id"].isin(ids)])

    @classmethod
    def concat(cls, parts: list[Records]) -> Records:
        parts = [p for p in parts if p is not None]
        if not parts:
            return Recorder().records()
        return cls(
            pd.concat([p.steps for p in parts], ignore_index=True),
            pd.concat([p.episodes for p in parts], ignore_index=True),
        )


class Recorder:
    """Collects steps and episodes from one or more ``AuditWrapper``s; ids are unique within it.

    A wrapper hands over each finished episode as it was stepped (actions as given, rewards, tool
    calls, the last step's flags); the rows are derived from that only when the tables are asked
    for, so recording costs the rollout a few appends per step and one per episode.
    """

    def __init__(self, *, ids: Iterator[int] | None = None) -> None:
        self._steps: dict[str, list] = {c: [] for c in STEP_COLUMNS}
        self._episodes: dict[str, list] = {c: [] for c in EPISODE_COLUMNS}
        self._tags: list[dict[str, Any]] = []
        self._ended: list[tuple] = []  # finished episodes not yet in the columns, see ``_expand``
        # Recorders that share an id iterator give ids unique across all of them (one per scan).
        self._ids = ids if ids is not None else itertools.count()
        self.abandoned = 0

    def new_episode_id(self) -> int:
        return next(self._ids)

    def add_step(self, row: tuple) -> None:
        self._flush()
        for column, value in zip(STEP_COLUMNS, row, strict=True):
            self._steps[column].append(value)

    def add_step_columns(self, columns: list[list]) -> None:
        """Add the steps of one episode at once: one list per column, in ``STEP_COLUMNS`` order."""
        self._flush()
        for column, values in zip(STEP_COLUMNS, columns, strict=True):
            self._steps[column].extend(values)

    def add_episode(self, row: tuple, tags: Mapping[str, Any]) -> None:
        self._flush()
        for column, value in zip(EPISODE_COLUMNS, row, strict=True):
            self._episodes[column].append(value)
        self._tags.append(dict(tags))

    def __len__(self) -> int:
        return len(self._episodes["episode_id"]) + len(self._ended)

    def records(self) -> Records:
        self._flush()
        steps = pd.DataFrame(self._steps, columns=STEP_COLUMNS)
        episodes = pd.DataFrame(self._episodes, columns=EPISODE_COLUMNS)
        if self._tags:
            tags = pd.DataFrame(self._tags, index=episodes.index)
            for column in tags.columns:
                episodes[column] = tags[column]
        episodes["success"] = episodes["success"].astype("boolean")
        return Records(steps, episodes)

    def _flush(self) -> None:
        ended, self._ended = self._ended, []
        for episode in ended:
            self._expand(*episode)

    def _expand(self, episode_id: int, seed: int | None, actions: list, rewards: list[float],
                tools: list, terminated: bool, truncated: bool, success: bool | None,
                exception: str | None, action_labels: list | None, labels: list[str] | None,
                success_threshold: float | None, tags: dict[str, Any]) -> None:
        """The step rows and episode row of one episode as ``AuditWrapper`` handed it over.

        ``actions`` are as given (immutable scalars) or already plain; ``tools`` holds the step
        index and ``tool_fields`` of each step that called a tool, one after the other;
        ``action_labels`` are the labels when the env named them itself, else they come from
        ``labels`` (the env's action labels).
        """
        n = len(rewards)
        actions = _plain_actions(actions)
        # The failing step of an env_exception episode has a NaN reward; the return is what was
        # earned before it, so group statistics stay finite. (reduce adds in order, as a loop would.)
        total = reduce(add, rewards if exception is None else rewards[:-1], 0.0)
        if action_labels is None:
            if labels is None:
                action_labels = [None] * n
            else:
                n_labels = len(labels)
                action_labels = [labels[a] if type(a) is int and 0 <= a < n_labels else None for a in actions]
        # Only an episode's last step can be terminated or truncated: any earlier one would have ended it.
        ended_terminated, ended_truncated = [False] * n, [False] * n
        ended_terminated[-1], ended_truncated[-1] = terminated, truncated
        n_calls = len(tools) // 6
        if n_calls == n:  # every step called a tool (step indices are distinct and below n)
            names, statuses, latencies, errors, injected = (tools[i::6] for i in range(1, 6))
        else:
            names, statuses, latencies, errors = [None] * n, [None] * n, [None] * n, [None] * n
            injected = [False] * n
            called = tools[::6]
            for i, column in enumerate((names, statuses, latencies, errors, injected), start=1):
                for t, value in zip(called, tools[i::6], strict=True):
                    column[t] = value
        n_errors, n_timeouts = statuses.count(TOOL_ERROR), statuses.count(TOOL_TIMEOUT)
        n_injected = injected.count(True)
        if exception is not None:
            errors[-1] = exception  # the failing step called no tool
            reason = END_ENV_EXCEPTION
        else:
            reason = end_reason(terminated=terminated, truncated=truncated, tool_status=statuses[-1],
                                success=success)
        outcome = outcome_class(reason, success=success, episode_return=total,
                                success_threshold=success_threshold)
        step_columns = (
            [episode_id] * n, range(n), actions, action_labels, rewards, ended_terminated,
            ended_truncated, names, statuses, latencies, errors, injected,
        )
        for values, column in zip(step_columns, self._steps.values(), strict=True):
            column.extend(values)
        episode_row = (episode_id, seed, n, total, reason, outcome, success,
                       n_calls, n_errors, n_timeouts, n_injected, exception)
        for value, column in zip(episode_row, self._episodes.values(), strict=True):
            column.append(value)
        self._tags.append(tags)


class AuditWrapper(gym.Wrapper):
    """Record every step of ``env``; the 5-tuple passes through unchanged.

    ``success`` overrides where the success flag comes from: a callable on the last step's info, or
    the name of an info key (default ``"success"``). ``success_threshold`` classifies episodes as
    success/failure by return when the env gives no flag. ``tags`` set with ``set_tags`` are copied
    onto every following episode row (the scan uses them for policy names and GRPO groups).
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        tool_key: str = TOOL_KEY,
        success: SuccessFn | str | None = None,
        success_threshold: float | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        super().__init__(env)
        self.tool_key = tool_key
        if success is None or isinstance(success, str):
            key = success or SUCCESS_KEY
            self._success: SuccessFn = lambda info: info.get(key)  # noqa: E731
        else:
            self._success = success
        self.success_threshold = success_threshold
        self.recorder = recorder if recorder is not None else Recorder()
        self.labels = action_labels_of(env)
        # Envs whose actions are not indices (text tool calls) may name the label themselves.
        self.label_of = getattr(env.unwrapped, "label_of", None)
        self.tags: dict[str, Any] = {}
        self._open = False

    def set_tags(self, **tags: Any) -> None:
        clash = sorted(set(tags) & set(EPISODE_COLUMNS))
        if clash:
            raise ValueError(f"tags {clash} would overwrite episode columns; rename them")
        self.tags = dict(tags)

    @property
    def records(self) -> Records:
        return self.recorder.records()

    def _begin(self, seed: int | None) -> None:
        self._open = True
        self.episode_id = self.recorder.new_episode_id()
        self._seed = seed
        # Steps are buffered per episode and reach the recorder when it ends: an episode that is
        # reset mid-way (or hangs) leaves no orphan rows behind. A step stores only its action and
        # reward (and its tool call, if any); everything else is derived when the episode ends.
        self._actions: list = []
        self._rewards: list[float] = []
        self._tools: list = []  # step, *tool_fields of each step that called a tool
        self._add_action = self._actions.append
        self._add_reward = self._rewards.append

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._open:
            self.recorder.abandoned += 1
        self._open = False  # a reset that raises leaves no half episode behind
        obs, info = self.env.reset(seed=seed, options=options)
        self._begin(seed)
        return obs, info

    def step(self, action: Any):
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:
            if self._open:
                self._actions.append(_plain_action(action))
                self._rewards.append(float("nan"))
                self._finish(None, False, False, exception=f"{type(exc).__name__}: {exc}")
            raise
        if self._open:
            # This runs on every step of every rollout: identity tests instead of isinstance chains.
            self._add_action(action if action.__class__ in _RAW_ACTIONS else _plain_action(action))
            self._add_reward(float(reward))
            key = self.tool_key
            # A non-mapping info breaks the API (the api probe reports it); record the step anyway.
            if key in info if info.__class__ is dict else isinstance(info, Mapping) and key in info:
                tool = tool_fields(info.get(key), key)
                if tool is not None:
                    # Flat, as plain values: a container kept per step would cost the rollout
                    # more in garbage collection than the step itself.
                    tools = self._tools
                    tools.append(len(self._rewards) - 1)
                    tools.extend(tool)
            if terminated or truncated:
                self._finish(info, terminated, truncated)
        return obs, reward, terminated, truncated, info

    def _finish(self, info: Any, terminated: Any, truncated: Any, exception: str | None = None) -> None:
        self._open = False
        success = None
        if info.__class__ is dict or isinstance(info, Mapping):
            flag = self._success(info)
            success = None if flag is None else bool(flag)
        actions, action_labels = self._actions, None
        if callable(self.label_of):  # asked now: what an env's labels mean may change on its next reset
            actions = _plain_actions(actions)
            action_labels = [self.label_of(a) for a in actions]
        self.recorder._ended.append((
            self.episode_id, self._seed, actions, self._rewards, self._tools, bool(terminated),
            bool(truncated), success, exception, action_labels, self.labels, self.success_threshold,
            dict(self.tags),
        ))


def audit_wrap(env: gym.Env, *, tool_key: str = TOOL_KEY, success_threshold: float | None = None,
               recorder: Recorder | None = None, mapping: AuditWrapper | None = None) -> AuditWrapper:
    """Wrap ``env`` for a scan's recording, keeping the user's mapping.

    When the env was made as ``envaudit.wrap(env, success=..., tool_key=...)``, that mapping (and a
    ``success_threshold`` given there) is what the user told envaudit about the env; the scan's own
    wrapper adopts it instead of the default keys. ``mapping`` is that wrapper when the caller has
    already taken it off the env (``strip_user_wrapper``); otherwise it is looked for in ``env``.
    """
    mapping = mapping if mapping is not None else user_mapping(env)
    if mapping is not None:
        tool_key = mapping.tool_key if tool_key == TOOL_KEY else tool_key
        if success_threshold is None:
            success_threshold = mapping.success_threshold
    wrapper = AuditWrapper(env, tool_key=tool_key, success_threshold=success_threshold, recorder=recorder)
    if mapping is not None:
        wrapper._success = mapping._success
    return wrapper


def user_mapping(env: gym.Env) -> AuditWrapper | None:
    """The ``envaudit.wrap`` layer of ``env``, if the user made the env with one."""
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, AuditWrapper):
            return layer
        layer = layer.env
    return None


def strip_user_wrapper(env: gym.Env) -> tuple[gym.Env, AuditWrapper | None]:
    """``(env, mapping)``: an outermost ``envaudit.wrap`` layer taken off (its recording would only
    duplicate the scan's), with the mapping it carried."""
    if isinstance(env, AuditWrapper):
        return env.env, env
    return env, user_mapping(env)


def wrap(
    env: gym.Env,
    *,
    tool_key: str = TOOL_KEY,
    success: SuccessFn | str | None = None,
    success_threshold: float | None = None,
    recorder: Recorder | None = None,
) -> AuditWrapper:
    """Wrap ``env`` so every step is recorded; see ``AuditWrapper``."""
    return AuditWrapper(env, tool_key=tool_key, success=success,
                        success_threshold=success_threshold, recorder=recorder)


def explored_episodes(episodes: pd.DataFrame) -> pd.DataFrame:
    """Exploration's own episodes (``probe == "explore"``) of a table other probes may have added to."""
    return episodes[episodes["probe"] == "explore"] if "probe" in episodes else episodes
