"""Findings: what a probe reports, in the shape of DESIGN.md's catalogue."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CODES: dict[str, str] = {
    "timeout-rewarded": "timing out (truncation or tool timeout) earns more than failing outright",
    "timeout-drop-incentive": "the pipeline drops timed-out rollouts, so forcing a timeout avoids a negative advantage",
    "failure-shortcut": "tool failures make short trajectories pay better than persisting",
    "failure-rewarded": "a step whose tool failed pays more than the same step succeeding",
    "length-bias": "return depends on trajectory length beyond what success explains",
    "reward-without-success": "high return while the environment's own success flag is false",
    "non-replayable": "same seed and same actions give different observations or rewards",
    "exploit-policy": "a scripted exploit policy out-earns the exploration baseline while succeeding less",
    "learned-exploit": "the GRPO-trained probe policy raised its return without raising success",
    "env-error": "the env broke the Gymnasium API, raised, hung, or returned NaN/inf",
}


class Severity(enum.IntEnum):
    """How much a return-maximising agent would care. Ordered: ``INFO < WARN < FAIL``."""

    INFO = 1
    WARN = 2
    FAIL = 3

    @classmethod
    def parse(cls, value: str | Severity) -> Severity:
        if isinstance(value, Severity):
            return value
        try:
            return cls[str(value).upper()]
        except KeyError:
            raise ValueError(
                f"unknown severity {value!r}; expected one of info, warn, fail"
            ) from None

    def __str__(self) -> str:
        return self.name.lower()


def jsonable(value: Any) -> Any:
    """Evidence as plain JSON: numpy scalars become Python numbers, NaN/inf become strings."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, enum.Enum):
        return str(value)
    return value


@dataclass(frozen=True)
class Finding:
    """One incentive or defect a probe found.

    ``evidence`` holds the numbers a reviewer checks (means, intervals, p-values, sample sizes);
    a ``p_value`` in it takes part in the scan's Holm correction. ``examples`` are episode ids in
    the report's tables.
    """

    code: str
    severity: Severity
    title: str
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    examples: Sequence[int] = ()
    fix: str = ""
    probe: str = ""

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(
                f"unknown finding code {self.code!r}; expected one of {', '.join(CODES)}"
            )
        object.__setattr__(self, "severity", Severity.parse(self.severity))
        object.__setattr__(self, "evidence", jsonable(dict(self.evidence)))
        object.__setattr__(self, "examples", [int(e) for e in self.examples])

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": str(self.severity),
            "title": self.title,
            "summary": self.summary,
            "evidence": dict(self.evidence),
            "examples": list(self.examples),
            "fix": self.fix,
            "probe": self.probe,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=data["code"],
            severity=Severity.parse(data["severity"]),
            title=data["title"],
            summary=data["summary"],
            evidence=data.get("evidence", {}),
            examples=data.get("examples", ()),
            fix=data.get("fix", ""),
            probe=data.get("probe", ""),
        )


def rank(findings: Sequence[Finding]) -> list[Finding]:
    """Most severe first; within a severity, catalogue order; within a code, findings measured on
    the env itself before those a trained policy surfaced (``evidence["source"] == "grpo"``), whose
    numbers are harder to check by hand; then title (stable, deterministic)."""
    order = {code: i for i, code in enumerate(CODES)}
    return sorted(findings, key=lambda f: (-int(f.severity), order[f.code],
                                           f.evidence.get("source") == "grpo", f.title))
