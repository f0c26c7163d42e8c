"""TRL: the completions table ``GRPOTrainer`` logs with ``GRPOConfig(log_completions=True)``.

TRL writes no rollout dump of its own beyond this table (huggingface/trl,
``trl/trainer/grpo_trainer.py``):

- ``_generate_and_score_completions`` appends each generation batch to ``self._logs``: ``prompt``
  and ``completion`` (decoded text), one reward column per reward function (named by
  ``reward_func_names``; the unweighted per-function score, ``NaN`` where a function did not
  apply), ``advantage``, and the ``log_extra`` columns reward functions add. Each deque keeps the
  last ``generation_batch_size`` rows.
- ``log`` (every ``logging_steps``) writes that window with ``step`` = ``state.global_step``: to
  ``{output_dir}/completions/completions_{global_step:05d}.parquet`` (``df_base.to_parquet``, TRL
  >= 0.28), and as a ``completions`` table to W&B / trackio when ``report_to`` has them. Before
  0.28 only the W&B table exists on disk: ``wandb/run-*/files/media/table/completions_<n>_<hash>
  .table.json`` (same columns). This reader reads both.

Mapping:

- ``iteration`` <- ``step`` (the global step at logging time); ``episode_id`` <- ``<file>:<row>``.
- ``group_id`` <- ``step`` + ``prompt`` (the ``num_generations`` completions of one prompt).
- ``return`` <- the trainer's reward: ``nansum(reward_column * weight)`` over the reward columns,
  ``NaN`` where every function returned ``None`` (as ``rewards[unscorable_mask] = nan`` does).
  Reward columns are the float columns other than ``step``/``advantage``; ``reward_columns=``
  names them when ``log_extra`` added float columns, ``reward_weights=`` gives
  ``GRPOConfig.reward_weights`` (default all 1, TRL's default).
- ``success`` <- a boolean ``log_extra`` column with an explicit correctness name (``correct``,
  ``acc``...), or the column ``success_field=`` names; never a reward column by default (TRL's
  ``accuracy_reward`` is a reward: name it with ``success_field=`` if you trust it as correctness).
- ``prompt`` <- ``prompt``, ``response`` <- ``completion``.
- A table logged twice (``logging_steps`` shorter than a generation's lifetime, e.g.
  ``num_iterations > 1``) repeats the previous file's rows under a later step: such a file is
  skipped and counted in the notes.
- Missing: ``length`` and ``end_reason`` (the table has no token counts and no truncation flag).
  No step table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from envaudit.errors import UsageError
from envaudit.logs.readers import _common
from envaudit.logs.schema import LoggedRun

NAME = "trl"
FIELDS = ("step", "prompt", "completion")
NOT_REWARDS = ("step", "advantage")
_FILE = re.compile(r"^completions_\d+(_[0-9a-f]+)?\.(parquet|table\.json)$")


def _columns(file: Path) -> list | None:
    if file.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            return pq.read_schema(file).names
        except (OSError, ValueError):
            return None
    if file.name.endswith(".table.json"):
        return _common.wandb_table_columns(file)
    return None


def _files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("completions_*"), key=_common.natural_key)
            if p.is_file() and _FILE.match(p.name)]


def sniff(path: str | os.PathLike) -> bool:
    """A completions parquet / W&B table (or a folder of them) with TRL's ``step, prompt, completion``."""
    path = Path(path)
    first = path if path.is_file() else next(iter(_files(path)), None) if path.is_dir() else None
    columns = _columns(first) if first is not None else None
    return columns is not None and all(c in columns for c in FIELDS)


def _read(file: Path) -> pd.DataFrame:
    if file.name.endswith(".parquet"):
        return pd.read_parquet(file)
    if file.name.endswith(".table.json"):
        return _common.read_wandb_table(file)
    raise UsageError(f"{file} is neither a .parquet nor a .table.json file; TRL writes its completions table as "
                     "completions/completions_NNNNN.parquet (or a W&B completions_*.table.json)")


def read(path: str | os.PathLike, *, reward_columns: Sequence[str] | None = None,
         reward_weights: Sequence[float] | None = None, success_field: str | None = None) -> LoggedRun:
    """Every completions table under ``path`` (or the one file ``path``) as a ``LoggedRun``."""
    root = _common.as_path(path)
    files = [root] if root.is_file() else _files(root)
    if not files:
        raise UsageError(f"{root} holds no TRL completions table (completions_NNNNN.parquet); set "
                         "GRPOConfig(log_completions=True) and point at {output_dir}/completions")
    frames: list[pd.DataFrame] = []
    repeated = 0
    previous: pd.DataFrame | None = None
    for file in files:
        frame = _read(file)
        absent = [c for c in FIELDS if c not in frame.columns]
        if absent:
            have = ", ".join(map(str, frame.columns))
            raise UsageError(f"{file} has no {', '.join(absent)} column (it has: {have}); "
                             "this is not a TRL completions table: pass the --format of the trainer that wrote it")
        body = frame.drop(columns="step").reset_index(drop=True)
        if previous is not None and body.equals(previous):
            repeated += 1  # the same generation logged again at a later step
            continue
        previous = body
        label = file.relative_to(root).as_posix() if root.is_dir() else file.name
        frame = frame.reset_index(drop=True)
        frame.insert(0, "_id", [f"{label}:{i}" for i in range(len(frame))])
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    notes = [f"read {len(table)} completions from {len(frames)} TRL table(s) (GRPOConfig.log_completions)",
             "iteration <- step (global step when the table was logged); group_id <- step + prompt"]
    if repeated:
        notes.append(f"{repeated} table(s) repeated the previous one row for row (the same generation logged at a "
                     "later step) and were skipped")
    rewards = _reward_columns(table, reward_columns)
    weights = np.ones(len(rewards)) if reward_weights is None else np.asarray(reward_weights, dtype=float)
    if len(weights) != len(rewards):
        raise UsageError(f"reward_weights has {len(weights)} values for {len(rewards)} reward columns "
                         f"({', '.join(rewards)}); give one weight per reward function, in that order")
    values = table[rewards].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    total = np.nansum(values * weights, axis=1)
    total[np.isnan(values).all(axis=1)] = np.nan  # unscorable by every function: TRL sets NaN too
    weight_text = "" if reward_weights is None else f" with weights {weights.tolist()}"
    notes.append(f"return <- sum of reward columns {', '.join(rewards)}{weight_text} (NaN-skipping, as GRPOTrainer)")
    unscorable = int(np.isnan(total).sum())
    if unscorable:
        notes.append(f"{unscorable} completions had no reward from any function: return NaN")
    episodes = pd.DataFrame({
        "episode_id": table["_id"],
        "group_id": [_common.group_key(s, p) for s, p in zip(table["step"], table["prompt"], strict=True)],
        "iteration": table["step"],
        "return": total,
    })
    candidates = [c for c in table.columns if c not in ("_id", *FIELDS, "advantage")]
    field = success_field if success_field is not None else next(
        (c for c in _common.CORRECTNESS_NAMES if c in candidates and table[c].dtype == bool), None)
    if field is None:
        notes.append("success: no boolean correctness column (log_extra 'correct', 'acc', ...); success left "
                     "missing (success_field= names one)")
    else:
        _common.pick_correctness_field(candidates, field)
        success, note = _common.correctness(table[field].astype(object), field)
        notes.append(note)
        if success is not None:
            episodes["success"] = success
    notes.append("length, end_reason: TRL's completions table has no token counts and no truncation flag; missing")
    episodes["prompt"] = table["prompt"].astype(str)
    episodes["response"] = table["completion"].astype(str)
    return _common.logged_run(episodes, None, NAME, notes, fields=table)


def _reward_columns(table: pd.DataFrame, named: Sequence[str] | None) -> list[str]:
    if named is not None:
        absent = [c for c in named if c not in table.columns]
        if absent:
            raise UsageError(f"reward_columns {', '.join(absent)} not in the table; its columns: "
                             f"{', '.join(c for c in table.columns if c != '_id')}")
        return list(named)
    found = [c for c in table.columns
             if c not in ("_id", *FIELDS, *NOT_REWARDS) and pd.api.types.is_float_dtype(table[c])]
    if not found:
        raise UsageError(f"no reward column in the TRL table (float columns besides step/advantage; it has: "
                         f"{', '.join(c for c in table.columns if c != '_id')}); name them with reward_columns=")
    return found
