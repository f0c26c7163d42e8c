"""Readers for the rollout logs trainers actually write, each mapping onto the generic schema.

One module per trainer, each with ``NAME``, ``sniff(path) -> bool`` and ``read(path, **options) ->
LoggedRun``; its docstring cites the trainer's source file and option that produce the format and
says what maps to what. ``reader_for`` picks one by name (``--format NAME``) or by sniffing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pandas as pd

from envaudit.errors import UsageError
from envaudit.logs.readers import _common, openrlhf, prime_rl, skyrl, trl, verl
from envaudit.logs.schema import LoggedRun, check_run

READERS: dict[str, ModuleType] = {m.NAME: m for m in (verl, skyrl, trl, prime_rl, openrlhf)}
"""``--format`` name -> reader module."""

_WHAT = {
    "verl": "{step}.jsonl files of trainer.rollout_data_dir",
    "skyrl": "dumped_evals/global_step_N_evals/*.jsonl of trainer.dump_eval_results",
    "trl": "completions/completions_NNNNN.parquet of GRPOConfig(log_completions=True)",
    "prime-rl": "rollouts/step_N/train/all/traces.jsonl of the file monitor",
    "openrlhf": "the W&B table train/generated_samples_*.table.json",
}


def reader_for(path: str | os.PathLike, name: str | None = None) -> ModuleType:
    """The reader named ``name``, or the one whose ``sniff`` recognises ``path``."""
    choices = ", ".join(READERS)
    if name is not None:
        if name not in READERS:
            raise UsageError(f"--format {name!r} is not a trainer reader; choose one of {choices}")
        return READERS[name]
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist; give the file or folder the trainer wrote its rollouts to")
    found = [module for module in READERS.values() if module.sniff(path)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{path} looks like the rollout log of more than one trainer "
                         f"({', '.join(m.NAME for m in found)}); say which with --format NAME")
    expected = "; ".join(f"{n}: {w}" for n, w in _WHAT.items())
    raise UsageError(f"no trainer reader recognises {path} (expected one of: {expected}); pass --format NAME "
                     f"with NAME one of {choices}, or write the log in the generic schema")


MAPPABLE = ("success", "length", "end_reason", "tool_calls", "tool_errors", "tool_timeouts", "seed", "task")
"""Schema columns ``--map KEY=COLUMN`` can fill from a trainer dump's own keys (``LoggedRun.fields``)."""
SAME_NAME = ("tool_calls", "tool_errors", "tool_timeouts")
"""Keys read without ``--map`` when a dump has them under the schema's own name."""


def map_fields(run: LoggedRun, mapping: Mapping[str, str]) -> LoggedRun:
    """``run`` with the dump's own keys read as schema columns: ``mapping`` is ``{KEY: COLUMN}``
    (``--map KEY=COLUMN``), and a key named like a tool-count column is read as it unasked. Each
    mapped column is checked as the schema checks it (``success`` by the correctness rule: booleans
    or 0/1, never a copy of the return) and noted; a key the dump lacks is an error naming the keys
    it has. Returns the checked run."""
    fields = run.fields if run.fields is not None else pd.DataFrame(index=run.episodes.index)
    mapping = dict(mapping)
    for key in SAME_NAME:
        if key in fields.columns and key not in run.episodes.columns and key not in mapping:
            mapping[key] = key
    if not mapping:
        return run
    keys = ", ".join(map(str, fields.columns)) or "none"
    eps = run.episodes.copy()
    for key, column in mapping.items():
        if column not in MAPPABLE:
            raise UsageError(f"--map {key}={column}: a {run.source} dump has no step table and its reader maps the "
                             f"other columns itself; --map fills one of {', '.join(MAPPABLE)}")
        if key not in fields.columns:
            raise UsageError(f"--map {key}={column}: the {run.source} dump has no key {key!r}; its keys: {keys}")
        values = fields[key].reset_index(drop=True)
        if column == "success":
            success, note = _common.correctness(values, key)
            if success is not None and _common.copies_reward(pd.to_numeric(values, errors="coerce"), eps["return"]):
                success, note = None, f"{key!r} equals the return on every rollout: a copy of the reward"
            if success is None:
                raise UsageError(f"--map {key}=success: {note.removeprefix('success: ')}; map a correctness "
                                 "key (true/false or 0/1, independent of the reward)")
            values = success
        elif column in ("length", "tool_calls", "tool_errors", "tool_timeouts"):
            numbers = pd.to_numeric(values, errors="coerce")
            if numbers.isna().any():
                raise UsageError(f"--map {key}={column}: {key!r} is not a number on every rollout (e.g. "
                                 f"{values[numbers.isna()].iloc[0]!r}); {column} is a count")
            values = numbers
        elif column == "end_reason":
            values = values.astype("string").str.lower().astype(object)
        eps[column] = values.to_numpy()
        run.notes.append(f"{column} <- {key!r}" + (" (--map)" if key != column else " (the dump's key of that name)"))
        run.missing = [c for c in run.missing if c != column]
    run.episodes = eps
    return check_run(run)


__all__ = ["MAPPABLE", "READERS", "map_fields", "reader_for"]
