"""Reports built by hand, with every number known by construction.

``full_report`` has every table a plot reads; ``empty_report`` has none (no records, no probe
ran). The exploration of ``full_report`` books reward to known sources:

| episode | outcome | steps (reward, tool status) | return |
| --- | --- | --- | --- |
| 0 | success | 0.1 ok, 0.1 ok, 1.0 ok (submit) | 1.2 |
| 1 | failure | 0.1 ok, 0.2 error, 0.0 ok (submit) | 0.3 |
| 2 | timeout | 0.1 ok, 0.1 ok, 0.1 ok, 0.5 timeout | 0.8 |
| 3 | error | 0.0 error | 0.0 |
"""

from __future__ import annotations

import pandas as pd

from envaudit.findings import CODES, Finding
from envaudit.recording import EPISODE_COLUMNS, STEP_COLUMNS, Records
from envaudit.report import ProbeStatus, Report

LABELS = ["search", "submit", "wait"]
EPISODES = [
    # (outcome, end_reason, success, [(action, reward, tool_status)])
    ("success", "terminated", True, [(0, 0.1, "ok"), (0, 0.1, "ok"), (1, 1.0, "ok")]),
    ("failure", "terminated", False, [(0, 0.1, "ok"), (0, 0.2, "error"), (1, 0.0, "ok")]),
    ("timeout", "tool_timeout", False, [(2, 0.1, "ok"), (2, 0.1, "ok"), (2, 0.1, "ok"), (2, 0.5, "timeout")]),
    ("error", "tool_error", None, [(0, 0.0, "error")]),
]
SOURCE_TOTALS = {"end:success": 1.0, "end:failure": 0.0, "end:timeout": 0.5, "end:error": 0.0,
                 "failed_calls": 0.2, "per_step": 0.1 * 6}
"""Reward per source summed over the four episodes, from the table above."""

SWEEP = pd.DataFrame([
    {"rate": rate, "policy": policy, "description": policy, "n": 16, "mean_return": ret,
     "ci_low": ret - 0.1, "ci_high": ret + 0.1, "success_rate": succ, "mean_length": length,
     "observed_failure_rate": rate}
    for rate in (0.0, 0.25, 0.5)
    for policy, ret, succ, length in (("persist", 0.9 - rate, 0.95 - rate, 5.0), ("quit-on-failure", 0.6, 0.6, 3.0),
                                      ("short:submit", 0.25, 0.25, 1.0))
])
ADVANTAGES = pd.DataFrame([
    {"pipeline": pipe, "role": role, "outcome": outcome, "kind": "observed", "n_episodes": 10, "n_groups": 4,
     "mean_advantage": adv, "ci_low": adv - 0.2, "ci_high": adv + 0.2, "trained_share": 1.0, "mean_return": 0.0}
    for pipe, role, rows in (("rllm", "configured", (("success", 0.9), ("failure", -0.7), ("timeout", 0.0),
                                                      ("timeout_if_failing", 0.0))),
                             ("timeout-keep", "keep", (("success", 0.8), ("failure", -0.6), ("timeout", -0.5))))
    for outcome, adv in rows
])
CURVES = pd.DataFrame([
    {"iteration": i, "mode": mode, "episodes": 32, "return": 0.1 * i + off, "success_rate": 0.3,
     "timeout_rate": 0.1 + 0.15 * i if mode == "natural" else 0.5, "failure_rate": 0.2, "mean_length": 5 - 0.5 * i,
     "training_reward": 0.1 * i, "entropy": 1.0 - 0.1 * i, "kl": 0.01 * i, "mix:search": 0.5, "mix:wait": 0.5}
    for mode, off in (("natural", 0.0), ("target-timeout", 0.2)) for i in range(5)
])
POLICIES = pd.DataFrame([
    {"policy": name, "description": name, "n": 16, "return_mean": ret, "return_ci_low": ret - 0.1,
     "return_ci_high": ret + 0.1, "success_rate": succ, "failure_rate": 1 - succ, "timeout_rate": 0.0,
     "error_rate": 0.0, "tool_failure_rate": 0.1, "mean_length": 4.0}
    for name, ret, succ in (("random", 0.3, 0.3), ("oracle", 1.0, 0.95), ("wait-forever", 0.8, 0.0))
])
TABLES = {"failures_failure_sweep": SWEEP, "pipeline_advantages": ADVANTAGES, "grpo_curves": CURVES,
          "exploits_policies": POLICIES}


def records() -> Records:
    steps, episodes = [], []
    for eid, (outcome, reason, success, rows) in enumerate(EPISODES):
        for t, (action, reward, status) in enumerate(rows):
            last = t == len(rows) - 1
            steps.append((eid, t, action, LABELS[action], reward, last, False,
                          LABELS[action], status, 0.01, "tool broke <badly>" if status == "error" else None, False))
        n_err = sum(s == "error" for _, _, s in rows)
        n_to = sum(s == "timeout" for _, _, s in rows)
        episodes.append((eid, 7, len(rows), sum(r for _, r, _ in rows), reason, outcome, success,
                         len(rows), n_err, n_to, 0, None))
    eps = pd.DataFrame(episodes, columns=EPISODE_COLUMNS)
    eps["success"] = eps["success"].astype("boolean")
    eps["probe"], eps["policy"], eps["group"] = "explore", "random", 0
    return Records(pd.DataFrame(steps, columns=STEP_COLUMNS), eps)


def _finding(code: str, severity: str = "warn", **kw) -> Finding:
    defaults = dict(title=f"planted {code}", summary=f"{code} happens", evidence={"p_value": 0.001, "diff": 0.5},
                    examples=[0, 2], fix="fix it", probe="synthetic")
    return Finding(code=code, severity=severity, **{**defaults, **kw})


CONDITIONED = {"p_value": 0.001, "diff": 1.0, "condition": "right after a failed `search` call", "next_action": "handoff",
               "mean_reward_after_failed": 1.0, "mean_reward_after_ok": 0.0, "n": 16,
               "conditioned_path_return": 0.95, "honest_success_return": 0.9}
"""The evidence of a failure-conditioned ``failure-shortcut`` (failures probe): handing off right
after a failed search pays 1, after a working one 0."""


def full_report(findings: list[Finding] | None = None) -> Report:
    probes = [ProbeStatus(name, "ok", 0.1) for name in ("failures", "pipeline", "grpo", "exploits")]
    found = findings if findings is not None else [_finding(code, evidence=CONDITIONED) if code == "failure-shortcut"
                                                   else _finding(code) for code in CODES]
    return Report("synthetic/Full-v0", {"seed": 3}, {"class": "tests.Synthetic"}, found, probes,
                  {"episodes": 4, "mean_return": 0.575, "mean_length": 2.75, "success_flag": True,
                   "outcomes": {"error": 1, "failure": 1, "success": 1, "timeout": 1}},
                  "2025-01-01T00:00:00+00:00", 1.0, "0.1.0", records=records(), tables=dict(TABLES))


def empty_report() -> Report:
    """What a scan of an env that could not be made looks like: no records, no probes, no tables."""
    return Report("synthetic/Empty-v0", {"seed": 3}, {}, [], [], {"episodes": 0},
                  "2025-01-01T00:00:00+00:00", 0.1, "0.1.0")
