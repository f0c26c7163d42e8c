"""A logged run as the scan's records, and the context the probes' record analyses read.

The probes read ``Records`` (``envaudit.recording``): an episodes table with the end reason and
outcome class the pipeline keys on, and a steps table. ``to_records`` derives those from the log's
columns and nothing else: a column the log lacks stays unknown (``outcome`` is ``unknown`` without
``success``; tool-failure counts are zero and flagged ``no_tool_status``) and the analyses that need
it say so. ``LogContext`` is a ``ProbeContext`` without an env: its ``env`` is the logged action
catalogue (it cannot be stepped) and ``run`` refuses, so a probe function that would run episodes
fails loudly instead of reporting on episodes it never ran.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.config import ScanConfig
from envaudit.logs.schema import LoggedRun
from envaudit.pipeline import Pipeline
from envaudit.probe import ProbeContext, ProbeInputs
from envaudit.protocol import (
    END_TERMINATED,
    END_TOOL_ERROR,
    END_TOOL_TIMEOUT,
    END_TRUNCATED,
    ERROR,
    FAILURE,
    SUCCESS,
    TIMEOUT,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    UNKNOWN,
)
from envaudit.recording import EPISODE_COLUMNS as RECORD_EPISODES
from envaudit.recording import STEP_COLUMNS as RECORD_STEPS
from envaudit.recording import Records

END_REASON_OF = {"terminated": END_TERMINATED, "truncated": END_TRUNCATED, "timeout": END_TOOL_TIMEOUT,
                 "error": END_TOOL_ERROR}
"""Schema end reasons as the protocol's: a wall-clock timeout is a timeout class like a tool timeout,
a crash an error class (``protocol.outcome_class`` keys on these)."""


NEEDS_ENV = "needs episodes of the env, and a logged run only has the episodes it logged"


class NeedsEnv(RuntimeError):
    """An analysis asked to run episodes, which a logged run cannot do without ``--env``."""


@dataclass
class Converted:
    records: Records
    has_success: bool
    has_end_reason: bool
    has_tool_status: bool
    has_steps: bool
    labels: list[str] | None
    """The logged actions' names when actions are text (their integer codes index this list)."""
    has_length: bool = True
    """``length`` was logged, or counted from the step table."""
    has_timeout_counts: bool = False
    """No step statuses, but a per-rollout ``tool_timeouts`` count (``schema.COUNT_COLUMNS``)."""
    has_error_counts: bool = False
    """No step statuses, but a per-rollout ``tool_errors`` count."""

    @property
    def knows_timeouts(self) -> bool:
        """Timed-out rollouts can be told apart: an ``end_reason``, or a timeout count to derive it from."""
        return self.has_end_reason or self.has_timeout_counts

    @property
    def knows_tool_failures(self) -> bool:
        """Failed tool calls are known per rollout: step statuses, or error and timeout counts."""
        return self.has_tool_status or (self.has_timeout_counts and self.has_error_counts)


def to_records(run: LoggedRun) -> Converted:
    """The logged run as ``Records``: outcome classes, tool-failure counts and step flags derived
    from the logged columns, episode ids as integers (``log_episode_id`` keeps the logged one)."""
    src = run.episodes.reset_index(drop=True)
    n = len(src)
    ids = np.arange(n, dtype=np.int64)
    logged_ids = src["episode_id"]
    has_success = "success" in src
    has_end = "end_reason" in src
    reason = (src["end_reason"].map(END_REASON_OF).fillna(END_TERMINATED) if has_end
              else pd.Series(END_TERMINATED, index=src.index))
    success = src["success"].astype("boolean") if has_success else pd.Series(pd.NA, index=src.index, dtype="boolean")
    outcome = np.full(n, UNKNOWN, dtype=object)
    timed = reason.isin([END_TRUNCATED, END_TOOL_TIMEOUT]).to_numpy()
    errored = (reason == END_TOOL_ERROR).to_numpy()
    flag = success.to_numpy(dtype=object, na_value=None)
    known = np.array([f is not None for f in flag])
    outcome[known] = np.where(np.array([bool(f) for f in flag[known]]), SUCCESS, FAILURE)
    counted = not has_end and "tool_timeouts" in src and not _has_statuses(run)
    if counted:
        # No end reason, but a count of timed-out calls: a rollout that failed its task with a call
        # timing out is counted in the timeout class (DESIGN: ended on a tool timeout), a successful
        # one stays a success whatever timed out on the way.
        timed = ~np.array([f is not None and bool(f) for f in flag], dtype=bool) & (src["tool_timeouts"].to_numpy(np.int64) > 0) & known
        reason = reason.where(~timed, END_TOOL_TIMEOUT)
    outcome[timed] = TIMEOUT
    outcome[errored] = ERROR
    eps = pd.DataFrame({
        "episode_id": ids,
        "seed": src["seed"].to_numpy() if "seed" in src else np.full(n, None, dtype=object),
        "return": src["return"].to_numpy(float),
        "end_reason": reason.to_numpy(object),
        "outcome": outcome,
        "success": success.to_numpy(dtype=object, na_value=None),
        "error": np.full(n, None, dtype=object),
        "iteration": src["iteration"].to_numpy(np.int64),
        # Integer codes in order of first appearance (``log_group_id`` keeps the logged id): the
        # probes group by this column thousands of times, and integers group fastest.
        "group": (pd.factorize(src["group_id"])[0].astype(np.int64) if "group_id" in src
                  else np.full(n, None, dtype=object)),
        "log_episode_id": logged_ids.astype(str).to_numpy(object),
        "log_group_id": (src["group_id"].astype(str).to_numpy(object) if "group_id" in src
                         else np.full(n, None, dtype=object)),
        "probe": "logged", "policy": run.source,
    })
    eps["success"] = eps["success"].astype("boolean")
    steps, has_status, labels = _steps(run, logged_ids, ids, reason)
    if "length" in src:
        eps["length"] = src["length"].to_numpy(np.int64)
    elif steps is not None:
        eps["length"] = steps.groupby("episode_id").size().reindex(ids, fill_value=0).to_numpy(np.int64)
    else:
        eps["length"] = np.zeros(n, np.int64)
    if steps is not None and has_status:
        status = steps["tool_status"]
        per = pd.DataFrame({"episode_id": steps["episode_id"], "calls": status.notna(),
                            "errors": status == TOOL_ERROR, "timeouts": status == TOOL_TIMEOUT})
        counts = per.groupby("episode_id")[["calls", "errors", "timeouts"]].sum().reindex(ids, fill_value=0)
        eps["n_tool_calls"] = counts["calls"].to_numpy(np.int64)
        eps["n_tool_errors"] = counts["errors"].to_numpy(np.int64)
        eps["n_tool_timeouts"] = counts["timeouts"].to_numpy(np.int64)
    else:
        for column in ("n_tool_calls", "n_tool_errors", "n_tool_timeouts"):
            logged = column.removeprefix("n_")
            eps[column] = src[logged].to_numpy(np.int64) if logged in src else np.zeros(n, np.int64)
    eps["n_injected"] = np.zeros(n, np.int64)
    order = [*RECORD_EPISODES, *[c for c in eps.columns if c not in RECORD_EPISODES]]
    records = Records(steps if steps is not None else pd.DataFrame(columns=RECORD_STEPS), eps[order])
    return Converted(records, has_success, has_end, has_status, steps is not None, labels,
                     has_length="length" in src or steps is not None,
                     has_timeout_counts=not has_status and "tool_timeouts" in src,
                     has_error_counts=not has_status and "tool_errors" in src)


def _has_statuses(run: LoggedRun) -> bool:
    return run.steps is not None and not run.steps.empty and "tool_status" in run.steps.columns


MAX_ANALYSED = 2000
"""Episodes the probes' statistics read at most: they are sized for a scan's exploration (a few
hundred episodes; their bootstraps hold n_boot x n indices, their group loops are Python), and two
thousand episodes detect the same effects with room to spare. A larger log is analysed on a seeded
sample of whole groups, and the report says so; the curves read every episode."""


def sample_groups(converted: Converted, seed: int, limit: int = MAX_ANALYSED) -> tuple[Converted, str | None]:
    """At most ``limit`` episodes, whole groups (or episodes, without groups) drawn with ``seed``,
    spread over every iteration; the note says how many of how many."""
    eps = converted.records.episodes
    if len(eps) <= limit:
        return converted, None
    from envaudit.seeding import child_rng

    rng = child_rng(seed, "logs", "sample")
    key = eps["group"].astype(str) if eps["group"].notna().all() else eps["episode_id"].astype(str)
    units = key.unique()
    per_unit = len(eps) / len(units)
    chosen = set(rng.choice(units, size=max(1, int(limit / per_unit)), replace=False))
    mask = key.isin(chosen).to_numpy()
    kept = eps[mask].reset_index(drop=True)
    steps = converted.records.steps
    steps = steps[steps["episode_id"].isin(kept["episode_id"])].reset_index(drop=True)
    note = (f"the probes' statistics read a seeded sample of {len(kept)} of the {len(eps)} logged episodes "
            f"(whole groups; at most {limit}); the curves read every episode")
    return dataclasses.replace(converted, records=Records(steps, kept)), note


def _steps(run: LoggedRun, logged_ids: pd.Series, ids: np.ndarray,
           reason: pd.Series) -> tuple[pd.DataFrame | None, bool, list[str] | None]:
    if run.steps is None or run.steps.empty:
        return None, False, None
    src = run.steps
    index = pd.Series(ids, index=logged_ids.to_numpy())
    episode = index.reindex(src["episode_id"].to_numpy()).to_numpy(np.int64)
    order = np.lexsort((src["step"].to_numpy(), episode))
    episode = episode[order]
    src = src.iloc[order].reset_index(drop=True)
    n = len(src)
    last = np.ones(n, dtype=bool)
    last[:-1] = episode[1:] != episode[:-1]
    ending = reason.to_numpy(object)[episode]
    labels = None
    if "action" in src:
        action = src["action"]
        if action.map(type).isin([str]).any():
            # Text actions (a tool call, a response) get integer codes so the probes' per-action
            # statistics work; ``action_label`` keeps the text.
            text = action.astype(str)
            codes, uniques = pd.factorize(text, sort=True)
            action_values, action_label = codes.astype(np.int64), text.to_numpy(object)
            labels = [str(u) for u in uniques]
        else:
            action_values, action_label = pd.to_numeric(action).to_numpy(), np.full(n, None, dtype=object)
    else:
        action_values, action_label = np.full(n, None, dtype=object), np.full(n, None, dtype=object)
    has_status = "tool_status" in src
    steps = pd.DataFrame({
        "episode_id": episode,
        "step": src["step"].to_numpy(np.int64),
        "action": action_values,
        "action_label": action_label,
        "reward": src["reward"].to_numpy(float) if "reward" in src else np.full(n, np.nan),
        "terminated": last & (ending == END_TERMINATED),
        "truncated": last & np.isin(ending, [END_TRUNCATED, END_TOOL_TIMEOUT]),
        "tool_name": src["tool_name"].to_numpy(object) if "tool_name" in src else np.full(n, None, dtype=object),
        "tool_status": (src["tool_status"].astype(object).where(src["tool_status"].notna(), None).to_numpy(object)
                        if has_status else np.full(n, None, dtype=object)),
        "latency_s": src["latency_s"].to_numpy(float) if "latency_s" in src else np.full(n, np.nan),
        "error": np.full(n, None, dtype=object),
        "injected": np.zeros(n, dtype=bool),
    })
    return steps, has_status, labels


class LoggedActions(gym.Env):
    """The logged action catalogue as an env's spaces and labels, for analyses that ask which
    actions exist; it cannot be reset or stepped (a logged run is not an env)."""

    def __init__(self, n_actions: int, labels: list[str] | None) -> None:
        self.action_space = gym.spaces.Discrete(max(1, n_actions))
        self.observation_space = gym.spaces.Discrete(1)
        self.action_labels = labels

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        raise NeedsEnv("a logged run cannot be reset; pass --env ENV to replay it against the env")

    def step(self, action: Any):
        raise NeedsEnv("a logged run cannot be stepped; pass --env ENV to replay it against the env")


def log_context(converted: Converted, config: ScanConfig, pipeline: Pipeline, name: str) -> ProbeContext:
    """A ``ProbeContext`` over the logged records: the probes' record analyses run on it unchanged."""
    steps = converted.records.steps
    # an action column with no value in it (a mapped field left empty) is no catalogue either
    numeric = (len(steps) and pd.api.types.is_numeric_dtype(steps["action"])
               and bool(steps["action"].notna().any()))
    n_actions = int(steps["action"].max()) + 1 if numeric else 0
    catalogue = LoggedActions(n_actions, converted.labels) if numeric else None
    return LogContext(ProbeInputs("logged run", _no_env, config, converted.records, [], pipeline, name), catalogue)


def _no_env() -> gym.Env:
    raise NeedsEnv("a logged run has no env to make; pass --env ENV to replay it against the env")


class LogContext(ProbeContext):
    """A context over a logged run: no env to step, the logged actions as its catalogue."""

    def __init__(self, inputs: ProbeInputs, catalogue: LoggedActions | None) -> None:
        super().__init__(inputs)
        self._catalogue = catalogue

    @property
    def env(self) -> gym.Env:
        if self._catalogue is None:
            raise NeedsEnv("the log has no step actions, so no action catalogue to analyse")
        return self._catalogue

    @property
    def is_tool_env(self) -> bool:
        return False  # no fault injection on a log: the failure probes take their exploration paths

    def over_cap(self, skipped: str) -> bool:
        """Always: a logged run has no env to run more episodes on, so a probe that checks before
        running them stops there (its analysis of the logged episodes stands) and says what it left."""
        self.incomplete(skipped, NEEDS_ENV)
        return True

    def run(self, policy, seeds, **_: Any):
        raise NeedsEnv(f"running policy {getattr(policy, 'name', policy)!r} needs the env; a logged run "
                       "only has the episodes it logged")

    def close(self) -> None:
        self._catalogue = None
