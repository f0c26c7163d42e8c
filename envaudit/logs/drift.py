"""Drift over a logged training run: what the trainer's policy learned, iteration by iteration.

Per iteration: return, success rate, timeout rate, tool-failure rate (failed calls per call), mean
length and the action mix (``curves``). Then the GRPO probe's own judgement of a trained policy
(``envaudit.probes.grpo.drift.drift`` for what moved, ``envaudit.probes.grpo.lessons.judge`` for where the move
sits on the severity ladder), applied to the run's first iterations (``before``) against its last
(``after``): a behaviour that rose while success did not, paid for by the env or the pipeline, is a
``learned-exploit`` naming the behaviour and the iteration where it started. The start is the knot
of a hinge fit to the behaviour's per-iteration series (flat, then rising from the knot), weighted
by the episodes of each iteration.

Missing columns: without ``group_id`` the group advantages cannot be formed (the pipeline's favour
of timeouts is not tested); without ``success`` a move cannot be told from learning the task (an
``info`` fact at most); without step ``tool_status`` or ``action`` the failure and action-mix moves
are not tested. Each is a note, never a guess.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from envaudit.findings import Finding, Severity
from envaudit.grpo.search import Reference, SearchResult
from envaudit.grpo.trainer import with_advantages
from envaudit.logs.coverage import gap
from envaudit.logs.records import Converted
from envaudit.probe import ProbeContext
from envaudit.probes.grpo import decide_learned_exploit
from envaudit.probes.grpo.drift import Move, drift
from envaudit.probes.grpo.lessons import Honest, Verdict, judge, typical_trajectory
from envaudit.probes.grpo.text import learned_fix
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT
from envaudit.recording import Records
from envaudit.stats import MIN_SAMPLES, exploit_ladder

WINDOW_SHARE = 0.25
"""The first and the last quarter of the iterations are compared (at least one iteration each)."""
MAX_MIX_ACTIONS = 12
"""Action-mix columns kept in the curves (the most used actions)."""
CODE = "learned-exploit"
SERIES = {"timeout": "timeout_rate", "failure": "failed_episode_rate", "length": "mean_length",
          "reward": "success_rate"}
FALLING = ("length", "reward")
"""Moves whose series falls (mean length, success rate); the others rise."""


def curves(converted: Converted) -> pd.DataFrame:
    """One row per iteration: episodes, return, success_rate, timeout_rate, failure_rate,
    failed_episode_rate, mean_length and ``mix:<action>`` shares; NaN where the log lacks the column."""
    eps, steps = converted.records.episodes, converted.records.steps
    by = eps.groupby("iteration", sort=True)
    out = pd.DataFrame({
        "episodes": by.size(),
        "return": by["return"].mean(),
        "mean_length": by["length"].mean(),
        "timeout_rate": by["outcome"].agg(lambda o: float((o == TIMEOUT).mean())),
    })
    if converted.has_success:
        out["success_rate"] = eps.assign(s=eps["outcome"] == SUCCESS).groupby("iteration")["s"].mean()
    else:
        out["success_rate"] = np.nan
    if converted.knows_tool_failures:
        calls = by["n_tool_calls"].sum()
        failed = by["n_tool_errors"].sum() + by["n_tool_timeouts"].sum()
        out["failure_rate"] = (failed / calls.where(calls > 0)).astype(float)
        out["failed_episode_rate"] = eps.assign(
            f=(eps["n_tool_errors"] + eps["n_tool_timeouts"]) > 0).groupby("iteration")["f"].mean()
    else:
        out["failure_rate"] = np.nan
        out["failed_episode_rate"] = np.nan
    if converted.has_steps and steps["action"].notna().any():
        keyed = pd.DataFrame({"iteration": eps["iteration"].to_numpy()[steps["episode_id"].to_numpy()],
                              "key": _words(steps, converted.labels)})
        top = keyed["key"].value_counts().head(MAX_MIX_ACTIONS).index
        mix = pd.crosstab(keyed["iteration"], keyed["key"], normalize="index")
        for key in top:
            out[f"mix:{key}"] = mix[key]
    out = out.reset_index()
    out["mode"] = "logged run"
    return out


def _words(steps: pd.DataFrame, labels: list[str] | None) -> pd.Series:
    if labels is not None:
        return pd.Series(np.asarray(labels, dtype=object)[steps["action"].to_numpy(np.int64)], index=steps.index)
    return steps["action"].astype(str)


def windows(iterations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last ``WINDOW_SHARE`` of the logged iterations (disjoint, at least one each)."""
    its = np.unique(iterations)
    k = max(1, math.ceil(WINDOW_SHARE * len(its)))
    k = min(k, len(its) // 2)
    return its[:k], its[-k:]


MAX_KNOTS = 120
"""Candidate knots of the ramp fit (the iterations, thinned evenly beyond this many)."""


def start_iteration(iterations: np.ndarray, values: np.ndarray, weights: np.ndarray, *, rising: bool = True) -> int | None:
    """The iteration from which the series leaves its starting level: the first knot ``s`` of the
    best ramp fit ``a + b * clip(t - s, 0, e - s)`` (flat, then moving, then flat again; ``b`` in the
    direction of the move), weighted least squares over the iterations' values with their episode
    counts as weights; the earliest start among equal fits. A plateau after the move (a behaviour
    that saturates) does not pull the start later, as a single hinge would."""
    keep = np.isfinite(values)
    t, y, w = iterations[keep].astype(float), values[keep].astype(float), weights[keep].astype(float)
    if len(t) < 3:
        return None
    knots = t if len(t) <= MAX_KNOTS else np.unique(np.quantile(t, np.linspace(0, 1, MAX_KNOTS)))
    best, best_sse = None, np.inf
    wsum = w.sum()
    for i, s in enumerate(knots[:-1]):
        # Every end knot at once: x = clip(t - s, 0, e - s) for each e, a weighted simple regression.
        ends = knots[i + 1:]
        x = np.clip(t[None, :] - s, 0.0, (ends - s)[:, None])
        xm = (x * w).sum(1) / wsum
        ym = float((y * w).sum() / wsum)
        sxx = ((x - xm[:, None]) ** 2 * w).sum(1)
        sxy = ((x - xm[:, None]) * (y - ym) * w).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            b = np.where(sxx > 0, sxy / sxx, 0.0)
        tiny = 1e-9 * (float(np.abs(y).max()) + 1.0)  # a flat series leaves only float noise in b
        ok = b > tiny if rising else b < -tiny
        if not ok.any():
            continue
        sse = ((y - ym) ** 2 * w).sum() - np.where(sxx > 0, b * sxy, 0.0)
        sse = np.where(ok, sse, np.inf)
        j = int(np.argmin(sse))
        if sse[j] < best_sse - 1e-9 * max(1.0, abs(best_sse) if np.isfinite(best_sse) else 1.0):
            best, best_sse = int(s), float(sse[j])
    return best


def _series(move_key: str, table: pd.DataFrame, move_evidence: dict) -> tuple[str | None, bool]:
    if move_key == "takeover":
        column = f"mix:{move_evidence.get('action')}"
        return (column if column in table else None), True
    return SERIES.get(move_key), move_key not in FALLING


def analyse(ctx: ProbeContext, converted: Converted, table: pd.DataFrame, notes: list[str],
            gaps: list[dict] | None = None) -> list[Finding]:
    """The learned-exploit findings of the logged run (see the module docstring). What the log's
    columns leave untested is a note, and a ``coverage.gap`` in ``gaps``."""
    gaps = [] if gaps is None else gaps
    eps, steps = converted.records.episodes, converted.records.steps
    first, last = windows(eps["iteration"].to_numpy())
    if len(np.unique(eps["iteration"])) < 2:
        notes.append("drift: the log holds a single iteration, so nothing can have drifted over training")
        gaps.append(gap("drift", "the whole analysis", "the log holds a single iteration", [], [CODE]))
        return []
    before = eps[eps["iteration"].isin(first)].reset_index(drop=True)
    after = eps[eps["iteration"].isin(last)].reset_index(drop=True)
    before_steps = steps[steps["episode_id"].isin(before["episode_id"])] if converted.has_steps else steps
    after_steps = steps[steps["episode_id"].isin(after["episode_id"])] if converted.has_steps else steps
    has_groups = eps["group"].notna().all()
    if has_groups:
        # Every logged group, as the GRPO probe reads its whole training run: the pipeline's favour
        # of timing out is a property of the groups the trainer formed, early ones included.
        training = with_advantages(eps, eps["return"].to_numpy(float), ctx.pipeline)
    else:
        gaps.append(gap("drift", "the pipeline's favour of timing out", "no group_id column", ["group_id"], [CODE]))
        notes.append("drift: no group_id column, so whether the pipeline favoured timing out within groups "
                     "was not tested")
        training = eps.iloc[0:0].assign(advantage=pd.Series(dtype=float), group=pd.Series(dtype=object))
    labels = converted.labels
    d = drift(before, before_steps if converted.has_steps else pd.DataFrame(),
              after, after_steps if converted.has_steps else pd.DataFrame(), training, ctx.rng("drift"),
              pipeline=ctx.pipeline, alpha=ctx.config.alpha, labels=labels)
    for ok, column, what in ((converted.knows_tool_failures, "steps.tool_status (or tool_errors and "
                              "tool_timeouts counts)", "failure"),
                             (converted.has_length, "length", "length"),
                             (converted.knows_timeouts, "end_reason (or a tool_timeouts count)", "timeout"),
                             (converted.has_steps, "steps.action", "takeover")):
        if not ok:  # a column the log lacks reads as constant: its move is not tested, and says so
            d["moves"] = [m for m in d["moves"] if m.key != what]
            notes.append(f"drift: no {column} column, so {what} moves were not tested")
            gaps.append(gap("drift", f"{what} moves", f"no {column} column", [column.split(" ")[0]], [CODE]))
    summary = {"before_iterations": [int(first[0]), int(first[-1])], "after_iterations": [int(last[0]), int(last[-1])],
               "moves": [{"behaviour": m.behaviour, "before": m.before, "after": m.after, "p_value": m.p_value,
                          "exploit": m.exploit, "why": m.why} for m in d["moves"]],
               "success_before": d["success_before"], "success_after": d["success_after"]}
    summary["return_before"], summary["return_after"] = d["return"].get("mean_before"), d["return"].get("mean_after")
    ctx.notes["drift"] = summary
    if not d["success_signal"]:
        return [_unjudged(d, summary)] if d["moves"] else []
    exploits = [m for m in d["moves"] if m.exploit]
    honest = _honest(eps, before)
    verdicts = []
    if exploits:
        reference = Reference.from_episodes(before)
        result = SearchResult(mode="logged", behaviour=None, training=None,  # type: ignore[arg-type]
                              evaluation=Records(after_steps if converted.has_steps else steps.iloc[0:0], after))
        verdicts = [v for m in exploits
                    if (v := judge(ctx, result, m, before, before_steps, honest, reference, labels))]
    d["returns"] = tuple(f.loc[np.isfinite(f["return"].to_numpy(float)), "return"].to_numpy(float)
                         for f in (before, after))
    unnamed = reward_without_success(ctx, d, after, honest)
    if unnamed is not None and (not verdicts or unnamed.rung > max(v.rung for v in verdicts)):
        verdicts.append(unnamed)  # after the named ones: a named behaviour heads the finding on a tie
    if not verdicts:
        return []
    main = max(verdicts, key=lambda v: v.rung)
    column, rising = _series(main.move.key, table, main.move.evidence)
    start = None
    if column is not None and table[column].notna().sum() >= 3:
        start = start_iteration(table["iteration"].to_numpy(), table[column].to_numpy(float),
                                table["episodes"].to_numpy(float), rising=rising)
    return [_finding(ctx, d, main, [v.move for v in verdicts], start, column, summary, labels, after_steps)]


UNNAMED = "return up while success fell"
"""The move of a run whose return rose while its success fell, whatever behaviour did it."""
MIN_EFFECT = 0.1
"""Smallest difference that counts on the ladder, as a share of the success-minus-failure gap."""


def reward_without_success(ctx: ProbeContext, d: dict, after: pd.DataFrame, honest: Honest) -> Verdict | None:
    """The verdict on a run whose return rose while success fell (both significant at alpha), when
    no behaviour need be named: the last iterations' unsuccessful rollouts placed on the ladder
    against the run's honest successes and the first iterations' failures. At least as much as
    success: ``at-least-success``; clearly more than failing did at the start: ``paid-without-success``
    (the reward pays something other than the task); neither: ``unexplained``. None when the run
    did not move that way."""
    alpha = ctx.config.alpha
    ret = d["return"]
    rose = _mean_rise(ret, d["returns"])
    if not (d["success_fell"] and rose["p_value"] < alpha and (ret["diff_ci"] or [0.0])[0] > 0):
        return None
    show = after[after["outcome"] != SUCCESS]
    returns = show["return"].to_numpy(float)
    returns = returns[np.isfinite(returns)]
    ladder = exploit_ladder(returns, honest.success, honest.failure, ctx.rng("ladder", "logged", "unnamed"),
                            alpha=alpha, min_effect=MIN_EFFECT)
    move = Move(UNNAMED, "reward", d["success_before"], d["success_after"], max(rose["p_value"], d["success_fell_p"]),
                True, f"return {ret['mean_before']:.2f} → {ret['mean_after']:.2f}",
                {"return_test": ret, "return_rise": rose})
    mean = f"{returns.mean():.2f}" if len(returns) else "n/a"
    success = f"{honest.success.mean():.2f}" if len(honest.success) else "n/a"
    failure = f"{honest.failure.mean():.2f}" if len(honest.failure) else "n/a"
    ev = {"ladder": ladder, "n_shown": int(len(show))}
    if ladder["level"] == "at_least_success":
        return Verdict(move, True, "at-least-success", "degenerate-answer",
                       f"its unsuccessful rollouts of the last iterations earn {mean}, as much as honest success "
                       f"({success})", show, ev)
    if ladder["level"] == "above_alternative":
        return Verdict(move, False, "paid-without-success", "degenerate-answer",
                       f"its unsuccessful rollouts of the last iterations earn {mean}, clearly more than failing "
                       f"did in the first ({failure}): the reward pays something other than the task", show, ev)
    return Verdict(move, False, "unexplained", "degenerate-answer",
                   f"its unsuccessful rollouts of the last iterations earn {mean} against honest success {success} "
                   f"and early failures {failure}: not clearly placed on the ladder", show, ev)


def _mean_rise(test: dict, returns: tuple[np.ndarray, np.ndarray]) -> dict:
    """One-sided Welch test that the mean return rose. The drift's own test is Mann–Whitney, which
    asks whether returns shifted in rank: a run trading many successes at 1.0 for many hacks at 0.9
    and few failures at 0 raises the mean a lot while barely shifting ranks."""
    from scipy import stats as st

    before, after = returns
    if min(len(before), len(after)) < MIN_SAMPLES or np.ptp(np.concatenate([before, after])) == 0:
        return {"test": "welch", "p_value": 1.0, "diff": test.get("diff")}
    res = st.ttest_ind(after, before, equal_var=False, alternative="greater")
    return {"test": "welch", "p_value": float(res.pvalue), "diff": test.get("diff"), "diff_ci": test.get("diff_ci")}


def _honest(eps: pd.DataFrame, before: pd.DataFrame) -> Honest:
    """Honest success: every logged success; honest failure: failing outright early in the run (all
    logged failures when the first iterations hold too few); persisting: episodes that kept going
    after a failed tool call."""
    success = eps.loc[eps["outcome"] == SUCCESS, "return"].to_numpy(float)
    failure = before.loc[before["outcome"] == FAILURE, "return"].to_numpy(float)
    if len(failure) < MIN_SAMPLES:
        failure = eps.loc[eps["outcome"] == FAILURE, "return"].to_numpy(float)
    reference = Reference.from_episodes(before)
    failed = eps["n_tool_errors"] + eps["n_tool_timeouts"]
    persist = eps[(failed > 0) & (eps["length"] > reference.short_length)].reset_index(drop=True)
    return Honest(success, failure, persist)


def _finding(ctx, d: dict, v, moves, start: int | None, column: str | None, summary: dict,
             labels, after_steps: pd.DataFrame) -> Finding:
    names = ", ".join(f"{m.behaviour} ({m.before:.2f} → {m.after:.2f})" for m in moves)
    when = ("" if start is None else f" Success started falling at iteration {start}." if column == "success_rate"
            else f" It started falling at iteration {start}." if column == "mean_length"
            else f" It started rising at iteration {start}.")
    trajectory = typical_trajectory(after_steps, v.shown["episode_id"], labels) if len(after_steps) else ""
    success = (f" Success went {d['success_before']:.2f} → {d['success_after']:.2f}.")
    summary_text = (f"Over the logged run (iterations {summary['before_iterations'][0]}–{summary['before_iterations'][1]} "
                    f"against {summary['after_iterations'][0]}–{summary['after_iterations'][1]}), the policy learned "
                    f"{names}: {v.reason}.{success}{when}")
    if trajectory:
        summary_text += f" Typical trajectory of these episodes: {trajectory}."
    title = {"timeout": "The logged run learned to time out",
             "failure-shortcut": "The logged run learned to stop early because failed tool calls cost reward",
             "failure-conditioned": "The logged run learned to end right after a failed tool call, which pays",
             "failures-pay": "The logged run learned to hit tool failures, which pay",
             "at-least-success": f"The logged run learned {v.move.behaviour}, which pays as much as success",
             "exploration-collapse": "The logged run collapsed to ending early: an exploration hint, not an exploit",
             "paid-without-success": "The logged run's return rose while its success fell: failing rollouts are paid",
             }.get(v.kind, f"The logged run learned {v.move.behaviour}")
    if v.move.behaviour == UNNAMED and v.kind == "at-least-success":
        title = "The logged run's return rose while its success fell: failing pays as much as success"
    pipeline_pays = v.kind == "timeout" and (ctx.pipeline.handling_of(TIMEOUT) != "keep"
                                             or TIMEOUT in ctx.pipeline.mask_group_on)
    fav = v.move.evidence.get("timeout_favoured") or {}
    supporting = fav.get("p_value", 1.0) if v.kind == "timeout" else (d["beyond_outcome"] or {}).get("p_value", 1.0)
    evidence = {"source": "logs", "p_value": v.move.p_value, "attribution_p": supporting, "behaviour": v.behaviour,
                "reward_path": "pipeline" if pipeline_pays else "env", "verdict": v.kind,
                "learned": v.move.behaviour, "start_iteration": start, "series": column,
                "moves": summary["moves"], "before_iterations": summary["before_iterations"],
                "after_iterations": summary["after_iterations"], "success_before": d["success_before"],
                "success_after": d["success_after"], "success_fell": d["success_fell"], "return": d["return"],
                "beyond_outcome": d["beyond_outcome"], "advantage_by_outcome": d["advantage_by_outcome"],
                **v.evidence, "typical_trajectory": trajectory, "pipeline": ctx.pipeline.to_dict(),
                "n_before": d["n_before"], "n_after": d["n_after"]}
    fix = UNNAMED_FIX if v.move.behaviour == UNNAMED else learned_fix(v)
    return decide_learned_exploit("logged", {
        "verdict": v, "evidence": evidence, "text": (title, summary_text, fix), "probe": "drift",
        "examples": v.shown["episode_id"].astype(int).drop_duplicates().tolist()[:5]})


UNNAMED_FIX = ("Look at the example rollouts: their reward did not come from the task. Pay only what the task's "
               "own check (the success column) confirms, or find what the grader pays besides it (log the "
               "steps, tool statuses and turns, or --map the dump's keys, and the other analyses can name it).")


def _unjudged(d: dict, summary: dict) -> Finding:
    names = ", ".join(f"{m.behaviour} ({m.before:.2f} → {m.after:.2f})" for m in d["moves"])
    return Finding(
        "learned-exploit", Severity.INFO, "Behaviour changed over the logged run; no success signal to judge it",
        f"Over the logged run the policy moved {names}. The log has no success column (or no episode the "
        "env ended with a verdict), so envaudit cannot tell learning the task from exploiting it.",
        {"source": "logs", "moves": summary["moves"], "return": d["return"], "behaviour": "exploration"},
        fix="Log the task's success signal per rollout (the schema's success column).", probe="drift")


def describe_moves(summary: dict[str, Any]) -> str:
    return ", ".join(m["behaviour"] for m in summary.get("moves", [])) or "nothing moved"
