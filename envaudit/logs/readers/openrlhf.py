"""OpenRLHF: the one-sample-per-step ``train/generated_samples`` W&B table (no rollout dump exists).

OpenRLHF (OpenRLHF/OpenRLHF) writes no rollouts to disk: no JSONL/Parquet dump of samples or
experiences exists in ``openrlhf/``. What it does log per training step:

- ``openrlhf/trainer/ppo_trainer.py``: after ``make_experience``, ``sample0`` = the first decoded
  sequence of the first experience (prompt and response together,
  ``tokenizer.decode(experiences[0].sequences[0])``) and its ``info["reward"]``; it goes into the
  step's status as ``generated_samples`` (printed as ``Sample: [...]`` too).
- ``openrlhf/utils/logging_utils.py``, ``WandbLogger.log_train`` (with ``--logger.wandb.key``
  set): appends ``[global_step, text, reward]`` to a table with columns
  ``["global_step", "text", "reward"]`` and logs the whole table again as
  ``train/generated_samples``. On disk the W&B SDK writes each logged copy to
  ``wandb/run-*/files/media/table/train/generated_samples_<n>_<hash>.table.json`` (``{"columns",
  "data"}``); every copy holds all rows so far. (``TensorboardLogger`` writes the same sample as
  text into the event file, which this reader does not parse.)

Mapping:

- ``iteration`` <- ``global_step``; ``episode_id`` <- ``step<global_step>``.
- ``return`` <- ``reward`` (the experience's ``info["reward"]``).
- ``prompt`` <- ``text`` (prompt and response in one decoded string).
- Rows repeated across the cumulative copies are read once.
- Missing: ``group_id`` (one sample per step: no group to compare within), ``length``,
  ``end_reason``, ``success``. No step table. One rollout per step is a thin sample: drift curves
  from it are noisy by construction, and the notes say how many steps it covers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from envaudit.errors import UsageError
from envaudit.logs.readers import _common
from envaudit.logs.schema import LoggedRun

NAME = "openrlhf"
COLUMNS = ["global_step", "text", "reward"]
"""``WandbLogger.samples_table``'s columns (openrlhf/utils/logging_utils.py)."""


def _files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("generated_samples_*.table.json"), key=_common.natural_key) if p.is_file()]


def sniff(path: str | os.PathLike) -> bool:
    """A W&B table file (or a run folder holding them) with OpenRLHF's three columns."""
    path = Path(path)
    first = path if path.is_file() else next(iter(_files(path)), None) if path.is_dir() else None
    return first is not None and _common.wandb_table_columns(first) == COLUMNS


def read(path: str | os.PathLike) -> LoggedRun:
    """Every ``generated_samples_*.table.json`` under ``path`` (a W&B run folder, or one file)."""
    root = _common.as_path(path)
    files = [root] if root.is_file() else _files(root)
    if not files:
        raise UsageError(f"{root} holds no OpenRLHF samples table (generated_samples_*.table.json); point at the "
                         "wandb/run-*/files folder of a run logged with --logger.wandb.key (OpenRLHF writes no "
                         "rollout dump of its own)")
    frames = []
    for file in files:
        frame = _common.read_wandb_table(file)
        if list(frame.columns) != COLUMNS:
            raise UsageError(f"{file} has columns {list(frame.columns)}, expected {COLUMNS} (OpenRLHF's "
                             "train/generated_samples table); pass the --format of the trainer that wrote it")
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True).drop_duplicates(ignore_index=True)
    table = table.sort_values("global_step", kind="stable", ignore_index=True)
    if table.empty:
        raise UsageError(f"the OpenRLHF samples table(s) in {root} hold no rows; nothing to audit")
    if table["global_step"].duplicated().any():
        step = table.loc[table["global_step"].duplicated(), "global_step"].iloc[0]
        raise UsageError(f"global_step {step} has two different samples across the tables in {root}; "
                         "the tables of more than one run are mixed: point at one run's folder")
    episodes = pd.DataFrame({
        "episode_id": [f"step{s}" for s in table["global_step"]],
        "iteration": table["global_step"],
        "return": table["reward"].map(_common.number_or_nan),
        "prompt": table["text"].astype(str),
    })
    notes = [f"read {len(table)} logged samples (one per training step, steps {table['global_step'].min()}.."
             f"{table['global_step'].max()}) from {len(files)} OpenRLHF W&B table file(s); OpenRLHF dumps no "
             "rollouts, this table is all it writes",
             "iteration <- global_step; return <- reward; prompt <- text (prompt and response decoded together)",
             "group_id, length, end_reason, success: not in OpenRLHF's table; missing"]
    return _common.logged_run(episodes, None, NAME, notes, fields=table)
