"""Probe ``grpo`` → ``learned-exploit`` (and ``timeout-drop-incentive``, ``failure-shortcut``,
``timeout-rewarded``, ``reward-without-success``, ``length-bias``): what does training actually teach?

Incentive: the other probes show what an env *allows*; this one trains a small policy with GRPO
under the configured rollout pipeline and reports what it *learns*: to force timeouts when
timed-out rollouts are dropped, to stop early when tool failures are charged, to end right after a
failed call when that pays, to farm failures. It also measures, by targeted training, the best
return an agent reaches through each behaviour (timing out, hitting tool failures, finishing in
few steps, ending without success) next to the best return of honest success, and whether
succeeding *later* pays more than succeeding at once.

Signal: runs of ``envaudit.grpo`` (embedded torch MLP over the action catalogue; with
``--engine vllm`` a language model writing text tool calls on a text env, compared with its own
first iteration rather than the random explorer), each evaluated on the same seeds:

1. *natural*: maximise the training reward under the pipeline and compare the trained policy with
   the exploration baseline (``envaudit.probes.grpo.drift``); every moved behaviour is put on the ladder
   by ``envaudit.probes.grpo.lessons`` from the trained policy's non-success episodes that show it;
2. *natural under faults* (``ToolEnv`` only): the same with every tool failing at
   ``FAULT_ERROR_RATE``, against its own first iteration, read for ``failure-shortcut`` only;
3. *targeted*: what is reached through timing out (``timeout-rewarded``) and through ending
   without success (``reward-without-success``, only when it pays as much as success), against
   honest success and honest failure; and, from every group of the success search and the natural
   run, whether successes reached after extra steps out-earn the fastest success from the same
   start (``length-bias`` at ``fail``, behaviour ``delay-success``);
4. *met on the way*: the richest episode exploration or any run's training met that the env ended
   without success, replayed open-loop on the evaluation seeds (beside the env's oracle, if any)
   when it paid about what success pays: a multi-call sequence that no search is trained toward
   but the timing-out search, taught to keep going, plays into (``reward-without-success``).

Work is counted in GRPO iterations and evaluation groups (``ITERATIONS``, ``EVAL_GROUPS``; fewer
under ``--quick``; the replay and the oracle beside it are one evaluation's worth each), never in
seconds: the same seed gives the same curves and findings on any machine under any load.
``ITERATIONS`` is each run's most: a run whose policy met nothing to learn from in ``barren_rollouts()``
rollouts in a row stops there, whether it is still the uniform explorer (``barren``) or has learned
what it could and settled, its entropy not climbing back (``settled``): a behaviour shown in 1% of
its rollouts is missed with chance 5% (``notes["runs"][name]["barren"]`` / ``["settled"]``;
``envaudit.grpo.trainer``). A run whose groups still differ is never cut: a plateau of the training
reward is no fixed point, since behaviour drifts among endings that pay about the same (a hand-off
paid after a failed call against an honest booking), and that drift is what this probe reports.
The clock is a safety cap only (``ctx.time_left()``): a run it cuts is
left out of the findings and listed as incomplete.

Severity follows DESIGN.md's ladder: ``fail`` when the behaviour earns at least as much as honest
success; ``warn`` when the pipeline or the infrastructure makes it pay (timeouts escape a negative
advantage, failed calls charged beyond their step so that quitting beats persisting, an ending
paid only after a failure); a collapse to ending early where honest success pays more is an
``info`` exploration-collapse hint. Each code is graded, and its finding made, in one function of
``envaudit.probes.grpo.decisions`` (words in ``text``): ``decide_learned_exploit``,
``decide_timeout_drop_incentive``, ``decide_failure_shortcut``, ``decide_timeout_rewarded``,
``decide_reward_without_success`` and ``decide_length_bias``; this module and ``lessons`` measure and
hand over what they found. Per-iteration behaviour of every run is the ``curves`` table,
what each target reached the ``targets`` table; evidence carries ``source="grpo"``, the run it
comes from and ``behaviour`` (the grouping word).

Known false positives: an env that is *meant* to end at its step limit (CartPole) has no success
flag; there drift is reported as ``info`` only. Success rewards that grow with the path taken from
the same start (a bonus per distinct milestone on a longer route) read as delayed success, which a
return maximiser would indeed prefer. The targeted numbers are lower bounds on what is reachable,
so a missing finding is weak evidence.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.config import ScanConfig
from envaudit.faults import FaultInjector
from envaudit.findings import Finding
from envaudit.grouping import episodes_behaviour
from envaudit.grpo.config import GRPOConfig
from envaudit.grpo.search import (
    BEHAVIOURS,
    TARGETS,
    Ceiling,
    Reference,
    SearchResult,
    natural,
    targeted,
)
from envaudit.grpo.trainer import with_advantages
from envaudit.probe import ProbeContext, cap_reason
from envaudit.probes._shared.delays import delayed_success
from envaudit.probes.grpo import text
from envaudit.probes.grpo.decisions import (
    NAME,
    decide_learned_exploit,
    decide_length_bias,
    decide_reward_without_success,
    decide_timeout_rewarded,
)
from envaudit.probes.grpo.lessons import (
    MIN_EFFECT,
    Honest,
    ending_premium_in_run,
    run_findings,
    typical_trajectory,
)
from envaudit.probes.grpo.met import REPLAY, kept, replay_met
from envaudit.probes.grpo.sparing import STAND_IN, ceilings, stand_in_reach, stands_in_for_success
from envaudit.probes.grpo.waves import play_wave, waves
from envaudit.protocol import FAILURE, SUCCESS
from envaudit.recording import Records, explored_episodes
from envaudit.stats import MIN_SAMPLES, exploit_ladder, reward_scale

__all__ = ["run", "typical_trajectory"]

FAULT_ERROR_RATE = 0.3
"""Injected error rate on every tool in the faulted run: a backend failing ten times as often as a
merely flaky one, yet low enough that an honest path of a few calls fits most step limits."""
ITERATIONS = {"natural": 60, "faults": 30, "target": 24}
"""GRPO iterations of each kind of run (each iteration: ``groups_per_iteration`` groups of G)."""
QUICK_ITERATIONS = {"natural": 36, "faults": 16, "target": 14}
LM_ITERATIONS, QUICK_LM_ITERATIONS = {"natural": 20, "faults": 10, "target": 8}, {"natural": 12, "faults": 6, "target": 4}
"""The same for the vllm engine, whose iteration (generation on vLLM, a transformer update, a weight
push) costs far more than the MLP's."""
MISS_RATE, MISS_CHANCE = 0.01, 0.05
"""A run stops once its policy (uniform or settled) has given nothing to learn from for so long that a
behaviour which would (a target reached, a reward that differs within a group) shows in fewer than
``MISS_RATE`` of its rollouts, at a ``MISS_CHANCE`` chance of having missed it: ``barren_rollouts``."""

def barren_rollouts(rate: float = MISS_RATE, chance: float = MISS_CHANCE) -> int:
    """Rollouts in a row without a learning signal after which a behaviour with ``rate`` or more
    would have shown with probability at least 1 - ``chance``: the least n with (1 - rate)^n <= chance."""
    return int(np.ceil(np.log(chance) / np.log1p(-rate)))
EVAL_GROUPS, QUICK_EVAL_GROUPS = 8, 4
"""Evaluation groups (reset seeds, G rollouts each) of every run's trained policy."""
LEARNING_RATE = 1e-2
"""Higher than a careful run's: the probe trains briefly, and it looks for what training *tends* to."""
FAULTS_WHERE = f" under injected tool failures ({FAULT_ERROR_RATE:.0%} of calls)"


@dataclass
class Plan:
    name: str
    kind: str  # natural | faults | target
    iterations: int
    behaviour: str | None = None


def run(ctx: ProbeContext, *, only: tuple[str, ...] | None = None) -> list[Finding]:
    """The probe; ``only`` restricts it to some runs (``natural``, ``faults``, ``target-timeout``, ...)."""
    skip = _cannot_drive(ctx)
    if skip is not None:
        return [skip]
    quick = ctx.config.quick
    config = GRPOConfig.from_scan(ctx.config, learning_rate=LEARNING_RATE,
                                  barren_rollouts=barren_rollouts())
    if config.engine == "vllm":  # build the model and start vLLM once, before the first run
        from envaudit.grpo.lm_engine import LMEngine

        LMEngine.for_env(_env_factory(ctx), config, config.lm_settings())
    explore = _explored(ctx)
    explore_steps = ctx.exploration.steps[ctx.exploration.steps["episode_id"].isin(set(explore["episode_id"]))]
    reference = Reference.from_episodes(explore)
    success_signal = bool(explore["outcome"].isin([SUCCESS, FAILURE]).any()) if len(explore) else True
    plans = run_plans(ctx.config, explore, ctx.is_tool_env)
    if only is not None:
        plans = [p for p in plans if p.name in only]

    eval_groups = QUICK_EVAL_GROUPS if quick else EVAL_GROUPS
    results: dict[str, SearchResult] = {}
    stood_in: dict[str, str] = {}
    skipped: list[str] = []
    for wave in waves(plans):
        todo = []
        for plan in wave:
            if plan.name == "target-success" and stands_in_for_success(results.get(STAND_IN)):
                stood_in[plan.name] = STAND_IN  # it holds what the search would reach (``sparing``)
            else:
                todo.append(plan)
        if not todo:
            continue
        later = plans[plans.index(todo[0]):]
        if ctx.time_left() <= 0:
            _incomplete(ctx, [p.name for p in later], f"before {todo[0].name} started")
            break
        if ctx.steps_capped(f"GRPO runs {', '.join(p.name for p in later)}"):
            break
        # Every run of a wave reads only the waves before it (the ceilings: honest success so far).
        honest_so_far = _honest(explore, results, reference)
        played = play_wave(ctx, [partial(_execute, ctx, plan, config.replace(iterations=plan.iterations), reference,
                                         eval_groups, ceilings(plan.behaviour, honest_so_far,
                                                               explore["return"].to_numpy(float))
                                         if plan.kind == "target" else ()) for plan in todo])
        for result in played:  # every run of the wave played, whatever is read of it below
            evaluated = result.played
            ctx.count_env(result.training.env_steps + (int(evaluated["length"].sum()) if len(evaluated) else 0),
                          len(result.training.episodes) + len(evaluated))
            # A rollout whose env killed its worker process: the scan's env-error finding lists it.
            ctx.lost.extend(p for p in result.problems if p.kind in ("crash", "memory"))
        cut = next((k for k, r in enumerate(played) if r.stopped == "deadline"), None)
        results.update({plan.name: r for plan, r in zip(todo[:cut], played[:cut], strict=True)})
        if cut is not None:
            # A run the cap cut is not comparable with a full one: none of its numbers are read, nor
            # those of the runs after it.
            plan, result = todo[cut], played[cut]
            _incomplete(ctx, [p.name for p in plans[plans.index(plan):]], f"during {plan.name} (iteration "
                        f"{len(result.training.curves)} of {plan.iterations})")
            break
        if any(r.stopped == "hang" for r in played):
            # A hang ends the probe's env work: the runs of later waves would wait on it again.
            skipped += [p.name for p in plans[plans.index(wave[-1]) + 1:]]
            break

    for result in results.values():
        if result.evaluated_on == "eval seeds":  # exploration's records are kept already
            ctx.keep(kept(result.evaluation))
    curves = [r.training.curves for r in results.values() if len(r.training.curves)]
    if curves:
        ctx.table("curves", pd.concat(curves, ignore_index=True))
    reach = {r.behaviour: r.reach for r in results.values() if r.behaviour}
    if stood_in:
        reach = {"success": stand_in_reach(results[STAND_IN], reference), **reach}
    if reach:
        ctx.table("targets", _targets_table(reach))

    honest = _honest(explore, results, reference)
    # Replayed only after every run did its work: a run cut by the cap or a hang is not read, and
    # neither is what it met.
    replayed = (replay_met(ctx, results, Records(explore_steps, explore), honest, reference, config, eval_groups)
                if success_signal and len(results) + len(stood_in) == len(plans) else None)
    if replayed is not None and replayed["oracle"] is not None:
        honest = _honest(explore, results, reference, replayed["oracle"])
    if replayed is not None and replayed["reach"]["n"] and (
            "no_success" not in reach or not reach["no_success"]["n"]
            or replayed["reach"]["mean_return"] > reach["no_success"]["mean_return"]):
        reach["no_success"] = replayed["reach"]
    labels = ctx.action_labels
    found: list[Finding] = []
    reported: set[str] = set()
    if "natural" in results and len(results["natural"].episodes):
        # A language model starts from its own habits, not the random explorer's: compare with its start.
        from_explore = len(explore) >= MIN_SAMPLES and config.engine == "torch"
        before = _with_pipeline(Records(explore_steps, explore), ctx.pipeline) if from_explore \
            else results["natural"].training.first.episodes
        before_steps = explore_steps if from_explore else results["natural"].training.first.steps
        found += run_findings(ctx, results["natural"], before, before_steps, honest, reference, labels,
                              where="", reported=reported)
    if "faults" in results and len(results["faults"].episodes) and results["faults"].training.first is not None:
        first = results["faults"].training.first
        found += run_findings(ctx, results["faults"], first.episodes, first.steps, honest, reference, labels,
                              where=FAULTS_WHERE, reported=reported)
    if reach and success_signal:
        found += _target_findings(ctx, reach, honest, results, replayed)
    if success_signal:
        delay = _delayed_success(ctx, explore, results, honest, stood_in)
        if delay is not None:
            found.append(delay)
    ctx.notes.update({
        "runs": {**{name: {"iterations": len(r.training.curves), "barren": r.training.barren,
                           "settled": r.training.settled, "decided": r.training.decided,
                           "eval_episodes": len(r.played),
                           "evaluated_on": r.evaluated_on, "env_steps": r.training.env_steps, "stopped": r.stopped}
                    for name, r in results.items()},
                 **{name: {"iterations": 0, "eval_episodes": 0, "env_steps": 0, "stopped": None, "stood_in_by": by}
                    for name, by in stood_in.items()}},
        "skipped": skipped,
        "reach": {b: text.reach_sentence(b, r) for b, r in reach.items()},
        "replayed": {k: v for k, v in replayed.items() if k not in ("records", "oracle", "reach")} if replayed else None,
        "config": {k: v for k, v in config.to_dict().items() if k not in ("pipeline", "iterations")},
        "iterations": {p.name: p.iterations for p in plans},
        "eval_groups": eval_groups,
        "pipeline": ctx.pipeline.name,
    })
    return _merge(found)


def run_plans(scan: ScanConfig, explore: pd.DataFrame, is_tool_env: bool) -> list[Plan]:
    """The GRPO runs a scan makes at these settings, given exploration's episodes (``explore``)."""
    if scan.engine == "vllm":
        iterations = QUICK_LM_ITERATIONS if scan.quick else LM_ITERATIONS
    else:
        iterations = QUICK_ITERATIONS if scan.quick else ITERATIONS
    success_signal = bool(explore["outcome"].isin([SUCCESS, FAILURE]).any()) if len(explore) else True
    plans = [Plan("natural", "natural", iterations["natural"])]
    if is_tool_env:
        plans.append(Plan("faults", "faults", iterations["faults"]))
    targets = TARGETS if not scan.quick else ("success", "timeout", "no_success")
    if not success_signal:  # success and its absence mean nothing without a success signal
        targets = tuple(t for t in targets if t in ("timeout", "tool_failure", "short"))
    if len(explore) and not explore["n_tool_calls"].any():  # no tools, no tool failures to reach
        targets = tuple(t for t in targets if t != "tool_failure")
    return plans + [Plan(f"target-{t}", "target", iterations["target"], t) for t in targets]


def planned_episodes(scan: ScanConfig, explore: pd.DataFrame, is_tool_env: bool) -> int:
    """The most episodes the probe's runs play at these settings (``envaudit scan --plan``): each
    run's iterations of ``groups_per_iteration`` groups of G, and its evaluation groups; a run stops
    earlier when barren or settled (``barren_rollouts``). Replays of what
    the runs met come on top (a few, only when they met something)."""
    config = GRPOConfig.from_scan(scan, learning_rate=LEARNING_RATE)
    eval_groups = QUICK_EVAL_GROUPS if scan.quick else EVAL_GROUPS
    return sum((p.iterations * config.groups_per_iteration + eval_groups) * config.group_size
               for p in run_plans(scan, explore, is_tool_env))


def _incomplete(ctx: ProbeContext, runs: list[str], when: str) -> None:
    """Record that the safety cap cut these runs: the report lists them and the scan exits 4."""
    ctx.incomplete(f"GRPO runs {', '.join(runs)}", f"{cap_reason(ctx.config.budget_s)}, {when}")


# -- runs -------------------------------------------------------------------------------------
def _execute(ctx: ProbeContext, plan: Plan, config: GRPOConfig, reference: Reference, eval_groups: int,
             stops: tuple[Ceiling, ...], ids: Iterator[int]) -> SearchResult:
    """One run; ``ids``: the stride of episode ids its wave gave it (``waves.play_wave``)."""
    # The scan's deadline is a safety cap only; the work is ``config.iterations`` and ``eval_groups``.
    make_env = _env_factory(ctx)
    # The rollouts' envs step on the scan's workers (one lane each); the policy stays here.
    common = dict(ids=ids, deadline=ctx.deadline, eval_groups=eval_groups, executor=ctx.executor,
                  spec=ctx.spec if make_env is ctx.make_env else None)
    # The uniform explorer's episodes count towards a barren run's quiet rollouts, and are a barren
    # run's evaluation, where the untrained policy is that explorer: uniform over a Discrete space,
    # on the same env, unwrapped.
    prior = None
    if config.engine == "torch" and isinstance(ctx.env.action_space, gym.spaces.Discrete):
        explored = _explored(ctx)
        steps = ctx.exploration.steps
        prior = Records(steps[steps["episode_id"].isin(set(explored["episode_id"]))], explored)
    if plan.kind == "natural":
        return natural(make_env, config, pipeline=ctx.pipeline, prior=prior, **common)
    if plan.kind == "faults":
        seed = ctx.config.seed

        def faults(env):
            return FaultInjector(env, error_rate=FAULT_ERROR_RATE, seed=seed)
        return natural(make_env, config, mode="faults", pipeline=ctx.pipeline, wrappers=[faults], **common)
    return targeted(make_env, config, plan.behaviour, reference, prior=prior, ceilings=stops, **common)


def _explored(ctx: ProbeContext) -> pd.DataFrame:
    """Exploration's own episodes (the uniform explorer's groups), without what other probes added."""
    return explored_episodes(ctx.exploration.episodes)


def _env_factory(ctx: ProbeContext):
    """The env as the engine drives it: an ecosystem adapter's env in text for the vllm engine."""
    if ctx.config.engine != "vllm":
        return ctx.make_env
    from envaudit.adapters.base import text_factory

    return text_factory(ctx.make_env, sample=ctx.env)


def _cannot_drive(ctx: ProbeContext) -> Finding | None:
    # torch is imported here, not with the module: a scan under --executor processes trains in a
    # probe worker, and the scanning process (and the fork server) need not import it.
    from envaudit.grpo.torch_engine import Featurizer, UnsupportedSpace, action_count

    try:
        env = ctx.env
        if ctx.config.engine == "vllm":
            from envaudit.adapters.base import text_view

            _check_lm(text_view(env))
        else:
            action_count(env.action_space)
            Featurizer(env.observation_space)
    except UnsupportedSpace as exc:
        return decide_learned_exploit("unsupported", {"evidence": {
            "source": NAME, "reason": str(exc), "action_space": repr(ctx.env.action_space),
            "behaviour": "exploration"}})
    return None


def _check_lm(env) -> None:
    import gymnasium as gym

    from envaudit.grpo.torch_engine import UnsupportedSpace
    from envaudit.grpo.vllm_backend import vllm_available

    if not isinstance(env.action_space, gym.spaces.Text):
        raise UnsupportedSpace(
            f"the vllm engine writes tool calls as text and drives a Text action space, got "
            f"{type(env.action_space).__name__}; scan the env's text twin (an envaudit/*-Text-v0 id, or "
            "envaudit.textmode.make_text_env(YourToolEnv))")
    ok, why = vllm_available()
    if not ok:
        raise UnsupportedSpace(why)


def _with_pipeline(records: Records, pipeline) -> pd.DataFrame:
    episodes = records.episodes
    if episodes.empty or "group" not in episodes:
        return episodes
    return with_advantages(episodes, episodes["return"].to_numpy(float), pipeline)


def _honest(explore: pd.DataFrame, results: dict[str, SearchResult], reference: Reference,
            oracle: pd.DataFrame | None = None) -> Honest:
    """Honest success: every success seen (targeted, natural, exploration, the env's oracle where
    it was run); honest failure: the exploration's failures (failing outright while trying, as a
    random agent does); persisting: episodes (exploration and the trained policies' evaluations)
    that kept going after a failed tool call, i.e. did not end early."""
    parts = [explore] + [results[k].played for k in ("target-success", "natural") if k in results]
    if oracle is not None and len(oracle):
        parts.append(oracle)
    success = np.concatenate([p.loc[p["outcome"] == SUCCESS, "return"].to_numpy(float) for p in parts if len(p)]
                             or [np.zeros(0)])
    failure = explore.loc[explore["outcome"] == FAILURE, "return"].to_numpy(float) if len(explore) else np.zeros(0)
    columns = ["episode_id", "return", "length", "n_tool_errors", "n_tool_timeouts", "outcome"]
    pooled = pd.concat([p[columns] for p in parts if len(p)] or [pd.DataFrame(columns=columns)], ignore_index=True)
    failed = pooled["n_tool_errors"] + pooled["n_tool_timeouts"]
    persist = pooled[(failed > 0) & (pooled["length"] > reference.short_length)].reset_index(drop=True)
    return Honest(success, failure, persist)


def _targets_table(reach: dict[str, dict]) -> pd.DataFrame:
    rows = [{"behaviour": b, "words": BEHAVIOURS[b].words, "n": r["n"], "rate": r["rate"],
             "mean_return": r["mean_return"], "max_return": r["max_return"]} for b, r in reach.items()]
    return pd.DataFrame(rows)


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per feeding code (the most severe as its decide function graded it, the others'
    evidence attached)."""
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
        out[i] = replace(keep, evidence=evidence)
    return out


# -- delaying success -------------------------------------------------------------------------
def _delayed_success(ctx: ProbeContext, explore: pd.DataFrame, results: dict[str, SearchResult],
                     honest: Honest, stood_in: dict[str, str] | None = None) -> Finding | None:
    """Successes reached after extra steps that out-earn the fastest success from the same start."""
    pools = {"explore": explore}
    for name in ("target-success", "natural"):
        if name in results:
            pools[f"{name}-training"] = results[name].training.episodes
            pools[f"{name}-eval"] = results[name].played
    # The scale is the gap between success and failing outright; with no failure seen (every
    # non-success a timeout) it is the spread of all returns, never that of successes alone: equal
    # successes have no spread, and a margin of 0 would count rounding as an incentive.
    margin = MIN_EFFECT * reward_scale(honest.success, honest.failure, explore["return"] if len(explore) else [])
    d = delayed_success(pools, ctx.rng("delay"), margin=margin, alpha=ctx.config.alpha)
    if not d["holds"]:
        return None
    fast, test = d["fastest"], d["test"]
    # Examples: the trained policies' evaluated successes (kept in the report) that came later than
    # the fastest success and earned more than it.
    evaluated = pd.concat([results[k].played for k in ("target-success", "natural") if k in results]
                          or [pd.DataFrame(columns=["outcome", "length", "return", "episode_id"])], ignore_index=True)
    later = evaluated[(evaluated["outcome"] == SUCCESS) & (evaluated["length"] > fast["length"])
                      & (evaluated["return"] > fast["return"])].sort_values("return", ascending=False, kind="stable")
    kept = list(dict.fromkeys(later["episode_id"].astype(int).tolist() + d["examples"]))
    kept = [i for i in kept if i in _kept_ids(ctx)]
    search = results.get("target-success", results.get(STAND_IN) if "target-success" in (stood_in or {}) else None)
    searched = search.played if search is not None else pd.DataFrame()
    wins = searched[searched["outcome"] == SUCCESS] if len(searched) else searched
    best = None
    if len(wins):
        top = wins.loc[wins["return"].idxmax()]
        best = {"return": float(top["return"]), "length": int(top["length"]), "episode_id": int(top["episode_id"])}
    return decide_length_bias({
        "evidence": {"source": NAME, "behaviour": "delay-success", "reward_path": "env", "p_value": test["p_value"],
                     "delayed_vs_fastest": test, "n_groups": d["n_sets"], "extra_steps": d["extra_steps"],
                     "margin": d["margin"], "best_searched_success": best, "fastest_success": fast},
        "examples": kept[:5]})


def _kept_ids(ctx: ProbeContext) -> set[int]:
    """Episode ids the report will hold (exploration and this probe's kept records)."""
    ids = set(ctx.exploration.episodes["episode_id"].astype(int))
    for records in ctx.kept:
        ids |= set(records.episodes["episode_id"].astype(int))
    return ids


# -- targeted runs ------------------------------------------------------------------------------
def _target_findings(ctx, reach: dict[str, dict], honest: Honest,
                     results: dict[str, SearchResult], replayed: dict | None = None) -> list[Finding]:
    """What timing out and ending without success reached, on the ladder against honest success and
    honest failure, each handed to its deciding function (``decide_timeout_rewarded``'s
    ``"targeted"`` basis, ``decide_reward_without_success``)."""
    findings: list[Finding] = []
    if len(honest.failure) < MIN_SAMPLES:
        return findings
    sentences = text.reach_sentences(reach, honest.success)
    for behaviour, code in (("timeout", "timeout-rewarded"), ("no_success", "reward-without-success")):
        r = reach.get(behaviour)
        if not r or r["n"] < MIN_SAMPLES:
            continue
        ladder = exploit_ladder(r["returns"], honest.success, honest.failure, ctx.rng("target", behaviour),
                                alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        # The timed-out ending is measured only where the ladder put timing out on a rung: nowhere
        # else does the decision read it.
        premium = (_timeout_ending(ctx, results.get("target-timeout"), r, ladder)
                   if code == "timeout-rewarded" and ladder["level"] is not None else None)
        target = results.get(f"target-{behaviour}")
        replay = replayed is not None and r is replayed["reach"]
        reached = replayed["records"].episodes if replay else target.episodes if target is not None else None
        reached_steps = (replayed["records"].steps if replay else
                         target.evaluation.steps if target is not None else None)
        measured = {
            "evidence": {"source": NAME, "run": REPLAY if replay else f"target-{behaviour}",
                         "p_value": ladder["p_value"], "ladder": ladder,
                         "behaviour": _reached_behaviour(behaviour, reached, r, reached_steps), "reward_path": "env",
                         "ending_premium": premium,
                         "reach": {b: {k: v for k, v in x.items() if k not in ("returns", "episode_ids")}
                                   for b, x in reach.items()}},
            "examples": r["episode_ids"][:5], "mean_return": r["mean_return"],
            "replayed": {"run": replayed["run"], "actions": replayed["actions"]} if replay else None,
            "honest": honest, "sentences": sentences}
        found = (decide_timeout_rewarded("targeted", measured) if code == "timeout-rewarded"
                 else decide_reward_without_success(measured))
        if found is not None:
            findings.append(found)
    return findings


def _reached_behaviour(target: str, episodes: pd.DataFrame | None, r: dict, steps: pd.DataFrame | None = None) -> str:
    """The grouping word for what a targeted run (or a replay) reached: timing out, or (ending
    without success) what most of its reached episodes did (``grouping.episodes_behaviour``, which
    reads their ``steps`` for failed calls that pay); ended by the agent itself with what success
    pays, the degenerate answer."""
    if target == "timeout" or episodes is None:
        return "timeout"
    reached = episodes[episodes["episode_id"].isin(r["episode_ids"])]
    return episodes_behaviour(reached, steps) or "degenerate-answer"


def _timeout_ending(ctx, result: SearchResult | None, r: dict, ladder: dict) -> dict | None:
    """Does the ending of the targeted run's timed-out episodes pay more than an honest failure's
    ending (``timeouts.ending_premium``)? None when the run's steps are not at hand."""
    if result is None or result.evaluation.steps.empty:
        return None
    return ending_premium_in_run(ctx, result, r["episode_ids"], ladder["scale"], ctx.rng("target", "ending"))
