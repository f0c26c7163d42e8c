"""Never a falsely clean report of a logged run: what the log could not check is a ``warn``.

An analysis whose columns the log lacks does not run (``analyses.run_analysis``), and a drift move
whose column is absent is not tested (``drift.analyse``). A report that listed only the findings of
what did run would read "no findings" for a run that was never checked for timeouts, tool failures
or length, so every such gap becomes one ``warn`` finding, "could not check: …", naming each gap,
the codes it leaves unchecked and the ``--map`` that would fill it (a trainer dump's own keys are
listed), and an ``incomplete`` entry of the report, so ``envaudit logs`` exits 4 (DESIGN.md's
"a check could not run for lack of data") unless a finding reaches ``--fail-on``.

Code: ``exploit-policy``, as the scan's own coverage check (``envaudit.coverage``): a statement
about the audit, not an incentive; ``evidence["behaviour"] = "exploration"`` keeps it in a group of
its own, and it carries no p-value, so Holm leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envaudit.findings import Finding, Severity
from envaudit.logs.schema import LoggedRun

HINTS: dict[str, str] = {
    "success": "--map KEY=success (the task's own correctness, true/false or 0/1)",
    "end_reason": "--map KEY=tool_timeouts (a count of timed-out tool calls) or an end_reason column",
    "length": "--map KEY=length (turns or steps per rollout)",
    "group_id": "a group_id column (the GRPO group a rollout was compared in)",
    "steps": "a step table (the generic schema's steps.jsonl: episode_id, step, reward, action, tool_status)",
    "steps.tool_status": ("a step table with tool_status (the drift's failure moves also read per-rollout counts: "
                          "--map KEY=tool_errors and --map KEY=tool_timeouts)"),
    "steps.reward": "a step table with each step's reward",
    "steps.action": "a step table with each step's action",
}
"""How to fill each column an analysis needs."""
MAX_KEYS = 16
"""A dump's own keys listed in the finding at most."""


def gap(probe: str, skipped: str, reason: str, columns: Sequence[str], codes: Sequence[str]) -> dict[str, Any]:
    """One thing the log could not check: the analysis (``probe``), what of it was skipped, why, the
    columns that would fill it and the finding codes it leaves unchecked."""
    return {"probe": probe, "skipped": skipped, "reason": reason, "columns": list(columns), "codes": list(codes)}


def incomplete_entries(gaps: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The gaps as the report's ``incomplete`` list (probe, skipped, reason)."""
    return [{"probe": g["probe"], "skipped": g["skipped"], "reason": g["reason"]} for g in gaps]


def dump_keys(run: LoggedRun) -> list[str]:
    """The trainer dump's own keys ``--map`` can read (empty for the generic schema)."""
    return [str(c) for c in run.fields.columns][:MAX_KEYS] if run.fields is not None else []


def decide_exploit_policy(gaps: Sequence[Mapping[str, Any]], run: LoggedRun) -> Finding | None:
    """The one place the "could not check" finding is decided: ``warn`` when anything of the log
    went unchecked for lack of a column, None when everything ran."""
    if not gaps:
        return None
    checked_out = "; ".join(f"{g['probe']} ({g['skipped']}: {g['reason']}"
                            + (f"; {', '.join(g['codes'])} unchecked" if g["codes"] else "") + ")" for g in gaps)
    columns = list(dict.fromkeys(c for g in gaps for c in g["columns"]))
    hints = [f"{c}: {HINTS.get(c, f'--map KEY={c}')}" for c in columns]
    keys = dump_keys(run)
    keys_text = (f" The {run.source} dump's keys: {', '.join(keys)}." if keys else "")
    fix = ("Give the log the columns it lacks, then audit it again: " + "; ".join(hints) + "." + keys_text
           if hints else "Audit a log of more iterations." + keys_text)
    return Finding(
        code="exploit-policy", severity=Severity.WARN, probe="logs",
        title=f"Could not check {len(gaps)} part{'s' if len(gaps) != 1 else ''} of the logged run",
        summary=(f"could not check: {checked_out}. A report without other findings does not mean the run is "
                 f"clean; map them with --map KEY=COLUMN" + (f" ({', '.join(columns)})" if columns else "") + "."),
        evidence={"behaviour": "exploration", "reward_path": "env", "source": run.source,
                  "unchecked": [dict(g) for g in gaps], "columns": columns, "dump_keys": keys},
        fix=fix)


__all__ = ["HINTS", "decide_exploit_policy", "gap", "incomplete_entries"]
