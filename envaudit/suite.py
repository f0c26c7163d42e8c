"""Suites: many envs scanned into one folder, a report per env and a ranked summary over them.

``envaudit scan A B C``, ``envaudit scan --suite suite.toml`` and ``envaudit scan 'reasoning-gym:*'``
end here. Each env is scanned exactly as ``envaudit scan ENV`` scans it alone (``envaudit.scan``),
by the executor chosen (``envaudit.suite_exec``: this process, local worker processes, or Ray),
and its report folder is written whole into ``OUT/<env>/`` as soon as it finishes. The suite's
summary (``suite.json``, ``summary.md``, ``summary.html``; ``envaudit.reporting.suite_summary``)
is rewritten after every env, each file atomically, marked incomplete until the last env is in:
a crash or Ctrl-C leaves finished envs and a consistent summary of them.

Resuming: every env folder holds ``suite_entry.json`` with the identity of its scan (target,
options, config, envaudit version). Rerunning the suite into the same folder keeps each env whose
folder is complete (its ``report.json`` is there: folders are renamed into place whole) with the
same identity, and scans the rest.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from envaudit.atomic import REPORT_MARKER, atomic_folder, atomic_write
from envaudit.errors import UsageError
from envaudit.reporting.suite_summary import (
    SUITE_MARKER,
    SuiteSummary,
    env_row,
    error_row,
    load_summary,
    pending_row,
)
from envaudit.suite_exec import EXECUTORS, Job, Outcome, run_jobs
from envaudit.suite_file import SuiteEntry

ENTRY_FILE = "suite_entry.json"
"""In each env folder of a suite: which scan made it (``SuiteEntry.identity``), for resuming."""
OnEvent = Callable[[dict[str, Any]], None]


def _version() -> str:
    from envaudit import __version__

    return __version__


def check_out(out: Path, *, force: bool, resume: bool) -> None:
    """``--out`` of a suite: new, empty, or a suite folder; a finished suite is rescanned only with
    ``--force`` and reused only with ``--resume``; an interrupted one is resumed."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not out.is_dir() or not (out / SUITE_MARKER).exists():
        what = "a single env's report folder" if (out / REPORT_MARKER).exists() else "not a suite folder"
        raise UsageError(f"--out {out} exists and is {what}; choose another --out for the suite")
    try:
        finished = load_summary(out).complete
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"--out {out}: its {SUITE_MARKER} cannot be read ({exc}); pass --force to rescan the "
                         "suite there or choose another --out") from None
    if finished and not (force or resume):
        raise UsageError(f"--out {out} already holds a finished suite; pass --resume to keep its finished "
                         "envs (scanning only new or changed ones), --force to rescan every env, or choose "
                         "another --out")


def validate(entries: Sequence[SuiteEntry]) -> None:
    """Every env's probes and pipeline preset exist: a typo is a usage error before any scan."""
    from envaudit.scan import select_probes

    for entry in entries:
        try:
            select_probes(entry.config.probes)
            entry.config.rollout_pipeline()
        except (UsageError, ValueError) as exc:
            raise UsageError(f"env {entry.name!r} ({entry.target}): {exc}") from None
        if entry.config.engine == "vllm":
            from envaudit.grpo.vllm_backend import check_engine

            check_engine(entry.config.model)


def kept_report(folder: Path, identity: str) -> dict[str, Any] | None:
    """The ``report.json`` of a finished env folder made by the same scan, else None."""
    try:
        made_by = json.loads((folder / ENTRY_FILE).read_text())
        report = json.loads((folder / REPORT_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return report if made_by.get("identity") == identity else None


def _write_env_folder(folder: Path, job: Job, files: dict[str, bytes]) -> None:
    entry = job.entry

    def fill(staging: Path) -> None:
        atomic_write(staging / ENTRY_FILE, json.dumps(
            {"identity": job.identity, "name": entry.name, "target": entry.target,
             "env_args": dict(entry.env_args), "envaudit_version": _version()}, indent=2, default=repr) + "\n")
        # report.json last, as a single scan writes it: its presence means the folder is complete.
        for rel in sorted(files, key=lambda r: r == REPORT_MARKER):
            atomic_write(staging / rel, files[rel])

    try:
        atomic_folder(folder, fill, replace=True)
    except FileExistsError as exc:
        raise UsageError(f"cannot write env {entry.name!r}: {exc}") from None


def run_suite(entries: Sequence[SuiteEntry], out: str | os.PathLike, *, executor: str = "local",
              workers: int | None = None, ray_address: str | None = None, force: bool = False,
              on_event: OnEvent | None = None) -> SuiteSummary:
    """Scan ``entries`` into ``out`` and return the summary (also written there).

    ``workers``: envs scanned at once (default: one after another in this process; on a local Ray
    instance, ``RAY_DEFAULT_CPUS``). Finished envs of an earlier run of the same suite are kept
    unless ``force``. ``on_event`` receives ``{"kind": "kept"|"progress"|"done", "name",
    "message", "fraction", "done", "total"}`` for a progress display; nothing here prints.
    """
    if executor not in EXECUTORS:
        raise UsageError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: expected at least 1 (envs scanned at once)")
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise UsageError(f"two envs of the suite share a folder name: {sorted({n for n in names if names.count(n) > 1})}")
    out = Path(out)
    version = _version()
    tell = on_event or (lambda _event: None)
    entries = [dataclasses.replace(e, config=dataclasses.replace(e.config, out=str(out / e.name))) for e in entries]
    jobs = {e.name: Job.here(e, e.identity(version)) for e in entries}
    rows: dict[str, dict[str, Any]] = {}
    todo: list[Job] = []
    for entry in entries:
        job = jobs[entry.name]
        kept = None if force else kept_report(out / entry.name, job.identity)
        if kept is not None:
            rows[entry.name] = env_row(entry.name, entry.target, entry.env_args, job.identity, kept,
                                       entry.config.fail_on)
        else:
            rows[entry.name] = pending_row(entry.name, entry.target, entry.env_args, job.identity,
                                           entry.config.fail_on)
            todo.append(job)
    total = len(entries)
    done = total - len(todo)
    for name, row in rows.items():
        if row["status"] == "done":
            tell({"kind": "kept", "name": name, "message": "kept from the earlier run", "fraction": 1.0,
                  "done": done, "total": total})

    def summary(complete: bool) -> SuiteSummary:
        return SuiteSummary([rows[e.name] for e in entries], complete, envaudit_version=version, executor=executor)

    out.mkdir(parents=True, exist_ok=True)
    summary(not todo).write(out)

    def finished(outcome: Outcome) -> None:
        nonlocal done
        job = jobs[outcome.name]
        entry = job.entry
        if outcome.error is not None:
            rows[entry.name] = error_row(entry.name, entry.target, entry.env_args, job.identity,
                                         entry.config.fail_on, outcome.error, exit_code=3 if outcome.crashed else 2)
        else:
            _write_env_folder(out / entry.name, job, outcome.files)
            report = json.loads(outcome.files[REPORT_MARKER])
            rows[entry.name] = env_row(entry.name, entry.target, entry.env_args, job.identity, report,
                                       entry.config.fail_on)
        done += 1
        summary(done == total and all(r["status"] != "pending" for r in rows.values())).write(out)
        tell({"kind": "done", "name": entry.name, "message": "done", "fraction": 1.0, "done": done,
              "total": total, "row": rows[entry.name]})

    def progress(name: str, message: str, fraction: float) -> None:
        tell({"kind": "progress", "name": name, "message": message, "fraction": fraction, "done": done,
              "total": total})

    run_jobs(todo, executor=executor, workers=workers, ray_address=ray_address, on_progress=progress,
             on_done=finished)
    final = summary(True)
    final.write(out)
    return final


def default_suite_out(targets: Sequence[str], suite_file: str | None) -> str:
    """Where a suite goes without --out: named after its file, or after its targets — the same
    command gives the same folder, so rerunning it resumes."""
    import hashlib

    if suite_file is not None:
        return f"reports/suite-{Path(suite_file).stem}"
    digest = hashlib.sha256("\n".join(targets).encode()).hexdigest()[:8]
    return f"reports/suite-{digest}"


def is_suite(targets: Sequence[str], suite_file: str | None, tasks: str | None = None) -> bool:
    """Whether a command line asks for a suite: several targets, a suite file, a pattern, or a
    glob of row files (``--tasks 'data/*.parquet'``) for an adapter fed row files."""
    from envaudit.suite_file import is_pattern, takes_row_files

    if suite_file is not None or len(targets) != 1 or is_pattern(targets[0]):
        return True
    return tasks is not None and is_pattern(tasks) and takes_row_files(targets[0])


__all__ = ["ENTRY_FILE", "check_out", "default_suite_out", "is_suite", "kept_report", "run_suite", "validate"]
