"""The one ending of both front doors, ``envaudit scan`` and ``envaudit logs``: Holm across the
findings, the checks added after correction (coverage), grouping by incentive, the ``Report``.

Each door gathers its own findings and probe statuses; this module turns them into the report, so
a finding is corrected, grouped and reported the same way whether a scan or a logged run found it.
The scan's own ``env-error`` findings (an env that cannot run, env code that killed its process)
live here too: both doors report a broken env in the same words.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from envaudit.findings import Finding, Severity
from envaudit.grouping import group_findings
from envaudit.recording import Records
from envaudit.report import ProbeStatus, Report
from envaudit.rollout import Problem
from envaudit.stats import holm


def holm_correct(findings: list[Finding], alpha: float) -> list[Finding]:
    """Holm across every finding that rests on a p-value; unsupported warn/fail become info."""
    tested = [i for i, f in enumerate(findings) if isinstance(f.evidence.get("p_value"), (int, float))]
    if not tested:
        return findings
    adjusted = holm([findings[i].evidence["p_value"] for i in tested])
    out = list(findings)
    for i, p_adj in zip(tested, adjusted, strict=True):
        f = out[i]
        evidence = {**f.evidence, "p_adjusted": float(p_adj), "tests_in_scan": len(tested)}
        severity = f.severity
        if severity > Severity.INFO and p_adj > alpha:
            severity = Severity.INFO
            evidence["downgraded"] = f"adjusted p {p_adj:.3g} > alpha {alpha:g} (Holm over {len(tested)} tests)"
        out[i] = dataclasses.replace(f, severity=severity, evidence=evidence)
    return out


def conclude(
    env_id: str,
    config: Mapping[str, Any],
    fingerprint: Mapping[str, Any],
    findings: list[Finding],
    statuses: list[ProbeStatus],
    summary: Mapping[str, Any],
    *,
    alpha: float,
    created: str,
    started: float,
    records: Records | None = None,
    tables: Mapping[str, pd.DataFrame] | None = None,
    incomplete: Sequence[Mapping[str, str]] = (),
    broken: Mapping[str, Any] | None = None,
    after_correction: Sequence[Finding] = (),
    cost: Mapping[str, Any] | None = None,
) -> Report:
    """The report of one audit: ``findings`` Holm-corrected at ``alpha``, then ``after_correction``
    (checks that rest on no p-value, such as coverage) appended, then grouped by incentive — after
    Holm, so a group's severity is its members' after correction. ``started`` is the audit's
    ``time.monotonic()`` start (the report's duration)."""
    corrected = holm_correct(findings, alpha) + list(after_correction)
    return Report(env_id, dict(config), dict(fingerprint), corrected, statuses, dict(summary), created,
                  time.monotonic() - started, version(), records=records, tables=dict(tables or {}),
                  incomplete=list(incomplete), groups=group_findings(corrected),
                  broken=dict(broken) if broken is not None else None, cost=dict(cost or {}))


def broken_finding(broken: Mapping[str, Any]) -> Finding:
    """The env could not be made, reset or stepped at all: nothing else could be checked."""
    stage = {"make": "made", "reset": "reset", "step": "stepped"}.get(broken["stage"], broken["stage"])
    where = f" (at {broken['where']})" if broken.get("where") else ""
    return Finding(code="env-error", severity=Severity.FAIL, probe="scan", title=f"the env cannot be {stage}",
                   summary=f"The env could not be {stage}, so nothing else could be checked: "
                           f"{broken['message']}{where}",
                   evidence={**broken, "behaviour": "env-error", "reward_path": "env"},
                   fix="Make the env work on its own first: the message and file:line above are where it failed.")


def lost_finding(lost: list[Problem], probes: list[str]) -> Finding:
    """One finding for every episode (or probe run) whose worker process died or was killed past
    the memory cap; ``probes[i]`` is the probe whose work ``lost[i]`` was."""
    kinds = sorted({p.kind for p in lost})
    what = " and ".join({"crash": "crashed the process running it", "memory": "held memory past the cap"}[k]
                        for k in kinds)
    first = lost[0]
    cases = [{"kind": p.kind, "probe": probe, "call": p.where, "seed": p.seed, "step": p.step, "message": p.message}
             for p, probe in zip(lost[:20], probes, strict=False)]
    where = ", ".join(dict.fromkeys(probes))
    return Finding(
        code="env-error", severity=Severity.FAIL, probe="scan",
        title="the env crashes its process" if "crash" in kinds else "the env outgrows the memory cap",
        summary=f"{len(lost)} time{'s' if len(lost) != 1 else ''} (in {where}) the env {what}; the scan went "
                f"on with fresh worker processes. First: {first.message}.",
        evidence={"behaviour": "env-error", "reward_path": "env", "episodes": len(lost), "kinds": kinds,
                  "probes": list(dict.fromkeys(probes)), "cases": cases},
        fix="Reproduce it with the seed and call above (envaudit scan --executor inline shows the native "
            "traceback); a crash in a C extension, an os._exit or a leak kills a training run's rollout "
            "worker the same way.",
    )


def version() -> str:
    from envaudit import __version__

    return __version__


__all__ = ["broken_finding", "conclude", "holm_correct", "lost_finding", "version"]
