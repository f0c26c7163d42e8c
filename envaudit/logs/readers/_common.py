"""What the trainer readers share: finding the dump files, reading JSONL and W&B tables, the
correctness rule for ``success``, group ids and the final ``LoggedRun`` with its ``missing`` list.

Errors are ``UsageError``: a log that cannot be read is bad input, and the message names the file,
the line and what was expected there.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from envaudit.errors import UsageError
from envaudit.logs.schema import COUNT_COLUMNS, EPISODE_COLUMNS, STEP_COLUMNS, LoggedRun

CORRECTNESS_NAMES = ("success", "correct", "is_correct", "acc", "accuracy", "pass", "passed", "solved")
"""Field names that state a task's correctness. ``success`` is only ever read from one of these (or
the field the user names): a reward is never turned into a success flag."""

SNIFF_LINE_BYTES = 64 << 20
"""The most sniffing reads of a file: its first line, up to this many bytes. A rollout line holds a
whole prompt and response (prime-rl's: every node's token ids too), so it can run to megabytes."""


def as_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist; give the file or folder the trainer wrote its rollouts to")
    return path


def natural_key(path: Path) -> tuple:
    """Sort ``step_2`` before ``step_10``: the numbers in a path compare as numbers."""
    parts = re.split(r"(\d+)", str(path))
    return tuple(int(p) if p.isdigit() else p for p in parts)


def find_files(path: Path, pattern: str, what: str, hint: str) -> list[Path]:
    """``path`` itself, or the files under it matching ``pattern`` (recursively), in step order."""
    if path.is_file():
        return [path]
    files = sorted((p for p in path.rglob(pattern) if p.is_file()), key=natural_key)
    if not files:
        raise UsageError(f"{path} holds no {what} ({pattern}); {hint}")
    return files


def first_line(path: Path) -> str:
    """The first non-empty line of a text file (at most ``SNIFF_LINE_BYTES`` of it)."""
    try:
        with open(path, "rb") as f:
            while True:
                line = f.readline(SNIFF_LINE_BYTES)
                if not line or line.strip():
                    return line.decode("utf-8", "replace")
    except OSError:
        return ""


def first_record(path: Path) -> dict | None:
    """The first JSON object of a JSONL file, or ``None`` when it does not parse (sniffing only)."""
    try:
        record = json.loads(first_line(path))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def sniff_first(path: str | os.PathLike, pattern: str) -> Path | None:
    """The file sniffing should look at: ``path`` itself, or the first match of ``pattern`` below it."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        return next(iter(sorted(path.rglob(pattern), key=natural_key)), None)
    return None


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` for each non-empty line; a line that is not a JSON object is an
    error naming the file and line (a half-written last line of a live run included)."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise UsageError(f"{path}:{lineno} is not valid JSON ({exc}); a rollout dump holds one "
                                 "JSON object per line (a run still writing may leave a partial last line: "
                                 "copy the file once the step is done)") from None
            if not isinstance(record, dict):
                raise UsageError(f"{path}:{lineno} holds a JSON {type(record).__name__}, expected an object "
                                 "(one rollout per line)")
            yield lineno, record


def require(record: dict, keys: Iterable[str], where: str, trainer: str) -> None:
    absent = [k for k in keys if k not in record]
    if absent:
        raise UsageError(f"{where} has no {', '.join(absent)} (it has: {', '.join(map(str, record)) or 'nothing'}); "
                         f"this is not a {trainer} rollout dump: pass the --format of the trainer that wrote it")


def read_wandb_table(path: Path) -> pd.DataFrame:
    """A W&B table as the SDK writes it next to the run: ``<run>/files/media/table/<key>_<step>_<hash>
    .table.json`` holding ``{"columns": [...], "data": [[...], ...]}`` (wandb/sdk/data_types/table.py,
    ``Table.bind_to_run`` / ``_to_table_json``)."""
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); expected a W&B table file (*.table.json)") from None
    if not isinstance(table, dict) or not isinstance(table.get("columns"), list) \
            or not isinstance(table.get("data"), list):
        raise UsageError(f"{path} is not a W&B table file: expected an object with 'columns' and 'data' lists")
    return pd.DataFrame(table["data"], columns=table["columns"])


def wandb_table_columns(path: Path) -> list | None:
    """The column names of a W&B table file, without reading its rows (sniffing only): the SDK
    writes ``columns`` first, so the file's head holds them."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return None
    match = re.match(r'\s*\{\s*"columns"\s*:\s*(\[[^\]]*\])', head)
    if not match:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


def group_key(iteration: Any, *parts: Any) -> str:
    """A short, stable group id: ``<iteration>/<hash of the prompt>``. Rollouts of the same prompt
    in the same iteration are the GRPO group the advantage was computed in."""
    digest = hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:10]
    return f"{iteration}/{digest}"


def correctness(values: pd.Series, field: str, reward: pd.Series | None = None) -> tuple[pd.Series | None, str]:
    """``values`` as a bool ``success`` column, and a note saying what was done. Accepted: booleans,
    and numbers that are all 0 or 1. Refused (``None``, the note says why): anything else, and a
    numeric field equal to the reward on every row (a copy of the reward, e.g. verl's DAPO reward
    manager stores ``acc = score`` when the score function returns a bare number)."""
    present = values.dropna()
    if present.empty:
        return None, f"success: {field!r} is empty on every rollout; success left missing"
    if all(isinstance(v, (bool, np.bool_)) for v in present):
        return values.astype("boolean"), f"success <- {field!r} (boolean)"
    if all(isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_)) for v in present):
        numbers = pd.to_numeric(values)
        if reward is not None and copies_reward(numbers, reward):
            return None, (f"success: {field!r} equals the reward on every rollout, so it is a copy of the "
                          "reward, not a correctness check; success left missing")
        if set(numbers.dropna().unique()) <= {0, 1}:
            return numbers.map(lambda v: pd.NA if pd.isna(v) else bool(v)).astype("boolean"), \
                f"success <- {field!r} (0/1)"
        odd = numbers[numbers.notna() & ~numbers.isin([0, 1])].iloc[0]
        return None, (f"success: {field!r} holds values other than 0/1 (e.g. {odd.item()!r}); a correctness "
                      "flag must be boolean or 0/1, success left missing")
    return None, (f"success: {field!r} holds non-numeric values (e.g. {present.iloc[0]!r}); success left missing")


def copies_reward(numbers: pd.Series, reward: pd.Series) -> bool:
    """Whether ``numbers`` equals ``reward`` on every rollout, by value: an integer 0/1 column that
    copies a float reward of 0.0/1.0 is a copy all the same (``Series.equals`` would compare dtypes)."""
    a = pd.to_numeric(pd.Series(numbers).reset_index(drop=True), errors="coerce").to_numpy(float)
    b = pd.to_numeric(pd.Series(reward).reset_index(drop=True), errors="coerce").to_numpy(float)
    return len(a) == len(b) and len(a) > 0 and bool(np.array_equal(a, b, equal_nan=True))


def pick_correctness_field(candidates: Iterable[str], success_field: str | None) -> str | None:
    """The field ``success`` comes from: the one the user named, else the first of the explicit
    correctness names present among ``candidates``."""
    names = list(candidates)
    if success_field is not None:
        if success_field not in names:
            raise UsageError(f"success_field={success_field!r} is not in the log; fields there: "
                             f"{', '.join(map(str, names)) or 'none'}")
        return success_field
    return next((n for n in CORRECTNESS_NAMES if n in names), None)


def number_or_nan(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def logged_run(episodes: pd.DataFrame, steps: pd.DataFrame | None, source: str, notes: list[str],
               fields: pd.DataFrame | None = None) -> LoggedRun:
    """The ``LoggedRun``: schema columns first, each absent one named in ``missing`` (step columns as
    ``steps.<name>``), never filled in. ``fields``: the dump's own keys, row for row with
    ``episodes``, that ``--map`` may read (``map_fields``)."""
    order = [c for c in EPISODE_COLUMNS if c in episodes.columns]
    extra = [c for c in episodes.columns if c not in EPISODE_COLUMNS]
    episodes = episodes[order + extra].reset_index(drop=True)
    if "iteration" in episodes.columns:
        episodes["iteration"] = episodes["iteration"].astype("int64")
    if "return" in episodes.columns:
        episodes["return"] = episodes["return"].astype("float64")
    if "length" in episodes.columns:
        episodes["length"] = episodes["length"].astype("Int64")
    missing = [c for c in EPISODE_COLUMNS if c not in episodes.columns and c not in COUNT_COLUMNS]
    if steps is not None:
        steps = steps[[c for c in STEP_COLUMNS if c in steps.columns]].reset_index(drop=True)
        missing += [f"steps.{c}" for c in STEP_COLUMNS if c not in steps.columns]
    if fields is not None:
        fields = fields.reset_index(drop=True)
        fields = fields[[c for c in fields.columns if not str(c).startswith("_")]]
    return LoggedRun(episodes=episodes, steps=steps, source=source, notes=notes, missing=missing, fields=fields)
