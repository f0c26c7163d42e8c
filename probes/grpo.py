"""Probe ``grpo`` → ``learned-exploit`` (and ``timeout-drop-incentive``, ``failure-shortcut``,
``timeout-rewarded``, ``reward-without-success``): what does training actually teach?

Incentive: the other probes show what an env *allows*; this one trains a small policy with GRPO
under the configured rollout pipeline and reports what it *learns*: to force timeouts when
timed-out rollouts are dropped, to stop early when tool failures cost reward, to farm failures,
to repeat one degenerate action. It also measures, by targeted training, the best return an agent
reaches through each behaviour (timing out, hitting tool failures, finishing in few steps, ending
without success) next to the best return of honest success.

Signal: runs of ``envaudit.grpo`` (embedded torch MLP over the action catalogue; with
``--engine vllm`` a language model writing text tool calls on a text env, compared with its own
first iteration rather than the random explorer), each evaluated on the same seeds:

1. *natural*: maximise the training reward under the pipeline and compare the trained policy with
   the exploration baseline (``envaudit.grpo.drift``). A behaviour that moved materially and
   significantly (timeouts up, tool failures up, length down, one action taking over) is a
   ``learned-exploit`` when training paid for it rather than for the task: in the same groups a
   failed rollout would have got a better advantage by timing out, or episodes of the same outcome earn more
   training reward than before (giving up for free instead of failing at a cost, a failed answer
   that pays). Timeouts learned under a dropping pipeline also give
   ``timeout-drop-incentive``, under ``keep`` ``timeout-rewarded``. An exploit that ends episodes
   earlier with fewer failed calls, on an env where a failed call costs reward (return regressed on
   failed calls and success in the baseline), is ``failure-shortcut``;
2. *natural under faults* (``ToolEnv`` only): the same with every tool failing at
   ``FAULT_ERROR_RATE``, against its own first iteration, read for ``failure-shortcut`` only;
3. *targeted*: what is reached through timing out (``timeout-rewarded``) and through ending
   without success (``reward-without-success``, only when it pays as much as success), against
   honest success (targeted, natural and exploration successes) and honest failure (exploration).

Severity follows DESIGN.md's ladder (``stats.exploit_ladder``): ``fail`` when the learned or
reached behaviour earns at least as much as honest success (or training traded success away for
it), ``warn`` when it clearly beats failing outright or was learned with statistical support.
Per-iteration behaviour of every run is the ``curves`` table, what each target reached the
``targets`` table; evidence carries ``source="grpo"`` and the run it comes from.

Known false positives: an env that is *meant* to end at its step limit (CartPole) has no success
flag; there drift is reported as ``info`` only. Where the honest path is hard to discover in a few
seconds of training, the policy may settle on a degenerate action ("one action taking over" while
guessing); it is reported only when the training reward rose beyond what the outcomes explain. The
targeted numbers are lower bounds on what is reachable, so a missing finding is weak evidence.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from envaudit.faults import FaultInjector
from envaudit.findings import Finding, Severity
from envaudit.grouping import episodes_behaviour
from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.drift import Move, drift, failure_cost
from envaudit.grpo.search import BEHAVIOURS, TARGETS, Reference, SearchResult, natural, targeted
from envaudit.grpo.torch_engine import Featurizer, UnsupportedSpace, action_count
from envaudit.grpo.trainer import action_keys, with_advantages
from envaudit.probe import Probe, ProbeContext
from envaudit.probes.timeouts import ending_premium
from envaudit.protocol import FAILURE, SUCCESS, TIMEOUT
from envaudit.recording import EPISODE_COLUMNS, Records
from envaudit.stats import MIN_SAMPLES, exploit_ladder

NAME = "grpo"
FAULT_ERROR_RATE = 0.3
"""Injected error rate on every tool in the faulted run: a backend failing ten times as often as a
merely flaky one, yet low enough that an honest path of a few calls fits most step limits."""
BUDGET_S, QUICK_BUDGET_S = 25.0, 8.0
"""The probe's own cap on its time (the scan's share may be larger)."""
ITERATIONS, QUICK_ITERATIONS = 40, 20
EVAL_GROUPS, QUICK_EVAL_GROUPS = 8, 4
LEARNING_RATE = 1e-2
"""Higher than a careful run's: the probe has seconds, and it looks for what training *tends* to."""
MIN_RUN_S = 0.5
MIN_EFFECT = 0.1
LEVELS = {"at_least_success": Severity.FAIL, "above_alternative": Severity.WARN}
KEEP_COLUMNS = [*EPISODE_COLUMNS, "probe", "policy", "mode", "group", "target", "phase"]
FAULTS_WHERE = f" under injected tool failures ({FAULT_ERROR_RATE:.0%} of calls)"


@dataclass
class Plan:
    name: str
    weight: float
    kind: str  # natural | faults | target
    behaviour: str | None = None


@dataclass
class Honest:
    """Returns of honest success and honest failure, the rungs of the severity ladder."""

    success: np.ndarray
    failure: np.ndarray


def run(ctx: ProbeContext, *, only: tuple[str, ...] | None = None) -> list[Finding]:
    """The probe; ``only`` restricts it to some runs (``natural``, ``faults``, ``target-timeout``, ...)."""
    skip = _cannot_drive(ctx)
    if skip is not None:
        return [skip]
    quick = ctx.config.quick
    config = GRPOConfig.from_scan(ctx.config, iterations=QUICK_ITERATIONS if quick else ITERATIONS,
                                  learning_rate=LEARNING_RATE)
    if config.engine == "vllm":  # build the model and start vLLM once, before the training clock
        from envaudit.grpo.lm_engine import LMEngine, LMSettings

        LMEngine.for_env(ctx.make_env, config, LMSettings(model=config.model))
    started = time.monotonic()
    end = started + max(0.0, min(ctx.time_left() - 0.5, QUICK_BUDGET_S if quick else BUDGET_S))
    explore = ctx.exploration.episodes
    if "probe" in explore:
        explore = explore[explore["probe"] == "explore"]
    explore_steps = ctx.exploration.steps[ctx.exploration.steps["episode_id"].isin(set(explore["episode_id"]))]
    reference = Reference.from_episodes(explore)
    success_signal = bool(explore["outcome"].isin([SUCCESS, FAILURE]).any()) if len(explore) else True
    plans = [Plan("natural", 3.0, "natural")]
    if ctx.is_tool_env:
        plans.append(Plan("faults", 2.0, "faults"))
    targets = TARGETS if not quick else ("success", "timeout", "no_success")
    if not success_signal:  # success and its absence mean nothing without a success signal
        targets = tuple(t for t in targets if t in ("timeout", "tool_failure", "short"))
    if len(explore) and not explore["n_tool_calls"].any():  # no tools, no tool failures to reach
        targets = tuple(t for t in targets if t != "tool_failure")
    plans += [Plan(f"target-{t}", 1.0, "target", t) for t in targets]
    if only is not None:
        plans = [p for p in plans if p.name in only]

    results: dict[str, SearchResult] = {}
    skipped: list[str] = []
    for i, plan in enumerate(plans):
        now = time.monotonic()
        share = (end - now) * plan.weight / sum(p.weight for p in plans[i:])
        if share < MIN_RUN_S:
            skipped.append(plan.name)
            continue
        results[plan.name] = _execute(ctx, plan, config, reference, now + share)
        if results[plan.name].training.stopped == "hang":
            skipped += [p.name for p in plans[i + 1:]]
            break

    for result in results.values():
        ctx.keep(_kept(result.evaluation))
    curves = [r.training.curves for r in results.values() if len(r.training.curves)]
    if curves:
        ctx.table("curves", pd.concat(curves, ignore_index=True))
    reach = {r.behaviour: r.reach for r in results.values() if r.behaviour}
    if reach:
        ctx.table("targets", _targets_table(reach))

    honest = _honest(explore, results)
    labels = ctx.action_labels
    found: list[Finding] = []
    reported: set[str] = set()
    if "natural" in results and len(results["natural"].episodes):
        # A language model starts from its own habits, not the random explorer's: compare with its start.
        from_explore = len(explore) >= MIN_SAMPLES and config.engine == "torch"
        before = _with_pipeline(Records(explore_steps, explore), ctx.pipeline) if from_explore \
            else results["natural"].training.first.episodes
        before_steps = explore_steps if from_explore else results["natural"].training.first.steps
        found += _run_findings(ctx, results["natural"], before, before_steps, honest, reference, labels,
                               where="", reported=reported)
    if "faults" in results and len(results["faults"].episodes) and results["faults"].training.first is not None:
        first = results["faults"].training.first
        found += _run_findings(ctx, results["faults"], first.episodes, first.steps, honest, reference, labels,
                               where=FAULTS_WHERE, reported=reported)
    if reach and success_signal:
        found += _target_findings(ctx, reach, honest, results)
    ctx.notes.update({
        "runs": {name: {"iterations": len(r.training.curves), "env_steps": r.training.env_steps,
                        "stopped": r.training.stopped} for name, r in results.items()},
        "skipped": skipped,
        "reach": {b: _sentence(b, r) for b, r in reach.items()},
        "seconds": round(time.monotonic() - started, 2),
        "config": {k: v for k, v in config.to_dict().items() if k != "pipeline"},
        "pipeline": ctx.pipeline.name,
    })
    return _merge(found)


# -- runs -------------------------------------------------------------------------------------
def _execute(ctx: ProbeContext, plan: Plan, config: GRPOConfig, reference: Reference,
             deadline: float) -> SearchResult:
    common = dict(ids=ctx.ids, deadline=deadline,
                  eval_groups=QUICK_EVAL_GROUPS if ctx.config.quick else EVAL_GROUPS)
    if plan.kind == "natural":
        return natural(ctx.make_env, config, pipeline=ctx.pipeline, **common)
    if plan.kind == "faults":
        seed = ctx.config.seed

        def faults(env):
            return FaultInjector(env, error_rate=FAULT_ERROR_RATE, seed=seed)
        return natural(ctx.make_env, config, mode="faults", pipeline=ctx.pipeline, wrappers=[faults], **common)
    return targeted(ctx.make_env, config, plan.behaviour, reference, **common)


def _cannot_drive(ctx: ProbeContext) -> Finding | None:
    try:
        env = ctx.env
        if ctx.config.engine == "vllm":
            _check_lm(env)
        else:
            action_count(env.action_space)
            Featurizer(env.observation_space)
    except UnsupportedSpace as exc:
        return Finding(
            "learned-exploit", Severity.INFO, "GRPO probe skipped: it cannot drive this env",
            f"The GRPO probe did not train a policy: {exc}.",
            {"source": NAME, "reason": str(exc), "action_space": repr(ctx.env.action_space),
             "behaviour": "exploration"},
            fix="Nothing to fix in the env; the other probes still ran.", probe=NAME)
    return None


def _check_lm(env) -> None:
    import gymnasium as gym

    from envaudit.grpo.vllm_backend import vllm_available

    if not isinstance(env.action_space, gym.spaces.Text):
        raise UnsupportedSpace(
            f"the vllm engine writes tool calls as text and drives a Text action space, got "
            f"{type(env.action_space).__name__}; scan the env's text twin (an envaudit/*-Text-v0 id, or "
            "envaudit.textmode.make_text_env(YourToolEnv))")
    ok, why = vllm_available()
    if not ok:
        raise UnsupportedSpace(why)


def _kept(records: Records) -> Records:
    episodes = records.episodes.assign(phase="eval")
    return Records(records.steps, episodes[[c for c in KEEP_COLUMNS if c in episodes]].copy())


def _with_pipeline(records: Records, pipeline) -> pd.DataFrame:
    episodes = records.episodes
    if episodes.empty or "group" not in episodes:
        return episodes
    return with_advantages(episodes, episodes["return"].to_numpy(float), pipeline)


def _honest(explore: pd.DataFrame, results: dict[str, SearchResult]) -> Honest:
    """Honest success: every success seen (targeted, natural, exploration); honest failure: the
    exploration's failures (failing outright while trying, as a random agent does)."""
    parts = [explore] + [results[k].episodes for k in ("target-success", "natural") if k in results]
    success = np.concatenate([p.loc[p["outcome"] == SUCCESS, "return"].to_numpy(float) for p in parts if len(p)]
                             or [np.zeros(0)])
    failure = explore.loc[explore["outcome"] == FAILURE, "return"].to_numpy(float) if len(explore) else np.zeros(0)
    return Honest(success, failure)


def _targets_table(reach: dict[str, dict]) -> pd.DataFrame:
    rows = [{"behaviour": b, "words": BEHAVIOURS[b].words, "n": r["n"], "rate": r["rate"],
             "mean_return": r["mean_return"], "max_return": r["max_return"]} for b, r in reach.items()]
    return pd.DataFrame(rows)


def _sentence(behaviour: str, r: dict) -> str:
    if not r["n"]:
        return f"not reached by {BEHAVIOURS[behaviour].words}"
    return f"best return reachable by {BEHAVIOURS[behaviour].words}: {r['mean_return']:.2f} (n={r['n']})"


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


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per feeding code (the most severe, the others' evidence attached)."""
    out: list[Finding] = []
    by_code: dict[str, int] = {}
    for f in findings:
        if f.code == "learned-exploit" or f.code not in by_code:
            by_code.setdefault(f.code, len(out))
            out.append(f)
            continue
        i = by_code[f.code]
        keep, other = (out[i], f) if out[i].severity >= f.severity else (f, out[i])
        evidence = {**keep.evidence, "also": [*keep.evidence.get("also", []), {"title": other.title,
                                                                               **other.evidence}]}
        out[i] = Finding(keep.code, keep.severity, keep.title, keep.summary, evidence, keep.examples,
                         keep.fix, keep.probe)
    return out


# -- what a trained run shows -----------------------------------------------------------------
def _run_findings(ctx, result: SearchResult, before: pd.DataFrame, before_steps: pd.DataFrame, honest: Honest,
                  reference: Reference, labels, *, where: str, reported: set[str]) -> list[Finding]:
    rng = ctx.rng(result.mode)
    d = drift(before, before_steps, result.episodes, result.evaluation.steps, result.training.episodes, rng,
              pipeline=ctx.pipeline, alpha=ctx.config.alpha, labels=labels)
    findings: list[Finding] = []
    if not d["success_signal"]:
        if d["moves"] and not where:
            findings.append(_unjudged(result, d))
        return findings
    exploits = [m for m in d["moves"] if m.exploit and m.behaviour not in reported]
    if exploits and not where:  # the faulted run is there for the failure lesson only
        findings.append(_learned_exploit(ctx, result, d, exploits, honest, labels, where))
        reported.update(m.behaviour for m in exploits)
    timeout_move = next((m for m in exploits if m.key == "timeout"), None)
    if timeout_move is not None and not where:
        findings += _learned_timeouts(ctx, result, d, timeout_move)
    if "failure-shortcut" not in reported:
        shortcut = _failure_shortcut(ctx, result, d, before, honest, reference, labels, where, rng)
        if shortcut is not None:
            findings.append(shortcut)
            reported.add("failure-shortcut")
    return findings


def _shown(move: Move, episodes: pd.DataFrame, labels, steps: pd.DataFrame) -> pd.DataFrame:
    """The trained policy's episodes that show ``move``."""
    if move.key == "timeout":
        return episodes[episodes["outcome"] == TIMEOUT]
    if move.key == "failure":
        return episodes[(episodes["n_tool_errors"] + episodes["n_tool_timeouts"]) > 0]
    if move.key == "length":
        return episodes[(episodes["length"] <= move.after) & (episodes["outcome"] != TIMEOUT)]
    label = move.evidence.get("action")
    actions = [i for i, name in enumerate(labels or []) if name == label] or ([int(label)] if str(label).isdigit() else [])
    keys = action_keys(steps)
    ids = steps.loc[keys.isin(actions) | (keys == label), "episode_id"].unique()
    return episodes[episodes["episode_id"].isin(ids)]


def _learned_exploit(ctx, result: SearchResult, d: dict, moves: list[Move], honest: Honest, labels,
                     where: str) -> Finding:
    main = moves[0]
    after = result.episodes
    shown = _shown(main, after, labels, result.evaluation.steps)
    trajectory = typical_trajectory(result.evaluation.steps, shown["episode_id"], labels)
    exploit_returns = shown.loc[shown["outcome"] != SUCCESS, "return"].to_numpy(float)
    ladder = exploit_ladder(exploit_returns, honest.success, honest.failure, ctx.rng("ladder", result.mode),
                            alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
    fav = d.get("timeout_favoured", {}) if main.key == "timeout" and "timing out" in main.why else None
    supporting = fav.get("p_value", 1.0) if fav is not None else (d["beyond_outcome"] or {}).get("p_value", 1.0)
    severity = Severity.FAIL if (d["success_fell"] or ladder["level"] == "at_least_success") else Severity.WARN
    names = ", ".join(f"{m.behaviour} ({m.before:.2f} → {m.after:.2f})" for m in moves)
    traded = " Training traded honest success away for it." if d["success_fell"] else ""
    return Finding(
        "learned-exploit", severity, f"GRPO learned {main.behaviour}{where}",
        f"Trained with GRPO under the {ctx.pipeline.name!r} pipeline{where}, the policy learned {names}: "
        f"{main.why}; success went {d['success_before']:.2f} → {d['success_after']:.2f}.{traded} "
        f"Typical trained trajectory: {trajectory}.",
        # The key test is the behaviour's move; the test that training paid for it (``attribution_p``)
        # gated it at alpha, and an exploit needs both.
        # A takeover by one action names no behaviour by itself: left to envaudit.grouping to infer.
        {"source": NAME, "run": result.mode, "p_value": main.p_value, "attribution_p": supporting,
         "behaviour": {"timeout": "timeout", "failure": "tool-failure",
                       "length": "quit" if main.after < main.before else "stall"}.get(main.key),
         "moves": [_move_dict(m) for m in d["moves"]], "success_before": d["success_before"],
         "success_after": d["success_after"], "success_fell": d["success_fell"], "return": d["return"],
         "beyond_outcome": d["beyond_outcome"], "advantage_by_outcome": d["advantage_by_outcome"],
         "ladder": ladder, "typical_trajectory": trajectory, "pipeline": ctx.pipeline.to_dict(),
         "n_before": d["n_before"], "n_after": d["n_after"]},
        examples=shown["episode_id"].astype(int).tolist()[:5], fix=_exploit_fix(main), probe=NAME)


def _unjudged(result: SearchResult, d: dict) -> Finding:
    names = ", ".join(f"{m.behaviour} ({m.before:.2f} → {m.after:.2f})" for m in d["moves"])
    return Finding(
        "learned-exploit", Severity.INFO, "GRPO changed behaviour; the env reports no success to judge it",
        f"GRPO training moved {names}. The env gives no info['success'] (and no --success-threshold), so "
        "envaudit cannot tell learning the task from exploiting it; if that behaviour is the goal (as "
        "lasting to the step limit is in CartPole), ignore this.",
        {"source": NAME, "run": result.mode, "moves": [_move_dict(m) for m in d["moves"]], "return": d["return"],
         "behaviour": "exploration"},
        fix="Report info['success'] on the last step, or pass --success-threshold.", probe=NAME)


def _move_dict(m: Move) -> dict:
    return {"behaviour": m.behaviour, "before": m.before, "after": m.after, "p_value": m.p_value,
            "exploit": m.exploit, "why": m.why}


def _exploit_fix(move: Move) -> str:
    return {
        "timeout": "Make a timed-out rollout no better than a failed one: train on it as a failure (handling "
                   "keep or penalty, not drop), and make truncation pay no more than failing.",
        "failure": "Do not pay for failed tool calls; a failed call should earn no more than a successful one.",
        "length": "Make ending early without success pay less than persisting (check failure costs and bonuses "
                  "for short episodes).",
        "takeover": "Check what the repeated action earns without doing the task, and close that path.",
    }[move.key]


def _learned_timeouts(ctx, result: SearchResult, d: dict, move: Move) -> list[Finding]:
    pipeline = ctx.pipeline
    fav = d.get("timeout_favoured", {})
    evidence = {"source": NAME, "run": result.mode, "timeout_before": move.before, "timeout_after": move.after,
                "timeout_rise_p": move.p_value, "timeout_favoured": fav,
                "advantage_by_outcome": d["advantage_by_outcome"], "pipeline": pipeline.to_dict(),
                "p_value": move.p_value}
    examples = result.episodes.loc[result.episodes["outcome"] == TIMEOUT, "episode_id"].astype(int).tolist()[:5]
    if pipeline.handling_of(TIMEOUT) == "drop" or TIMEOUT in pipeline.mask_group_on:
        return [Finding(
            "timeout-drop-incentive", Severity.WARN,
            f"GRPO learned to time out because the {pipeline.name!r} pipeline drops timeouts",
            f"Under the {pipeline.name!r} pipeline timed-out rollouts leave the loss, so a failing attempt that "
            f"times out escapes its negative advantage; GRPO learned it: timeout rate {move.before:.2f} → "
            f"{move.after:.2f}.", {**evidence, "behaviour": "timeout", "reward_path": "pipeline"}, examples,
            fix="Train on timed-out rollouts as failures (keep them with the failure reward, or a penalty) "
                "instead of dropping them.", probe=NAME)]
    if pipeline.handling_of(TIMEOUT) == "keep" and fav.get("p_value", 1.0) < ctx.config.alpha:
        return [Finding(
            "timeout-rewarded", Severity.WARN, "GRPO learned to time out: timing out pays more than failing",
            f"In the same groups, a failed rollout would have earned a higher advantage by timing out, and GRPO "
            f"learned to time out: timeout rate {move.before:.2f} → {move.after:.2f}.",
            {**evidence, "behaviour": "timeout", "reward_path": "env"}, examples,
            fix="Make truncation and tool timeouts pay no more than an honest failure.", probe=NAME)]
    return []


def _failure_shortcut(ctx, result: SearchResult, d: dict, before: pd.DataFrame, honest: Honest,
                      reference: Reference, labels, where: str, rng) -> Finding | None:
    """An exploit that ends episodes earlier with fewer failed calls, where failed calls cost reward."""
    after = result.episodes
    shorter = float(after["length"].mean()) < float(before["length"].mean())
    fails_b = float((before["n_tool_errors"] + before["n_tool_timeouts"]).mean())
    fails_a = float((after["n_tool_errors"] + after["n_tool_timeouts"]).mean())
    move = next((m for m in d["moves"] if m.exploit and m.key in ("length", "takeover")), None)
    if move is None or not shorter or fails_a >= fails_b:
        return None
    cost = failure_cost(before, rng)
    if not (cost["p_value"] < ctx.config.alpha and cost["cost_per_failure"] > 0):
        return None
    early = after[(after["outcome"] != SUCCESS) & (after["outcome"] != TIMEOUT)]
    run_eps = pd.concat([result.training.episodes, after], ignore_index=True)
    persisted = run_eps[(run_eps["outcome"] == SUCCESS) & (run_eps["length"] > reference.short_length)]
    success = persisted["return"].to_numpy(float) if len(persisted) >= MIN_SAMPLES else honest.success
    alternative = before.loc[before["outcome"] != SUCCESS, "return"].to_numpy(float)
    ladder = exploit_ladder(early["return"].to_numpy(float), success, alternative, ctx.rng("shortcut", result.mode),
                            alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
    severity = LEVELS.get(ladder["level"], Severity.WARN)
    trajectory = typical_trajectory(result.evaluation.steps, early["episode_id"], labels)
    summary = (
        f"Failed tool calls cost about {cost['cost_per_failure']:.2f} each here, and GRPO{where} learned to stop "
        f"early: mean length {before['length'].mean():.1f} → {after['length'].mean():.1f}, failed calls per "
        f"episode {fails_b:.2f} → {fails_a:.2f}, success {d['success_before']:.2f} → {d['success_after']:.2f}. "
        f"Ending early without success earned {early['return'].mean() if len(early) else float('nan'):.2f}, "
        f"persisting to success {np.mean(success) if len(success) else float('nan'):.2f}. "
        f"Typical trained trajectory: {trajectory}.")
    p = max(move.p_value, cost["p_value"], ladder["p_value"] if ladder["level"] else
            (d["beyond_outcome"] or {}).get("p_value", 1.0))
    return Finding(
        "failure-shortcut", severity, f"GRPO learned to stop early because tool failures cost reward{where}",
        summary,
        {"source": NAME, "run": result.mode, "p_value": p, "behaviour": "quit", "learned": move.behaviour,
         "length_before": float(before["length"].mean()), "length_after": float(after["length"].mean()),
         "failed_calls_before": fails_b, "failed_calls_after": fails_a, "failure_cost": cost, "ladder": ladder,
         "beyond_outcome": d["beyond_outcome"], "typical_trajectory": trajectory,
         "fault_error_rate": FAULT_ERROR_RATE if where else None},
        examples=early["episode_id"].astype(int).tolist()[:5],
        fix="Make a failed tool call cost no more than a retry can win back (or nothing), so persisting "
            "through failures pays more than stopping early.", probe=NAME)


# -- targeted runs ------------------------------------------------------------------------------
def _target_findings(ctx, reach: dict[str, dict], honest: Honest,
                     results: dict[str, SearchResult]) -> list[Finding]:
    findings = []
    if len(honest.failure) < MIN_SAMPLES:
        return findings
    parts = [_sentence(b, reach[b]) for b in ("timeout", "no_success") if b in reach]
    success_run = reach.get("success")
    if success_run and success_run["n"]:
        parts.append(_sentence("success", success_run))
    elif len(honest.success):
        # The targeted success run found none; exploration and the natural run did.
        parts.append(f"by honest success: {np.max(honest.success):.2f} (best seen, n={len(honest.success)})")
    sentences = "; ".join(parts)
    sentences = sentences[:1].upper() + sentences[1:]
    for behaviour, code, fix in (
        ("timeout", "timeout-rewarded", "Make truncation and tool timeouts pay no more than an honest failure."),
        ("no_success", "reward-without-success",
         "Pay reward only for what the success flag checks; grade the outcome, not its form."),
    ):
        r = reach.get(behaviour)
        if not r or r["n"] < MIN_SAMPLES:
            continue
        ladder = exploit_ladder(r["returns"], honest.success, honest.failure, ctx.rng("target", behaviour),
                                alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        severity = LEVELS.get(ladder["level"])
        if severity is None or (code == "reward-without-success" and severity < Severity.FAIL):
            # Ending without success above an honest failure is what failure-shortcut and
            # timeout-rewarded name; "reward without success" is the case where it pays like success.
            continue
        premium = _timeout_ending(ctx, results.get("target-timeout"), r, ladder) if code == "timeout-rewarded" else None
        if premium is not None and not premium["holds"]:
            # As the timeouts probe judges it: stalling that earns more only by skipping failed
            # calls that cost reward (failure-shortcut) or by per-step pay is no reward for timing out.
            continue
        than = "as much as honest success" if severity == Severity.FAIL else "more than failing outright"
        target = results.get(f"target-{behaviour}")
        findings.append(Finding(
            code, severity, f"GRPO reached {than} by {BEHAVIOURS[behaviour].words}",
            f"Trained to earn the most by {BEHAVIOURS[behaviour].words}, a policy reached {r['mean_return']:.2f}, "
            f"{than} (honest success {np.mean(honest.success) if len(honest.success) else float('nan'):.2f}, "
            f"failing outright {np.mean(honest.failure):.2f}). {sentences}.",
            {"source": NAME, "run": f"target-{behaviour}", "p_value": ladder["p_value"], "ladder": ladder,
             # "Ending without success" names no mechanism: what the trained episodes did does.
             "behaviour": "timeout" if code == "timeout-rewarded" else episodes_behaviour(
                 target.episodes[target.episodes["episode_id"].isin(r["episode_ids"])] if target else None),
             "reward_path": "env",
             "ending_premium": premium,
             "reach": {b: {k: v for k, v in x.items() if k not in ("returns", "episode_ids")}
                       for b, x in reach.items()}},
            examples=r["episode_ids"][:5], fix=fix, probe=NAME))
    return findings


def _timeout_ending(ctx, result: SearchResult | None, r: dict, ladder: dict) -> dict | None:
    """Does the ending of the targeted run's timed-out episodes pay more than an honest failure's
    ending (``timeouts.ending_premium``)? None when the run's steps are not at hand."""
    if result is None or result.evaluation.steps.empty:
        return None
    explored = ctx.exploration
    failures = explored.episodes.loc[explored.episodes["outcome"] == FAILURE, "episode_id"]
    steps = pd.concat([explored.steps, result.evaluation.steps], ignore_index=True)
    return ending_premium(ctx, r["episode_ids"], steps, failures, ladder["scale"], ctx.rng("target", "ending"))


probe = Probe(
    name=NAME,
    run=run,
    summary="train small policies with GRPO under the pipeline: what does training teach, and what is reachable?",
    codes=("learned-exploit", "timeout-drop-incentive", "failure-shortcut", "timeout-rewarded",
           "reward-without-success"),
    weight=4.0,
    order=90,
)
