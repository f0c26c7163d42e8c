"""``load_report``: the one way notebooks, plots, the HTML page, ``envaudit diff`` and tests read a report.

A report folder holds ``report.json`` (findings, probe statuses, config, fingerprint), the
``steps`` / ``episodes`` tables and each probe's tables (``<probe>_<name>.parquet``).
``AuditReport`` puts them behind plain attributes: ``findings``, ``groups`` (one per incentive),
``episodes``, ``steps``,
``curves`` (the GRPO probe's per-iteration behaviour, None when it did not run), ``config``,
``table(name)``. An in-memory ``Report`` (what ``run_scan`` returns) is viewed the same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from envaudit.findings import Finding, Severity
from envaudit.grouping import FindingGroup
from envaudit.recording import EPISODE_COLUMNS, STEP_COLUMNS
from envaudit.report import ProbeStatus, Report

CURVES_TABLE = "grpo_curves"
"""The GRPO probe's per-iteration behaviour table (iteration, mode, return, success_rate, ...)."""
EXPLORATION = "explore"
"""The ``probe`` tag of the scan's random exploration episodes."""


@dataclass
class AuditReport:
    """A report with its tables as DataFrames; ``folder`` is where it was loaded from (or None)."""

    report: Report
    folder: Path | None = None

    # -- what report.json says --------------------------------------------------------------
    @property
    def env_id(self) -> str:
        return self.report.env_id

    @property
    def findings(self) -> list[Finding]:
        """Ranked: most severe first."""
        return self.report.findings

    @property
    def groups(self) -> list[FindingGroup]:
        """The findings grouped by incentive, ranked: the verdicts go by these."""
        return self.report.finding_groups()

    def group_of(self, finding: Finding) -> int | None:
        """The 1-based rank of the group ``finding`` belongs to (None when it is not in this report)."""
        return next((i for i, g in enumerate(self.groups, 1) if any(m is finding for m in g.members)), None)

    @property
    def config(self) -> dict[str, Any]:
        return self.report.config

    @property
    def fingerprint(self) -> dict[str, Any]:
        return self.report.fingerprint

    @property
    def probes(self) -> list[ProbeStatus]:
        return self.report.probes

    @property
    def exploration(self) -> dict[str, Any]:
        return self.report.exploration

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.report.tables

    def worst(self) -> Severity | None:
        return self.report.worst()

    def counts(self) -> dict[str, int]:
        return self.report.counts()

    def probe_status(self, name: str) -> ProbeStatus | None:
        return next((p for p in self.probes if p.name == name), None)

    # -- the tables -------------------------------------------------------------------------
    @property
    def episodes(self) -> pd.DataFrame:
        """Every recorded episode (exploration and the probes' own runs), one row each."""
        records = self.report.records
        return records.episodes if records is not None else pd.DataFrame(columns=EPISODE_COLUMNS)

    @property
    def steps(self) -> pd.DataFrame:
        records = self.report.records
        return records.steps if records is not None else pd.DataFrame(columns=STEP_COLUMNS)

    @property
    def exploration_episodes(self) -> pd.DataFrame:
        """The random-policy exploration episodes: the unbiased sample of what the env pays."""
        eps = self.episodes
        if "probe" in eps.columns and (eps["probe"] == EXPLORATION).any():
            return eps[eps["probe"] == EXPLORATION]
        return eps

    @property
    def curves(self) -> pd.DataFrame | None:
        """The GRPO probe's per-iteration curves, or None when the probe did not run or kept none."""
        return self.table(CURVES_TABLE)

    def table(self, name: str) -> pd.DataFrame | None:
        """A probe's table by its file name (``<probe>_<name>``), or None when the report has none."""
        frame = self.tables.get(name)
        return None if frame is None or frame.empty else frame

    def episode(self, episode_id: int) -> pd.DataFrame:
        """The steps of one episode, in order."""
        steps = self.steps
        return steps[steps["episode_id"] == episode_id].sort_values("step")

    def findings_frame(self) -> pd.DataFrame:
        """The ranked findings as a table (for notebooks): severity, code, probe, title, p-values, and
        the group each belongs to (``group``: the group's rank; ``headline``: whether it heads it)."""
        rows = [{"rank": i, "group": self.group_of(f),
                 "headline": any(g.headline is f for g in self.groups),
                 "severity": str(f.severity), "code": f.code, "probe": f.probe, "title": f.title,
                 "p_value": f.evidence.get("p_value"), "p_adjusted": f.evidence.get("p_adjusted"),
                 "examples": list(f.examples), "summary": f.summary}
                for i, f in enumerate(self.findings, 1)]
        return pd.DataFrame(rows, columns=["rank", "group", "headline", "severity", "code", "probe", "title",
                                           "p_value", "p_adjusted", "examples", "summary"])

    def groups_frame(self) -> pd.DataFrame:
        """One row per incentive (for notebooks): severity, headline code, behaviour, reward path,
        the member codes and how many findings back it."""
        rows = [{"group": i, "severity": str(g.severity), "code": g.code, "behaviour": g.behaviour,
                 "reward_path": g.reward_path, "codes": list(g.codes), "findings": len(g.members),
                 "probes": sorted({f.probe for f in g.members}), "title": g.headline.title}
                for i, g in enumerate(self.groups, 1)]
        return pd.DataFrame(rows, columns=["group", "severity", "code", "behaviour", "reward_path", "codes",
                                           "findings", "probes", "title"])

    def __repr__(self) -> str:
        where = f", folder={str(self.folder)!r}" if self.folder is not None else ""
        return (f"AuditReport({self.env_id!r}: {self.report.headline_counts()}, "
                f"{len(self.episodes)} episodes{where})")

    def _repr_html_(self) -> str:  # a notebook shows the ranked incentives
        head = (f"<p><b>{_esc(self.env_id)}</b>: {_esc(self.report.headline_counts())}, grouped by incentive "
                f"({self.exploration.get('episodes', 0)} exploration episodes)</p>")
        return head + self.groups_frame().to_html(index=False)


def _esc(text: str) -> str:
    import html

    return html.escape(str(text))


def load_report(path: str | os.PathLike | Report | AuditReport) -> AuditReport:
    """Read a report folder written by ``envaudit scan`` (or its ``report.json``).

    A ``Report`` (what ``run_scan`` returns) or an ``AuditReport`` is passed through, so every
    reader accepts either a folder or an in-memory report.
    """
    if isinstance(path, AuditReport):
        return path
    if isinstance(path, Report):
        return AuditReport(path)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_report expects a report folder path, a Report or an AuditReport, "
                        f"got {type(path).__name__}")
    folder = Path(path)
    if folder.name == "report.json" and folder.is_file():
        folder = folder.parent
    if not folder.exists():
        raise FileNotFoundError(f"report folder {str(folder)!r} does not exist; pass the folder that "
                                "`envaudit scan` wrote (it holds report.json)")
    try:
        report = Report.load(folder)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{folder / 'report.json'} is not valid JSON ({exc}); re-run `envaudit scan`") from None
    return AuditReport(report, folder)


__all__ = ["CURVES_TABLE", "AuditReport", "load_report"]
