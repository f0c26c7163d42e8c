"""The scan report: findings grouped by incentive, per-probe status, the env's fingerprint and the tables.

A report renders itself (rich, JSON) and writes its data files: ``report.json``,
``steps.parquet``, ``episodes.parquet`` and the probes' tables. The files people read
(``report.md``, ``report.html``, the plots) are rendered by ``envaudit.reporting``, which sits above
this module, and ``envaudit.reporting.write_folder`` writes the whole folder. Every file is written
to a temporary name and renamed, so no report file is ever left half-written.
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

from envaudit.atomic import atomic_parquet, atomic_write
from envaudit.findings import CODES, Finding, Severity, rank
from envaudit.grouping import FindingGroup, group_findings, rank_groups
from envaudit.recording import Records

SCHEMA_VERSION = 2
"""2: report.json gained ``groups`` (one per incentive, pointing into ``findings``); a version-1
report is still read, its findings grouped on load."""
READABLE_VERSIONS = (1, SCHEMA_VERSION)
SEVERITY_STYLE = {Severity.FAIL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}


@dataclass
class ProbeStatus:
    """How one probe went: ``ok``, ``crashed``, ``overran`` (the safety cap), ``skipped``, or ``hung`` (its
    env work stopped at a hang, its own or one seen before it; ``error`` says which)."""

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
    """What a scan found. ``findings`` holds every finding, ranked; ``groups`` holds one
    ``FindingGroup`` per incentive (DESIGN.md, "Findings"), and the verdicts (``worst``,
    ``reaches``, ``counts``) go by group: one planted flaw is one problem however many probes saw it.
    ``groups`` is filled from ``findings`` when not given; read them through ``finding_groups()``,
    which regroups when findings were added or removed after the report was made.
    """

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
    groups: list[FindingGroup] | None = None
    cost: dict[str, Any] = field(default_factory=dict)
    """What the scan spent in env units (``envaudit.cost.EnvCost.section``): env steps and episodes,
    in all and per probe; the same for the same seed at any number of workers."""

    def __post_init__(self) -> None:
        self.findings = rank(self.findings)
        self.seconds = round(float(self.seconds), 3)
        self.incomplete = [{"probe": str(g["probe"]), "skipped": str(g["skipped"]), "reason": str(g["reason"])}
                           for g in self.incomplete]
        if self.groups is None:
            self.groups = group_findings(self.findings)
        else:
            self.groups = rank_groups(self.groups)
            self._check_groups()

    def _covers(self, groups: list[FindingGroup]) -> bool:
        held = [id(f) for g in groups for f in g.members]
        return sorted(held) == sorted(id(f) for f in self.findings)

    def finding_groups(self) -> list[FindingGroup]:
        """The findings grouped by incentive, ranked; regrouped when ``findings`` changed since."""
        if self.groups is None or not self._covers(self.groups):
            self.groups = group_findings(self.findings)
        return self.groups

    def _check_groups(self) -> None:
        """Every finding in exactly one group, and no group member outside ``findings``."""
        if not self._covers(self.groups or []):
            held = [f for g in self.groups or [] for f in g.members]
            raise ValueError(f"the report's {len(self.groups or [])} groups hold {len(held)} findings, "
                             f"the report has {len(self.findings)}: every finding must be in exactly one "
                             "group (build groups with envaudit.grouping.group_findings(findings))")

    # -- verdicts (by group: one incentive, one verdict) ---------------------------------------
    def worst(self) -> Severity | None:
        return max((g.severity for g in self.finding_groups()), default=None)

    def reaches(self, severity: Severity | str | None) -> list[FindingGroup]:
        """Groups at or above ``severity`` (None: never)."""
        if severity is None:
            return []
        level = Severity.parse(severity)
        return [g for g in self.finding_groups() if g.severity >= level]

    def counts(self) -> dict[str, int]:
        """Groups per severity."""
        return {str(s): sum(g.severity == s for g in self.finding_groups()) for s in reversed(Severity)}

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        index = {id(f): i for i, f in enumerate(self.findings)}
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
            "groups": [g.to_dict(index) for g in self.finding_groups()],
            "probes": [p.to_dict() for p in self.probes],
            "exploration": self.exploration,
            "incomplete": self.incomplete,
            "cost": self.cost,
            "broken": self.broken,
            "tables": sorted(self.tables),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"report schema_version {version!r} is not one this envaudit reads "
                             f"({', '.join(map(str, READABLE_VERSIONS))}); re-run `envaudit scan` with this "
                             "version of envaudit")
        # report.json lists findings ranked, so rank() keeps their order and group indices hold.
        findings = [Finding.from_dict(f) for f in data["findings"]]
        groups = ([FindingGroup.from_dict(g, findings) for g in data["groups"]]
                  if version >= 2 and "groups" in data else None)
        return cls(
            env_id=data["env_id"], config=data["config"], fingerprint=data["fingerprint"],
            findings=findings,
            probes=[ProbeStatus(**p) for p in data["probes"]], exploration=data["exploration"],
            created=data["created"], seconds=data["seconds"], envaudit_version=data["envaudit_version"],
            incomplete=data.get("incomplete", []), broken=data.get("broken"),
            groups=groups, cost=data.get("cost", {}),
        )

    # -- folder (written whole by envaudit.reporting.write_folder) ------------------------------
    def write_tables(self, folder: Path) -> None:
        """The step and episode tables and the probes' tables into ``folder`` (``write_folder``'s
        staging folder, first)."""
        if self.records is not None:
            self.records.save(folder)
        for name, frame in sorted(self.tables.items()):
            atomic_parquet(folder / f"{name}.parquet", frame)

    def write_json(self, folder: Path) -> None:
        """``report.json`` into ``folder``; ``write_folder`` writes it last, so its presence means
        the folder is complete."""
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

    # -- text (report.md itself is envaudit.reporting.render_markdown) -------------------------
    def headline_counts(self) -> str:
        """"1 fail, 0 warn, 2 info (7 findings)": groups per severity, and the findings behind them."""
        c = self.counts()
        return (f"{c['fail']} fail, {c['warn']} warn, {c['info']} info "
                f"({len(self.findings)} finding{'s' if len(self.findings) != 1 else ''})")

    # -- rich -------------------------------------------------------------------------------
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield groups_table(self.finding_groups(), title=f"envaudit: {self.env_id}")
        yield Text(f"{self.headline_counts()}, grouped by incentive "
                   f"({self.exploration.get('episodes', 0)} episodes explored, {self.seconds:.1f} s)")
        if self.broken:
            where = f" at {self.broken['where']}" if self.broken.get("where") else ""
            yield Text(f"ENV BROKEN ({self.broken['stage']}): {self.broken['message']}{where}", style="bold red")
        for g in self.incomplete:
            yield Text(f"INCOMPLETE: {g['probe']}: skipped {g['skipped']} ({g['reason']})", style="bold magenta")


def groups_table(groups: Iterable[FindingGroup], *, title: str | None = None) -> Table:
    """One row per incentive: severity, headline code, its summary, its fix, and what corroborates it."""
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("#", justify="right")
    table.add_column("severity")
    table.add_column("code")
    table.add_column("finding", overflow="fold")
    rows = list(groups)
    for i, g in enumerate(rows, 1):
        cell = Text(g.headline.summary or g.headline.title)
        if g.headline.fix:
            cell.append("\nfix: ", style="bold")
            cell.append(g.headline.fix)
        if g.corroborating:
            also = "; ".join(f"{f.probe or '?'} {f.code} ({f.severity})" for f in g.corroborating)
            cell.append(f"\nalso seen by: {also}", style="dim")
        table.add_row(str(i), Text(str(g.severity), style=SEVERITY_STYLE[g.severity]), g.code, cell)
    if not rows:
        table.add_row("", "", "", "no findings")
    return table


def catalogue_markdown() -> str:
    return "\n".join(f"- `{code}`: {text}" for code, text in CODES.items())
