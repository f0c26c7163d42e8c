"""The generic reader: a logged run in the documented schema, as JSONL, Parquet or CSV.

An episode table (one row per rollout) and, optionally, a step table (one row per step), each a
file; the step table is the second PATH or ``steps=``. A folder is read as its ``episodes.*`` and
``steps.*`` files. Columns with other names are mapped with ``mapping`` (``--map
LOG_COLUMN=SCHEMA_COLUMN``); columns the schema does not know are left out, so a log with long
prompt/response texts costs only the columns the analyses read (Parquet and CSV are read column by
column with pyarrow, never row by row).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa

from envaudit.logs.schema import (
    EPISODE_COLUMNS,
    OPTIONAL_EPISODE_COLUMNS,
    STEP_COLUMNS,
    LoggedRun,
    LogSchemaError,
    check_run,
    plain_value,
)

NAME = "generic"
SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".pq", ".csv")
KNOWN = set(EPISODE_COLUMNS) | set(STEP_COLUMNS) | set(OPTIONAL_EPISODE_COLUMNS)


def parse_mapping(items: Sequence[str]) -> dict[str, str]:
    """``["score=return", "turns=length"]`` as ``{"score": "return", "turns": "length"}``."""
    out: dict[str, str] = {}
    for item in items:
        log, sep, schema = item.partition("=")
        log, schema = log.strip(), schema.strip()
        if not sep or not log or not schema:
            raise LogSchemaError(f"--map {item!r}: expected LOG_COLUMN=SCHEMA_COLUMN, e.g. --map score=return")
        if schema not in KNOWN:
            raise LogSchemaError(f"--map {item!r}: {schema!r} is not a schema column; schema columns: "
                                 f"{', '.join(sorted(KNOWN))}")
        out[log] = schema
    return out


def _suffix(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    return next((s for s in SUFFIXES if name.endswith(s)), "")


def sniff(path: str | os.PathLike) -> bool:
    """A file (or folder of files) this reader can read: JSONL, Parquet or CSV."""
    path = Path(path)
    if path.is_dir():
        return any(_suffix(p) for p in path.iterdir())
    return bool(_suffix(path))


def read_table(path: str | os.PathLike, wanted: set[str] | None = None) -> pd.DataFrame:
    """One file as a DataFrame, only the ``wanted`` columns when given (and present)."""
    path = Path(path)
    kind = _suffix(path)
    if not path.exists():
        raise LogSchemaError(f"{path} does not exist; give the path of a JSONL, Parquet or CSV log")
    try:
        if kind in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            names = pq.read_schema(path).names
            table = pq.read_table(path, columns=[c for c in names if wanted is None or c in wanted])
        elif kind == ".csv":
            import pyarrow.csv as pcsv

            include = None
            if wanted is not None:
                with pa.input_stream(path) as f:  # the header only, for the column list
                    header = f.read(1 << 16).decode("utf-8", "replace").splitlines()[0]
                include = [c.strip().strip('"') for c in header.split(",") if c.strip().strip('"') in wanted]
            table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(include_columns=include))
        elif kind in (".jsonl", ".ndjson", ".json"):
            import pyarrow.json as pjson

            # Mixed value kinds in one column (an action that is an int in one row and text in the
            # next) make pyarrow refuse the column; pandas reads those row by row instead.
            try:
                table = pjson.read_json(path, read_options=pjson.ReadOptions(block_size=1 << 24))
            except pa.ArrowInvalid:
                frame = pd.read_json(path, lines=True, dtype=False)
                return frame[[c for c in frame.columns if wanted is None or c in wanted]]
            if wanted is not None:
                table = table.select([c for c in table.column_names if c in wanted])
        else:
            raise LogSchemaError(f"{path}: cannot tell its format from the name; expected a file ending in "
                                 f"{', '.join(SUFFIXES)} (optionally .gz)")
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as exc:
        raise LogSchemaError(f"{path} could not be read as {kind.lstrip('.')}: {exc}") from None
    return table.to_pandas()


def _files(paths: Sequence[str | os.PathLike], steps: str | os.PathLike | None) -> tuple[Path, Path | None]:
    paths = [Path(p) for p in paths]
    if len(paths) == 1 and paths[0].is_dir():
        folder = paths[0]
        found = {p.name.split(".")[0]: p for p in sorted(folder.iterdir()) if _suffix(p)}
        if "episodes" not in found:
            raise LogSchemaError(f"{folder} has no episodes.jsonl/.parquet/.csv; give the episode table's path")
        return found["episodes"], (Path(steps) if steps else found.get("steps"))
    if not paths or len(paths) > 2 or (len(paths) == 2 and steps is not None):
        raise LogSchemaError(f"expected an episode table and at most one step table, got {len(paths)} paths"
                             + (" and --steps" if steps is not None else "")
                             + "; pass EPISODES [STEPS] or EPISODES --steps STEPS")
    return paths[0], (paths[1] if len(paths) == 2 else Path(steps) if steps else None)


def _coerce_episodes(eps: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    for column, kind in (("iteration", "int"), ("length", "int"), ("return", "float")):  # counts: check_run
        if column in eps:
            values = pd.to_numeric(eps[column], errors="coerce")
            if values.isna().any():
                bad = plain_value(eps.loc[values.isna(), column].iloc[0])
                raise LogSchemaError(f"{column} must be a number in every row; found {bad!r} "
                                     f"(episode {plain_value(eps.loc[values.isna(), 'episode_id'].iloc[0])!r})"
                                     if "episode_id" in eps else f"{column} must be a number; found {bad!r}")
            eps[column] = values.astype("int64" if kind == "int" else "float64")
    if "success" in eps:
        eps["success"] = _booleans(eps["success"])
        if eps["success"].isna().all():
            eps = eps.drop(columns="success")
            notes.append("success: every value was empty, so the log has no success signal")
    if "end_reason" in eps:
        eps["end_reason"] = eps["end_reason"].astype("string").str.lower().astype(object)
    return eps


def _booleans(values: pd.Series) -> pd.Series:
    words = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False,
             "1.0": True, "0.0": False}
    if values.dtype == bool:
        return values.astype("boolean")
    mapped = values.map(lambda v: None if v is None or (isinstance(v, float) and v != v)
                        else words.get(str(v).strip().lower()))
    unknown = values.notna() & mapped.isna()
    if unknown.any():
        raise LogSchemaError(f"success must be true/false (or 1/0); found {plain_value(values[unknown].iloc[0])!r}")
    return mapped.astype("boolean")


def read(paths: str | os.PathLike | Sequence[str | os.PathLike], *, steps: str | os.PathLike | None = None,
         mapping: Mapping[str, str] | None = None, **_: object) -> LoggedRun:
    """Read a logged run in the generic schema; ``mapping`` renames log columns onto it."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    mapping = dict(mapping or {})
    episodes_path, steps_path = _files(paths, steps)
    wanted = KNOWN | set(mapping)
    notes = [f"{log} -> {schema}" for log, schema in mapping.items()]
    eps = read_table(episodes_path, wanted).rename(columns=mapping)
    if {"step"} <= set(eps.columns) and steps_path is None:
        raise LogSchemaError(f"{episodes_path} looks like a step table (it has a step column); give the "
                             "episode table first and this one as the second PATH or --steps")
    eps = _coerce_episodes(eps[[c for c in eps.columns if c in set(EPISODE_COLUMNS) | set(OPTIONAL_EPISODE_COLUMNS)]],
                           notes)
    step_frame = None
    if steps_path is not None:
        step_frame = read_table(steps_path, wanted).rename(columns=mapping)
        step_frame = step_frame[[c for c in step_frame.columns if c in STEP_COLUMNS]]
        for column in ("step",):
            if column in step_frame:
                step_frame[column] = pd.to_numeric(step_frame[column], errors="raise").astype("int64")
        if "reward" in step_frame:
            step_frame["reward"] = pd.to_numeric(step_frame["reward"], errors="coerce").astype("float64")
        if "tool_status" in step_frame:
            step_frame["tool_status"] = step_frame["tool_status"].astype("string").str.lower().astype(object)
    run = LoggedRun(eps, step_frame, NAME, notes=notes)
    return check_run(run)


__all__ = ["NAME", "parse_mapping", "read", "read_table", "sniff"]
