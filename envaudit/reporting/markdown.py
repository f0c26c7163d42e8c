"""``report.md``: the report as text a person reads in a terminal, a pull request or a wiki.

One section per incentive (finding group). The headline finding's scalar evidence is a small
two-column table; every nested structure (a statistical ``test``, a ``ladder``, a list of ``arms``,
a ``regression``) is summarised in one line (what it concluded, its p-value, a few numbers) with
a pointer into ``report.json`` where the whole structure is kept. Prose is wrapped and no table
cell grows past ``CELL`` characters, so the file reads as well raw as it does rendered.

This module loads nothing heavy (no matplotlib); ``envaudit.reporting.render_markdown`` is its public name.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

WRAP = 100
"""Prose (summaries, fixes) is wrapped at this width; Markdown joins the lines into one paragraph."""
CELL = 160
"""The longest table cell, in characters; longer text is cut with an ellipsis."""
WORDS = ("level", "verdict", "holds", "noninferior", "behaviour", "policy", "arm", "name", "kind", "ending")
"""Keys whose value says what a nested structure concluded or names; shown first in its summary line."""
NUMBERS = ("p_value", "p_adjusted", "estimate", "diff", "effect_size", "slope", "mean_exploit",
           "mean_success", "mean_alternative", "mean_return", "n", "n_episodes")
"""Numbers that carry a nested structure's result; shown before its other numbers."""
SHOWN_NUMBERS = 3
NAMES = ("arm", "policy", "name", "behaviour", "mode", "run", "pipeline", "outcome", "code", "probe")
"""Keys that name one record of a list (an arm, a policy); the first present names it in a summary."""


# -- values ---------------------------------------------------------------------------------------
def number(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def clip(text: str, width: int = CELL) -> str:
    text = " ".join(str(text).split())  # no newline may break a table row
    return text if len(text) <= width else text[: width - 1] + "…"


def cell(text: Any) -> str:
    return clip(text).replace("|", "\\|")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or value in ("nan", "inf", "-inf")


def is_long(value: Any) -> bool:
    """A value that does not fit a table cell as it is: a mapping, a list of structures, a long list."""
    if _scalar(value):
        return False
    if isinstance(value, Sequence) and not isinstance(value, str):
        return not all(_scalar(v) for v in value) or len(value) > 8
    return True


def short_value(value: Any) -> str:
    """A scalar or a short list of scalars as one cell."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ", ".join(number(v) for v in value) + "]"
    return number(value)


def summary_of(value: Any) -> str:
    """One line saying what a nested structure holds: its conclusion, its p-value, a few numbers."""
    if isinstance(value, Mapping):
        words = [str(value[k]) if not isinstance(value[k], bool) else f"{k} {number(value[k])}"
                 for k in WORDS if k in value and _scalar(value[k]) and value[k] is not None]
        keys = [k for k in NUMBERS if _is_number(value.get(k))]
        keys += [k for k, v in value.items() if _is_number(v) and k not in keys]
        numbers = [f"p = {number(value[k])}" if k == "p_value" else f"{k} {number(value[k])}"
                   for k in keys[:SHOWN_NUMBERS]]
        nested = [k for k, v in value.items() if not _scalar(v)]
        rest = len(value) - len(words) - len(numbers)
        text = ", ".join(words[:3])
        if numbers:
            text = f"{text} ({'; '.join(numbers)})" if text else "; ".join(numbers)
        if nested:
            text += f"{'; ' if text else ''}parts: {', '.join(nested[:4])}{', …' if len(nested) > 4 else ''}"
        if rest > 0 and not nested:
            text += f" (+{rest} more field{'s' if rest != 1 else ''})"
        return text or f"{len(value)} fields"
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = list(value)
        if all(_scalar(v) for v in items):
            nums = [float(v) for v in items if _is_number(v) and not isinstance(v, str)]
            head = ", ".join(number(v) for v in items[:5])
            span = f"; min {number(min(nums))}, max {number(max(nums))}" if nums else ""
            return f"{len(items)} values: {head}, …{span}"
        if all(isinstance(v, Mapping) for v in items):
            names = [next((str(v[k]) for k in (*NAMES, *v) if isinstance(v.get(k), str)), "?") for v in items]
            shown = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
            return f"{len(items)} records ({shown})"
        return f"{len(items)} items"
    return number(value)


# -- one finding's evidence ----------------------------------------------------------------------
def evidence_lines(evidence: Mapping[str, Any], pointer: str) -> list[str]:
    """The evidence as a small table of its scalars, then one line per nested structure, each
    pointing at its full form in report.json (``pointer`` is e.g. ``findings[0].evidence``)."""
    flat = [(k, v) for k, v in evidence.items() if not is_long(v)]
    long = [(k, v) for k, v in evidence.items() if is_long(v)]
    lines: list[str] = []
    if flat:
        lines += ["| evidence | value |", "| --- | --- |"]
        lines += [f"| {cell(k)} | {cell(short_value(v))} |" for k, v in flat]
        lines.append("")
    if long:
        lines += ["In short (the full structures are in report.json):", ""]
        lines += [f"- `{k}`: {clip(summary_of(v), CELL)} → `{pointer}.{k}`" for k, v in long]
        lines.append("")
    return lines


def prose(text: str) -> list[str]:
    return textwrap.wrap(" ".join(str(text).split()), WRAP) or [""]


# -- the whole report ----------------------------------------------------------------------------
def corroboration_line(f: Any) -> str:
    """One short line for a corroborating finding: ``grpo (timeout-rewarded, fail): <title>``."""
    return clip(f"{f.probe or '?'} ({f.code}, {f.severity}): {f.title}", 2 * WRAP)


def incentive_words(g: Any) -> str:
    paid = "the training pipeline" if g.reward_path == "pipeline" else "the env's reward"
    seen = len({f.probe for f in g.members})
    return (f"{g.behaviour}, paid by {paid}; {len(g.members)} finding{'s' if len(g.members) != 1 else ''} "
            f"from {seen} probe{'s' if seen != 1 else ''}")


def render_markdown(report: Any) -> str:
    """``report.md`` of a ``Report``."""
    index = {id(f): i for i, f in enumerate(report.findings)}
    lines = [f"# envaudit report: `{report.env_id}`", "",
             *prose(f"{report.headline_counts()} — seed {report.config.get('seed')}, "
                    f"{report.exploration.get('episodes', 0)} exploration episodes, {report.seconds:.1f} s, "
                    f"envaudit {report.envaudit_version}, {report.created}"), ""]
    if report.broken:
        where = f" at `{report.broken['where']}`" if report.broken.get("where") else ""
        lines += [*prose(f"**ENV BROKEN** ({report.broken['stage']}): {report.broken['message']}{where}"), ""]
    if report.incomplete:
        lines += [*prose("**INCOMPLETE:** the wall-clock safety cap cut this audit short; the work below was "
                         "not done, so findings may be missing."), ""]
        lines += [f"- `{g['probe']}`: {clip(g['skipped'])} ({clip(g['reason'])})" for g in report.incomplete]
        lines.append("")
    groups = report.finding_groups()
    if not groups:
        lines += ["No findings.", ""]
    elif len(groups) > 1:
        lines += ["| # | severity | code | incentive | finding |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {i} | {g.severity} | `{g.code}` | {g.behaviour} / {g.reward_path} | {cell(g.headline.title)} |"
                  for i, g in enumerate(groups, 1)]
        lines.append("")
    for i, g in enumerate(groups, 1):
        f = g.headline
        lines += [f"## {i}. [{str(g.severity).upper()}] `{f.code}` — {clip(f.title, 2 * WRAP)}", "",
                  *prose(f.summary), "",
                  *prose(f"Incentive: {incentive_words(g)}; probe `{f.probe or '?'}`."), ""]
        lines += evidence_lines(f.evidence, f"findings[{index[id(f)]}].evidence")
        if f.examples:
            lines += [*prose(f"Example episodes: {', '.join(map(str, list(f.examples)[:10]))}"), ""]
        if f.fix:
            lines += [*prose(f"**Fix:** {f.fix}"), ""]
        if g.corroborating:
            lines += ["Corroborated by:", ""]
            lines += [f"- {corroboration_line(m)}" for m in g.corroborating]
            lines.append("")
    lines += ["## Probes", "", "| probe | status | seconds | findings | note |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {p.name} | {p.status} | {p.seconds:.2f} | {p.findings} | {cell(p.error or '')} |"
              for p in report.probes]
    lines += ["", "## Exploration", ""]
    for k, v in report.exploration.items():
        text = summary_of(v) if is_long(v) else short_value(v)
        if isinstance(v, Mapping) and v and all(_scalar(x) for x in v.values()) and len(v) <= 8:
            text = ", ".join(f"{a} {number(b)}" for a, b in v.items())
        lines.append(f"- {k}: {clip(text)}")
    config = json.dumps(report.config, indent=2, default=str).splitlines()
    lines += ["", "## Config", "", "```json", *(line[: 2 * WRAP] for line in config), "```", ""]
    return "\n".join(lines)


__all__ = ["CELL", "WRAP", "corroboration_line", "evidence_lines", "render_markdown", "summary_of"]
