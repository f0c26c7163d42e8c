"""Replay a logged run against the env (``envaudit logs PATH --env ENV``).

Each replayed episode is reset with its logged ``seed`` and stepped with its logged actions (by
index, or by catalogue label for text actions); every step's reward, tool status and ending are
compared with the log, and the logged success flag with the env's ``info["success"]``. The first step that differs is the episode's divergence: the env no longer
gives what the trainer saw, so GRPO groups built from it were not comparable and offline
re-evaluation of the log is off. A divergence is ``non-replayable`` at ``fail`` (the replay probe's
verdict), naming the first diverging step.

Off-policy: after its first divergence, every logged action was chosen for what the env returned
then, not for what it returns now. ``off_policy_step_share`` is the share of replayed steps that
come after a divergence, and ``mean_return_gap`` how far the replayed return is from the logged one.

Work is ``REPLAY_EPISODES`` episodes spread evenly over the log (in episode order), a count, never
a time. Rewards compare with ``rtol=1e-6, atol=1e-9`` (a CSV log rounds floats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.conclusion import broken_finding
from envaudit.config import ScanConfig
from envaudit.findings import Finding, Severity
from envaudit.logs.records import Converted
from envaudit.protocol import (
    END_TERMINATED,
    END_TOOL_TIMEOUT,
    END_TRUNCATED,
    SUCCESS_KEY,
    TOOL_KEY,
    read_tool_info,
)

REPLAY_EPISODES = 64
"""Logged episodes replayed (fewer under --quick: a quarter, at least 16)."""
RTOL, ATOL = 1e-6, 1e-9


@dataclass
class ReplayOutcome:
    findings: list[Finding] = field(default_factory=list)
    table: pd.DataFrame | None = None
    status: str = "ok"
    error: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    broken: dict[str, str] | None = None


def _chosen(eps: pd.DataFrame, n: int) -> pd.DataFrame:
    if len(eps) <= n:
        return eps
    idx = np.unique(np.linspace(0, len(eps) - 1, n).round().astype(int))
    return eps.iloc[idx]


def _action_for(env: gym.Env, row: dict, index: dict[str, int] | None) -> Any:
    label = row["action_label"]
    if isinstance(env.action_space, gym.spaces.Text):
        return label if label is not None else str(row["action"])
    if label is not None and index is not None:
        if label not in index:
            raise KeyError(f"logged action {label!r} is not in the env's action catalogue")
        return index[label]
    return int(row["action"])


def replay_episode(env: gym.Env, seed: int, steps: pd.DataFrame, end_reason: str,
                   index: dict[str, int] | None, success: bool | None = None) -> dict[str, Any]:
    """Replay one episode; the first divergence (step, field, logged, replayed) or None. ``success``:
    the logged success flag, compared with the env's ``info["success"]`` on the last step (None: not
    logged, not compared)."""
    env.reset(seed=int(seed))
    first: dict[str, Any] | None = None
    total, n = 0.0, 0
    rows = list(steps.itertuples(index=False))
    for k, row in enumerate(rows):
        _, reward, terminated, truncated, info = env.step(_action_for(env, row._asdict(), index))
        total += float(reward)
        n += 1
        tool = read_tool_info(info, TOOL_KEY) if isinstance(info, dict) and TOOL_KEY in info else None
        # a value the log does not have (None, or NaN in a float or string column) is not compared
        checks = [] if pd.isna(row.reward) else [("reward", row.reward, float(reward))]
        if not pd.isna(row.tool_status):
            checks.append(("tool_status", row.tool_status, tool["status"] if tool else None))
        last = k == len(rows) - 1
        ended = bool(terminated or truncated)
        if ended and not last:
            checks.append(("ending", "the episode went on", "the env ended it here"))
        if last:
            logged = ("terminated" if end_reason == END_TERMINATED else "truncated"
                      if end_reason in (END_TRUNCATED, END_TOOL_TIMEOUT) else None)
            replayed = "terminated" if terminated else "truncated" if truncated else "not ended"
            if logged is not None and logged != replayed:
                checks.append(("ending", logged, replayed))
            if success is not None and ended:
                # the env's own verdict: a log that says solved where the env now says not (or back)
                # was graded by something else than the env, or the env's grader changed
                # (an env that gives no verdict on this ending is not contradicted by the log)
                flag = info.get(SUCCESS_KEY) if isinstance(info, dict) else None
                if flag is not None:
                    checks.append(("success", bool(success), bool(flag)))
        for name, want, got in checks:
            if first is None and not _same(want, got):
                first = {"step": int(row.step), "field": name, "logged": _show(want), "replayed": _show(got)}
        if ended:
            break
    return {"divergence": first, "replayed_return": total, "replayed_steps": n}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float, np.floating, np.integer)) and isinstance(b, (int, float, np.floating, np.integer)):
        if np.isnan(a) and np.isnan(b):
            return True
        return bool(np.isclose(float(a), float(b), rtol=RTOL, atol=ATOL))
    return a == b


def _show(x: Any) -> Any:
    return float(x) if isinstance(x, (np.floating, float)) else x


def replay_run(converted: Converted, env: str | Callable[[], gym.Env], config: ScanConfig) -> ReplayOutcome:
    from envaudit.resolve import resolve_env

    eps, steps = converted.records.episodes, converted.records.steps
    missing = [c for c, ok in (("seed", eps["seed"].notna().any()),
                               ("steps.action", converted.has_steps and steps["action"].notna().all()))
               if not ok]
    if missing:
        return ReplayOutcome(status="skipped", error=f"not run: the log has no {', '.join(missing)} column "
                             "(replay needs each episode's reset seed and its actions)")
    env_id, make_env = resolve_env(env) if isinstance(env, str) else (getattr(env, "__name__", "env"), env)
    try:
        instance = make_env()
    except Exception as exc:
        from envaudit.errors import user_frame
        broken = {"stage": "make", "message": f"{type(exc).__name__}: {exc}", "where": user_frame(exc)}
        return ReplayOutcome([broken_finding(broken)], status="crashed", error=broken["message"], broken=broken)
    labels = getattr(instance.unwrapped, "action_labels", None)
    index = {str(label): i for i, label in enumerate(labels)} if labels is not None else None
    n = REPLAY_EPISODES if not config.quick else max(16, REPLAY_EPISODES // 4)
    chosen = _chosen(eps[eps["seed"].notna()], n)
    by_episode = {k: g for k, g in steps[steps["episode_id"].isin(chosen["episode_id"])].groupby("episode_id")}
    rows = []
    try:
        for ep in chosen.to_dict("records"):
            part = by_episode.get(ep["episode_id"])
            if part is None:
                continue
            part = part.sort_values("step")
            try:
                flag = ep.get("success")
                # without a logged end_reason the records say "terminated" for every episode: not compared
                out = replay_episode(instance, int(ep["seed"]), part,
                                     ep["end_reason"] if converted.has_end_reason else None, index,
                                     None if flag is None or pd.isna(flag) else bool(flag))
            except Exception as exc:  # the env raised on a logged action: that step diverges
                out = {"divergence": {"step": None, "field": "exception", "logged": "a step",
                                      "replayed": f"{type(exc).__name__}: {exc}"},
                       "replayed_return": float("nan"), "replayed_steps": 0}
            d = out["divergence"] or {}
            rows.append({"episode_id": int(ep["episode_id"]), "log_episode_id": ep["log_episode_id"],
                         "seed": int(ep["seed"]), "logged_steps": int(len(part)), "logged_return": float(ep["return"]),
                         "replayed_return": out["replayed_return"], "replayed_steps": out["replayed_steps"],
                         "diverged": bool(d), "step": d.get("step"), "field": d.get("field"),
                         "logged": None if not d else str(d["logged"]), "replayed": None if not d else str(d["replayed"])})
    finally:
        instance.close()
    table = pd.DataFrame(rows)
    outcome = ReplayOutcome(table=table, notes={"env": env_id, "replayed": len(table)})
    if table.empty:
        outcome.status, outcome.error = "skipped", "not run: no logged episode had both a seed and steps"
        return outcome
    diverged = table[table["diverged"]]
    after = (table["logged_steps"] - table["step"].fillna(0)).where(table["diverged"], 0)
    off_policy = float(after.sum() / max(1, table["logged_steps"].sum()))
    gap = float((table["replayed_return"] - table["logged_return"]).abs().mean())
    outcome.notes.update(diverged=int(len(diverged)), off_policy_step_share=off_policy, mean_return_gap=gap)
    if diverged.empty:
        return outcome
    first = diverged.iloc[0]
    step_text = f"step {int(first['step'])}" if pd.notna(first["step"]) else "its first step"
    fields = diverged["field"].value_counts().to_dict()
    outcome.findings.append(Finding(
        "non-replayable", Severity.FAIL, f"Logged episodes do not replay on {env_id}",
        f"Replayed with their logged seeds and actions, {len(diverged)} of {len(table)} logged episodes diverged "
        f"from the log; first: episode {first['log_episode_id']} (seed {int(first['seed'])}) at {step_text}, "
        f"{first['field']} logged {first['logged']} vs replayed {first['replayed']}. "
        f"{off_policy:.0%} of the replayed steps come after a divergence: off-policy for what the env returns "
        f"now (mean return gap {gap:.2f}).",
        {"behaviour": "non-replayable", "reward_path": "env", "source": "logs", "env": env_id,
         "n_replayed": int(len(table)), "n_diverged": int(len(diverged)), "first_step": first["step"],
         "first_field": first["field"], "fields": {str(k): int(v) for k, v in fields.items()},
         "divergences": diverged.head(5)[["log_episode_id", "seed", "step", "field", "logged", "replayed"]]
         .to_dict("records"), "off_policy_step_share": off_policy, "mean_return_gap": gap},
        [int(i) for i in diverged["episode_id"].head(5)],
        "Draw every random choice of reset and step from the env's seeded generator (self.np_random), "
        "never from global random state or the clock, so a seed and the actions replay the episode.",
        probe="replay"))
    return outcome
