"""Probe ``length`` → ``length-bias``: does the return depend on episode length beyond success?

Incentive: a positive per-step reward pays an agent to drag episodes out (step farming: stall,
repeat a harmless action) instead of finishing; a brevity bonus pays it to stop at once, whether
or not the task is done. A per-step *cost* also shortens episodes, which is usually intended.

Signal (info protocol only): an OLS regression of exploration returns on episode length with
success, timing out, erroring and the numbers of tool errors and tool timeouts held fixed
(bootstrap CI per coefficient), plus the length slope within each outcome class. A length effect
alone is a correlation and never more than ``info``; severity comes from scripted policies on
fresh seeds.

- Positive effect: the long non-success strategies (stall = random actions that never end the
  episode, and repeating each such action) are screened on a few seeds, the best is confirmed on
  new ones and placed on DESIGN.md's ladder: ``fail`` when it earns at least as much as honest
  success (exploration's successes, plus the env's ``oracle()`` policy when it has one), ``warn``
  when it clearly beats honest failure, the alternative it displaces. Either level needs the
  stall's *marginal* value to be positive (``idle_value``: the same prefix idled and then ended
  earns more than ended at once, by ``stall.stall_marginal``'s replays; the idle tail of its
  episodes, ``delay.marginal_stall``, where the env cannot be replayed that way); a long
  episode that earns more only by the progress it made on the way (shaped rewards, partial
  progress, which a random staller keeps making late) is ``info``.
- Delaying success (any env with successes to replay): ``delay.delay_success`` replays
  successes with extra non-ending actions inserted before the final one; when that earns more
  than succeeding at once, ``fail``. Where step farming is already reported, the delay result is
  folded into that finding (one reward path, one finding).
- Negative effect: quitting at once with each episode-ending action; ``fail`` only when quitting
  earns as much as succeeding (a brevity bonus), else ``info`` (a step cost, fine if intended).
  Where the slope hides it, the endings whose own pay fades with the step they are taken at
  (``envaudit.probes.length.fading``) are quit with at once the same way.
- Every step pays the same reward: the return is a multiple of length, ``info`` ("return equals
  length; if that is intended, ignore").

This module measures; every kind above is graded in one place, ``decisions.decide_length_bias``
(``envaudit.probes.length.decide_length_bias``), which chooses the severity and makes the finding.

Known false positives: tasks whose honest solutions are genuinely longer when they pay more
(the regression holds success fixed, not task difficulty); a few strategies cannot cover every
way to drag an episode out, so a farming env whose farming needs a specific action sequence may
stay at ``info``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd

from envaudit.findings import Finding
from envaudit.policies import RepeatPolicy, StallPolicy
from envaudit.probe import ProbeContext
from envaudit.probes._shared.endings import (
    honest_successes,
    quoted,
    returns_of,
    sample_size,
    split_enders,
    typical_step_pay,
)
from envaudit.probes._shared.stall import stall_marginal
from envaudit.probes.length.cycles import cycle_farming
from envaudit.probes.length.decisions import decide_length_bias
from envaudit.probes.length.delay import (
    best_paying,
    delay_success,
    marginal_stall,
    searched_successes,
)
from envaudit.probes.length.fading import fading_enders
from envaudit.protocol import ERROR, FAILURE, SUCCESS, TIMEOUT
from envaudit.rollout import Policy
from envaudit.stats import MIN_SAMPLES, exploit_ladder, ols_bootstrap, reward_scale

MIN_EFFECT = 0.1
MAX_STRATEGIES = 6
"""At most this many scripted strategies per direction (stall plus the first repeat-actions)."""


def constant_step_reward(steps: pd.DataFrame) -> float | None:
    """The reward every step pays, when every recorded step pays the same finite amount."""
    r = steps["reward"].to_numpy(float)
    if len(r) == 0 or not np.all(np.isfinite(r)) or np.ptp(r) != 0:
        return None
    return float(r[0])


def regress(episodes: pd.DataFrame, rng: np.random.Generator) -> dict:
    """Return on length with outcome and tool failures held fixed, and the slope per outcome."""
    y = episodes["return"].to_numpy(float)
    outcome = episodes["outcome"]
    columns = {
        "length": episodes["length"].to_numpy(float),
        "success": (outcome == SUCCESS).to_numpy(float),
        "timed_out": (outcome == TIMEOUT).to_numpy(float),
        "errored": (outcome == ERROR).to_numpy(float),
        "tool_errors": episodes["n_tool_errors"].to_numpy(float),
        "tool_timeouts": episodes["n_tool_timeouts"].to_numpy(float),
    }
    fit = ols_bootstrap(y, columns, rng)
    strata = {}
    for cls, group in episodes.groupby("outcome"):
        if len(group) >= MIN_SAMPLES and group["length"].nunique() > 1:
            sub = ols_bootstrap(group["return"].to_numpy(float), {"length": group["length"].to_numpy(float)},
                                rng, n_boot=500)
            if "length" in sub["coef"]:
                strata[str(cls)] = {**sub["coef"]["length"], "n": sub["n"]}
    fit["within_outcome"] = strata
    return fit


def _run_strategies(ctx: ProbeContext, policies: list[Policy], tag: str) -> tuple[Policy | None, dict]:
    """Pick the policy whose non-success episodes earn most on a few seeds, confirm it on new ones."""
    if not policies or ctx.over_cap(f"{tag} strategies"):
        return None, {}
    screen: dict[str, float] = {}
    n_screen = max(2, ctx.config.scaled(8))
    for policy in policies:
        if ctx.over_cap(f"{tag} strategy {policy.name!r} and those after it"):
            break
        eps = ctx.run(policy, ctx.seeds(n_screen, tag, "screen", policy.name)).records.episodes
        rest = eps[eps["outcome"] != SUCCESS]
        if len(rest):
            screen[policy.name] = float(rest["return"].mean())
    if not screen:
        return None, {}
    best = next(p for p in policies if p.name == max(screen, key=screen.get))
    result = ctx.run(best, ctx.seeds(sample_size(ctx, 32), tag, "confirm", best.name))
    ctx.keep(result.records)
    return best, {"screen_mean_non_success": screen, "episodes": result.records.episodes,
                  "steps": result.records.steps, "records": result.records}


def idle_value(ctx: ProbeContext, run: dict, long_rest: pd.DataFrame, scale: float) -> dict:
    """Whether the strategy's extra steps pay with progress held fixed (DESIGN.md: stalling is judged
    by its marginal value). Where the env can be replayed with a discrete action space,
    ``stall.stall_marginal`` replays each stalled episode's first half on its own seed, ended honestly
    at once against idled (its last action repeated) and then ended the same way: only what the idle
    steps add counts, so progress a random staller keeps making late (shaped or partial credit) is
    not read as farming. Elsewhere the tail of the strategy's own episodes stands in for it."""
    records = run.get("records")
    if records is not None and isinstance(getattr(ctx.env, "action_space", None), gym.spaces.Discrete):
        replay = stall_marginal(ctx, records, scale, min_effect=MIN_EFFECT, tag="length")
        idle = replay.get("idle_steps_pay")
        if idle is not None and not idle.get("underpowered", True):
            steps = replay.get("mean_idle_steps") or 0.0
            mean = idle["mean"]
            return {"method": "replay: same prefix ended at once against idled, then ended the same way",
                    "pays": bool(idle["pays"]), "mean_tail_pay": mean, "mean_tail_steps": steps,
                    "pay_per_tail_step": mean / steps if steps else 0.0, "p_value": idle["p_value"],
                    "replay": {k: v for k, v in replay.items() if k != "examples"}}
    tail = marginal_stall(long_rest, run["steps"], scale, alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
    return {**tail, "method": "tail: second half of the strategy's own episodes"}


def _farming(ctx: ProbeContext, fit: dict, success, failure, rng) -> Finding:
    """The best long non-success strategy, on the ladder against honest success and failure, with
    the marginal value of its idle steps; ``decide_length_bias("farming")`` grades it."""
    coef = fit["coef"]["length"]
    enders, others, _ = split_enders(ctx.exploration.steps)
    policies: list[Policy] = []
    if others:
        policies.append(StallPolicy(others, avoided=quoted(ctx, enders)) if enders else StallPolicy(others))
        # The actions that paid most in exploration are repeated first: with more non-ending actions
        # than strategies, catalogue order would leave a paying one untried.
        policies += [RepeatPolicy.repeating(a, ctx.describe_action(a))
                     for a in best_paying(ctx, others)[: MAX_STRATEGIES - 1]]
    best, run = _run_strategies(ctx, policies, "long")
    evidence = {"length_effect": coef, "regression": fit, "n": fit["n"], "min_samples": MIN_SAMPLES,
                "p_value": coef["p_value"]}
    level, examples = None, []
    if best is not None:
        eps = run["episodes"]
        long_rest = eps[eps["outcome"] != SUCCESS]
        verdict = exploit_ladder(long_rest["return"].to_numpy(float), success, failure, rng,
                                 alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        evidence.update(policy=best.describe(), mean_strategy=float(long_rest["return"].mean()) if len(long_rest) else None,
                        mean_strategy_length=float(long_rest["length"].mean()) if len(long_rest) else None,
                        mean_success=float(np.mean(success)) if len(success) else None,
                        mean_failure=float(np.mean(failure)) if len(failure) else None,
                        screen=run["screen_mean_non_success"], test=verdict)
        examples = [int(e) for e in long_rest.sort_values("return", ascending=False)["episode_id"][:5]]
        # Stalling is judged by what the extra steps add once progress stops, not by the average
        # pay per step of a long episode: shaped progress is kept, only a paying tail is farming.
        evidence["marginal"] = idle_value(ctx, run, long_rest, reward_scale(success, failure, long_rest["return"]))
        level = verdict["level"]
    (finding,) = decide_length_bias("farming", {"evidence": evidence, "examples": examples, "level": level})
    return finding


def _brevity(ctx: ProbeContext, fit: dict, success, failure, rng, *, slope: bool = True,
             enders: list | None = None) -> Finding | None:
    """Quitting at once with each ending action (``enders``, default all), on the ladder;
    ``decide_length_bias("brevity")`` grades it. ``slope``: the regression found shorter episodes
    earn more (else only a brevity bonus is worth a finding: None otherwise)."""
    coef = fit["coef"]["length"]
    if enders is None:
        enders, _, _ = split_enders(ctx.exploration.steps)
    policies: list[Policy] = [RepeatPolicy.repeating(a, ctx.describe_action(a)) for a in enders[:MAX_STRATEGIES]]
    best, run = _run_strategies(ctx, policies, "quit")
    if best is not None:
        # Honest failure, the alternative quitting displaces, is failing some other way: failures
        # that ended with this very action are the behaviour under test (a brevity bonus paid on
        # them would lift the bar the bonus is measured against).
        action = enders[[p.name for p in policies].index(best.name)]
        failure = _failures_not_ending_with(ctx, action, failure)
    evidence = {"length_effect": coef, "regression": fit, "n": fit["n"], "min_samples": MIN_SAMPLES,
                "p_value": coef["p_value"]}
    measured: dict = {"evidence": evidence, "examples": [], "level": None, "slope": slope}
    if best is not None:
        eps = run["episodes"]
        # Quitting is ending the episode as a failure; an ending on a tool timeout or error is
        # another behaviour (and another probe's finding) even when the same action led to it.
        quit_rest = eps[eps["outcome"] == FAILURE]
        verdict = exploit_ladder(quit_rest["return"].to_numpy(float), success, failure, rng,
                                 alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        if verdict["level"] == "above_alternative" and len(success) < MIN_SAMPLES:
            # Quitting beats failing, and too few honest successes were seen to place it against
            # success: random play on fresh seeds tops them up (a bounded number of episodes).
            success, _ = honest_successes(ctx, target=MIN_SAMPLES)
            if len(success) < MIN_SAMPLES:
                # Random play did not find them either (a long task, no oracle): search for them.
                searched = [s.ret for s in searched_successes(ctx, MIN_SAMPLES)]
                success = np.concatenate([success, searched])
            verdict = exploit_ladder(quit_rest["return"].to_numpy(float), success, failure, rng,
                                     alpha=ctx.config.alpha, min_effect=MIN_EFFECT)
        evidence.update(policy=best.describe(), mean_strategy=float(quit_rest["return"].mean()) if len(quit_rest) else None,
                        mean_success=float(np.mean(success)) if len(success) else None, test=verdict)
        measured.update(level=verdict["level"],
                        examples=[int(e) for e in quit_rest.sort_values("return", ascending=False)["episode_id"][:5]])
    if slope:
        # The regression slope mixes the usual step cost with rarer penalties (Taxi: -1 per move, -10
        # per illegal pickup), so say what a typical step pays and what the slope adds up to.
        typical = typical_step_pay(ctx.exploration.steps)
        measured["typical_step_reward"] = coef["estimate"] if typical is None else typical
    found = decide_length_bias("brevity", measured)
    return found[0] if found else None


def _failures_not_ending_with(ctx: ProbeContext, action, failure: np.ndarray) -> np.ndarray:
    """Exploration's failure returns without the episodes whose last action was ``action``
    (all of ``failure`` when fewer than ``MIN_SAMPLES`` are left)."""
    eps, steps = ctx.exploration.episodes, ctx.exploration.steps
    last = steps.groupby("episode_id")["action"].last()
    ended_by = eps["episode_id"].map(last)
    other = eps.loc[(eps["outcome"] == FAILURE) & (ended_by != action), "return"].to_numpy(float)
    return other if len(other) >= MIN_SAMPLES else failure


def _run(ctx: ProbeContext, looped: list) -> list[Finding]:
    eps, steps = ctx.exploration.episodes, ctx.exploration.steps
    if len(eps) < MIN_SAMPLES:
        ctx.notes["skipped"] = f"only {len(eps)} exploration episodes (need {MIN_SAMPLES})"
        return []
    c = constant_step_reward(steps)
    if c is not None:
        return decide_length_bias("constant", {"evidence": {
            "reward_per_step": c, "n_steps": int(len(steps)), "n": int(len(eps)),
            "behaviour": "stall" if c > 0 else "quit"}})
    rng = ctx.rng("regression")
    failure = returns_of(eps, FAILURE)
    success, sources = honest_successes(ctx)
    # An action cycle that pays lap after lap (the boat-race loop) is judged from the same states.
    cycle = cycle_farming(ctx, success, "honest successes found (exploration, the oracle)")
    if cycle is not None:
        ctx.notes["cycle"] = {k: v for k, v in cycle.items() if k != "examples"}
        looped += decide_length_bias("cycle", cycle)
    # Delaying a success needs successes to delay, not successes in random play: where neither
    # exploration nor an oracle shows one, the check searches for them (``search``).
    enders, others, _ = split_enders(steps)
    # An action that sometimes ends episodes (a wrong answer that ends only at the last attempt)
    # is still a way to delay; a replay it ends without success simply does not count.
    delayed = delay_success(ctx, others, reward_scale(success, failure, eps["return"]), ctx.rng("delay"),
                            candidates=sorted(set(enders) | set(others)))
    found = [delayed] if delayed is not None else []
    if eps["length"].nunique() == 1 and (eps["end_reason"] == "truncated").all():
        # Random play never ends the env (CliffWalking under a random walk): no length varies, so
        # there is nothing to regress; say so rather than stay silent.
        return found + decide_length_bias("unending", {"evidence": {
            "n": int(len(eps)), "length": int(eps["length"].iloc[0]), "mean_return": float(eps["return"].mean()),
            "behaviour": "exploration"}})
    fit = regress(eps, rng)
    ctx.notes["regression"] = fit
    fit["success_sources"] = sources
    coef = fit["coef"].get("length")
    if coef is None:
        return found
    significant = coef["p_value"] < ctx.config.alpha
    if significant and coef["ci"][0] > 0:
        # Farming that pays per step also pays for delaying a success: one reward path, one finding.
        return decide_length_bias("one-incentive", {"delayed": found,
                                                    "farming": _farming(ctx, fit, success, failure, rng)})
    if significant and coef["ci"][1] < 0:
        return found + [_brevity(ctx, fit, success, failure, rng)]
    # A brevity bonus hangs on one ending action and fades with the step it is taken at; among all
    # the other ways random play ends episodes it need not tilt the overall slope. So each ending
    # action whose own pay falls with the step it is taken at (``fading``) is tried at once (one
    # step an episode); only the ladder's top rung (as much as success) makes a finding here. An
    # ending that pays the same whenever it is taken is no length effect (reward without success, if any).
    fading = fading_enders(ctx, rng, success, failure, margin_share=MIN_EFFECT)
    brevity = _brevity(ctx, fit, success, failure, rng, slope=False, enders=fading) if fading else None
    found += [brevity] if brevity is not None else []
    return found


def run(ctx: ProbeContext) -> list[Finding]:
    looped: list[Finding] = []
    return _run(ctx, looped) + looped
