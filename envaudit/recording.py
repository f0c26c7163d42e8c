"""Instrumentation: ``AuditWrapper`` records every step and episode without changing the 5-tuple.

Records come out as two pandas DataFrames, ``steps`` (one row per step) and ``episodes`` (one row
per finished episode, with its end reason and outcome class), and save to / load from a folder as
Parquet. Recording is a few list appends per step; the tables are built only when asked for.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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
    read_tool_info,
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
    # Fast paths for what policies usually hand over (this runs on every recorded step).
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
    """Collects steps and episodes from one or more ``AuditWrapper``s; ids are unique within it."""

    def __init__(self, *, ids: Iterator[int] | None = None) -> None:
        self._steps: dict[str, list] = {c: [] for c in STEP_COLUMNS}
        self._episodes: dict[str, list] = {c: [] for c in EPISODE_COLUMNS}
        self._tags: list[dict[str, Any]] = []
        # Recorders that share an id iterator give ids unique across all of them (one per scan).
        self._ids = ids if ids is not None else itertools.count()
        self.abandoned = 0

    def new_episode_id(self) -> int:
        return next(self._ids)

    def add_step(self, row: tuple) -> None:
        for column, value in zip(STEP_COLUMNS, row, strict=True):
            self._steps[column].append(value)

    def add_step_columns(self, columns: list[list]) -> None:
        """Add the steps of one episode at once: one list per column, in ``STEP_COLUMNS`` order."""
        for column, values in zip(STEP_COLUMNS, columns, strict=True):
            self._steps[column].extend(values)

    def add_episode(self, row: tuple, tags: Mapping[str, Any]) -> None:
        for column, value in zip(EPISODE_COLUMNS, row, strict=True):
            self._episodes[column].append(value)
        self._tags.append(dict(tags))

    def __len__(self) -> int:
        return len(self._episodes["episode_id"])

    def records(self) -> Records:
        steps = pd.DataFrame(self._steps, columns=STEP_COLUMNS)
        episodes = pd.DataFrame(self._episodes, columns=EPISODE_COLUMNS)
        if self._tags:
            tags = pd.DataFrame(self._tags, index=episodes.index)
            for column in tags.columns:
                episodes[column] = tags[column]
        episodes["success"] = episodes["success"].astype("boolean")
        return Records(steps, episodes)


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
        # reset mid-way (or hangs) leaves no orphan rows behind, and a step costs one append.
        self._rows: list[tuple] = []

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
                message = f"{type(exc).__name__}: {exc}"
                self._rows.append((_plain_action(action), float("nan"), False, False, None, message))
                self._finish(None, exception=message)
            raise
        if self._open:
            # A non-mapping info breaks the API (the api probe reports it); record the step anyway.
            has_info = isinstance(info, Mapping)
            tool = read_tool_info(info, self.tool_key) if has_info and self.tool_key in info else None
            self._rows.append((_plain_action(action), float(reward), terminated, truncated, tool, None))
            if terminated or truncated:
                self._finish(info)
        return obs, reward, terminated, truncated, info

    def _finish(self, info: Mapping[str, Any] | None, exception: str | None = None) -> None:
        self._open = False
        success = None
        if isinstance(info, Mapping):
            flag = self._success(info)
            success = None if flag is None else bool(flag)
        episode_id, n = self.episode_id, len(self._rows)
        actions, rewards, terminated, truncated, tools, errors = map(list, zip(*self._rows, strict=True))
        # The failing step of an env_exception episode has a NaN reward; the return is what was
        # earned before it, so group statistics stay finite.
        total = 0.0
        for reward in rewards[:-1] if exception is not None else rewards:
            total += reward
        labels = self.labels
        if callable(self.label_of):
            action_labels = [self.label_of(a) for a in actions]
        elif labels is None:
            action_labels = [None] * n
        else:
            n_labels = len(labels)
            action_labels = [labels[a] if type(a) is int and 0 <= a < n_labels else None for a in actions]
        n_calls = n_errors = n_timeouts = n_injected = 0
        names, statuses, latencies, injected = [None] * n, [None] * n, [None] * n, [False] * n
        for t, tool in enumerate(tools):
            if tool is not None:
                names[t], statuses[t], latencies[t] = tool["name"], tool["status"], tool["latency_s"]
                injected[t] = bool(tool.get("injected"))
                n_calls += 1
                n_errors += statuses[t] == TOOL_ERROR
                n_timeouts += statuses[t] == TOOL_TIMEOUT
                n_injected += injected[t]
                errors[t] = errors[t] or tool["error"]
        self.recorder.add_step_columns([
            [episode_id] * n, range(n), actions, action_labels, rewards,
            [bool(x) for x in terminated], [bool(x) for x in truncated],
            names, statuses, latencies, errors, injected,
        ])
        if exception is not None:
            reason = END_ENV_EXCEPTION
        else:
            reason = end_reason(terminated=bool(terminated[-1]), truncated=bool(truncated[-1]),
                                tool_status=statuses[-1], success=success)
        outcome = outcome_class(reason, success=success, episode_return=total,
                                success_threshold=self.success_threshold)
        self.recorder.add_episode((
            episode_id, self._seed, n, total, reason, outcome, success,
            n_calls, n_errors, n_timeouts, n_injected, exception,
        ), self.tags)


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
