"""``envaudit diff OLD NEW``: did the fix remove the incentive without adding another?

Two reports are compared incentive by incentive: finding groups (``envaudit.grouping``), one per
incentive, matched by ``behaviour + reward path + headline code``, in rank order. So a reworded
title, a number in a title, or another probe joining the evidence does not turn one incentive into
a fixed one and a new one. Each group gets a status:

- ``fixed``: OLD had it at warn or fail; NEW has no counterpart at warn or fail (gone, or only info);
- ``new``: NEW has it at warn or fail; OLD had no counterpart at warn or fail (absent, or only info);
- ``unchanged``: at warn or fail on both sides (its severity may still move: shown old → new);
- ``info``: at info on both sides, or at info on the one side that has it (facts, not incentives);
- ``settings``: would be ``new`` or ``fixed``, but the two scans were run with different settings
  that explain it: a pipeline-paid group (``timeout-drop-incentive``) or one only the GRPO probe
  (which trains under the pipeline) saw, when the pipeline or its timeout handling differs (drop
  vs keep), a group every probe of which ran on one side only
  (``--probes``), a GRPO-only group when the GRPO engine or model differs. That is not the env
  getting better or worse; it is the question asked differently.

Every config key that differs between the scans (pipeline, timeout handling, seed, quick,
episodes, probes, ...) is listed first (``settings``). A difference in how much was sampled
(seed, episodes, quick, group size, alpha, ...) does not reclassify anything, but the diff says
that borderline groups and the numbers may move with it.

The diff exits 1 when anything is ``new``. Beside the groups it shows how the numbers moved:
each matched group's headline evidence side by side, and the scans' own key numbers
(exploration return, length, outcome rates, group counts).

Two reports are "of the same env" when their env ids match or their fingerprints name the same
class (a fixed version of an env, or a flawed variant and its clean twin); anything else is
refused unless ``force=True``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from envaudit.errors import UsageError
from envaudit.findings import Finding, Severity, jsonable
from envaudit.grouping import FindingGroup
from envaudit.reporting.load import AuditReport, load_report

FIXED, NEW, UNCHANGED, INFO, SETTINGS = "fixed", "new", "unchanged", "info", "settings"
STATUS_ORDER = (NEW, FIXED, SETTINGS, UNCHANGED, INFO)
STATUS_STYLE = {NEW: "bold red", FIXED: "green", SETTINGS: "magenta", UNCHANGED: "yellow", INFO: "cyan"}

PIPELINE_KEYS = ("pipeline", "timeout_handling", "timeout_penalty")
"""Config keys that decide the training pipeline a pipeline-paid incentive is measured under."""
SAMPLING_KEYS = ("seed", "episodes", "group_size", "quick", "max_steps", "alpha", "success_threshold",
                 "step_timeout_s", "budget_s")
"""Config keys that change how much is sampled (or how it is judged), not which question is asked."""
GRPO_KEYS = ("engine", "model")
NOT_SETTINGS = ("out", "fail_on")
"""Config keys that say nothing about what a scan measured: where it was written, when it exits 1."""

Number = float | tuple[float, float]


class DifferentEnvsError(UsageError):
    """The two reports are of different envs (and ``force`` was not given)."""


def group_key(g: FindingGroup) -> tuple[str, str, str]:
    """The key an incentive is matched by across reports: behaviour, reward path, headline code."""
    return (g.behaviour, g.reward_path, g.code)


def evidence_numbers(evidence: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Number]:
    """The numbers of a finding's evidence, nested keys dotted (``test.vs_success.diff``);
    two-number lists (confidence intervals) kept as pairs; lists of records skipped."""
    out: dict[str, Number] = {}
    for key, value in evidence.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[name] = float(value)
        elif isinstance(value, str) and value in ("nan", "inf", "-inf"):
            out[name] = float(value)
        elif isinstance(value, dict) and depth < 2:
            out.update(evidence_numbers(value, f"{name}.", depth + 1))
        elif (isinstance(value, (list, tuple)) and len(value) == 2
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
            out[name] = (float(value[0]), float(value[1]))
    return out


@dataclass(frozen=True)
class SettingChange:
    """One config key whose value differs between the two scans."""

    key: str
    old: Any
    new: Any

    @property
    def kind(self) -> str:
        """``pipeline``, ``probes``, ``grpo``, ``sampling`` or ``other``."""
        if self.key in PIPELINE_KEYS:
            return "pipeline"
        if self.key == "probes":
            return "probes"
        if self.key in GRPO_KEYS:
            return "grpo"
        return "sampling" if self.key in SAMPLING_KEYS else "other"

    def text(self) -> str:
        return f"{self.key} {_setting(self.old)} → {_setting(self.new)}"


def _setting(value: Any) -> str:
    if value is None:
        return "default"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def setting_changes(old: AuditReport, new: AuditReport) -> list[SettingChange]:
    """Every config key whose value differs between the scans, in config order."""
    keys = list(dict.fromkeys([*old.config, *new.config]))
    return [SettingChange(k, old.config.get(k), new.config.get(k)) for k in keys
            if k not in NOT_SETTINGS and _norm(old.config.get(k)) != _norm(new.config.get(k))]


def _norm(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _pipeline(config: dict[str, Any]) -> tuple[Any, ...]:
    """The pipeline a scan modelled: a preset overrides the simple timeout handling; the penalty
    matters only under ``penalty``."""
    if config.get("pipeline"):
        return ("preset", config["pipeline"])
    handling = config.get("timeout_handling", "keep")
    return ("handling", handling, config.get("timeout_penalty") if handling == "penalty" else None)


def _ran(view: AuditReport, probe: str) -> bool:
    status = view.probe_status(probe)
    return status is not None and status.status != "skipped"


def explained_by_settings(group: FindingGroup, here: AuditReport, there: AuditReport,
                          changes: list[SettingChange]) -> str:
    """Why ``group`` (at warn or fail in ``here``, not in ``there``) may be there only because the
    scans were set up differently; "" when no setting explains it."""
    kinds = {c.kind for c in changes}
    pipeline_changed = "pipeline" in kinds and _pipeline(here.config) != _pipeline(there.config)
    probes = sorted({f.probe for f in group.members if f.probe})
    # The GRPO probe trains under the configured pipeline, so what it learned moves with it too.
    if pipeline_changed and (group.reward_path == "pipeline" or probes == ["grpo"]):
        return "; ".join(c.text() for c in changes if c.kind == "pipeline")
    if probes and all(_ran(here, p) for p in probes) and not any(_ran(there, p) for p in probes):
        return f"probe {', '.join(probes)} did not run in the other scan"
    if probes == ["grpo"] and "grpo" in kinds:
        return "; ".join(c.text() for c in changes if c.kind == "grpo")
    return ""


@dataclass(frozen=True)
class GroupChange:
    """One incentive across the two reports (``old`` or ``new`` is None when it is on one side only);
    ``reason`` says which setting change explains a ``settings`` status."""

    status: str
    old: FindingGroup | None
    new: FindingGroup | None
    reason: str = ""

    @property
    def group(self) -> FindingGroup:
        return self.new if self.new is not None else self.old  # type: ignore[return-value]

    @property
    def finding(self) -> Finding:
        """The headline finding (NEW's when both sides have the group)."""
        return self.group.headline

    @property
    def severity_move(self) -> str:
        old = str(self.old.severity) if self.old is not None else "—"
        new = str(self.new.severity) if self.new is not None else "—"
        return old if old == new else f"{old} → {new}"

    def numbers(self) -> list[tuple[str, Number | None, Number | None]]:
        """The headline's evidence numbers, OLD and NEW side by side (None where a side lacks it)."""
        old = evidence_numbers(dict(self.old.headline.evidence)) if self.old is not None else {}
        new = evidence_numbers(dict(self.new.headline.evidence)) if self.new is not None else {}
        keys = list(dict.fromkeys([*old, *new]))
        keys.sort(key=lambda k: "." in k)  # top-level numbers first (stable: evidence order within)
        return [(k, old.get(k), new.get(k)) for k in keys]

    def to_dict(self) -> dict[str, Any]:
        f, g = self.finding, self.group
        return {"status": self.status, "reason": self.reason, "code": f.code, "probe": f.probe, "title": f.title,
                "behaviour": g.behaviour, "reward_path": g.reward_path,
                "old_severity": str(self.old.severity) if self.old else None,
                "new_severity": str(self.new.severity) if self.new else None,
                "old_codes": list(self.old.codes) if self.old else [],
                "new_codes": list(self.new.codes) if self.new else [],
                "numbers": [{"name": k, "old": jsonable(o), "new": jsonable(n)} for k, o, n in self.numbers()]}


@dataclass
class ReportDiff:
    """The comparison of two reports: per-incentive changes and the scans' key numbers."""

    old_env: str
    new_env: str
    env_note: str
    changes: list[GroupChange]
    numbers: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    settings: list[SettingChange] = field(default_factory=list)

    def with_status(self, status: str) -> list[GroupChange]:
        return [c for c in self.changes if c.status == status]

    @property
    def fixed(self) -> list[GroupChange]:
        return self.with_status(FIXED)

    @property
    def new(self) -> list[GroupChange]:
        return self.with_status(NEW)

    @property
    def unchanged(self) -> list[GroupChange]:
        return self.with_status(UNCHANGED)

    @property
    def with_settings(self) -> list[GroupChange]:
        return self.with_status(SETTINGS)

    def settings_line(self) -> str:
        """The first line a reader needs: whether the two scans asked the same question."""
        if not self.settings:
            return "Same settings in both scans."
        line = "Settings differ: " + "; ".join(c.text() for c in self.settings) + "."
        if any(c.kind == "sampling" for c in self.settings):
            line += " Sampling differs, so the numbers and borderline groups may move with it."
        return line

    @property
    def exit_code(self) -> int:
        """1 when NEW has a warn/fail incentive OLD did not, else 0."""
        return 1 if self.new else 0

    def verdict(self) -> str:
        counts = f"{len(self.fixed)} fixed, {len(self.new)} new, {len(self.unchanged)} unchanged"
        if self.with_settings:
            counts += f", {len(self.with_settings)} changed with the settings"
        if self.new:
            return f"{counts}: NEW has {len(self.new)} warn/fail incentive(s) that OLD did not"
        if self.fixed and not self.unchanged:
            return f"{counts}: every warn/fail incentive of OLD is gone and none was added"
        return f"{counts}: no warn/fail incentive was added"

    def to_dict(self) -> dict[str, Any]:
        return {"old_env": self.old_env, "new_env": self.new_env, "env_note": self.env_note,
                "settings": [{"key": c.key, "old": c.old, "new": c.new, "kind": c.kind} for c in self.settings],
                "verdict": self.verdict(), "exit_code": self.exit_code,
                "changes": [c.to_dict() for c in self.changes],
                "numbers": [{"name": k, "old": o, "new": n} for k, o, n in self.numbers]}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(f"envaudit diff: {self.old_env} (OLD) → {self.new_env} (NEW)", style="bold")
        if self.env_note:
            yield Text(self.env_note, style="dim")
        yield Text(self.settings_line(), style="bold magenta" if self.settings else "dim")
        table = Table(title="incentives (finding groups)", show_lines=False)
        for column in ("status", "severity", "code", "incentive", "finding"):
            table.add_column(column, overflow="fold")
        for c in self.changes:
            f, g = c.finding, c.group
            also = f" (+{len(g.corroborating)} corroborating)" if g.corroborating else ""
            why = f"; with {c.reason}" if c.reason else ""
            status = "changed with the settings" if c.status == SETTINGS else c.status
            table.add_row(Text(status, style=STATUS_STYLE[c.status]), c.severity_move, f.code,
                          f"{g.behaviour} / {g.reward_path}", Text(f"{f.title}{also}{why}"))  # Text: a title is never markup
        if not self.changes:
            table.add_row("", "", "", "", "no findings in either report")
        yield table
        for c in self.changes:
            if c.status == INFO:
                continue
            rows = c.numbers()
            if not rows:
                continue
            status = "changed with the settings" if c.status == SETTINGS else c.status
            numbers = Table(title=f"{status}: {c.finding.code} — {c.finding.title}", title_justify="left")
            for column, justify in (("evidence", "left"), ("OLD", "right"), ("NEW", "right"), ("change", "right")):
                numbers.add_column(column, justify=justify)  # type: ignore[arg-type]
            for name, old, new in rows[:12]:
                numbers.add_row(name, _fmt(old), _fmt(new), _change(old, new))
            if len(rows) > 12:
                numbers.add_row(f"… {len(rows) - 12} more", "", "", "")
            yield numbers
        key = Table(title="scan numbers", title_justify="left")
        for column, justify in (("number", "left"), ("OLD", "right"), ("NEW", "right"), ("change", "right")):
            key.add_column(column, justify=justify)  # type: ignore[arg-type]
        for name, old, new in self.numbers:
            key.add_row(name, _fmt(old), _fmt(new), _change(old, new))
        yield key
        yield Text(self.verdict(), style="bold red" if self.new else "bold green")


def same_env(old: AuditReport, new: AuditReport) -> tuple[bool, str]:
    """Whether two reports are of the same env, and a line that says why (or why not)."""
    if old.env_id == new.env_id:
        return True, ""
    old_class, new_class = old.fingerprint.get("class"), new.fingerprint.get("class")
    if old_class and old_class == new_class:
        return True, (f"different env ids, same class {old_class} (a changed version of the env, or a "
                      "flawed variant and its clean twin)")
    return False, (f"OLD is a report of {old.env_id!r} (class {old_class or 'unknown'}) and NEW of "
                   f"{new.env_id!r} (class {new_class or 'unknown'}); a diff compares two scans of the same "
                   "env (same id or same class). Pass --force to compare them anyway")


def match(old: Iterable[FindingGroup],
          new: Iterable[FindingGroup]) -> list[tuple[FindingGroup | None, FindingGroup | None]]:
    """Pair the groups of two reports by ``group_key``, in rank order; the rest stay one-sided."""
    old, new = list(old), list(new)
    pairs: list[tuple[FindingGroup | None, FindingGroup | None]] = []
    used_old: set[int] = set()
    matched_new: set[int] = set()
    for j, n in enumerate(new):
        i = next((i for i, o in enumerate(old) if i not in used_old and group_key(o) == group_key(n)), None)
        if i is not None:
            used_old.add(i)
            matched_new.add(j)
            pairs.append((old[i], n))
    pairs += [(o, None) for i, o in enumerate(old) if i not in used_old]
    pairs += [(None, n) for j, n in enumerate(new) if j not in matched_new]
    return pairs


def _status(old: FindingGroup | None, new: FindingGroup | None) -> str:
    old_hit = old is not None and old.severity >= Severity.WARN
    new_hit = new is not None and new.severity >= Severity.WARN
    if old_hit and new_hit:
        return UNCHANGED
    if old_hit:
        return FIXED
    if new_hit:
        return NEW
    return INFO


def scan_numbers(view: AuditReport) -> dict[str, float]:
    """The key numbers of one scan: exploration return, length, outcome rates, group and finding counts."""
    ex = view.exploration
    n = ex.get("episodes", 0) or 0
    out: dict[str, float] = {"exploration episodes": float(n)}
    for key in ("mean_return", "mean_length"):
        if isinstance(ex.get(key), (int, float)):
            out[f"exploration {key.replace('_', ' ')}"] = float(ex[key])
    for outcome, count in sorted((ex.get("outcomes") or {}).items()):
        out[f"{outcome} rate"] = count / n if n else float("nan")
    for sev, count in view.counts().items():
        out[f"{sev} incentives"] = float(count)
    out["findings"] = float(len(view.findings))
    return out


def diff_reports(old: Any, new: Any, *, force: bool = False) -> ReportDiff:
    """Compare two reports (folders, ``Report``s or ``AuditReport``s) of the same env."""
    old_view, new_view = load_report(old), load_report(new)
    same, note = same_env(old_view, new_view)
    if not same and not force:
        raise DifferentEnvsError(note)
    if not same:
        note = "--force: " + note.split("; a diff")[0]
    settings = setting_changes(old_view, new_view)
    changes = []
    for o, n in match(old_view.groups, new_view.groups):
        status, reason = _status(o, n), ""
        if status in (NEW, FIXED):  # the side where it is at warn or fail is "here"
            here, there = (new_view, old_view) if status == NEW else (old_view, new_view)
            reason = explained_by_settings(n if status == NEW else o, here, there, settings)  # type: ignore[arg-type]
            status = SETTINGS if reason else status
        changes.append(GroupChange(status, o, n, reason))
    order = {s: i for i, s in enumerate(STATUS_ORDER)}
    rank = {id(g): i for i, g in enumerate([*new_view.groups, *old_view.groups])}
    changes.sort(key=lambda c: (order[c.status], -int(c.group.severity), rank[id(c.group)]))
    old_numbers, new_numbers = scan_numbers(old_view), scan_numbers(new_view)
    keys = list(dict.fromkeys([*old_numbers, *new_numbers]))
    numbers = [(k, old_numbers.get(k), new_numbers.get(k)) for k in keys]
    return ReportDiff(old_view.env_id, new_view.env_id, note, changes, numbers, settings)


def _fmt(value: Number | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, tuple):
        return f"[{value[0]:.4g}, {value[1]:.4g}]"
    return f"{value:.4g}"


def _change(old: Number | None, new: Number | None) -> str:
    if isinstance(old, float) and isinstance(new, float) and math.isfinite(old) and math.isfinite(new):
        return f"{new - old:+.4g}"
    return ""


__all__ = ["DifferentEnvsError", "GroupChange", "ReportDiff", "SettingChange", "diff_reports", "evidence_numbers",
           "explained_by_settings", "group_key", "match", "same_env", "scan_numbers", "setting_changes"]
