"""A suite's summary: one row per env, ranked by its worst finding group, and the suite's verdict.

``suite.json`` holds it whole (``SuiteSummary.to_dict``); ``summary.md`` and ``summary.html``
render it. Each env's row is read from its own ``report.json`` (``env_row``), so a row of a
resumed suite and a row of a fresh scan are the same thing. A summary written before every env
finished is marked ``"complete": false`` and lists the unfinished envs as ``pending``.

Exit codes per env are the single scan's (3 broken, 1 a group reached --fail-on, 4 incomplete, 0
clean); a row whose env could not even be resolved or configured (an option the env's adapter
rejects) gets 2, and one whose scanning process died (killed for memory, a native crash) gets 3. The suite's exit code is the env codes' most urgent one under the same
precedence as one scan's: 2, then 3, then 1, then 4, then 0.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from envaudit.atomic import atomic_write
from envaudit.findings import Severity

SCHEMA_VERSION = 1
SUITE_MARKER = "suite.json"
"""A folder holding this file is a suite folder envaudit wrote; only such folders are resumed."""
PRECEDENCE = (2, 3, 1, 4, 0)
"""Exit codes, most urgent first: a usage error in an env, a broken env, a finding group at
--fail-on, an incomplete audit, clean. The same order as one scan's (see ``envaudit scan --help``)."""
STYLE = {"fail": "bold red", "warn": "yellow", "info": "cyan"}


def env_exit_code(report: Mapping[str, Any], fail_on: str) -> int:
    """The exit code ``envaudit scan`` gives this report (a ``report.json`` dict) under ``fail_on``."""
    if report.get("broken"):
        return 3
    if fail_on != "never":
        level = Severity.parse(fail_on)
        if any(Severity.parse(g["severity"]) >= level for g in report.get("groups", [])):
            return 1
    return 4 if report.get("incomplete") else 0


def env_row(name: str, target: str, env_args: Mapping[str, Any], identity: str,
            report: Mapping[str, Any], fail_on: str) -> dict[str, Any]:
    """One env's row from its ``report.json`` dict: worst group, its headline, the verdict."""
    findings = report.get("findings", [])
    groups = [{"code": g["code"], "severity": g["severity"], "behaviour": g["behaviour"],
               "reward_path": g["reward_path"], "codes": list(g["codes"])} for g in report.get("groups", [])]
    headline = None
    if report.get("groups"):
        top = report["groups"][0]  # report.json lists groups ranked, worst first
        finding = findings[int(top["headline"])]
        headline = {"code": top["code"], "severity": top["severity"], "behaviour": top["behaviour"],
                    "title": finding.get("title", ""), "summary": finding.get("summary", "")}
    return {
        "name": name, "target": target, "env_args": dict(env_args), "identity": identity,
        "env_id": report.get("env_id", target), "folder": name, "status": "done",
        "worst": headline["severity"] if headline else None, "headline": headline,
        "counts": dict(report.get("counts", {})), "findings": len(findings), "groups": groups,
        "broken": report.get("broken"), "incomplete": len(report.get("incomplete", [])),
        "fail_on": fail_on, "exit_code": env_exit_code(report, fail_on),
        "seconds": report.get("seconds"),
    }


def pending_row(name: str, target: str, env_args: Mapping[str, Any], identity: str, fail_on: str) -> dict[str, Any]:
    return {"name": name, "target": target, "env_args": dict(env_args), "identity": identity, "env_id": target,
            "folder": None, "status": "pending", "worst": None, "headline": None, "counts": {}, "findings": 0,
            "groups": [], "broken": None, "incomplete": 0, "fail_on": fail_on, "exit_code": None, "seconds": None}


def error_row(name: str, target: str, env_args: Mapping[str, Any], identity: str, fail_on: str,
              message: str, *, exit_code: int = 2) -> dict[str, Any]:
    """An env that could not be scanned at all: its target or options were rejected (exit code 2),
    or the process scanning it died (3: it could not be audited). Not finished: a rerun with --resume retries it."""
    return {**pending_row(name, target, env_args, identity, fail_on), "status": "error",
            "error": message, "exit_code": exit_code}


def _rank_key(row: Mapping[str, Any], position: int) -> tuple:
    worst = Severity.parse(row["worst"]) if row["worst"] else None
    counts = row.get("counts") or {}
    return (row["status"] == "pending", row["status"] != "error", -(int(worst) if worst is not None else -1),
            -counts.get("fail", 0), -counts.get("warn", 0), -counts.get("info", 0), position)


@dataclass
class SuiteSummary:
    """The rows of a suite (in suite order) and whether every env finished."""

    rows: list[dict[str, Any]]
    complete: bool
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    envaudit_version: str = ""
    executor: str = "local"

    def ranked(self) -> list[dict[str, Any]]:
        """Worst first: envs that could not be scanned, then by the worst group's severity and the
        number of groups at each level; unfinished envs last; suite order breaks ties."""
        order = sorted(range(len(self.rows)), key=lambda i: _rank_key(self.rows[i], i))
        return [self.rows[i] for i in order]

    @property
    def exit_code(self) -> int:
        codes = {r["exit_code"] for r in self.rows if r["exit_code"] is not None}
        return next((c for c in PRECEDENCE if c in codes), 0)

    def counts(self) -> dict[str, int]:
        status = [r["status"] for r in self.rows]
        worst = [r["worst"] for r in self.rows if r["status"] == "done"]
        return {"envs": len(self.rows), "done": status.count("done"), "pending": status.count("pending"),
                "error": status.count("error"), "broken": sum(r["exit_code"] == 3 for r in self.rows),
                "fail": worst.count("fail"), "warn": worst.count("warn"), "info": worst.count("info"),
                "clean": worst.count(None)}

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "envaudit_version": self.envaudit_version,
                "created": self.created, "complete": self.complete, "executor": self.executor,
                "exit_code": self.exit_code, "counts": self.counts(), "envs": self.ranked()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SuiteSummary:
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"suite.json schema_version {data.get('schema_version')!r} is not {SCHEMA_VERSION}; "
                             "rescan the suite with --force")
        return cls(list(data["envs"]), bool(data["complete"]), data["created"], data.get("envaudit_version", ""),
                   data.get("executor", "local"))

    # -- writing ------------------------------------------------------------------------------
    def write(self, folder: str | os.PathLike) -> None:
        """summary.md and summary.html, then suite.json: each file whole (``atomic_write``), and
        suite.json, the marker, last."""
        from envaudit.reporting.suite_html import render_suite_html

        folder = Path(folder)
        atomic_write(folder / "summary.md", self.to_markdown())
        atomic_write(folder / "summary.html", render_suite_html(self))
        atomic_write(folder / SUITE_MARKER, json.dumps(self.to_dict(), indent=2, default=repr) + "\n")

    # -- text ---------------------------------------------------------------------------------
    def headline_counts(self) -> str:
        c = self.counts()
        done = f"{c['done']} of {c['envs']} envs scanned" if not self.complete else f"{c['envs']} envs"
        extra = f", {c['error']} could not be scanned" if c["error"] else ""
        return (f"{done}: {c['fail']} fail, {c['warn']} warn, {c['info']} info, {c['clean']} clean "
                f"(worst group per env){extra}; {c['broken']} broken")

    def to_markdown(self) -> str:
        lines = ["# envaudit suite", ""]
        if not self.complete:
            lines += ["**Incomplete**: the suite was interrupted or is still running; rerun the same "
                      "command to scan the pending envs.", ""]
        lines += [self.headline_counts() + f"; suite exit code {self.exit_code}.", "",
                  "| # | env | worst | headline | groups (fail/warn/info) | exit | report |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for i, row in enumerate(self.ranked(), 1):
            lines.append("| " + " | ".join(_md(c) for c in _cells(row, i)) + " |")
        lines += ["", "Exit codes per env are `envaudit scan`'s: 3 broken, 1 a group reached --fail-on, "
                  "4 incomplete, 0 clean; 2: the env's target or options were rejected; 3 also when the process "
                  "scanning an env died (--resume retries it).", ""]
        return "\n".join(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = Table(title="envaudit suite" + ("" if self.complete else " (incomplete)"))
        for column in ("#", "env", "worst", "headline", "f/w/i", "exit"):
            table.add_column(column, overflow="fold")
        for i, row in enumerate(self.ranked(), 1):
            cells = _cells(row, i)[:6]
            table.add_row(cells[0], cells[1], Text(cells[2], style=STYLE.get(row["worst"] or "", "")), *cells[3:])
        yield table
        yield Text(self.headline_counts())


def _cells(row: Mapping[str, Any], i: int) -> list[str]:
    c = row.get("counts") or {}
    if row["status"] == "pending":
        return [str(i), row["name"], "pending", "", "", "", ""]
    if row["status"] == "error":
        return [str(i), row["name"], "error", row.get("error", ""), "", str(row["exit_code"]), ""]
    h = row["headline"]
    headline = f"{_code(h)}: {h['title']}" if h else "no findings"
    if row.get("broken"):
        headline = f"ENV BROKEN: {headline}"
    if row.get("incomplete"):
        headline += f" [incomplete: {row['incomplete']} skipped]"
    return [str(i), row["name"], row["worst"] or "clean", headline,
            f"{c.get('fail', 0)}/{c.get('warn', 0)}/{c.get('info', 0)}", str(row["exit_code"]),
            f"[report]({row['folder']}/report.md)"]


def _code(headline: Mapping[str, Any]) -> str:
    """The headline's code, with the behaviour it is about when the code does not say it."""
    same = headline["behaviour"] == headline["code"]
    return headline["code"] if same else f"{headline['code']} ({headline['behaviour']})"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def load_summary(folder: str | os.PathLike) -> SuiteSummary:
    path = Path(folder) / SUITE_MARKER
    return SuiteSummary.from_dict(json.loads(path.read_text()))


def rows_by_name(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {r["name"]: r for r in rows}


__all__ = ["PRECEDENCE", "SUITE_MARKER", "SuiteSummary", "env_exit_code", "env_row", "error_row",
           "load_summary", "pending_row"]
