"""Reward without success: no episode the env judges unsuccessful earns what a success earns.

The yardstick is the env's own: by default an unsuccessful episode must return less than the
successes from the same reset seed (the oracle's, when the env has ``oracle()`` or ``oracle=`` is
given, and those the enumerated short plans reach), so partial credit and shaped rewards below a
success pass, and an answer-everything grader that pays a success's worth does not. A fixed
``max_return_without_success`` replaces that yardstick with a number.
"""

from __future__ import annotations

from typing import Any

from envaudit.policies import oracle_policy
from envaudit.protocol import TOOL_ERROR, TOOL_TIMEOUT
from envaudit.testing.explore import Explorer
from envaudit.testing.oracles import as_policy
from envaudit.testing.paired import raise_found
from envaudit.testing.search import (
    Counterexample,
    PropertyNotExercised,
    open_session,
    parse_options,
    run_search,
)
from envaudit.testing.strategies import fault_schedules, plans
from envaudit.testing.trajectory import EnvSession, Episode

PROP = "assert_no_reward_without_success"


def _reward(value: float) -> str:
    return f"{value:+.4g}"


def assert_no_reward_without_success(
    make_env: Any, *, max_return_without_success: float | None = None, oracle: Any = None, **options: Any
) -> None:
    """Assert that no finished episode the env judges unsuccessful earns as much as a success.

    The env's own judgement is ``info["success"]`` on the last step (DESIGN.md's info protocol);
    truncated episodes count when the env reports them unsuccessful. By default the yardstick is
    the best successful return from the same reset seed (else from any seed): the oracle's
    (``oracle``: a policy, a function ``(obs, info) -> action``, a list of actions, or a callable
    ``(env) -> one of those``; default the env's ``oracle()`` if it has one) and the successes
    among every short plan (exhaustive, shortest first); when none of those succeeds, the shortest
    successes of a deeper search that extends one plan per distinct observation and depth
    (``Explorer.deep_successes``: a path of a few steps among many actions). Every short plan,
    every episode of that deeper search, every action repeated to the end and a Hypothesis search
    (episodes run to their end, with faults) are checked: an unsuccessful episode returning at
    least the yardstick fails the property. With ``max_return_without_success`` the yardstick is
    that number instead: an unsuccessful episode must not return more. Raises ``PropertyNotExercised`` when no finished episode
    reported ``info["success"]``, or when unsuccessful episodes returned more than nothing and no
    success was seen to compare them with (pass ``oracle=`` or ``max_return_without_success=``).

    >>> from envaudit.testing import assert_no_reward_without_success
    >>> assert_no_reward_without_success("envaudit/FlakySearch-v0", max_examples=20)
    """
    opts, extra = parse_options(PROP, options, ("depth",))
    tol = opts.tolerance
    seen = {"finished": 0, "flagged": 0}
    with open_session(make_env, opts) as session:
        ex = Explorer(session, seed=opts.seed, seeds=opts.seeds, depth=extra.get("depth"))
        best: dict[int | None, Episode] = {}
        fixed = None if max_return_without_success is None else float(max_return_without_success)
        unjudged: list[Episode] = []  # paid without success while no success is known to compare with
        if fixed is None:
            best = _successes(ex, session, oracle)

        def check(episode: Episode) -> Counterexample | None:
            if not episode.finished:
                return None
            seen["finished"] += 1
            if episode.success is None:
                return None
            seen["flagged"] += 1
            if episode.success:
                return None
            if fixed is not None:
                if episode.episode_return > fixed + tol:
                    return Counterexample(
                        f"the episode ended with success false and returned {_reward(episode.episode_return)}, more "
                        f"than max_return_without_success={fixed:g}.", episode)
                return None
            if not best:
                if episode.episode_return > tol:
                    unjudged.append(episode)
                return None
            yardstick = best.get(episode.seed) or best[None]
            if episode.episode_return >= yardstick.episode_return - tol:
                return Counterexample(
                    f"the episode ended with success false and returned {_reward(episode.episode_return)}, as much as "
                    f"a success from the same {'reset seed' if episode.seed in best else 'env'} "
                    f"({_reward(yardstick.episode_return)}).", episode, [("the success", yardstick)])
            return None

        short = ([n.episode for n in ex.tree()] + ex.deep_played
                 + [ep for s in ex.seeds for _, ep in ex.repeated(s)])
        for episode in short:
            found = check(episode)
            if found is not None:
                raise_found(PROP, make_env, found, ex)
        faults = (fault_schedules(max_calls=min(session.limit, session.max_steps), kinds=(TOOL_ERROR, TOOL_TIMEOUT))
                  if opts.faults and session.injects else None)
        strategy = plans(session, seeds=opts.seeds, faults=faults, finish=True)
        run_search(PROP, make_env, strategy, lambda plan: check(session.play(plan)), opts)
        if unjudged:
            top = max(unjudged, key=lambda e: e.episode_return)
            raise PropertyNotExercised(
                f"{PROP} could not decide on {session.name}: unsuccessful episodes returned up to "
                f"{_reward(top.episode_return)} (e.g. {list(top.actions)} from seed {top.seed}), and no episode "
                "succeeded to tell partial credit from reward without success. Pass oracle= (a policy, a function "
                "(obs, info) -> action or a list of actions that solves the task; or give the env an oracle() "
                "method), or max_return_without_success= (the most an unsuccessful episode may return).",
                PROP, {**seen, "best_unsuccessful": top.episode_return})
        if seen["flagged"] == 0:
            why = (f"none of the {seen['finished']} finished episodes reported info['success']"
                   if seen["finished"] else f"no episode finished within max_steps={opts.max_steps}")
            raise PropertyNotExercised(
                f"{PROP} could not exercise its subject on {session.name}: {why}, so nothing was checked and it "
                "fails rather than passing vacuously; make the env set info['success'] on the last step of an "
                "episode (DESIGN.md's info protocol)" + ("" if seen["finished"] else " or raise max_steps"),
                PROP, seen,
            )


def _successes(ex: Explorer, session: EnvSession, oracle: Any) -> dict[int | None, Episode]:
    """The best successful episode per reset seed, and over all seeds (key None)."""
    policy = as_policy(oracle, session.env, action=session.action) if oracle is not None else oracle_policy(session.env)
    best: dict[int | None, Episode] = {}
    for ep in ex.successes(policy):  # successes only
        for key in (ep.seed, None):
            if key not in best or ep.episode_return > best[key].episode_return:
                best[key] = ep
    return best


__all__ = ["assert_no_reward_without_success"]
