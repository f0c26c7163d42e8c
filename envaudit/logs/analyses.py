"""The probes' record analyses, run on a logged run's episodes instead of the scan's exploration.

Each probe splits into what it reads from recorded episodes and what it learns by running its own
policies on the env. A logged run has only the former: the ``analyse`` half a probe registers
(``Probe.analyse``) with the record columns it cannot do without (``Probe.analyse_needs``). This
module runs those halves, in ``ANALYSED`` order, on a context over the log; each probe decides its
own codes there as in a scan (``timeouts``: the logged timeouts on the ladder; ``pipeline``:
timeouts reachable by the logged policy's own; ``length``: the regression and delayed successes
in the logged groups; ``intent``: the actions paid without success; ``failures``: its plain-env
path, which never runs episodes).

An analysis whose columns the log lacks produces nothing and says which it lacks; ``envaudit.logs.
coverage`` turns every such gap into the report's "could not check" finding.
"""

from __future__ import annotations

from collections.abc import Callable

from envaudit.findings import Finding
from envaudit.logs.records import Converted, NeedsEnv
from envaudit.probe import ProbeContext, registered_probes


def absent_columns(converted: Converted, *columns: str) -> list[str]:
    """Which of ``columns`` (an analysis' needs) the log cannot supply, in the words of the fix:
    ``end_reason`` is supplied by a ``tool_timeouts`` count too (the timeout class derived from it
    and ``success``)."""
    steps = converted.records.steps
    have = {"success": converted.has_success, "end_reason": converted.knows_timeouts,
            "steps": converted.has_steps, "steps.tool_status": converted.has_tool_status,
            "steps.reward": converted.has_steps and steps["reward"].notna().all(),
            "steps.action": converted.has_steps and steps["action"].notna().all(),
            "group_id": converted.records.episodes["group"].notna().all(), "length": converted.has_length}
    return [c for c in columns if not have[c]]


ANALYSED = ("timeouts", "pipeline", "length", "intent", "failures")
"""The probes whose ``analyse`` half runs on a logged run, in this order."""


def _analysis(name: str) -> tuple[Callable[[ProbeContext, Converted], list[Finding]], tuple[str, ...]]:
    probe = registered_probes([name])[name]
    return (lambda ctx, _converted: list(probe.analyse(ctx))), probe.analyse_needs


ANALYSES: dict[str, tuple[Callable[[ProbeContext, Converted], list[Finding]], tuple[str, ...]]] = {
    name: _analysis(name) for name in ANALYSED}
"""Each analysis and the columns it cannot do without (``steps.X``: the step table's column)."""


def run_analysis(name: str, ctx: ProbeContext, converted: Converted) -> tuple[list[Finding], str | None]:
    """One analysis, or the reason it did not run (the columns it needs, named)."""
    fn, needs = ANALYSES[name]
    absent = absent_columns(converted, *needs)
    if absent:
        return [], f"not run: the log has no {', '.join(absent)} column{'s' if len(absent) > 1 else ''}"
    try:
        return fn(ctx, converted), None
    except NeedsEnv as exc:
        return [], f"not run: {exc}"
