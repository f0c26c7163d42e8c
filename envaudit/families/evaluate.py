"""Scoring a scan of a generated case: hit, miss or false alarm; and the ``check_env`` baseline.

``evaluate_case`` runs ``envaudit.scan.run_scan`` on one case and classifies its warn/fail
findings against the case's ``expected`` and ``tolerated`` codes; ``check_env_verdict`` runs
Gymnasium's ``check_env`` on the same env as the baseline (a raise or a warning counts as a
detection: it can only ever see env-error-like flaws). ``summarise`` turns many results into the
rates the benchmark prints and the detection tests assert: recall per code and the false-alarm
rate, each with its Wilson 95% interval.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from envaudit.families.case import Case
from envaudit.families.spec import FLAW_KINDS
from envaudit.findings import Severity
from envaudit.seeding import child_seed
from envaudit.stats import proportion_ci

LOUD = Severity.WARN
"""A finding at this severity or above is a verdict (a hit on a flawed env, a false alarm on a clean one)."""


@dataclass(frozen=True)
class Flag:
    """One warn/fail finding of a scan, as a benchmark row shows it."""

    code: str
    severity: str
    probe: str
    summary: str
    behaviour: str = ""


@dataclass(frozen=True)
class CaseResult:
    """What one scan of one case said, and how that scores."""

    name: str
    kind: str
    code: str
    clean: bool
    expected: tuple[str, ...]
    tolerated: tuple[str, ...]
    features: dict[str, Any]
    flags: tuple[Flag, ...]
    check_env_detected: bool
    check_env_message: str
    scan_seconds: float
    incomplete: tuple[str, ...] = ()
    probe_problems: tuple[str, ...] = ()
    error: str = ""
    headlines: tuple[str, ...] = ()
    """Headline codes of the report's warn/fail finding groups (one per incentive), where the
    report groups its findings; what a user reads first."""

    @property
    def incentive_flags(self) -> list[Flag]:
        """Warn/fail findings that name an incentive; the scan's own "could tell nothing apart"
        notice (behaviour ``exploration``) says the audit was inconclusive, not that the env is flawed."""
        return [f for f in self.flags if f.behaviour != "exploration"]

    @property
    def inconclusive(self) -> bool:
        return any(f.behaviour == "exploration" for f in self.flags)

    @property
    def flagged_codes(self) -> set[str]:
        return {f.code for f in self.incentive_flags}

    @property
    def hit(self) -> bool:
        """The planted incentive was named: some expected code at warn or fail."""
        return bool(self.flagged_codes & set(self.expected))

    @property
    def primary_hit(self) -> bool:
        """The code the case is filed under was itself reported at warn or fail."""
        return self.code in self.flagged_codes

    @property
    def headline_hit(self) -> bool:
        """Some warn/fail group is headed by an expected code."""
        return bool(set(self.headlines) & set(self.expected))

    @property
    def false_alarm(self) -> bool:
        return self.clean and bool(self.incentive_flags)

    @property
    def unexplained(self) -> list[Flag]:
        """Warn/fail findings on a flawed env that name neither its flaw nor a side effect of it."""
        allowed = set(self.expected) | set(self.tolerated)
        return [f for f in self.incentive_flags if f.code not in allowed] if not self.clean else self.incentive_flags

    def to_row(self) -> dict[str, Any]:
        row = {k: v for k, v in asdict(self).items() if k not in ("flags", "features")}
        row.update({f"f_{k}": v for k, v in self.features.items()})
        row.update(hit=self.hit, primary_hit=self.primary_hit, false_alarm=self.false_alarm,
                   inconclusive=self.inconclusive,
                   flagged=";".join(sorted(f"{f.code}:{f.severity}:{f.probe}" for f in self.flags)),
                   unexplained=";".join(sorted({f.code for f in self.unexplained})),
                   expected=";".join(self.expected), tolerated=";".join(self.tolerated),
                   incomplete=";".join(self.incomplete), probe_problems=";".join(self.probe_problems),
                   headlines=";".join(self.headlines), headline_hit=self.headline_hit)
        return row


def check_env_verdict(case: Case) -> tuple[bool, str]:
    """Gymnasium's ``check_env`` on the case's env: (detected, what it said)."""
    from gymnasium.utils.env_checker import check_env

    env = case.make_env()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                check_env(env, skip_render_check=True)
            except Exception as exc:  # a raise is the baseline's detection
                return True, f"raised {type(exc).__name__}: {exc}"[:300]
        if caught:
            return True, f"warned: {caught[0].message}"[:300]
        return False, ""
    finally:
        try:
            env.close()
        except Exception:  # closing a broken env is not the baseline's verdict
            pass


def evaluate_case(
    case: Case,
    *,
    seed: int = 0,
    quick: bool = True,
    budget_s: float = 900.0,
    probes: Sequence[str] | None = None,
    baseline: bool = True,
) -> CaseResult:
    """Scan ``case`` with ``run_scan`` (its own overrides applied) and score the warn/fail findings.

    ``budget_s`` is the scan's wall-clock safety cap, set far above what a scan needs so that the
    work done is the configured work units; a scan that still hits it says so in ``incomplete``.
    """
    from envaudit.config import ScanConfig
    from envaudit.scan import run_scan

    config = ScanConfig(seed=seed, quick=quick, budget_s=budget_s, fail_on="never",
                        probes=tuple(probes) if probes else None, **case.overrides())
    detected, message = False, ""
    started = time.perf_counter()
    error = ""
    flags: list[Flag] = []
    headlines: list[str] = []
    incomplete: list[str] = []
    problems: list[str] = []
    # The non-replayable flaws draw from Python's global random. Its state at the start of the scan
    # is pinned (and restored after), so the same seed gives the same table in any process; the
    # env still ignores its reset seed, so replays inside the scan still diverge.
    state = random.getstate()
    random.seed(child_seed(seed, "families", "global-random", case.name))
    try:
        if baseline:
            detected, message = check_env_verdict(case)
        random.seed(child_seed(seed, "families", "global-random", case.name, "scan"))
        started = time.perf_counter()
        report = run_scan(case.make_env, config, env_id=case.name)
    except Exception as exc:  # a scan that cannot finish is a result too, never a crashed benchmark
        error = f"{type(exc).__name__}: {exc}"[:300]
    else:
        for f in report.findings:
            if f.severity >= LOUD:
                flags.append(Flag(f.code, str(f.severity), f.probe, f.summary,
                                  str(f.evidence.get("behaviour", "")) if hasattr(f.evidence, "get") else ""))
        for item in getattr(report, "incomplete", None) or []:
            incomplete.append(f"{item.get('probe', '?')}: {item.get('skipped', '')}"
                              if isinstance(item, dict) else str(item))
        problems = [f"{p.name}: {p.status}" for p in report.probes if p.status != "ok"]
        groups = report.finding_groups() if hasattr(report, "finding_groups") else []
        headlines = [g.code for g in groups if g.severity >= LOUD]
    finally:
        random.setstate(state)
    return CaseResult(
        name=case.name, kind=case.kind, code=case.code, clean=case.is_clean,
        expected=tuple(sorted(case.expected)), tolerated=tuple(sorted(case.tolerated)),
        features=case.features(), flags=tuple(flags), check_env_detected=detected,
        check_env_message=message, scan_seconds=round(time.perf_counter() - started, 2),
        incomplete=tuple(incomplete), probe_problems=tuple(problems), error=error,
        headlines=tuple(headlines),
    )


@dataclass(frozen=True)
class Rate:
    """k of n with its Wilson 95% interval."""

    k: int
    n: int
    low: float = field(init=False)
    high: float = field(init=False)

    def __post_init__(self) -> None:
        low, high = proportion_ci(self.k, self.n) if self.n else (float("nan"), float("nan"))
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")

    def __str__(self) -> str:
        if not self.n:
            return "-"
        return f"{self.k}/{self.n} ({100 * self.value:.0f}%, CI {100 * self.low:.0f}-{100 * self.high:.0f}%)"


@dataclass(frozen=True)
class Summary:
    """The benchmark's table: per code and per kind, envaudit's recall and check_env's."""

    recall_by_code: dict[str, Rate]
    primary_by_code: dict[str, Rate]
    check_env_by_code: dict[str, Rate]
    recall_by_kind: dict[str, Rate]
    primary_by_kind: dict[str, Rate]
    check_env_by_kind: dict[str, Rate]
    false_alarms: Rate
    check_env_false_alarms: Rate
    inconclusive: Rate
    """Clean envs whose scan said it could tell nothing apart (no success, constant reward)."""
    overall_recall: Rate
    check_env_overall_recall: Rate
    headline_by_code: dict[str, Rate]
    overall_headline_recall: Rate


def summarise(results: Iterable[CaseResult]) -> Summary:
    results = list(results)
    flawed = [r for r in results if not r.clean]
    clean = [r for r in results if r.clean]
    codes = list(dict.fromkeys(FLAW_KINDS.values()))
    kinds = list(FLAW_KINDS)

    def rate(rows: list[CaseResult], attr: str) -> Rate:
        return Rate(sum(bool(getattr(r, attr)) for r in rows), len(rows))

    by_code = {c: [r for r in flawed if r.code == c] for c in codes}
    by_kind = {k: [r for r in flawed if r.kind == k] for k in kinds}
    return Summary(
        recall_by_code={c: rate(rows, "hit") for c, rows in by_code.items()},
        primary_by_code={c: rate(rows, "primary_hit") for c, rows in by_code.items()},
        check_env_by_code={c: rate(rows, "check_env_detected") for c, rows in by_code.items()},
        recall_by_kind={k: rate(rows, "hit") for k, rows in by_kind.items()},
        primary_by_kind={k: rate(rows, "primary_hit") for k, rows in by_kind.items()},
        check_env_by_kind={k: rate(rows, "check_env_detected") for k, rows in by_kind.items()},
        false_alarms=rate(clean, "false_alarm"),
        check_env_false_alarms=rate(clean, "check_env_detected"),
        inconclusive=rate(clean, "inconclusive"),
        overall_recall=rate(flawed, "hit"),
        check_env_overall_recall=rate(flawed, "check_env_detected"),
        headline_by_code={c: rate(rows, "headline_hit") for c, rows in by_code.items()},
        overall_headline_recall=rate(flawed, "headline_hit"),
    )


__all__ = ["CaseResult", "Flag", "LOUD", "Rate", "Summary", "check_env_verdict", "evaluate_case", "summarise"]
