"""Paired comparisons on the enumerated short plans of a ``ToolEnv`` (``explore.Explorer``).

Each function walks the plans shortest first and returns the first ``Counterexample`` (the plan,
the forced fault, both episodes and their returns), or None:

- ``timeout_pairs``: a call forced to time out against the same call forced to fail outright,
  each with every one-step continuation: exact pairs (both arms skip the tool's code, so they
  draw the same random numbers); the timed-out arm must not return more.
- ``failure_pairs``: a call forced to fail against the same call run normally (status ok): the
  failed step must not pay more. Confirmed across seeds (``Explorer.confirm``).
- ``after_failure_pairs``: the step *after* a forced failure or timeout against the same step
  after the call ran normally: from the call on, the failed arm must not return more, with its
  next step paying more. Confirmed across seeds.
- ``penalty_pairs``: a failed or timed-out call (that does not end the episode) must not cost
  more than the cheapest working step that does not end it, anywhere in the seed's plans and its
  actions repeated to the end (past the steps that make progress): a failure charged beyond the
  time it takes. Required on every seed where the plan reaches it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.testing.explore import Explorer, Node
from envaudit.testing.search import Counterexample, PropertyFailed, render_failure, target_text
from envaudit.testing.trajectory import Episode, Plan

FAULTS = (TOOL_ERROR, TOOL_TIMEOUT)


def _r(value: float) -> str:
    return f"{value:+.4g}"


def _called(ex: Explorer) -> Iterator[tuple[Node, int, int]]:
    """Enumerated plans whose last step calls a tool: (node, step index, call index)."""
    if not ex.session.injects:
        return
    for node in ex.tree():
        ep = node.episode
        if ep.length != node.depth:
            continue
        step = ep.steps[-1]
        if step.tool is not None and step.call is not None:
            yield node, step.index, step.call


def _evidence_text(ev: dict) -> str:
    return (f"confirmed on {ev['pairs']} more reset seeds: higher in {ev['higher']}, lower in {ev['lower']}, "
            f"tied in {ev['ties']}; mean difference {_r(ev['mean_diff'])}, {ev['test']} p={ev['p_value']:.2g}")


def timeout_pairs(ex: Explorer, tol: float) -> Counterexample | None:
    for node, i, call in _called(ex):
        for plan in [node.plan] + [Plan(node.plan.seed, node.plan.actions + (a,)) for a in ex.actions]:
            t_ep, f_ep = ex.forced(plan, call, TOOL_TIMEOUT), ex.forced(plan, call, TOOL_ERROR)
            if t_ep.length <= i or f_ep.length <= i or t_ep.length != f_ep.length:
                continue  # the continuation is not played in both arms (one ended at the call)
            if t_ep.episode_return > f_ep.episode_return + tol:
                after = f", then {t_ep.steps[i + 1].action_text}" if t_ep.length > i + 1 else ""
                return Counterexample(
                    f"tool call {call} ({t_ep.steps[i].tool}, step {i}) timed out{after}, and the episode returned "
                    f"{_r(t_ep.episode_return)}, more than the same plan with call {call} failing outright "
                    f"({_r(f_ep.episode_return)}): timing out earns more than failing.",
                    t_ep, [(f"the same plan with call {call} failing outright", f_ep)],
                    details="Paired: both arms are forced, so they differ in the call's status alone.",
                    evidence={"timeout_return": t_ep.episode_return, "error_return": f_ep.episode_return,
                              "call": call, "step": i},
                )
    return None


def failure_pairs(ex: Explorer, tol: float, ordinary: float | None = None) -> Counterexample | None:
    """A failed call whose step pays more than the same step working and than ``ordinary`` (what an
    ordinary step pays: ``ordinary_step(ex)`` unless given)."""
    ordinary = ordinary_step(ex) if ordinary is None else ordinary
    for node, i, call in _called(ex):
        normal = node.episode
        if normal.steps[i].status != TOOL_OK:
            continue
        failed = ex.forced(node.plan, call, TOOL_ERROR)
        gain = _step_gain(failed, normal, i)
        if gain is None or gain <= tol:
            continue
        if ordinary is not None and failed.steps[i].reward <= ordinary + tol:
            continue  # the call's own effect costs (an undo): failing pays what an ordinary step pays
        ev = ex.confirm(node.plan.actions, i, TOOL_ERROR, lambda f, n, i=i: _step_gain(f, n, i), tol)
        if ev is None:
            continue
        return Counterexample(
            f"tool call {call} ({normal.steps[i].tool}, step {i}) failed and the step paid "
            f"{_r(failed.steps[i].reward)}, more than the same step with the call working "
            f"({_r(normal.steps[i].reward)}).",
            failed, [(f"the same plan with call {call} working", normal)],
            details=_evidence_text(ev), evidence=ev,
        )
    return None


def after_failure_pairs(ex: Explorer, tol: float) -> Counterexample | None:
    for node, i, call in _called(ex):
        normal = node.episode
        if normal.steps[i].status != TOOL_OK or normal.finished:
            continue
        for status in FAULTS:
            for a in ex.actions:
                plan = Plan(node.plan.seed, node.plan.actions + (a,))
                n_ep, f_ep = ex.play(plan), ex.forced(plan, call, status)
                gain = _after_gain(f_ep, n_ep, i)
                if gain is None or gain <= tol or _as_without_the_call(ex, plan, f_ep, i, tol):
                    continue
                ev = ex.confirm(plan.actions, i, status, lambda f, n, i=i: _after_gain(f, n, i), tol)
                if ev is None:
                    continue
                nxt = f_ep.steps[i + 1].action_text
                return Counterexample(
                    f"after tool call {call} ({f_ep.steps[i].tool}, step {i}) {'timed out' if status == TOOL_TIMEOUT else 'failed'}, "
                    f"{nxt} paid {_r(f_ep.steps[i + 1].reward)} and the episode returned {_r(f_ep.episode_return)}; "
                    f"after the same call working, {nxt} paid {_r(n_ep.steps[i + 1].reward)} and it returned "
                    f"{_r(n_ep.episode_return)}: the step after a {'timeout' if status == TOOL_TIMEOUT else 'failure'} "
                    "pays more than after a working call.",
                    f_ep, [(f"the same plan with call {call} working", n_ep)],
                    details=_evidence_text(ev), evidence=ev,
                )
    return None


def _step_gain(failed: Episode, normal: Episode, i: int) -> float | None:
    """How much more step ``i`` pays failed than working; None when one of them ended the episode
    and the other did not (an ending step settles shaping, so the two rewards are not comparable)."""
    if failed.length <= i or normal.length <= i or failed.steps[i].ends != normal.steps[i].ends:
        return None
    return failed.steps[i].reward - normal.steps[i].reward


def _after_gain(forced: Episode, normal: Episode, i: int) -> float | None:
    """How much more the forced arm returns from call ``i`` on, when its next step also pays more.

    None when the next step is not comparable: missing in an arm, or its tool call came back with
    another status (the forced arm skipped the tool's random draws, so later draws differ; a
    comparison conditioned on the call working would otherwise favour the forced arm's next call)."""
    if forced.length <= i + 1 or normal.length <= i + 1:
        return None
    if forced.steps[i + 1].status != normal.steps[i + 1].status:
        return None
    step_gain = forced.steps[i + 1].reward - normal.steps[i + 1].reward
    total = sum(forced.rewards[i:i + 2]) - sum(normal.rewards[i:i + 2])
    return min(step_gain, total)


def ordinary_step(ex: Explorer) -> float | None:
    """What an ordinary step pays: the median reward of the working steps of the short plans that
    did not end their episode (None without one). A failed call that pays no more changes nothing a
    step elsewhere would not: a failed undo keeps the progress the working one takes back, so it
    pays more than the undo working, and no more than an ordinary step (the scan's yardstick too)."""
    rewards = [s.reward for n in ex.tree() for s in n.episode.steps if s.status in (TOOL_OK, None) and not s.ends]
    return float(np.median(rewards)) if rewards else None


def _as_without_the_call(ex: Explorer, plan: Plan, forced: Episode, i: int, tol: float) -> bool:
    """Whether the step after the failed call ``i`` pays no more than the same action where the
    call was never made (a failed call leaves the state as it was): then what follows a failure is
    what follows not calling, and the working call's own effect (an undo) is what differs."""
    if forced.length <= i + 1 or forced.steps[i + 1].status not in (TOOL_OK, None):
        return False
    skipped = ex.play(Plan(plan.seed, plan.actions[:i] + plan.actions[i + 1:]))
    if skipped.length <= i or skipped.steps[i].status != forced.steps[i + 1].status:
        return False
    return forced.steps[i + 1].reward <= skipped.steps[i].reward + tol


def _cheapest_working(ex: Explorer) -> dict[int, float]:
    """Per seed: the lowest reward of a working step that did not end its episode, in the short
    plans and in each action repeated to the end. The repeats reach the steps that make no more
    progress (a path already done): where every short working step is progress (shaping pays it),
    a failed call that makes none is not charged for failing."""
    out: dict[int, float] = {}
    episodes = [(n.plan.seed, n.episode) for n in ex.tree()]
    episodes += [(seed, ep) for seed in ex.seeds for _, ep in ex.repeated(seed)]
    for seed, episode in episodes:
        for s in episode.steps:
            if s.status in (TOOL_OK, None) and not s.ends:
                out[seed] = min(out.get(seed, s.reward), s.reward)
    return out


def _failed_arm(ex: Explorer, plan: Plan, i: int, status: str) -> Episode | None:
    """``plan`` with step ``i``'s call failing with ``status``: forced on a ``ToolEnv``; on a plain
    env the plan's own run when that call failed so by itself (else None)."""
    ep = ex.play(plan)
    if ep.length <= i or ep.steps[i].tool is None:
        return None
    if ex.session.injects:
        return None if ep.steps[i].call is None else ex.forced(plan, ep.steps[i].call, status)
    return ep if ep.steps[i].status == status else None


def penalty_pairs(ex: Explorer, tol: float) -> Counterexample | None:
    floors = _cheapest_working(ex)
    if not floors:
        return None
    floor = min(floors.values())
    for node in ex.tree():
        if node.episode.length != node.depth or node.episode.steps[-1].tool is None:
            continue
        i = node.depth - 1
        for status in FAULTS:
            f_ep = _failed_arm(ex, node.plan, i, status)
            if f_ep is None or f_ep.steps[i].ends or f_ep.steps[i].reward >= floor - tol:
                continue
            hits = _penalised(ex, node.plan.actions, i, status, floor, tol)
            if hits < 2:
                continue
            return Counterexample(
                f"the {f_ep.steps[i].tool} call at step {i} {'timed out' if status == TOOL_TIMEOUT else 'failed'} and "
                f"the step paid {_r(f_ep.steps[i].reward)}, less than the cheapest working step that does not end "
                f"an episode ({_r(floor)}), on all {hits} reset seeds where the plan reached it: a failure is "
                "charged beyond the time it takes, so quitting beats persisting when tools fail.",
                f_ep, [], evidence={"failed_step_reward": f_ep.steps[i].reward, "cheapest_working": floor,
                                    "seeds": hits},
            )
    return None


def _penalised(ex: Explorer, actions: tuple, i: int, status: str, floor: float, tol: float) -> int:
    """On how many seeds the call fails below ``floor``; 0 as soon as one seed pays it no less."""
    hits = 0
    for s in ex.seeds + ex.confirm_seeds():
        f_ep = _failed_arm(ex, Plan(s, actions), i, status)
        if f_ep is None or f_ep.steps[i].ends:
            continue
        if f_ep.steps[i].reward >= floor - tol:
            return 0
        hits += 1
    return hits


def raise_found(prop: str, make_env: Any, found: Counterexample, ex: Explorer) -> None:
    how = (f"exhaustive: every action sequence of up to {ex.depth} steps from reset seeds "
           f"{ex.seeds[0]}..{ex.seeds[-1]}, shortest first, {ex.plays} plays")
    raise PropertyFailed(render_failure(prop, target_text(make_env), found, ex.plays, how=how), found, prop)


__all__ = ["after_failure_pairs", "failure_pairs", "penalty_pairs", "raise_found", "timeout_pairs"]
