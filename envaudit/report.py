"""The scan report: findings, per-probe status, the env's fingerprint and the tables behind them.

A report renders itself (rich, Markdown, JSON) and writes a folder: ``report.json``,
``report.md``, ``report.html``, the plots (``<plot>.png``, see ``envaudit.reporting``),
``steps.parquet``, ``episodes.parquet`` and the probes' tables. Every file is
written to a temporary name and renamed, so no report file is ever left half-written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from envaudit.atomic import atomic_folder, atomic_parquet, atomic_write
from envaudit.findings import CODES, Finding, Severity, rank
from envaudit.recording import Records

SCHEMA_VERSION = 1
SEVERITY_STYLE = {Severity.FAIL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}


@dataclass
class ProbeStatus:
    """How one probe went: ``ok``, ``crashed``, ``overran`` (the safety cap) or ``skipped``."""

    name: str
    status: str
    seconds: float
    findings: int = 0
    error: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Rounded once, here, so a report re-rendered from report.json reads exactly the same.
        self.seconds = round(float(self.seconds), 3)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "findings": self.findings, "error": self.error, "notes": self.notes}


@dataclass
class Report:
    env_id: str
    config: dict[str, Any]
    fingerprint: dict[str, Any]
    findings: list[Finding]
    probes: list[ProbeStatus]
    exploration: dict[str, Any]
    created: str
    seconds: float
    envaudit_version: str
    records: Records | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    incomplete: list[dict[str, str]] = field(default_factory=list)
    """Work the wall-clock safety cap cut: ``{"probe", "skipped", "reason"}``; empty when the scan
    ran all its work units."""
    broken: dict[str, str] | None = None
    """Set when the env could not be audited at all: ``{"stage", "message", "where"}`` — it cannot be
    made, or every episode of exploration crashed (``where`` is the user's ``file:line``)."""

    def __post_init__(self) -> None:
        self.findings = rank(self.findings)
        self.seconds = round(float(self.seconds), 3)
        self.incomplete = [{"probe": str(g["probe"]), "skipped": str(g["skipped"]), "reason": str(g["reason"])}
                           for g in self.incomplete]

    # -- verdicts ---------------------------------------------------------------------------
    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def reaches(self, severity: Severity | str | None) -> list[Finding]:
        """Findings at or above ``severity`` (None: never)."""
        if severity is None:
            return []
        level = Severity.parse(severity)
        return [f for f in self.findings if f.severity >= level]

    def counts(self) -> dict[str, int]:
        return {str(s): sum(f.severity == s for f in self.findings) for s in reversed(Severity)}

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "envaudit_version": self.envaudit_version,
            "env_id": self.env_id,
            "created": self.created,
            "seconds": self.seconds,
            "config": self.config,
            "fingerprint": self.fingerprint,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "probes": [p.to_dict() for p in self.probes],
            "exploration": self.exploration,
            "incomplete": self.incomplete,
            "broken": self.broken,
            "tables": sorted(self.tables),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"report schema_version {version!r} is not {SCHEMA_VERSION}; "
                             "re-run `envaudit scan` with this version of envaudit")
        return cls(
            env_id=data["env_id"], config=data["config"], fingerprint=data["fingerprint"],
            findings=[Finding.from_dict(f) for f in data["findings"]],
            probes=[ProbeStatus(**p) for p in data["probes"]], exploration=data["exploration"],
            created=data["created"], seconds=data["seconds"], envaudit_version=data["envaudit_version"],
            incomplete=data.get("incomplete", []), broken=data.get("broken"),
        )

    # -- folder -----------------------------------------------------------------------------
    def write(self, folder: str | os.PathLike, *, replace: bool = False) -> Path:
        """Write the report folder whole or not at all (``atomic.atomic_folder``): an existing report
        folder is replaced only with ``replace=True``; anything else there is never touched."""
        return atomic_folder(folder, self._fill, replace=replace)

    def _fill(self, folder: Path) -> None:
        if self.records is not None:
            self.records.save(folder)
        for name, frame in sorted(self.tables.items()):
            atomic_parquet(folder / f"{name}.parquet", frame)
        atomic_write(folder / "report.md", self.to_markdown())
        # The plots (<plot>.png) and report.html; matplotlib loads only when a folder is written.
        from envaudit.reporting.folder import write_visuals

        write_visuals(self, folder)
        # report.json last: its presence means the folder is complete.
        atomic_write(folder / "report.json", json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Report:
        folder = Path(folder)
        path = folder / "report.json"
        if not path.exists():
            raise FileNotFoundError(f"{folder} has no report.json; is it a folder written by `envaudit scan`?")
        report = cls.from_dict(json.loads(path.read_text()))
        if (folder / "steps.parquet").exists():
            report.records = Records.load(folder)
        for name in json.loads(path.read_text()).get("tables", []):
            table = folder / f"{name}.parquet"
            if table.exists():
                report.tables[name] = pd.read_parquet(table)
        return report

    # -- Markdown ---------------------------------------------------------------------------
    def to_markdown(self) -> str:
        c = self.counts()
        lines = [
            f"# envaudit report: `{self.env_id}`", "",
            f"{c['fail']} fail, {c['warn']} warn, {c['info']} info — seed {self.config.get('seed')}, "
            f"{self.exploration.get('episodes', 0)} exploration episodes, {self.seconds:.1f} s, "
            f"envaudit {self.envaudit_version}, {self.created}", "",
        ]
        if self.broken:
            lines += [f"**ENV BROKEN** ({self.broken['stage']}): {self.broken['message']}"
                      + (f" at `{self.broken['where']}`" if self.broken.get("where") else ""), ""]
        if self.incomplete:
            lines += ["**INCOMPLETE:** the wall-clock safety cap cut this audit short; the work below was "
                      "not done, so findings may be missing.", ""]
            lines += [f"- `{g['probe']}`: {g['skipped']} ({g['reason']})" for g in self.incomplete]
            lines.append("")
        if not self.findings:
            lines += ["No findings.", ""]
        for i, f in enumerate(self.findings, 1):
            lines += [f"## {i}. [{str(f.severity).upper()}] `{f.code}` — {f.title}", "", f.summary, ""]
            if f.evidence:
                lines += ["| evidence | value |", "| --- | --- |"]
                lines += [f"| {k} | {_md_value(v)} |" for k, v in f.evidence.items()]
                lines.append("")
            if f.examples:
                lines += [f"Example episodes: {', '.join(map(str, f.examples[:10]))}", ""]
            if f.fix:
                lines += [f"**Fix:** {f.fix}", ""]
        lines += ["## Probes", "", "| probe | status | seconds | findings | note |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {p.name} | {p.status} | {p.seconds:.2f} | {p.findings} | {p.error or ''} |" for p in self.probes]
        lines += ["", "## Exploration", ""]
        lines += [f"- {k}: {_md_value(v)}" for k, v in self.exploration.items()]
        lines += ["", "## Config", "", "```json", json.dumps(self.config, indent=2), "```", ""]
        return "\n".join(lines)

    # -- rich -------------------------------------------------------------------------------
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield findings_table(self.findings, title=f"envaudit: {self.env_id}")
        c = self.counts()
        yield Text(f"{c['fail']} fail, {c['warn']} warn, {c['info']} info "
                   f"({self.exploration.get('episodes', 0)} episodes explored, {self.seconds:.1f} s)")
        if self.broken:
            where = f" at {self.broken['where']}" if self.broken.get("where") else ""
            yield Text(f"ENV BROKEN ({self.broken['stage']}): {self.broken['message']}{where}", style="bold red")
        for g in self.incomplete:
            yield Text(f"INCOMPLETE: {g['probe']}: skipped {g['skipped']} ({g['reason']})", style="bold magenta")


def findings_table(findings: Iterable[Finding], *, title: str | None = None) -> Table:
    """The ranked findings as a rich table (severity, code, title, key number)."""
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("#", justify="right")
    table.add_column("severity")
    table.add_column("code")
    table.add_column("finding", overflow="fold")
    rows = list(findings)
    for i, f in enumerate(rows, 1):
        table.add_row(str(i), Text(str(f.severity), style=SEVERITY_STYLE[f.severity]), f.code, f.summary or f.title)
    if not rows:
        table.add_row("", "", "", "no findings")
    return table


def _md_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and all(isinstance(v, float) for v in value):
        return "[" + ", ".join(f"{v:.4g}" for v in value) + "]"
    text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return text.replace("|", "\\|")


def catalogue_markdown() -> str:
    return "\n".join(f"- `{code}`: {text}" for code, text in CODES.items())
