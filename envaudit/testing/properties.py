"""Incentive properties: plain functions that search an env for a counterexample with Hypothesis.

Each property generates *plans* (a reset seed, an action sequence, optionally an action repeated
until the episode ends, and, for ``ToolEnv``s, a fault schedule), plays them, and compares every
episode with the counterfactual that the property is about: the same trajectory without the
timeout, the same step succeeding, the same replay. The first violation is shrunk by Hypothesis
and raised as ``PropertyFailed`` (an ``AssertionError``) whose message shows the trajectory.

Plain Gymnasium envs are supported: where faults cannot be injected, the counterfactual of a
failed or timed-out tool call is another action at the same step that calls the same tool and
does not fail, and the rest of the trajectory is played unchanged. Where there is no such action,
the same actions are replayed under other reset seeds and the faulted calls are compared with
the others from the same state, statistically (``envaudit.testing.matched``). A property that
never saw its subject, or nothing to compare it with, raises ``PropertyNotExercised``.

Before the random search, ``assert_no_timeout_reward`` and ``assert_failures_not_rewarded`` play
every short plan (``explore``) and compare forced faults in pairs (``paired``): a flaw within a
few steps is then found on every run, whatever Hypothesis draws.

Options shared by every property: ``max_examples`` (default 50), ``max_steps`` (50), ``seed``
(0: the search is reproducible), ``settings`` (a ``hypothesis.settings`` to start from), ``seeds``
(reset seeds: int, list or strategy), ``faults`` (True: inject tool faults into ``ToolEnv``s) and
``tolerance`` (1e-9: reward differences at or below it are ties).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from envaudit.protocol import END_TRUNCATED, ERROR, FAILURE, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.stats import MIN_SAMPLES
from envaudit.testing.explore import Explorer
from envaudit.testing.matched import (
    ALPHA,
    EXTRA_SEEDS,
    MATCHED_SEEDS,
    TARGET_SAMPLES,
    MatchedPool,
    Verdict,
    return_from,
    step_reward,
)
from envaudit.testing.paired import failure_pairs, ordinary_step, raise_found, timeout_pairs
from envaudit.testing.search import (
    Counterexample,
    PropertyFailed,
    PropertyNotExercised,
    open_session,
    parse_options,
    render_failure,
    run_search,
    search_settings,
    target_text,
)
from envaudit.testing.strategies import fault_schedules, plans
from envaudit.testing.trajectory import EnvSession, Episode, Plan, Step


def _faults(session: EnvSession, opts, kinds: tuple[str, ...]):
    if not (opts.faults and session.injects):
        return None
    return fault_schedules(max_calls=min(session.limit, session.max_steps), kinds=kinds)


def _reward(value: float) -> str:
    return f"{value:+.4g}"


def _with_action(plan: Plan, episode: Episode, index: int, action: Any) -> Plan:
    """The plan with the action played at step ``index`` replaced; later actions unchanged."""
    if index < len(plan.actions):
        actions = episode.actions[:index] + (action,) + tuple(plan.actions[index + 1:])
    else:  # the step came from the repeated action: keep repeating it afterwards
        actions = episode.actions[:index] + (action,)
    return replace(plan, actions=actions)


def _same_tool_alternatives(session: EnvSession, plan: Plan, episode: Episode, step: Step, ok) -> list[tuple[str, Episode]]:
    """Other actions at the same step that call the same tool with a status ``ok`` accepts."""
    found = []
    for action in session.candidate_actions(seed=plan.seed or 0):
        if _equal_action(action, step.action):
            continue
        other = session.play(_with_action(plan, episode, step.index, action))
        if len(other.steps) > step.index:
            alt = other.steps[step.index]
            if alt.tool == step.tool and ok(alt.status):
                found.append((f"step {step.index} playing {alt.action_text} instead ({alt.tool} → {alt.status})", other))
    return found


def _equal_action(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:  # actions of odd types: compare them as Python values
        return a == b


# -- timeouts ----------------------------------------------------------------------------------
@dataclass
class _Seen:
    """What a search exercised: for the message of a property that could not decide."""

    cases: int = 0
    faulted: Counter = field(default_factory=Counter)  # faulted tool calls seen, by tool
    truncated: int = 0
    exact: int = 0  # faults compared with an exact counterfactual (same seed, same prefix)
    no_failure_action: int = 0  # truncations with no action that fails outright at the last step


def assert_no_timeout_reward(make_env: Any, **options: Any) -> None:
    """Assert that timing out never adds reward: no episode that times out out-earns the same
    trajectory without the timing-out step.

    First, exhaustively (``envaudit.testing.explore``): every action sequence of up to ``depth``
    steps from reset seeds ``seed``..``seed + 3``, shortest first; on a ``ToolEnv`` each plan's
    last tool call is forced to time out and, as its pair, to fail outright, with and without one
    more step after it: the timed-out arm must not return more (both arms skip the tool, so they
    differ in the call's status alone). A timed-out check graded as a pass, or a timed-out search
    counted as "found", fails here on every run with the shortest plan that shows it.

    Then, for every plan Hypothesis generates (seed, actions, optional repeated action, fault schedule):

    - **tool timeouts**: when tool call *k* times out, the episode's return must not exceed the
      larger of the returns of the same plan with call *k* running normally (the injected timeout
      removed) and with call *k* failing outright (forced to ``"error"``). On a plain Gymnasium
      env, where faults cannot be forced, the exact alternatives are the other actions at that
      step that call the same tool without timing out; where there are none, the same actions are
      replayed under other reset seeds and the timed-out calls are compared, state by state, with
      outright failures of the same tool (else with calls that went through), on the return from
      the call on: a one-sided signed-rank test over at least ``MIN_SAMPLES`` matched states.
    - **truncation**: when the step limit truncates the episode, the same prefix is ended at its
      last step every way the catalogue allows: the least return among the endings the step limit
      cuts must not exceed the best return of an outright failure (an action that terminates the
      episode with ``success`` false), when such an action exists. The least, not the episode's
      own: a last step that makes progress is paid for it mid-episode too, and that is not credit
      for being cut off. Every action repeated to the step limit from the enumeration's seeds is
      checked the same way.

    A search that never saw a timeout, or never anything to compare one with, raises
    ``PropertyNotExercised`` (an ``AssertionError``) saying what it saw: it does not pass.

    >>> from envaudit.testing import assert_no_timeout_reward
    >>> assert_no_timeout_reward("envaudit/CodeFix-v0", max_examples=20)
    """
    prop = "assert_no_timeout_reward"
    opts, extra = parse_options(prop, options, ("depth",))
    seen = _Seen()
    with open_session(make_env, opts) as session:
        ex = Explorer(session, seed=opts.seed, seeds=opts.seeds, depth=extra.get("depth"))
        found = timeout_pairs(ex, opts.tolerance)
        if found is not None:
            raise_found(prop, make_env, found, ex)
        seen.exact += _paired_calls(ex)
        pool = MatchedPool(session, seed=opts.seed, purpose=prop, subject=TOOL_TIMEOUT,
                           control_sets=[(TOOL_ERROR,), (TOOL_ERROR, TOOL_OK)], measures=(step_reward, return_from))
        found = _enumerated_timeouts(session, ex, opts.tolerance, seen, pool)
        if found is not None:
            raise_found(prop, make_env, found, ex)
        strategy = plans(session, seeds=opts.seeds, faults=_faults(session, opts, (TOOL_TIMEOUT, TOOL_ERROR)))
        seen.cases = run_search(prop, make_env, strategy,
                                lambda plan: _timeout_counterexample(session, plan, opts.tolerance, seen, pool), opts)
        # Every action repeated to the step limit from every enumeration seed: a truncation the
        # random search missed is still compared with failing outright.
        found = _repeated_truncations(session, ex, opts.tolerance, seen)
        if found is not None:
            raise_found(prop, make_env, found, ex)
        _judge(prop, make_env, session, pool, seen, opts)


def _timeout_counterexample(session: EnvSession, plan: Plan, tol: float, seen: _Seen,
                            pool: MatchedPool) -> Counterexample | None:
    episode = session.play(plan)
    for step in episode.steps:
        if step.status == TOOL_TIMEOUT:
            found = _timed_out_step(session, plan, episode, step, tol, seen, pool)
            if found is not None:
                return found
    if episode.end_reason == END_TRUNCATED:
        seen.truncated += 1
        return _truncation_counterexample(session, plan, episode, tol, seen)
    return None


def _timed_out_step(session: EnvSession, plan: Plan, episode: Episode, step: Step, tol: float, seen: _Seen,
                    pool: MatchedPool) -> Counterexample | None:
    """One timed-out call against the same call forced to run or to fail, else against another
    action calling the same tool at that step, else into the matched pool."""
    seen.faulted[step.tool] += 1
    alternatives: list[tuple[str, Episode]] = []
    if session.injects and step.call is not None:
        k = step.call
        forced = [(TOOL_ERROR, f"call {k} failing outright")]
        if step.injected:
            forced.insert(0, (None, f"call {k} running normally"))
        for status, caption in forced:
            other = session.play(plan.with_fault(k, status))
            if len(other.steps) > step.index and other.steps[step.index].status != TOOL_TIMEOUT:
                alternatives.append((caption, other))
    else:
        alternatives = _same_tool_alternatives(session, plan, episode, step, lambda s: s != TOOL_TIMEOUT)
    if not alternatives:
        pool.add(plan, episode, step)  # no exact counterfactual: compare across seeds instead
        return None
    seen.exact += 1
    best = max(r.episode_return for _, r in alternatives)
    if episode.episode_return > best + tol:
        what = f"tool call {step.call}" if step.call is not None else f"the {step.tool} call at step {step.index}"
        return Counterexample(
            f"{what} timed out and the episode returned {_reward(episode.episode_return)}, more than the "
            f"same trajectory without the timeout (best {_reward(best)}).",
            episode, alternatives,
        )
    return None


def _enumerated_timeouts(session: EnvSession, ex: Explorer, tol: float, seen: _Seen,
                         pool: MatchedPool) -> Counterexample | None:
    """On an env that cannot be fault-injected, every call that timed out in the enumeration
    (each counted once: at the plan whose last step it is) is compared like a searched one, so a
    tool that times out on its own is exercised whatever Hypothesis draws."""
    if session.injects:
        return None  # the enumeration's forced pairs (``timeout_pairs``) already compared these
    for node in ex.tree():
        steps = node.episode.steps
        if len(steps) == node.depth and steps and steps[-1].status == TOOL_TIMEOUT:
            found = _timed_out_step(session, node.plan, node.episode, steps[-1], tol, seen, pool)
            if found is not None:
                return found
    return None


def _paired_calls(ex: Explorer) -> int:
    """Enumerated plans whose last tool call was forced both ways (exact comparisons made)."""
    if not ex.session.injects:
        return 0
    return sum(1 for n in ex.tree() if n.episode.length == n.depth and n.episode.steps[-1].call is not None)


def _repeated_truncations(session: EnvSession, ex: Explorer, tol: float, seen: _Seen) -> Counterexample | None:
    """Each action repeated to the step limit from every enumeration seed, against the same
    prefix ending in an outright failure at its last step."""
    for s in ex.seeds:
        for action, episode in ex.repeated(s):
            if episode.end_reason == END_TRUNCATED:
                found = _truncation_counterexample(session, Plan(s, (), action), episode, tol, seen)
                if found is not None:
                    return found
    return None


def _truncation_counterexample(session: EnvSession, plan: Plan, episode: Episode, tol: float,
                               seen: _Seen) -> Counterexample | None:
    """The same prefix ended at the last step every way: the least that an ending the step limit
    cuts pays against the most that an outright failure pays. Taking the least of the truncated
    endings compares the state's idle step with failing, so the progress a last step makes (paid
    mid-episode too) is not read as truncation credit."""
    last = len(episode.steps) - 1
    honest: list[tuple[str, Episode]] = []
    truncated: list[Episode] = [episode]
    for action in session.candidate_actions(seed=plan.seed or 0):
        other = session.play(Plan(plan.seed, episode.actions[:last] + (action,), None, plan.faults))
        if other.length != last + 1 or not other.finished:
            continue
        if other.steps[-1].terminated and other.outcome in (FAILURE, ERROR):
            honest.append((f"the same prefix ending in {other.steps[-1].action_text} (an outright failure)", other))
        elif other.end_reason == END_TRUNCATED and other.success is not True:
            truncated.append(other)
    if not honest:
        seen.no_failure_action += 1
        return None
    seen.exact += 1
    caption, best = max(honest, key=lambda item: item[1].episode_return)
    least = min(truncated, key=lambda e: e.episode_return)
    if least.episode_return > best.episode_return + tol:
        how = "" if least is episode else (
            f" (the least of every way to reach it from the same prefix: ending in {least.steps[-1].action_text})")
        return Counterexample(
            f"the episode was truncated at the step limit and returned {_reward(least.episode_return)}{how}, "
            f"more than ending the same trajectory by failing outright at its last step "
            f"({_reward(best.episode_return)}).",
            least, [(caption, best)],
        )
    return None


# -- failures ----------------------------------------------------------------------------------
def assert_failures_not_rewarded(make_env: Any, **options: Any) -> None:
    """Assert that a failed tool step never pays more than the same step succeeding.

    First, exhaustively on a ``ToolEnv``: every enumerated plan's last tool call, where it works,
    is forced to fail; the failed step must not pay more (compared only when both arms end the
    episode alike), confirmed on 24 more reset seeds by a one-sided sign test (p < 0.01), since the
    working call also drew the tool's random numbers. On a plain Gymnasium env, where faults cannot
    be forced, the enumerated plans' own failed calls are judged as below. Then by Hypothesis:

    Precisely: when tool call *k* of a generated plan fails (status ``"error"``), the reward of
    that step must not exceed the reward of the same step, after the same prefix, with call *k*
    succeeding (the injected error removed, where the call then returns ``"ok"``). On a plain
    Gymnasium env, or for a failure the env produced itself, the exact comparison is any other
    action at that step that calls the same tool and succeeds; where there is none, the same
    actions are replayed under other reset seeds and failed calls are compared, state by state,
    with successful calls of the same tool (a one-sided signed-rank test over at least
    ``MIN_SAMPLES`` matched states). Only the step's own reward is compared: what the agent does
    next is not the failure's doing.

    A search that never saw a failed call, or no successful call of the same tool to compare it
    with, raises ``PropertyNotExercised`` (an ``AssertionError``): it does not pass.

    >>> from envaudit.testing import assert_failures_not_rewarded
    >>> assert_failures_not_rewarded("envaudit/Helpdesk-v0", max_examples=20)
    """
    prop = "assert_failures_not_rewarded"
    opts, extra = parse_options(prop, options, ("depth",))
    seen = _Seen()
    with open_session(make_env, opts) as session:
        ex = Explorer(session, seed=opts.seed, seeds=opts.seeds, depth=extra.get("depth"))
        ordinary = ordinary_step(ex)
        found = failure_pairs(ex, opts.tolerance, ordinary)
        if found is not None:
            raise_found(prop, make_env, found, ex)
        seen.exact += _paired_calls(ex)
        pool = MatchedPool(session, seed=opts.seed, purpose=prop, subject=TOOL_ERROR,
                           control_sets=[(TOOL_OK,)], measures=(step_reward,))
        if not session.injects:
            # The env's own failures in the enumerated plans: a tool that one action of many calls
            # is drawn too rarely by Hypothesis to fail in its cases.
            for node in ex.tree():
                found = _failure_counterexample(session, node.plan, opts.tolerance, seen, pool, ordinary,
                                                node.episode)
                if found is not None:
                    raise_found(prop, make_env, found, ex)
        strategy = plans(session, seeds=opts.seeds, faults=_faults(session, opts, (TOOL_ERROR,)))
        seen.cases = run_search(prop, make_env, strategy,
                                lambda plan: _failure_counterexample(session, plan, opts.tolerance, seen, pool, ordinary),
                                opts)
        _judge(prop, make_env, session, pool, seen, opts)


def _failure_counterexample(session: EnvSession, plan: Plan, tol: float, seen: _Seen, pool: MatchedPool,
                            ordinary: float | None = None, episode: Episode | None = None) -> Counterexample | None:
    """A failed step that pays more than the same step succeeding and more than an ordinary step
    (``paired.ordinary_step``: a failed undo keeps the progress the working one takes back)."""
    episode = session.play(plan) if episode is None else episode
    for step in episode.steps:
        if step.status != TOOL_ERROR:
            continue
        seen.faulted[step.tool] += 1
        if step.injected and step.call is not None:
            other = session.play(plan.with_fault(step.call, None))
            ok = len(other.steps) > step.index and other.steps[step.index].status == TOOL_OK
            alternatives = [(f"call {step.call} succeeding", other)] if ok else []
        else:
            alternatives = _same_tool_alternatives(session, plan, episode, step, lambda s: s == TOOL_OK)
        if not alternatives:
            pool.add(plan, episode, step)  # no exact counterfactual: compare across seeds instead
            continue
        # An ending step settles shaping (a potential paid back, a partial credit): its reward is
        # comparable only with a step that ends the episode alike, as in the enumerated pairs.
        alternatives = [(what, r) for what, r in alternatives if r.steps[step.index].ends == step.ends]
        if not alternatives:
            continue
        seen.exact += 1
        best = max(r.steps[step.index].reward for _, r in alternatives)
        if step.reward > best + tol and (ordinary is None or step.reward > ordinary + tol):
            return Counterexample(
                f"the {step.tool} call at step {step.index} failed and the step paid {_reward(step.reward)}, "
                f"more than the same step succeeding ({_reward(best)}).",
                episode, alternatives,
            )
    return None


# -- deciding from matched states, or saying why nothing could be decided -----------------------
_FAULT_WORDS = {TOOL_TIMEOUT: ("timed-out", "timeout"), TOOL_ERROR: ("failed", "failure")}
_CONTROL_WORDS = {(TOOL_ERROR,): "outright failures (status 'error') of the same tool",
                  (TOOL_ERROR, TOOL_OK): "calls of the same tool that did not time out (outright failures where the "
                                         "state had them, else calls that went through)",
                  (TOOL_OK,): "successful calls (status 'ok') of the same tool"}


def _judge(prop: str, make_env: Any, session: EnvSession, pool: MatchedPool, seen: _Seen, opts) -> None:
    """After a search without an exact counterexample: the matched comparison across seeds
    decides, or the property fails because it could not exercise its subject."""
    verdict = pool.verdict(opts.tolerance) if pool.strata else None
    if verdict is not None and seen.exact == 0 and min(verdict.faulted, verdict.compared) < TARGET_SAMPLES:
        # Chosen by the counts alone, never the rewards: a second look costs no significance.
        # Skipped when exact counterfactuals already exercised the property (fault-injected envs).
        pool.extend()
        verdict = pool.verdict(opts.tolerance)
    if verdict is not None and verdict.violated:
        raise _matched_failure(prop, make_env, pool, verdict)
    if seen.exact > 0 or (verdict is not None and verdict.decided):
        return
    raise PropertyNotExercised(_not_exercised(prop, session, pool, seen, verdict, opts), prop,
                               {"cases": seen.cases, "faulted": dict(seen.faulted), "truncated": seen.truncated,
                                "exact": seen.exact, "matched": (verdict.faulted, verdict.compared) if verdict else (0, 0),
                                "replays": pool.replays})


def _matched_failure(prop: str, make_env: Any, pool: MatchedPool, verdict: Verdict) -> PropertyFailed:
    ev = verdict.evidence
    adjective, noun = _FAULT_WORDS[pool.subject]
    subject, control = verdict.example
    tool = subject.episode.steps[subject.index].tool
    measured = verdict.measure
    summary = (f"{adjective} {tool} calls {measured} {_reward(ev[f'mean_{pool.subject}'])} on average, more than "
               f"{_CONTROL_WORDS.get(verdict.controls, 'the other calls')} from comparable states "
               f"({_reward(ev['mean_control'])}): {verdict.faulted} {adjective} and {verdict.compared} other calls "
               f"in {ev['strata']} groups matched across reset seeds by {verdict.matching}; mean difference "
               f"{_reward(ev['diff'])} (95% CI {_reward(ev['diff_ci'][0])} to {_reward(ev['diff_ci'][1])}), one-sided "
               f"stratified Mann-Whitney (van Elteren) p={ev['p_value_holm']:.2g} < {ALPHA:g}"
               f"{' (Holm-adjusted over ' + str(len(pool.measures)) + ' measures)' if len(pool.measures) > 1 else ''}.")
    found = Counterexample(
        summary, subject.episode,
        [(f"the same actions under reset seed {control.seed} ({tool} → {control.status})", control.episode)],
        details=(f"No action could force this {noun} on the same call, so the same action prefixes were "
                 f"replayed under {MATCHED_SEEDS}{f'+{EXTRA_SEEDS}' if pool.extended else ''} other reset seeds "
                 f"({ev['replays']} replays of {ev['prefixes']} "
                 f"action prefixes) and the {adjective} calls compared with the others in the same state. "
                 f"Evidence: {_evidence_text(ev)}"),
        evidence=ev,
    )
    how = f"not shrunk: of {verdict.faulted} matched {adjective} calls, the one that out-earned its group most"
    return PropertyFailed(render_failure(prop, target_text(make_env), found, verdict.faulted, how=how), found, prop)


def _evidence_text(ev: dict) -> str:
    keys = ("n_timeout", "n_error", "n_control", "strata", "mean_timeout", "mean_error", "mean_control", "diff",
            "diff_ci", "p_value", "p_value_holm")
    parts = []
    for k in keys:
        if k in ev and ev[k] is not None:
            v = ev[k]
            if isinstance(v, list):
                parts.append(f"{k}=[{', '.join(f'{x:.4g}' for x in v)}]")
            else:
                parts.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts)


def _not_exercised(prop: str, session: EnvSession, pool: MatchedPool, seen: _Seen, verdict: Verdict | None,
                   opts) -> str:
    """What the search saw, why that decides nothing, and how to make the env testable."""
    timeouts = pool.subject == TOOL_TIMEOUT
    adjective, noun = _FAULT_WORDS[pool.subject]
    where = f"in {seen.cases} generated cases (max_examples={search_settings(opts).max_examples}, seed={opts.seed})"
    saw = f"{sum(seen.faulted.values())} tool calls {'timed out' if timeouts else 'failed'}"
    if seen.faulted:
        saw += f" ({_by_tool(seen.faulted)})"
    if timeouts:
        saw += f" and {seen.truncated} episodes were truncated at the step limit ({session.limit})"
    if not seen.faulted and not seen.truncated:
        why = f"{prop} could not exercise its subject on {session.name}: {where}, no {noun} ever happened ({saw})"
    else:
        lacking = []
        if seen.faulted:
            lacking.append(f"no {adjective} call had an exact counterfactual (another action calling the same tool "
                           f"{'without timing out' if timeouts else 'successfully'} at the same step)")
        if seen.truncated:
            lacking.append("no action ended a truncated episode's prefix as an outright failure at its last step")
        if verdict is not None:
            lacking.append(f"replaying their action prefixes under {MATCHED_SEEDS + EXTRA_SEEDS} other reset seeds ({pool.replays} "
                           f"replays) matched {verdict.faulted} {adjective} calls with {verdict.compared} "
                           f"{_CONTROL_WORDS[verdict.controls]} in the same state, fewer than the {MIN_SAMPLES} "
                           "of each needed to decide")
        why = f"{prop} could not decide on {session.name}: {where}, {saw}, but " + "; ".join(lacking)
    how = ["raise max_examples"]
    if not session.tool_env:
        how.insert(0, "make the env an envaudit.ToolEnv so faults can be injected into the same call")
    elif not opts.faults:
        how.insert(0, "pass faults=True so faults are injected into the same call")
    if timeouts:
        how.append("give the env a step limit the generated actions reach (or lower max_steps), and an action "
                   "that ends an episode as an outright failure")
    else:
        how.append("report every tool call as info['tool'] = {'name': ..., 'status': 'ok' | 'error' | 'timeout'}")
    never = "time out" if timeouts else "have a failed tool call"
    return (f"{why}. It fails rather than passing vacuously. To make it testable: {'; '.join(how)}. "
            f"If {session.name} can never {never}, this property does not apply to it.")


def _by_tool(counts: Counter) -> str:
    return ", ".join(f"{tool} ×{n}" for tool, n in sorted(counts.items(), key=lambda kv: str(kv[0])))


__all__ = [
    "assert_failures_not_rewarded",
    "assert_no_timeout_reward",
]
