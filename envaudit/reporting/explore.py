"""What ``notebooks/explore_incentives.ipynb`` calls: scan-or-load by parameters, episode filters,
the step-by-step playback of one episode, two pipelines side by side.

``cached_scan(env_id, seed, pipeline)`` keeps one report folder per (env, seed, pipeline) under a
cache folder (``reports/notebook/<env>-seed<S>-<pipeline>/``): it loads the folder when it holds a
report of exactly those parameters (and the same quick/probes choice), and scans and writes it
otherwise, so changing a parameter at the top of the notebook never shows a stale report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from envaudit.grouping import MOSTLY_FAILED, FindingGroup
from envaudit.pipeline import HANDLINGS
from envaudit.reporting.load import AuditReport, load_report

SUCCESS_LABEL = "success"
"""The behaviour label of an episode that succeeded (the honest path)."""


def scan_config(seed: int, pipeline: str, *, quick: bool = True, probes: Any = None, **extra: Any) -> Any:
    """A ``ScanConfig`` for ``pipeline``: a timeout handling (keep, zero, penalty, drop) or a trainer
    preset name (``envaudit scan --help`` lists them)."""
    from envaudit.config import ScanConfig

    where = {"timeout_handling": pipeline} if pipeline in HANDLINGS else {"pipeline": pipeline}
    return ScanConfig(seed=seed, quick=quick, probes=tuple(probes) if probes is not None else None, **where, **extra)


def cache_folder(cache: str | Path, env_id: str, seed: int, pipeline: str) -> Path:
    """``<cache>/<env>-seed<S>-<pipeline>``: the env id made a folder name (``envaudit/X-v0`` → ``envaudit-X-v0``)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", env_id).strip("-")
    return Path(cache) / f"{slug}-seed{seed}-{re.sub(r'[^A-Za-z0-9._-]+', '-', pipeline)}"


def _matches(view: AuditReport, env_id: str, config: Any) -> bool:
    """Whether a cached report answers exactly these parameters."""
    want = config.to_dict()
    keys = ("seed", "quick", "probes", "timeout_handling", "pipeline", "episodes")
    return view.env_id == env_id and all(view.config.get(k) == want.get(k) for k in keys)


@dataclass
class Cached:
    """A report and how it was obtained: ``scanned`` (True: scanned now) and its ``folder``."""

    report: AuditReport
    folder: Path
    scanned: bool

    def line(self) -> str:
        how = "scanned now and saved to" if self.scanned else "loaded from"
        return f"{self.report.env_id}: {how} {self.folder}"


def cached_scan(env_id: str, seed: int = 0, pipeline: str = "keep", *, cache: str | Path = "reports/notebook",
                quick: bool = True, probes: Any = None) -> Cached:
    """The report of ``env_id`` at ``seed`` under ``pipeline``: loaded when the cache holds one for
    exactly these parameters, else scanned and written there (replacing a report of others)."""
    from envaudit.reporting.folder import write_folder
    from envaudit.scan import run_scan

    config = scan_config(seed, pipeline, quick=quick, probes=probes)
    folder = cache_folder(cache, env_id, seed, pipeline)
    if (folder / "report.json").exists():
        view = load_report(folder)
        if _matches(view, env_id, config):
            return Cached(view, folder, scanned=False)
    folder.parent.mkdir(parents=True, exist_ok=True)
    written = write_folder(run_scan(env_id, config), folder, replace=True)
    return Cached(load_report(written), Path(written), scanned=True)


# -- episodes ------------------------------------------------------------------------------------
def episode_behaviour(row: Any) -> str:
    """What one episode did, in the grouping's words and order (``grouping.episodes_behaviour``):
    ``timeout`` (ended on a tool timeout), ``tool-failure`` (at least half its tool calls failed,
    whatever ended it: farming failed calls until the step limit is about the failures),
    ``timeout`` (cut by the step limit), ``env-error``, ``success``, or ``quit`` (ended by the agent
    without success: gave up, or a worthless answer)."""
    calls = float(row.get("n_tool_calls", 0) or 0)
    failed = float((row.get("n_tool_errors", 0) or 0) + (row.get("n_tool_timeouts", 0) or 0))
    reason = str(row.get("end_reason"))
    if reason == "tool_timeout":
        return "timeout"
    if calls and failed / calls >= MOSTLY_FAILED:
        return "tool-failure"
    if reason == "truncated":
        return "timeout"
    if reason == "env_exception":
        return "env-error"
    return SUCCESS_LABEL if row.get("outcome") == "success" else "quit"


def episodes(view: AuditReport, *, outcome: str | None = None, behaviour: str | None = None,
             probe: str | None = None) -> pd.DataFrame:
    """The report's episodes with a ``behaviour`` column, filtered by outcome class, behaviour and probe."""
    eps = view.episodes.copy()
    eps["behaviour"] = [episode_behaviour(r) for r in eps.to_dict("records")] if len(eps) else []
    if outcome is not None:
        eps = eps[eps["outcome"] == outcome]
    if behaviour is not None:
        eps = eps[eps["behaviour"] == behaviour]
    if probe is not None and "probe" in eps.columns:
        eps = eps[eps["probe"] == probe]
    return eps


def exploit_episode(view: AuditReport, group: FindingGroup) -> int | None:
    """An episode of ``group``'s behaviour from its examples (the headline's first, then the
    other members'); the first example when none shows the behaviour; None without examples."""
    examples = list(dict.fromkeys(int(e) for f in group.members for e in f.examples))
    if not examples:
        return None
    labelled = episodes(view)
    shown = set(labelled.loc[labelled["behaviour"] == group.behaviour, "episode_id"].astype(int))
    return next((e for e in examples if e in shown), examples[0])


def playback(view: AuditReport, episode_id: int) -> list[str]:
    """One episode as sentences, one per step: the action, the tool and how the call went, the
    reward and the return so far, then how it ended."""
    steps = view.episode(episode_id)
    if steps.empty:
        return [f"episode {episode_id} has no recorded steps in this report"]
    lines, total = [], 0.0
    for s in steps.to_dict("records"):
        reward = float(s["reward"]) if pd.notna(s["reward"]) else 0.0
        total += reward
        label = s.get("action_label") if pd.notna(s.get("action_label")) else s["action"]
        call = ""
        if pd.notna(s.get("tool_name")):
            call = f" → tool {s['tool_name']} {s.get('tool_status') or '?'}"
            if pd.notna(s.get("error")) and s.get("error"):
                call += f" ({str(s['error'])[:60]})"
        lines.append(f"step {int(s['step'])}: {label}{call}; reward {reward:+.3g}, return so far {total:.3g}")
    repeated = int(steps.duplicated("step").sum())
    if repeated:  # say so rather than hide it: the tables should hold each step once
        lines.append(f"note: {repeated} step(s) of this episode appear more than once in the report's steps table")
    meta = view.episodes[view.episodes["episode_id"] == episode_id]
    if len(meta):
        m = meta.iloc[0]
        lines.append(f"ended: {m['end_reason']}, outcome {m['outcome']}, return {float(m['return']):.3g} "
                     f"in {int(m['length'])} steps ({episode_behaviour(m.to_dict())})")
    return lines


# -- two pipelines -------------------------------------------------------------------------------
def advantages_side_by_side(reports: dict[str, AuditReport]) -> pd.DataFrame:
    """The effective GRPO advantage of each outcome class under each report's configured pipeline
    (the pipeline probe's table), one column per pipeline name given."""
    columns = {}
    for name, view in reports.items():
        table = view.table("pipeline_advantages")
        if table is None or "mean_advantage" not in table.columns:
            continue
        if "role" in table.columns and (table["role"] == "configured").any():
            table = table[table["role"] == "configured"]
        columns[name] = table.groupby("outcome", sort=False)["mean_advantage"].mean()
    return pd.DataFrame(columns)


def groups_side_by_side(reports: dict[str, AuditReport]) -> pd.DataFrame:
    """Each incentive (behaviour / reward path / code) and its severity under each pipeline."""
    rows: dict[tuple[str, str, str], dict[str, str]] = {}
    for name, view in reports.items():
        for g in view.groups:
            rows.setdefault((g.behaviour, g.reward_path, g.code), {})[name] = str(g.severity)
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(reports)).fillna("—")
    frame.index = [f"{b} / {p}: {c}" for b, p, c in frame.index] if len(frame) else frame.index
    return frame


__all__ = ["Cached", "advantages_side_by_side", "cache_folder", "cached_scan", "episode_behaviour", "episodes",
           "exploit_episode", "groups_side_by_side", "playback", "scan_config"]
