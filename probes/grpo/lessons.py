"""What a trained GRPO run teaches, measured: ``learned-exploit`` and the specific codes it feeds.

``drift`` says which behaviours training moved; ``judge`` places each moved behaviour on DESIGN.md's
ladder from the episodes that show it (the trained policy's *non-success* episodes of that
behaviour, never its honest successes), as a ``Verdict`` with its rung:

- 2: the behaviour earns at least as much as honest success from the same starts (``fail``);
- 1: the pipeline or the infrastructure makes it pay: timing out earns a better advantage
  than failing (``timeout-drop-incentive`` / ``timeout-rewarded``); ending right after a failed tool
  call pays more than the same ending otherwise (a failure-conditioned reward); failed calls are
  charged beyond the step they take and, at the env's own failure rates, ending early beats
  persisting (``failure-shortcut``); failed calls themselves pay (``warn``);
- 0: anything else (``info``). A collapse to ending early where honest success pays more (random
  play rarely found success, a step cost made every failed attempt cost a little) is an
  *exploration collapse*: a fact about training, not an incentive of the env.

``run_findings`` measures one trained run and hands each result to its deciding function in
``decisions``: ``decide_learned_exploit`` (the ``"trained"`` and ``"no-success-signal"`` bases),
``decide_timeout_drop_incentive``, ``decide_timeout_rewarded`` (the ``"learned"`` basis) and
``decide_failure_shortcut``; they grade the verdict's rung and word the finding (``text``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from envaudit.findings import Finding
from envaudit.grouping import paid_by_failed_calls
from envaudit.grpo.search import Reference, SearchResult
from envaudit.grpo.trainer import action_keys
from envaudit.probes.grpo.decisions import (
    NAME,
    decide_failure_shortcut,
    decide_learned_exploit,
    decide_timeout_drop_incentive,
    decide_timeout_rewarded,
)
from envaudit.probes.grpo.drift import Move, drift, failure_cost
from envaudit.probes.grpo.text import money
from envaudit.probes.grpo.verdicts import failure_conditioned_endings, quitting_beats_persisting
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT
from envaudit.stats import compare, exploit_ladder, reward_scale

MIN_EFFECT = 0.1
"""Smallest difference that counts, as a share of the success-minus-failure reward gap."""


@dataclass
class Honest:
    """The rungs of the severity ladder, read from honest play."""

    success: np.ndarray
    """Returns of honest successes (exploration, the natural run, the targeted success search)."""
    failure: np.ndarray
    """Returns of failing outright (the exploration's failures)."""
    persist: pd.DataFrame
    """Episodes that kept going after a failed tool call (exploration and the trained policies'
    evaluations): persisting at the env's own failure rates."""


MECHANISMS = ("timeout", "failure-conditioned", "failure-shortcut", "failures-pay", "paid-without-success")
"""Verdict kinds that name why a behaviour pays: the pipeline or the infrastructure, not the task.
``paid-without-success`` is a logged run's (``envaudit.logs.drift``): its return rose while success
fell, its unsuccessful rollouts paid clearly more than failing did at the start: the reward itself."""


@dataclass
class Verdict:
    """Where one moved behaviour sits on the ladder, and the episodes that show it."""

    move: Move
    at_least: bool
    """Its non-success episodes earn at least as much as honest success from the same starts."""
    kind: str
    """at-least-success | timeout | failure-conditioned | failure-shortcut | failures-pay |
    exploration-collapse | unexplained"""
    behaviour: str
    """The grouping word (DESIGN.md): timeout, tool-failure, quit, degenerate-answer, exploration."""
    reason: str
    shown: pd.DataFrame
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def rung(self) -> int:
        """How high on DESIGN.md's ladder the behaviour reached: 2 when it earns as much as honest
        success, 1 when a named mechanism (``MECHANISMS``) pays it, 0 when neither. The severity is
        ``decisions.decide_learned_exploit``'s."""
        return 2 if self.at_least else 1 if self.kind in MECHANISMS else 0


def typical_trajectory(steps: pd.DataFrame, episode_ids: Any, labels: list[str] | None, limit: int = 12) -> str:
    """The most common action sequence of these episodes in action labels; when no sequence is
    common, the actions these episodes take most, per episode."""
    chosen = steps[steps["episode_id"].isin(list(episode_ids))]
    if chosen.empty:
        return ""

    def word(a: Any) -> str:
        if isinstance(a, str):  # a text action's call label
            return a
        return labels[int(a)] if labels is not None and 0 <= int(a) < len(labels) else str(a)
    chosen = chosen.assign(key=action_keys(chosen))
    sequences = Counter(tuple(g.sort_values("step")["key"]) for _, g in chosen.groupby("episode_id"))
    n = sum(sequences.values())
    sequence, count = sequences.most_common(1)[0]
    if count * 4 >= n or n < 4:
        more = f" … ({len(sequence) - limit} more)" if len(sequence) > limit else ""
        return " → ".join(word(a) for a in sequence[:limit]) + more + f" ({count} of {n} episodes)"
    per_episode = chosen["key"].value_counts() / n
    top = ", ".join(f"{word(a)} ×{k:.1f}" for a, k in per_episode.head(4).items())
    return f"no common sequence; per episode: {top} ({n} episodes)"


def _failures_pay_here(ctx, result: SearchResult, show: pd.DataFrame, scale: float, ev: dict) -> bool:
    """The regression across episodes (``drift.failure_cost``) says episodes with more failed calls
    earn more; do the failed calls themselves pay, from the same state? ``same_state.failed_call_premium``
    on the shown episodes' failed calls: each against ending honestly at once, less what any step
    costs. Episodes that retry a flaky tool on the way to progress have more failed calls *and* more
    progress, which the regression reads as pay for failing (generated ``clean-1-99``: 0.01 a failure
    by regression, 0.0 from the same state). A veto only: where the replays cannot ask (no honest
    ending, too few failed calls), the regression stands. Writes ``ev["failed_call_same_state"]``."""
    from envaudit.probes._shared.same_state import failed_call_premium

    same = failed_call_premium(ctx, show, result.evaluation.steps, scale, ctx.rng("failed-call", result.mode),
                               tag=f"grpo-{result.mode}-failed-call", min_effect=MIN_EFFECT)
    ev["failed_call_same_state"] = same
    return same is None or bool(same["holds"])


def shown(move: Move, episodes: pd.DataFrame, labels, steps: pd.DataFrame, reference: Reference) -> pd.DataFrame:
    """The trained policy's episodes that show ``move`` and did not succeed (an honest success is
    never an example of an exploit)."""
    failed = episodes[episodes["outcome"] != SUCCESS]
    if move.key == "timeout":
        return failed[failed["outcome"] == TIMEOUT]
    if move.key == "failure":
        return failed[(failed["n_tool_errors"] + failed["n_tool_timeouts"]) > 0]
    if move.key == "length":
        short = max(move.after, reference.short_length)
        return failed[(failed["length"] <= short) & (failed["outcome"] != TIMEOUT)]
    label = move.evidence.get("action")
    actions = [i for i, name in enumerate(labels or []) if name == label] or ([int(label)] if str(label).isdigit() else [])
    keys = action_keys(steps)
    ids = steps.loc[keys.isin(actions) | (keys == label), "episode_id"].unique()
    return failed[failed["episode_id"].isin(ids)]


def _ids(frame: pd.DataFrame, n: int = 5) -> list[int]:
    return frame["episode_id"].astype(int).drop_duplicates().tolist()[:n]


def judge(ctx, result: SearchResult, move: Move, before: pd.DataFrame, before_steps: pd.DataFrame,
          honest: Honest, reference: Reference, labels) -> Verdict | None:
    """Put one moved behaviour on the ladder (see the module docstring); None when no episode of the
    trained policy shows it without succeeding (then the move is the task being learned)."""
    alpha = ctx.config.alpha
    after, steps = result.episodes, result.evaluation.steps
    show = shown(move, after, labels, steps, reference)
    if show.empty:
        return None
    returns = show["return"].to_numpy(float)
    scale = reward_scale(honest.success, honest.failure)
    margin = MIN_EFFECT * scale
    ladder = exploit_ladder(returns, honest.success, honest.failure, ctx.rng("ladder", result.mode, move.key),
                            alpha=alpha, min_effect=MIN_EFFECT)
    ev: dict[str, Any] = {"ladder": ladder, "n_shown": len(show)}
    ended_early = move.key == "length" or (move.key == "takeover" and
                                            float(show["length"].mean() if len(show) else 0) <= reference.short_length)
    behaviour = {"timeout": "timeout", "failure": "tool-failure"}.get(move.key, "quit" if ended_early else
                                                                       "degenerate-answer")
    success_text = money(honest.success)
    # A mechanism below names *why* the behaviour pays (rung 1); when it also earns as much as honest
    # success, the same verdict reaches rung 2.
    at_least = ladder["level"] == "at_least_success"
    as_much = (f"; its episodes that do not succeed earn {money(returns)}, as much as honest success "
               f"({success_text})") if at_least else ""
    fav = move.evidence.get("timeout_favoured") or {}
    timeout_favoured = (move.key == "timeout" and fav.get("n_groups", 0) >= 4 and fav.get("p_value", 1.0) < alpha
                        and (fav.get("diff") or 0) > 0)
    if timeout_favoured and _pipeline_keeps_timeouts(ctx):
        # Under a pipeline that trains on the env's return, timing out is paid only if its ending
        # pays; timed-out episodes that earn more by the progress they made on the way (shaping,
        # partial credit) are partial progress, not an incentive to time out.
        ev["ending_premium"] = _timeout_ending_pays(ctx, result)
        timeout_favoured = ev["ending_premium"]["holds"]
    if timeout_favoured:
        return Verdict(move, at_least, "timeout", "timeout",
                       "in the same groups a failing rollout got a better advantage by timing out than by failing"
                       + as_much, show, ev)
    if move.key != "timeout":
        endings = failure_conditioned_endings(_concat(before_steps, steps), pd.concat([before, after], ignore_index=True),
                                              ctx.rng("endings", result.mode), margin=margin, alpha=alpha)
        ev["failure_conditioned"] = endings
        trained_after_failure = [i for i in endings.get("episode_ids", []) if i in set(show["episode_id"])]
        if endings["holds"] and trained_after_failure:
            what = ", ".join(endings["actions"][:2])
            return Verdict(move, at_least, "failure-conditioned", "tool-failure",
                           f"ending with {what} right after a failed tool call pays "
                           f"{endings['ending_after_failure']:.2f}, the same ending otherwise "
                           f"{endings['ending_otherwise']:.2f}: the reward is conditioned on the failure" + as_much,
                           show[show["episode_id"].isin(trained_after_failure)], ev)
    cost = failure_cost(before, ctx.rng("cost", result.mode))
    ev["failure_cost"] = cost
    # A material charge: an exact fit (returns made of step costs only) leaves a numerically tiny
    # coefficient with a meaningless p-value.
    material = abs(cost["cost_per_failure"]) >= MIN_EFFECT * margin
    p_cost = cost["p_value"] if np.isfinite(cost["p_value"]) else 1.0
    # Failures up, or another move (timing out, one action taking over) whose trained episodes earn
    # their pay on failed calls: stalling to the step limit on a tool that fails half the time is
    # farming the failures, and the timeout it ends on pays nothing by itself.
    farms = move.key == "failure" or paid_by_failed_calls(steps, show["episode_id"])
    if farms and material and cost["cost_per_failure"] < 0 and 1 - p_cost < alpha and \
            _failures_pay_here(ctx, result, show, scale, ev):
        return Verdict(move, at_least, "failures-pay", "tool-failure",
                       f"a failed tool call pays about {-cost['cost_per_failure']:.2f} beyond the step it takes"
                       + as_much, show, ev)
    # A shortcut ends early: one action taking over episodes that run to the step limit (farming a
    # paying call, which also avoids a failing one) is no giving up, whatever failures cost.
    if ended_early and material and cost["cost_per_failure"] > 0 and p_cost < alpha:
        beats = quitting_beats_persisting(show, honest.persist, cost["cost_per_failure"],
                                          ctx.rng("persist", result.mode), margin=margin, alpha=alpha)
        ev["quit_vs_persist"] = beats
        if beats["holds"]:
            return Verdict(move, at_least, "failure-shortcut", "quit",
                           f"failed tool calls cost about {cost['cost_per_failure']:.2f} each beyond their step, so "
                           f"ending early ({money(returns)}) beats persisting through failures at the env's own "
                           f"rates ({money(honest.persist['return'])}), and would not without that charge"
                           + as_much, show, ev)
    if at_least:
        # Ending at once with as much as success is the degenerate answer, not giving up.
        return Verdict(move, True, "at-least-success", "degenerate-answer" if ended_early else behaviour,
                       f"its episodes that do not succeed earn {money(returns)}, as much as honest success "
                       f"({success_text})", show, ev)
    below = compare(honest.success, returns, ctx.rng("below", result.mode, move.key), labels=("success", "learned"))
    ev["success_vs_learned"] = below
    clearly_below = bool(below["p_value"] < alpha and (below["diff"] or 0) >= margin)
    if ended_early and clearly_below:
        return Verdict(move, False, "exploration-collapse", "exploration",
                       f"honest success pays more ({success_text}) than what it settled on ({money(returns)}); "
                       "training found success too rarely and collapsed to the cheapest ending, which is a "
                       "training-dynamics fact, not an incentive of the env", show, ev)
    if clearly_below:
        return Verdict(move, False, "unexplained", behaviour,
                       f"what it learned earns {money(returns)}, less than honest success ({success_text}), and "
                       "nothing in the pipeline or the failure costs pays for it", show, ev)
    return Verdict(move, False, "unexplained", behaviour,
                   f"what it learned earns {money(returns)} against honest success {success_text}: too few "
                   "episodes to place it on the ladder (the other probes and a larger scan can)", show, ev)


def _pipeline_keeps_timeouts(ctx) -> bool:
    """The pipeline trains timed-out rollouts on the env's own return (no drop, zero, penalty, mask)."""
    return ctx.pipeline.handling_of(TIMEOUT) == "keep" and TIMEOUT not in ctx.pipeline.mask_group_on


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    parts = [x for x in (a, b) if len(x)]
    return pd.concat(parts, ignore_index=True) if parts else a


def run_findings(ctx, result: SearchResult, before: pd.DataFrame, before_steps: pd.DataFrame, honest: Honest,
                 reference: Reference, labels, *, where: str, reported: set[str]) -> list[Finding]:
    """Findings of one trained run (``where`` is empty for the natural run, else the faulted run's
    condition, read for ``failure-shortcut`` only)."""
    rng = ctx.rng(result.mode)
    d = drift(before, before_steps, result.episodes, result.evaluation.steps, result.training.episodes, rng,
              pipeline=ctx.pipeline, alpha=ctx.config.alpha, labels=labels)
    if not d["success_signal"]:
        return [_unjudged(result, d)] if d["moves"] and not where else []
    exploits = [m for m in d["moves"] if m.exploit and m.behaviour not in reported]
    if not exploits:
        return []
    verdicts = [v for m in exploits
                if (v := judge(ctx, result, m, before, before_steps, honest, reference, labels)) is not None]
    if not verdicts:
        return []
    main = max(verdicts, key=lambda v: v.rung)  # the first of those highest on the ladder (drift's order)
    findings: list[Finding] = []
    if not where:
        findings.append(_learned_exploit(ctx, result, d, main, [v.move for v in verdicts]))
        reported.update(m.behaviour for m in exploits)
        if main.kind == "timeout":
            findings += _learned_timeouts(ctx, result, d, main)
    shortcut = next((v for v in verdicts if v.kind == "failure-shortcut"), None)
    if shortcut is not None and "failure-shortcut" not in reported:
        findings.append(_failure_shortcut(ctx, result, d, shortcut, before, honest, labels, where))
        reported.add("failure-shortcut")
    return findings


def _learned_exploit(ctx, result: SearchResult, d: dict, v: Verdict, moves: list[Move]) -> Finding:
    trajectory = typical_trajectory(result.evaluation.steps, v.shown["episode_id"], ctx.action_labels)
    fav = v.move.evidence.get("timeout_favoured") or {}
    supporting = fav.get("p_value", 1.0) if v.kind == "timeout" else (d["beyond_outcome"] or {}).get("p_value", 1.0)
    # The key test is the behaviour's move; the test that training paid for it (``attribution_p``)
    # gated it at alpha, and an exploit needs both.
    evidence = {"source": NAME, "run": result.mode, "p_value": v.move.p_value, "attribution_p": supporting,
                "behaviour": v.behaviour, "reward_path": "pipeline" if _pipeline_pays(ctx, v) else "env",
                "verdict": v.kind, "moves": [_move_dict(m) for m in d["moves"]], "success_before": d["success_before"],
                "success_after": d["success_after"], "success_fell": d["success_fell"], "return": d["return"],
                "beyond_outcome": d["beyond_outcome"], "advantage_by_outcome": d["advantage_by_outcome"],
                **v.evidence, "typical_trajectory": trajectory, "pipeline": ctx.pipeline.to_dict(),
                "n_before": d["n_before"], "n_after": d["n_after"]}
    return decide_learned_exploit("trained", {
        "evidence": evidence, "examples": _ids(v.shown), "verdict": v, "moves": moves, "drift": d,
        "trajectory": trajectory, "pipeline": ctx.pipeline.name})


def _pipeline_pays(ctx, v: Verdict) -> bool:
    return v.kind == "timeout" and (ctx.pipeline.handling_of(TIMEOUT) != "keep" or TIMEOUT in ctx.pipeline.mask_group_on)


def _unjudged(result: SearchResult, d: dict) -> Finding:
    return decide_learned_exploit("no-success-signal", {
        "evidence": {"source": NAME, "run": result.mode, "moves": [_move_dict(m) for m in d["moves"]],
                     "return": d["return"], "behaviour": "exploration"},
        "moves": d["moves"]})


def _move_dict(m: Move) -> dict:
    return {"behaviour": m.behaviour, "before": m.before, "after": m.after, "p_value": m.p_value,
            "exploit": m.exploit, "why": m.why}


def _learned_timeouts(ctx, result: SearchResult, d: dict, v: Verdict) -> list[Finding]:
    pipeline, move = ctx.pipeline, v.move
    fav = d.get("timeout_favoured", {})
    evidence = {"source": NAME, "run": result.mode, "timeout_before": move.before, "timeout_after": move.after,
                "timeout_rise_p": move.p_value, "timeout_favoured": fav, "behaviour": "timeout",
                "advantage_by_outcome": d["advantage_by_outcome"], "pipeline": pipeline.to_dict(),
                "p_value": move.p_value}
    measured = {"examples": _ids(v.shown), "move": move, "pipeline": pipeline.name}
    if pipeline.handling_of(TIMEOUT) == "drop" or TIMEOUT in pipeline.mask_group_on:
        return [decide_timeout_drop_incentive({**measured, "evidence": {**evidence, "reward_path": "pipeline"}})]
    if pipeline.handling_of(TIMEOUT) == "keep" and fav.get("p_value", 1.0) < ctx.config.alpha:
        evidence["ending_premium"] = _timeout_ending_pays(ctx, result)
        found = decide_timeout_rewarded("learned", {**measured, "evidence": {**evidence, "reward_path": "env"}})
        return [] if found is None else [found]
    return []


SAME_STATE_VETO = 3
"""Fewest distinct states that may veto the population comparison (``same_state_premium``): a
greedy evaluation plays each group's seed one way, so a run's timeouts may come from only
``groups`` states."""


def ending_premium_in_run(ctx, result: SearchResult, episode_ids, scale: float, rng) -> dict:
    """Does timing out pay more than failing, for these episodes of a GRPO run? From the same state
    where the counterfactual engine can replay them (``same_state.same_state_premium``, as the
    timeouts probe judges exploration's timeouts): a staller that made progress and is paid partial
    credit for it at the step limit is paid what ending there pays. Its ending's pay must also beat
    an honest failure's ending in exploration (``endings.ending_premium``, the only test where the
    engine cannot replay): the pairs compare the timeout's last step with ending instead of it, and
    a last step that makes progress would read as a premium."""
    from envaudit.probes._shared.endings import ending_premium
    from envaudit.probes._shared.same_state import same_state_premium

    explored = ctx.exploration
    run_episodes = result.episodes[result.episodes["episode_id"].isin(list(episode_ids))]
    same = same_state_premium(ctx, run_episodes, result.evaluation.steps, scale, rng, tag="grpo-timeout-ending",
                              min_effect=MIN_EFFECT, veto=SAME_STATE_VETO)
    failures = explored.episodes.loc[explored.episodes["outcome"] == FAILURE, "episode_id"]
    steps = pd.concat([explored.steps, result.evaluation.steps], ignore_index=True)
    population = ending_premium(ctx, episode_ids, steps, failures, scale, rng)
    out = {**population, "same_state": False} if same is None else {
        # A timed-out episode's last step may itself make progress, which ending there instead
        # forgoes: the same-state pairs can say the timeout does not pay, never alone that it does.
        **same, "holds": bool(same["holds"] and population["holds"]), "population": population}
    if out["holds"]:
        limit = _step_limit_pays(ctx, result, run_episodes, scale)
        out["step_limit"] = limit
        out["holds"] = bool(limit is None or limit["pays"] or limit["underpowered"])
    return out


def _step_limit_pays(ctx, result: SearchResult, run_episodes: pd.DataFrame, scale: float) -> dict | None:
    """Does the step limit itself pay, with progress held fixed? ``stall.stall_marginal``'s test
    ``A - C`` on the run's timed-out episodes: the first half of each, then its last action
    repeated until the limit, against the same idle steps ended honestly one step before it. A
    repeated action makes no progress after its first call, so a last step's progress (with partial
    credit paid on every ending, or shaping) is not read as the limit's pay: on a generated clean
    env without an oracle or any success seen (``clean-0-7``), ending before the last step paid
    0.015 less than timing out, the step limit 0.0 more than ending after the same idle steps. A
    veto only: None (no honest ending, too few states) leaves the other tests to decide."""
    from envaudit.probes._shared.stall import stall_marginal

    ev = result.evaluation
    ids = set(run_episodes["episode_id"])
    timed_out = ev.of_episodes(ids)
    marginal = stall_marginal(ctx, timed_out, scale, min_effect=MIN_EFFECT, tag=f"grpo-{result.mode}-limit")
    test = marginal.get("step_limit_pays")
    if test is None:
        return None
    return {**test, "replay_steps": marginal["replay_steps"], "n_prefixes": marginal["n_prefixes"],
            "honest_ending": marginal["honest_ending"]}


def _timeout_ending_pays(ctx, result: SearchResult) -> dict:
    """``ending_premium_in_run`` for the trained policy's timed-out, unsuccessful episodes."""
    from envaudit.probes._shared.endings import unsuccessful_timeouts

    explored = ctx.exploration.episodes
    timed_out = result.episodes[unsuccessful_timeouts(result.episodes)]
    scale = reward_scale(explored.loc[explored["outcome"] == SUCCESS, "return"].to_numpy(float),
                         explored.loc[explored["outcome"] == FAILURE, "return"].to_numpy(float),
                         timed_out["return"].to_numpy(float))
    return ending_premium_in_run(ctx, result, timed_out["episode_id"], scale, ctx.rng(result.mode, "timeout-ending"))


def _failure_shortcut(ctx, result: SearchResult, d: dict, v: Verdict, before: pd.DataFrame, honest: Honest,
                      labels, where: str) -> Finding:
    """Ending early with fewer failed calls, where failed calls are charged beyond their step and
    ending early beats persisting at the env's own failure rates."""
    after, early = result.episodes, v.shown
    fails_b = float((before["n_tool_errors"] + before["n_tool_timeouts"]).mean())
    fails_a = float((after["n_tool_errors"] + after["n_tool_timeouts"]).mean())
    cost, beats, ladder = v.evidence["failure_cost"], v.evidence.get("quit_vs_persist", {}), v.evidence["ladder"]
    trajectory = typical_trajectory(result.evaluation.steps, early["episode_id"], labels)
    p = max(v.move.p_value, cost["p_value"], beats.get("p_value", ladder["p_value"]))
    evidence = {"source": NAME, "run": result.mode, "p_value": p, "behaviour": "quit", "reward_path": "env",
                "move": v.move.behaviour, "length_before": float(before["length"].mean()),
                "length_after": float(after["length"].mean()), "failed_calls_before": fails_b,
                "failed_calls_after": fails_a, "failure_cost": cost, "quit_vs_persist": beats, "ladder": ladder,
                "beyond_outcome": d["beyond_outcome"], "typical_trajectory": trajectory}
    return decide_failure_shortcut({
        "evidence": evidence, "examples": _ids(early), "verdict": v, "where": where,
        "early_returns": early["return"].to_numpy(float), "persist_returns": honest.persist["return"],
        "success_returns": honest.success})
