"""``run_logs``: audit a training run from its logged rollouts; records in, the scan's report out.

The second front door beside ``envaudit.scan``: a reader turns the log into the generic schema
(``envaudit.logs.schema``), ``records.to_records`` into the records the probes read, then the
probes' record analyses (``analyses``), the drift over training (``drift``) and, with an env,
the replay (``replay``) produce findings; ``envaudit.conclusion.conclude``, the scan's own ending,
turns them into the report (Holm across them, grouping by incentive, the ``Report``). Work is the logged episodes, so the report depends on the log, the
seed and the config only.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from envaudit.conclusion import conclude
from envaudit.config import ScanConfig
from envaudit.findings import Finding
from envaudit.logs import analyses, coverage, drift
from envaudit.logs.records import Converted, log_context, sample_groups, to_records
from envaudit.logs.schema import LoggedRun, LogSchemaError
from envaudit.probe import registered_probes
from envaudit.report import ProbeStatus, Report
from envaudit.resolve import UsageError

FORMATS = ("auto", "generic", "verl", "skyrl", "trl", "prime-rl", "openrlhf")
CURVES_TABLE = "grpo_curves"
"""The per-iteration table under the name the report's curves plot reads (``mode`` = logged run)."""


def read_log(paths: Sequence[str | os.PathLike], *, fmt: str = "auto", mapping: Mapping[str, str] | None = None,
             steps: str | os.PathLike | None = None, reader_options: Mapping[str, Any] | None = None) -> LoggedRun:
    """Read ``paths`` with the reader of ``fmt`` (``auto``: the trainer reader that recognises the
    file, else the generic one). ``mapping`` and ``steps`` are the generic schema's options;
    ``reader_options`` a trainer reader's own (``success_field``, prime-rl's ``kind``/``subset``...)."""
    from envaudit.logs import generic

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    options: dict[str, Any] = {"mapping": dict(mapping or {}), "steps": steps}
    try:
        reader = None if fmt == "generic" else _trainer_reader(paths[0], None if fmt == "auto" else fmt)
        if reader is None or getattr(reader, "NAME", None) == generic.NAME:
            if reader_options:
                raise UsageError(f"--reader-arg {', '.join(sorted(reader_options))}: options of a trainer's "
                                 "reader; this log is read as the generic schema (use --map for its columns)")
            return generic.read(paths, **options)
        return _read_trainer_log(reader, paths, options, dict(reader_options or {}))
    except LogSchemaError as exc:
        raise UsageError(str(exc)) from None


def _read_trainer_log(reader: Any, paths: Sequence[str | os.PathLike], options: dict[str, Any],
                      reader_options: dict[str, Any]) -> LoggedRun:
    """A trainer's dump: one file or folder, its reader's options, and ``--map KEY=COLUMN`` for the
    dump's own keys the reader does not map (timeouts, turns, tool errors: ``readers.map_fields``)."""
    import inspect

    from envaudit.logs.readers import map_fields

    name = reader.NAME
    if options["steps"]:
        raise UsageError(f"--steps is for logs in the generic schema; a {name} dump is read by its own "
                         "reader (drop it, or pass --format generic)")
    if len(paths) != 1:
        raise UsageError(f"a {name} dump is one file or folder; got {len(paths)} paths")
    accepted = [p for p in inspect.signature(reader.read).parameters if p != "path"]
    unknown = sorted(set(reader_options) - set(accepted))
    if unknown:
        raise UsageError(f"--reader-arg {', '.join(unknown)}: the {name} reader takes "
                         + (", ".join(accepted) if accepted else "no options"))
    return map_fields(reader.read(paths[0], **reader_options), options["mapping"])


def _trainer_reader(path: str | os.PathLike, name: str | None):
    """The trainer's reader module (``envaudit.logs.readers``), or None for the generic reader."""
    try:
        from envaudit.logs.readers import reader_for
    except ImportError:
        if name is not None:
            raise UsageError(f"--format {name}: the trainer readers are not installed in this envaudit") from None
        return None
    try:
        return reader_for(path, name)
    except (LookupError, ValueError) as exc:
        if name is None:  # auto: no trainer's reader recognises the file, so it is the generic schema
            return None
        raise UsageError(f"--format {name}: {exc}") from None


def run_logs(run: LoggedRun, config: ScanConfig | None = None, *, env: str | Callable | None = None,
             label: str = "logged run", progress: Callable[[str, float], None] | None = None,
             **overrides: Any) -> Report:
    """Audit a logged run; with ``env`` (a spec or factory) its episodes are also replayed."""
    config = dataclasses.replace(config or ScanConfig(), **overrides) if overrides else (config or ScanConfig())
    started = time.monotonic()
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    tell = progress or (lambda _m, _f: None)
    pipeline = config.rollout_pipeline()
    converted = to_records(run)
    analysed, sampled = sample_groups(converted, config.seed)
    findings: list[Finding] = []
    gaps: list[dict[str, Any]] = []  # what the log's columns could not check: coverage's finding
    statuses: list[ProbeStatus] = []
    tables: dict[str, pd.DataFrame] = {}
    names = list(analyses.ANALYSES)
    steps_total = len(names) + 1 + (env is not None)
    for i, name in enumerate(names):
        tell(f"analysis {name}", i / steps_total)
        t0 = time.monotonic()
        ctx = log_context(analysed, config, pipeline, name)
        produced, skipped = analyses.run_analysis(name, ctx, analysed)
        if skipped:
            gaps.append(coverage.gap(name, "the whole analysis", skipped.removeprefix("not run: "),
                                     analyses.absent_columns(analysed, *analyses.ANALYSES[name][1]),
                                     registered_probes([name])[name].codes))
        produced = [dataclasses.replace(f, probe=f.probe or name) for f in produced]
        findings += produced
        tables.update({f"{name}_{k}": v for k, v in ctx.tables.items()})
        notes = {**ctx.notes, **({"not run without an env": [s["skipped"] for s in ctx.skipped]} if ctx.skipped else {})}
        statuses.append(ProbeStatus(name, "skipped" if skipped else "ok", time.monotonic() - t0, len(produced),
                                    skipped, _plain(notes)))
    tell("drift over training", len(names) / steps_total)
    t0 = time.monotonic()
    ctx = log_context(analysed, config, pipeline, "drift")
    curve = drift.curves(converted)
    tables[CURVES_TABLE] = curve
    drift_notes: list[str] = []
    produced = drift.analyse(ctx, analysed, curve, drift_notes, gaps)
    findings += produced
    statuses.append(ProbeStatus("drift", "ok", time.monotonic() - t0, len(produced), None,
                                _plain({**ctx.notes, **({"missing": "; ".join(drift_notes)} if drift_notes else {})})))
    broken = None
    if env is not None:
        from envaudit.logs import replay

        tell("replay against the env", (len(names) + 1) / steps_total)
        t0 = time.monotonic()
        outcome = replay.replay_run(converted, env, config)
        findings += outcome.findings
        if outcome.table is not None:
            tables["replay_episodes"] = outcome.table
        broken = outcome.broken
        if outcome.status == "skipped":
            gaps.append(coverage.gap("replay", "the whole replay", (outcome.error or "").removeprefix("not run: "),
                                     [c for c in ("seed", "steps.action") if c in (outcome.error or "")],
                                     ["non-replayable"]))
        statuses.append(ProbeStatus("replay", outcome.status, time.monotonic() - t0, len(outcome.findings),
                                    outcome.error, _plain(outcome.notes)))
    tell("done", 1.0)
    summary = _summary(run, converted)
    if sampled:
        summary["sampled"] = sampled
    unchecked = coverage.decide_exploit_policy(gaps, run)
    return conclude(f"logs:{label}", {**config.to_dict(), "logs": {"source": run.source, "paths": label,
                                                                   "env": env if isinstance(env, str) else None}},
                    {"source": run.source}, findings, statuses, summary, alpha=config.alpha, created=created,
                    started=started, records=converted.records, tables=tables, broken=broken,
                    incomplete=coverage.incomplete_entries(gaps), after_correction=[unchecked] if unchecked else [])


def _summary(run: LoggedRun, converted: Converted) -> dict[str, Any]:
    eps = converted.records.episodes
    return {
        "episodes": int(len(eps)), "steps": int(len(converted.records.steps)),
        "iterations": int(eps["iteration"].nunique()) if len(eps) else 0,
        "mean_return": float(eps["return"].mean()) if len(eps) else None,
        "mean_length": float(eps["length"].mean()) if len(eps) else None,
        "outcomes": {k: int(v) for k, v in eps["outcome"].value_counts().sort_index().items()},
        "end_reasons": {k: int(v) for k, v in eps["end_reason"].value_counts().sort_index().items()},
        "success_flag": converted.has_success, "source": run.source, "missing": list(run.missing),
        "notes": list(run.notes),
    }


def _plain(notes: dict[str, Any]) -> dict[str, Any]:
    """Notes as JSON-ready values (numpy scalars and arrays inside evidence dicts)."""
    from envaudit.findings import jsonable

    return {str(k): jsonable(v) for k, v in notes.items()}


def default_out_dir(label: str) -> str:
    from envaudit.scan import default_out_dir as scan_out

    return scan_out(f"logs-{label}")


__all__ = ["FORMATS", "read_log", "run_logs"]
