"""Properties for the incentives the first four did not express: a reward after a failed call,
a failure charged beyond its time, length (farming, a brevity bonus) and delaying a success.

Each is one call with defaults that find a flaw of its class in a small tool env: it enumerates
every short plan from a few reset seeds (``explore.Explorer``) and compares pairs from the same
state (``paired``), so the verdict does not depend on luck, and the counterexample is the
shortest plan that shows the flaw, with both episodes and their returns. Options: the common ones
(``seed``, ``seeds``, ``max_steps``, ``tolerance``, ``faults``; ``max_examples`` and
``settings`` are accepted and unused) and ``depth`` (the longest enumerated plan, default: the
largest up to 3 that keeps 400 plans per seed).
"""

from __future__ import annotations

from typing import Any

from envaudit.policies import oracle_policy
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.stats import holm
from envaudit.testing.explore import Explorer, sign_test
from envaudit.testing.matched import (
    ALPHA,
    MAX_STRATA,
    PERMUTATIONS,
    MatchedPool,
    Verdict,
    return_from,
)
from envaudit.testing.oracles import as_policy
from envaudit.testing.paired import after_failure_pairs, penalty_pairs, raise_found
from envaudit.testing.search import (
    Counterexample,
    PropertyFailed,
    PropertyNotExercised,
    open_session,
    parse_options,
    render_failure,
    target_text,
)
from envaudit.testing.trajectory import EnvSession, Episode, Plan

EXTRA = ("depth",)


def _reward(value: float) -> str:
    return f"{value:+.4g}"


def _explorer(session: EnvSession, opts, extra: dict) -> Explorer:
    depth = extra.get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive int (the longest enumerated plan), got {depth!r}")
    return Explorer(session, seed=opts.seed, seeds=opts.seeds, depth=depth)


def _not_exercised(prop: str, session: EnvSession, ex: Explorer, why: str, how: str) -> PropertyNotExercised:
    return PropertyNotExercised(
        f"{prop} could not exercise its subject on {session.name}: {why} (every plan of up to {ex.depth} steps "
        f"from reset seeds {ex.seeds}, {ex.plays} plays). It fails rather than passing vacuously. {how}",
        prop, {"plays": ex.plays, "depth": ex.depth})


# -- after a failure ----------------------------------------------------------------------------
def assert_no_reward_after_failure(make_env: Any, **options: Any) -> None:
    """Assert that the step after a failed or timed-out tool call never pays more than the same
    step after the same call working.

    On a ``ToolEnv``: for every enumerated plan whose last step calls a tool that works, and every
    next action, the plan is played with that call forced to fail (then to time out) and left to
    run; from the call on, the failed arm must not return more with its next step paying more
    (resolving a ticket right after a failed search graded as solved; quitting after a failure
    paid most of a success). A comparison with the call working differs also in what the tool
    drew, so a violation is confirmed on 24 more reset seeds by a one-sided sign test (p < 0.01).
    On a plain env, where faults cannot be forced, the same plans are replayed from other reset
    seeds and the runs whose call failed are compared with those whose call worked
    (``envaudit.testing.matched``).

    >>> from envaudit.testing import assert_no_reward_after_failure
    >>> assert_no_reward_after_failure("envaudit/Helpdesk-v0")
    """
    prop = "assert_no_reward_after_failure"
    opts, extra = parse_options(prop, options, EXTRA)
    with open_session(make_env, opts) as session:
        ex = _explorer(session, opts, extra)
        if session.injects:
            found = after_failure_pairs(ex, opts.tolerance)
            if found is not None:
                raise_found(prop, make_env, found, ex)
            if not any(n.episode.steps[-1].status == TOOL_OK and n.episode.steps[-1].call is not None
                       and not n.episode.finished for n in ex.tree() if n.episode.length == n.depth):
                raise _not_exercised(prop, session, ex, "no plan ended in a working tool call with a step after it",
                                     "Give the env a tool call that can work without ending the episode.")
            return
        _matched_after_failure(prop, make_env, session, ex, opts)


def _comparability(node, subject: str, worked: set[str]) -> int:
    """0: the call failed here and worked elsewhere; 1: it worked here (other seeds may fail it);
    2: it failed and never worked (nothing to match it with)."""
    failed = node.episode.steps[-2].status == subject
    if failed and repr(node.episode.actions[:-1]) in worked:
        return 0
    return 2 if failed else 1


def _matched_after_failure(prop: str, make_env: Any, session: EnvSession, ex: Explorer, opts) -> None:
    """Per subject (a failed call, a timed-out one) and per next action: a continuation that pays
    only after a failure (quitting right after it) is its own question, not diluted by the other
    continuations, where a working call's progress pays more; Holm-adjusted over every one asked."""
    # Calls that worked somewhere in the tree (an action prefix whose last call came back ok, from
    # any seed): only there can replays match a failed call with a working one. A call that always
    # fails from its prefix (a precondition not met) has nothing to be compared with; one that
    # worked in every enumerated seed may still fail under the replays' seeds.
    worked = {repr(n.episode.actions) for n in ex.tree()
              if n.episode.length == n.depth and n.episode.steps[-1].status == TOOL_OK}
    seen = {s.status for n in ex.tree() for s in n.episode.steps}
    questions: dict[str, dict[str, list]] = {}
    for subject in (TOOL_ERROR, TOOL_TIMEOUT):
        if subject not in seen:
            continue  # a fault kind the short plans never showed is not asked about
        by_next = questions.setdefault(subject, {})
        for node in ex.tree():
            steps = node.episode.steps
            if node.episode.length == node.depth >= 2 and steps[-2].tool is not None \
                    and (steps[-2].status == subject or repr(node.episode.actions[:-1]) in worked):
                by_next.setdefault(steps[-1].action_text, []).append(node)
        for nodes in by_next.values():
            # Failed here and worked elsewhere first, then worked here; then those that end the
            # episode (quitting or resolving right after the call), the shortest.
            nodes.sort(key=lambda n, subject=subject: (_comparability(n, subject, worked), not n.episode.finished,
                                                       n.depth))
    # Enough permutations that the smallest p-value survives Holm over every question at ALPHA.
    permutations = max(PERMUTATIONS, int(10 * sum(map(len, questions.values())) / ALPHA))
    asked: list[tuple[str, str, Verdict]] = []
    for subject, by_next in questions.items():
        for following, nodes in sorted(by_next.items()):
            pool = MatchedPool(session, seed=opts.seed, purpose=f"{prop}-{subject}", subject=subject,
                               control_sets=[(TOOL_OK,)], measures=(return_from,), permutations=permutations)
            for node in nodes[: max(1, MAX_STRATA // len(by_next))]:
                pool.add(node.plan, node.episode, node.episode.steps[-2])
            verdict = pool.verdict(opts.tolerance)
            if not verdict.decided:
                pool.extend()
                verdict = pool.verdict(opts.tolerance)
            asked.append((subject, following, verdict))
    adjusted = holm([v.evidence["p_value_holm"] for _, _, v in asked])
    violated = [(p, subject, following, v) for p, (subject, following, v) in zip(adjusted, asked, strict=True)
                if v.decided and p < ALPHA and v.evidence["diff"] is not None and v.evidence["diff"] > opts.tolerance
                and v.example is not None]
    if violated:
        p, subject, following, verdict = min(violated, key=lambda item: (item[0], item[1], item[2]))
        ev = verdict.evidence
        faulted, control = verdict.example
        i = faulted.index
        found = Counterexample(
            f"after a {'timed-out' if subject == TOOL_TIMEOUT else 'failed'} {faulted.episode.steps[i].tool} call, "
            f"the plans going on with {following} returned {_reward(ev[f'mean_{subject}'])} from the call on, on "
            f"average, against {_reward(ev['mean_control'])} where the same call worked, from comparable states "
            f"(p={p:.2g}, stratified Mann-Whitney over {ev['strata']} groups, Holm-adjusted over the {len(asked)} "
            "next actions and fault kinds asked).",
            faulted.episode, [(f"the same actions from reset seed {control.seed}, the call working", control.episode)],
            evidence={**ev, "p_value_holm": float(p), "next_action": following, "questions": len(asked)},
        )
        raise PropertyFailed(render_failure(prop, target_text(make_env), found, ex.plays,
                                            how="matched across reset seeds, not shrunk"), found, prop)
    if not any(v.decided for _, _, v in asked):
        raise _not_exercised(prop, session, ex, "too few failed calls with a step after them, matched with working "
                             "ones, to decide", "Make the env an envaudit.ToolEnv so faults can be forced.")


# -- a failure charged beyond its time ------------------------------------------------------------
def assert_no_failure_penalty(make_env: Any, **options: Any) -> None:
    """Assert that a failed or timed-out tool call costs no more than a working step.

    On a ``ToolEnv`` every enumerated tool call is forced to fail and to time out (on a plain env,
    the calls that failed by themselves are used); where that does not end the episode, the
    step's reward must not be below the cheapest working step that does not end an episode among
    the enumerated plans, on every one of the reset seeds (and 24 more) where the plan reaches the
    call failing (at least two). An env that charges the agent for the infrastructure's failures makes
    quitting pay better than persisting whenever tools fail (the scan's ``failure-shortcut``).

    >>> from envaudit.testing import assert_no_failure_penalty
    >>> assert_no_failure_penalty("envaudit/Helpdesk-v0")
    """
    prop = "assert_no_failure_penalty"
    opts, extra = parse_options(prop, options, EXTRA)
    with open_session(make_env, opts) as session:
        ex = _explorer(session, opts, extra)
        found = penalty_pairs(ex, opts.tolerance)
        if found is not None:
            raise_found(prop, make_env, found, ex)
        if not session.injects and not any(s.status in (TOOL_ERROR, TOOL_TIMEOUT) for n in ex.tree()
                                           for s in n.episode.steps):
            raise _not_exercised(prop, session, ex, "no tool call failed, and faults cannot be forced on a plain env",
                                 "Make it an envaudit.ToolEnv so faults can be forced.")


# -- length -----------------------------------------------------------------------------------------
def assert_no_length_reward(make_env: Any, **options: Any) -> None:
    """Assert that the return does not depend on length beyond what the steps cost.

    Two paired checks on every reset seed of the enumeration:

    - **farming**: each action repeated until the episode ends; when its working steps keep
      paying more than nothing through the second half of the run (at least two of them, on at
      least two seeds), more steps buy more reward (a reply bonus, a farmed tool, a format score
      for a wrong answer that lets the episode go on). Partial progress is paid once per step of
      the task, so it stops paying before the second half.
    - **brevity**: each action that ends the episode at once, played first and after two steps of
      the cheapest action that does not end it; ending now must not earn more than ending later
      by more than those two steps cost (the cheapest working step's cost, per step).

    >>> from envaudit.testing import assert_no_length_reward
    >>> assert_no_length_reward("envaudit/Helpdesk-v0")
    """
    prop = "assert_no_length_reward"
    opts, extra = parse_options(prop, options, EXTRA)
    tol = opts.tolerance
    with open_session(make_env, opts) as session:
        ex = _explorer(session, opts, extra)
        found = _farming(ex, tol) or _brevity(ex, tol)
        if found is not None:
            raise_found(prop, make_env, found, ex)


def _farming(ex: Explorer, tol: float) -> Counterexample | None:
    for a in ex.actions:
        hits, example = 0, None
        for s in ex.seeds:
            ep = ex.play(Plan(s, (), a))
            half = ep.steps[ep.length // 2:]
            working = [st for st in half if st.status in (TOOL_OK, None) and not st.terminated]
            if ep.length >= 4 and len(working) >= 2 and all(st.reward > tol for st in working):
                hits += 1
                example = example or ep
        if hits >= min(2, len(ex.seeds)) and example is not None:
            short = ex.play(Plan(example.seed, (a,)))
            return Counterexample(
                f"repeating {example.steps[0].action_text} kept paying: its working steps in the second half of the "
                f"run paid {_reward(min(st.reward for st in example.steps[example.length // 2:] if st.reward > tol))} "
                f"or more each, and the run returned {_reward(example.episode_return)} against "
                f"{_reward(short.episode_return)} for one step of it (on {hits} of {len(ex.seeds)} seeds).",
                example, [("the same action played once", short)],
            )
    return None


def _brevity(ex: Explorer, tol: float) -> Counterexample | None:
    floor: dict[int, float] = {}
    for node in ex.tree():
        for st in node.episode.steps:
            if st.status in (TOOL_OK, None) and not st.ends:
                floor[node.plan.seed] = min(floor.get(node.plan.seed, st.reward), st.reward)
    for s in ex.seeds:
        if s not in floor:
            continue
        cost = max(0.0, -floor[s])
        first = [(a, ex.play(Plan(s, (a,)))) for a in ex.actions]
        enders = [(a, ep) for a, ep in first if ep.finished and ep.steps[0].terminated]
        pads = sorted(((ep.steps[0].reward, i) for i, (a, ep) in enumerate(first) if not ep.finished), key=lambda x: x)
        if not enders or not pads:
            continue
        pad = first[pads[0][1]][0]
        for a, now in enders:
            later = ex.play(Plan(s, (pad, pad, a)))
            if later.length != 3 or not later.steps[-1].terminated:
                continue
            if now.episode_return - later.episode_return > 2 * cost + tol:
                return Counterexample(
                    f"ending with {now.steps[0].action_text} at once returned {_reward(now.episode_return)}, and after two "
                    f"steps of {later.steps[0].action_text} {_reward(later.episode_return)}: {_reward(now.episode_return - later.episode_return)} "
                    f"less, more than two steps cost ({_reward(2 * cost)}); ending sooner is paid for being sooner.",
                    now, [(f"the same ending after two steps of {later.steps[0].action_text}", later)],
                )
    return None


# -- delaying a success -------------------------------------------------------------------------------
def assert_no_delayed_success_reward(make_env: Any, oracle: Any = None, **options: Any) -> None:
    """Assert that succeeding later never earns more than succeeding at once.

    Successes come from ``oracle`` (an ``envaudit.Policy``, a plain function ``(obs, info) ->
    action``, a list of actions, or a callable ``(env) -> one of those``; default: the env's own
    ``oracle()`` when it has one) and from the enumerated short plans; when none of those succeeds,
    from a deeper search that extends one plan per distinct observation and depth
    (``Explorer.deep_successes``). Each success is replayed
    with two steps of each action inserted before each of its steps (before the last first); when
    the delayed episode
    still succeeds and returns more, that is confirmed over the success's seeds and 24 more (a
    one-sided sign test, p < 0.01): an agent learns to stall before it finishes.

    >>> from envaudit.testing import assert_no_delayed_success_reward
    >>> assert_no_delayed_success_reward("envaudit/Helpdesk-v0")
    """
    prop = "assert_no_delayed_success_reward"
    opts, extra = parse_options(prop, options, EXTRA)
    tol = opts.tolerance
    with open_session(make_env, opts) as session:
        ex = _explorer(session, opts, extra)
        policy = (as_policy(oracle, session.env, action=session.action) if oracle is not None
                  else oracle_policy(session.env))
        sources = ex.successes(policy)
        if not sources:
            raise _not_exercised(prop, session, ex, "no episode succeeded", "Pass oracle= (a policy, a function "
                                 "(obs, info) -> action or a list of actions that solves the task), or give the env an "
                                 "oracle() method.")
        for success in _one_per_seed(sources):
            found = _delay(ex, success, tol)
            if found is not None:
                raise_found(prop, make_env, found, ex)


def _one_per_seed(episodes: list[Episode]) -> list[Episode]:
    """The shortest success from each seed: its delays are the cheapest to play."""
    best: dict[Any, Episode] = {}
    for ep in episodes:
        if ep.seed not in best or ep.length < best[ep.seed].length:
            best[ep.seed] = ep
    return list(best.values())


def _delay(ex: Explorer, success: Episode, tol: float) -> Counterexample | None:
    actions = success.actions
    for at in range(len(actions) - 1, -1, -1):  # before the last step first: the success already in reach
        for pad in ex.actions:
            delayed_actions = actions[:at] + (pad, pad) + actions[at:]
            delayed = ex.play(Plan(success.seed, delayed_actions))
            if not delayed.success or delayed.episode_return <= success.episode_return + tol:
                continue

            exact = _pads_alone(success, delayed, at, tol)
            if exact is not None:
                return _delay_found(success, delayed, at,
                                    f"exact, from the same reset seed: every step the two episodes share came back "
                                    f"with the same tool status and paid the same, and the two inserted steps paid "
                                    f"{_reward(exact)}",
                                    {"test": "same seed, shared steps identical", "pads_paid": exact,
                                     "seed": success.seed})

            def gain(seed: int, delayed_actions=delayed_actions) -> float | None:
                base = ex.play(Plan(seed, actions))
                if not base.success:
                    return None
                later = ex.play(Plan(seed, delayed_actions))
                return later.episode_return - base.episode_return if later.success else -1.0

            ev = sign_test([g for g in (gain(s) for s in [success.seed] + ex.confirm_seeds()) if g is not None], tol)
            if ev is None:
                continue
            return _delay_found(success, delayed, at,
                                f"confirmed on {ev['pairs']} reset seeds where the same actions succeed: more in "
                                f"{ev['higher']}, less in {ev['lower']}; {ev['test']} p={ev['p_value']:.2g}", ev)
    return None


def _delay_found(success: Episode, delayed: Episode, at: int, details: str, evidence: dict) -> Counterexample:
    return Counterexample(
        f"succeeding after two more steps of {delayed.steps[at].action_text} (inserted before step {at}) "
        f"returned {_reward(delayed.episode_return)}, more than succeeding without them "
        f"({_reward(success.episode_return)}): delaying a success pays.",
        delayed, [("the success it delays", success)], details=details, evidence=evidence,
    )


def _pads_alone(success: Episode, delayed: Episode, at: int, tol: float) -> float | None:
    """What the two inserted steps paid, when they are the whole difference: every step the two
    episodes share (before ``at``, and after the inserted pair) has the same tool status and the
    same reward. Else None (the tools drew otherwise, or the reward is noisy): confirm across seeds."""
    shared = list(zip(success.steps, delayed.steps[:at] + delayed.steps[at + 2:], strict=True))
    if any(a.status != b.status or abs(a.reward - b.reward) > tol for a, b in shared):
        return None
    paid = delayed.steps[at].reward + delayed.steps[at + 1].reward
    return paid if paid > tol else None


__all__ = ["assert_no_delayed_success_reward", "assert_no_failure_penalty", "assert_no_length_reward",
           "assert_no_reward_after_failure"]
