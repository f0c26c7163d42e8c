"""The generic schema of a logged training run, the contract between readers and analyses.

Every reader (the generic JSONL/Parquet/CSV reader and one per trainer's rollout dump) returns a
``LoggedRun``: an episode table with the columns of ``EPISODE_COLUMNS`` and, where the log has
per-step data, a step table with ``STEP_COLUMNS``. A column the log does not have is absent from
the frame (never filled with a guess); ``missing`` names it and ``notes`` say what was mapped from
what, so every analysis that needs an absent column says so in the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

END_REASONS = ("terminated", "truncated", "timeout", "error")
"""Values of ``end_reason``: the env ended the episode; a turn/step limit cut it; a wall-clock
timeout cut it; the env or a tool crashed."""

EPISODE_COLUMNS: dict[str, str] = {
    "episode_id": "unique id of the logged rollout (int or str)",
    "group_id": "the GRPO group (same prompt/task and reset) the rollout belongs to",
    "iteration": "training iteration (step) at which the rollout was generated, int",
    "return": "the reward the trainer used for the rollout, float",
    "length": "number of turns/steps (or response tokens where a trainer logs no turns), int",
    "end_reason": "one of END_REASONS",
    "success": "the task's correctness signal, bool; may be missing (never derived from reward)",
    "tool_calls": "tool calls the rollout made, int (where the log has no step table)",
    "tool_errors": "tool calls that failed with an error, int (where the log has no step table)",
    "tool_timeouts": "tool calls that timed out, int (where the log has no step table)",
}
COUNT_COLUMNS = ("tool_calls", "tool_errors", "tool_timeouts")
"""Per-rollout tool counts: what a dump without a step table can say about its tool calls. A step
table's ``tool_status`` takes precedence; without ``end_reason``, an unsuccessful rollout with a
timed-out call is counted in the timeout class (``records.to_records``)."""
REQUIRED_EPISODE_COLUMNS = ("episode_id", "iteration", "return")
"""Without these nothing can be analysed; the others unlock analyses one by one."""

STEP_COLUMNS: dict[str, str] = {
    "episode_id": "the episode the step belongs to",
    "step": "0-based index of the step within the episode, int",
    "reward": "reward of the step, float",
    "action": "what the agent did (text or an id)",
    "tool_name": "the tool called at this step, or missing",
    "tool_status": "ok / error / timeout for a tool call, or missing",
    "latency_s": "seconds the step (tool call) took, float",
}
OPTIONAL_EPISODE_COLUMNS = ("seed", "prompt", "response", "task")
"""Kept when present: replay (``--env``) needs ``seed`` and the step actions; the others are shown
in examples."""


@dataclass
class LoggedRun:
    """A logged run in the generic schema. ``source`` names the reader (``generic``, ``verl``...)."""

    episodes: pd.DataFrame
    steps: pd.DataFrame | None
    source: str
    notes: list[str] = field(default_factory=list)
    """What was mapped from what, and anything dropped, in the user's terms (shown in the report)."""
    missing: list[str] = field(default_factory=list)
    """Columns of the schema the log did not provide."""
    fields: pd.DataFrame | None = None
    """A trainer dump's own per-rollout keys, one row per episode (row for row with ``episodes``),
    for ``--map KEY=COLUMN`` to read a key the reader does not map (``readers.map_fields``)."""


class LogSchemaError(ValueError):
    """A log that cannot be read into the schema; the message names the column and the fix."""


def check_run(run: LoggedRun) -> LoggedRun:
    """Check ``run`` against the schema once, for every reader: required columns present, ids
    unique, ``end_reason`` values from ``END_REASONS``, steps pointing at logged episodes. Records
    each absent optional column in ``run.missing`` (never filled in). Returns ``run``."""
    eps = run.episodes
    absent = [c for c in REQUIRED_EPISODE_COLUMNS if c not in eps.columns]
    if absent:
        raise LogSchemaError(
            f"the {run.source} log has no {', '.join(absent)} column{'s' if len(absent) > 1 else ''} "
            f"(it has: {', '.join(map(str, eps.columns)) or 'none'}); map yours onto the schema with "
            f"--map YOUR_COLUMN={absent[0]}")
    if eps["episode_id"].duplicated().any():
        dup = eps.loc[eps["episode_id"].duplicated(), "episode_id"].iloc[0]
        raise LogSchemaError(f"episode_id {dup} appears more than once in the {run.source} log; "
                             "episode ids must be unique (map a unique column with --map COLUMN=episode_id)")
    if "end_reason" in eps.columns:
        bad = sorted(set(eps["end_reason"].dropna().astype(str)) - set(END_REASONS))
        if bad:
            raise LogSchemaError(f"end_reason holds {', '.join(map(repr, bad[:5]))}; expected one of "
                                 f"{', '.join(END_REASONS)} (rename the values in the log, or drop the column)")
    for column in COUNT_COLUMNS:
        if column in eps.columns:
            values = pd.to_numeric(eps[column], errors="coerce")
            bad = values.isna() | (values < 0) | (values != values.round())
            if bad.any():
                raise LogSchemaError(f"{column} counts tool calls, a whole number >= 0 in every row; found "
                                     f"{plain_value(eps.loc[bad, column].iloc[0])!r} (map a count of calls onto it, or drop it)")
            eps[column] = values.astype("int64")
    for column in EPISODE_COLUMNS:
        # the tool counts stand in for a step table's tool_status: absent, nothing is missing yet
        if column not in eps.columns and column not in run.missing and column not in COUNT_COLUMNS:
            run.missing.append(column)
    if run.steps is not None:
        steps = run.steps
        for column in ("episode_id", "step"):
            if column not in steps.columns:
                raise LogSchemaError(f"the step table has no {column} column (it has: "
                                     f"{', '.join(map(str, steps.columns))}); map it with --map COLUMN={column}")
        orphans = ~steps["episode_id"].isin(eps["episode_id"])
        if orphans.any():
            raise LogSchemaError(f"{int(orphans.sum())} logged steps belong to episodes the episode table does "
                                 f"not have (first: episode_id {plain_value(steps.loc[orphans, 'episode_id'].iloc[0])!r}); "
                                 "give the step table of the same run")
        for column in STEP_COLUMNS:
            name = f"steps.{column}"
            if column not in steps.columns and name not in run.missing:
                run.missing.append(name)
    return run


def plain_value(value):
    """A numpy scalar as the plain Python value a message shows (``-1``, not ``np.int64(-1)``)."""
    return value.item() if hasattr(value, "item") else value
