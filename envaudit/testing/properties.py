"""Incentive properties: plain functions that search an env for a counterexample with Hypothesis.

Each property generates *plans* (a reset seed, an action sequence, optionally an action repeated
until the episode ends, and, for ``ToolEnv``s, a fault schedule), plays them, and compares every
episode with the counterfactual that the property is about: the same trajectory without the
timeout, the same step succeeding, the same replay. The first violation is shrunk by Hypothesis
and raised as ``PropertyFailed`` (an ``AssertionError``) whose message shows the trajectory.

Plain Gymnasium envs are supported: where faults cannot be injected, the counterfactual of a
failed or timed-out tool call is another action at the same step that calls the same tool and
does not fail, and the rest of the trajectory is played unchanged.

Options shared by every property: ``max_examples`` (default 50), ``max_steps`` (50), ``seed``
(0: the search is reproducible), ``settings`` (a ``hypothesis.settings`` to start from), ``seeds``
(reset seeds: int, list or strategy), ``faults`` (True: inject tool faults into ``ToolEnv``s) and
``tolerance`` (1e-9: reward differences at or below it are ties).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from envaudit.protocol import END_TRUNCATED, ERROR, FAILURE, TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.testing.search import Counterexample, open_session, parse_options, run_search
from envaudit.testing.strategies import fault_schedules, plans
from envaudit.testing.trajectory import EnvSession, Episode, Plan, Step, short_text


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
def assert_no_timeout_reward(make_env: Any, **options: Any) -> None:
    """Assert that timing out never adds reward: no episode that times out out-earns the same
    trajectory without the timing-out step.

    Precisely, for every generated plan (seed, actions, optional repeated action, fault schedule):

    - **tool timeouts**: when tool call *k* times out, the episode's return must not exceed the
      larger of the returns of the same plan with call *k* running normally (the injected timeout
      removed) and with call *k* failing outright (forced to ``"error"``). On a plain Gymnasium
      env, where faults cannot be forced, the alternatives are the other actions at that step that
      call the same tool without timing out. The rest of the plan is played unchanged.
    - **truncation**: when the step limit truncates the episode, its return must not exceed the
      best return of the same prefix ending, at the last step, in an outright failure instead
      (an action that terminates the episode with ``success`` false), when such an action exists.

    Alternatives that time out themselves are not comparisons and are skipped.

    >>> from envaudit.testing import assert_no_timeout_reward
    >>> assert_no_timeout_reward("envaudit/CodeFix-v0", max_examples=20)
    """
    opts, _ = parse_options("assert_no_timeout_reward", options)
    with open_session(make_env, opts) as session:
        strategy = plans(session, seeds=opts.seeds, faults=_faults(session, opts, (TOOL_TIMEOUT, TOOL_ERROR)))
        run_search("assert_no_timeout_reward", make_env, strategy,
                   lambda plan: _timeout_counterexample(session, plan, opts.tolerance), opts)


def _timeout_counterexample(session: EnvSession, plan: Plan, tol: float) -> Counterexample | None:
    episode = session.play(plan)
    for step in episode.steps:
        if step.status != TOOL_TIMEOUT:
            continue
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
            continue
        best = max(r.episode_return for _, r in alternatives)
        if episode.episode_return > best + tol:
            what = f"tool call {step.call}" if step.call is not None else f"the {step.tool} call at step {step.index}"
            return Counterexample(
                f"{what} timed out and the episode returned {_reward(episode.episode_return)}, more than the "
                f"same trajectory without the timeout (best {_reward(best)}).",
                episode, alternatives,
            )
    if episode.end_reason == END_TRUNCATED:
        return _truncation_counterexample(session, plan, episode, tol)
    return None


def _truncation_counterexample(session: EnvSession, plan: Plan, episode: Episode, tol: float) -> Counterexample | None:
    last = len(episode.steps) - 1
    honest: list[tuple[str, Episode]] = []
    for action in session.candidate_actions(seed=plan.seed or 0):
        other = session.play(Plan(plan.seed, episode.actions[:last] + (action,), None, plan.faults))
        if (other.length == last + 1 and other.finished and other.steps[-1].terminated
                and other.outcome in (FAILURE, ERROR)):
            honest.append((f"the same prefix ending in {other.steps[-1].action_text} (an outright failure)", other))
    if not honest:
        return None
    caption, best = max(honest, key=lambda item: item[1].episode_return)
    if episode.episode_return > best.episode_return + tol:
        return Counterexample(
            f"the episode was truncated at the step limit and returned {_reward(episode.episode_return)}, "
            f"more than ending the same trajectory by failing outright at its last step "
            f"({_reward(best.episode_return)}).",
            episode, [(caption, best)],
        )
    return None


# -- failures ----------------------------------------------------------------------------------
def assert_failures_not_rewarded(make_env: Any, **options: Any) -> None:
    """Assert that a failed tool step never pays more than the same step succeeding.

    Precisely: when tool call *k* of a generated plan fails (status ``"error"``), the reward of
    that step must not exceed the reward of the same step, after the same prefix, with call *k*
    succeeding (the injected error removed, where the call then returns ``"ok"``). On a plain
    Gymnasium env, or for a failure the env produced itself, the comparison is any other action at
    that step that calls the same tool and succeeds. Only the step's own reward is compared: what
    the agent does next is not the failure's doing.

    >>> from envaudit.testing import assert_failures_not_rewarded
    >>> assert_failures_not_rewarded("envaudit/Helpdesk-v0", max_examples=20)
    """
    opts, _ = parse_options("assert_failures_not_rewarded", options)
    with open_session(make_env, opts) as session:
        strategy = plans(session, seeds=opts.seeds, faults=_faults(session, opts, (TOOL_ERROR,)))
        run_search("assert_failures_not_rewarded", make_env, strategy,
                   lambda plan: _failure_counterexample(session, plan, opts.tolerance), opts)


def _failure_counterexample(session: EnvSession, plan: Plan, tol: float) -> Counterexample | None:
    episode = session.play(plan)
    for step in episode.steps:
        if step.status != TOOL_ERROR:
            continue
        if step.injected and step.call is not None:
            other = session.play(plan.with_fault(step.call, None))
            ok = len(other.steps) > step.index and other.steps[step.index].status == TOOL_OK
            alternatives = [(f"call {step.call} succeeding", other)] if ok else []
        else:
            alternatives = _same_tool_alternatives(session, plan, episode, step, lambda s: s == TOOL_OK)
        if not alternatives:
            continue
        best = max(r.steps[step.index].reward for _, r in alternatives)
        if step.reward > best + tol:
            return Counterexample(
                f"the {step.tool} call at step {step.index} failed and the step paid {_reward(step.reward)}, "
                f"more than the same step succeeding ({_reward(best)}).",
                episode, alternatives,
            )
    return None


# -- success -----------------------------------------------------------------------------------
def assert_no_reward_without_success(
    make_env: Any, *, max_return_without_success: float = 0.0, **options: Any
) -> None:
    """Assert that no finished episode the env judges unsuccessful returns more than
    ``max_return_without_success``.

    The env's own judgement is ``info["success"]`` on the last step (DESIGN.md's info protocol);
    truncated episodes count when the env reports them unsuccessful. Episodes run to their end:
    every plan repeats an action after its sequence until the episode ends. Raises ``ValueError``
    when no finished episode reported ``info["success"]`` at all, since nothing was checked.

    >>> from envaudit.testing import assert_no_reward_without_success
    >>> assert_no_reward_without_success("envaudit/FlakySearch-v0", max_examples=20)
    """
    opts, _ = parse_options("assert_no_reward_without_success", options)
    limit = float(max_return_without_success)
    seen = {"finished": 0, "flagged": 0}

    def check(session: EnvSession, plan: Plan) -> Counterexample | None:
        episode = session.play(plan)
        if not episode.finished:
            return None
        seen["finished"] += 1
        if episode.success is None:
            return None
        seen["flagged"] += 1
        if episode.success is False and episode.episode_return > limit + opts.tolerance:
            return Counterexample(
                f"the episode ended with success false and returned {_reward(episode.episode_return)}, more "
                f"than max_return_without_success={limit:g}.",
                episode,
            )
        return None

    with open_session(make_env, opts) as session:
        strategy = plans(session, seeds=opts.seeds, faults=_faults(session, opts, (TOOL_ERROR, TOOL_TIMEOUT)),
                         finish=True)
        run_search("assert_no_reward_without_success", make_env, strategy, lambda p: check(session, p), opts)
        if seen["flagged"] == 0:
            why = (f"none of the {seen['finished']} finished episodes reported info['success']"
                   if seen["finished"] else f"no episode finished within max_steps={opts.max_steps}")
            raise ValueError(
                f"assert_no_reward_without_success checked nothing on {session.name}: {why}; make the env "
                "set info['success'] on the last step of an episode (DESIGN.md's info protocol)"
                + ("" if seen["finished"] else " or raise max_steps")
            )


# -- replay ------------------------------------------------------------------------------------
def assert_replayable(make_env: Any, **options: Any) -> None:
    """Assert that the same seed and the same actions give the same trajectory.

    Every generated plan is played three times: twice on one env instance (which has played
    other episodes before) and once on a second instance. The runs must agree on the first
    observation and, step by step, on observations, rewards, ``terminated``/``truncated``, the
    tool called and its status, and the final ``success`` flag. Tool latencies are not compared.

    >>> from envaudit.testing import assert_replayable
    >>> assert_replayable("envaudit/Helpdesk-v0", max_examples=20)
    """
    opts, _ = parse_options("assert_replayable", options)
    with open_session(make_env, opts) as first, open_session(make_env, opts) as second:

        def check(plan: Plan) -> Counterexample | None:
            runs = [first.play(plan, keep_observations=True), first.play(plan, keep_observations=True),
                    second.play(plan, keep_observations=True)]
            for caption, other in (("the replay on the same env instance", runs[1]),
                                   ("the replay on a fresh env instance", runs[2])):
                difference = first_difference(runs[0], other)
                if difference is not None:
                    return Counterexample(
                        f"replaying the same seed and actions gave {difference} ({caption}).",
                        runs[0], [(caption, other)],
                    )
            return None

        strategy = plans(first, seeds=opts.seeds, faults=_faults(first, opts, (TOOL_ERROR, TOOL_TIMEOUT)))
        run_search("assert_replayable", make_env, strategy, check, opts)


def first_difference(a: Episode, b: Episode) -> str | None:
    """Where two plays of the same plan first differ, in words; None when they agree."""
    obs_a, obs_b = a.observations or (), b.observations or ()
    if obs_a and obs_b and not same_value(obs_a[0], obs_b[0]):
        return f"a different first observation after reset ({_short(obs_a[0])} vs {_short(obs_b[0])})"
    for i in range(max(a.length, b.length)):
        if i >= a.length or i >= b.length:
            shorter, longer = ("first run", "replay") if i >= a.length else ("replay", "first run")
            return f"an episode that ended after {i} steps on the {shorter} but went on on the {longer}"
        x, y = a.steps[i], b.steps[i]
        for what, u, v in (("tool call", (x.tool, x.status), (y.tool, y.status)),
                           ("reward", x.reward, y.reward),
                           ("terminated flag", x.terminated, y.terminated),
                           ("truncated flag", x.truncated, y.truncated)):
            if not same_value(u, v):
                return f"a different {what} at step {i} ({_fmt(u)} vs {_fmt(v)})"
        if len(obs_a) > i + 1 and len(obs_b) > i + 1 and not same_value(obs_a[i + 1], obs_b[i + 1]):
            return f"a different observation after step {i} ({_short(obs_a[i + 1])} vs {_short(obs_b[i + 1])})"
    if a.success != b.success:
        return f"a different success flag ({a.success} vs {b.success})"
    return None


def _fmt(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2:
        return f"{value[0]} → {value[1]}" if value[0] is not None else "no tool"
    if isinstance(value, float):
        return _reward(value)
    return str(value)


def _short(value: Any) -> str:
    return short_text(value, 60)


def same_value(a: Any, b: Any) -> bool:
    """Equality for observations: arrays elementwise (NaN equals NaN), containers recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        try:
            return bool(np.array_equal(x, y, equal_nan=True))
        except TypeError:  # object or string arrays have no NaN
            return bool(np.array_equal(x, y))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:  # values that cannot be compared are treated as different
        return False


__all__ = [
    "assert_failures_not_rewarded",
    "assert_no_reward_without_success",
    "assert_no_timeout_reward",
    "assert_replayable",
    "first_difference",
    "same_value",
]
