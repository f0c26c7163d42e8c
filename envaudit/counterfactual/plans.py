"""What the engine plays: a prefix (a reset seed and the actions already taken) and the named
continuations that can follow it, and the wrapper and policy that play a prefix + continuation on
whichever worker the executor picks.

A run of the engine is an ordinary ``Runner`` run: the plan of each episode is found from its
reset seed (the ``PlannedEnv`` wrapper looks it up on ``reset`` and hands it to the policy), so the
episodes need no shared state and may play on any worker, in any order. Seeds are unique within one
run; prefixes that share a seed go to separate runs (``Counterfactuals.play``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.counterfactual.digest import digest
from envaudit.faults import FaultInjector
from envaudit.protocol import TOOL_ERROR, TOOL_OK, TOOL_TIMEOUT
from envaudit.rollout import Policy
from envaudit.toolenv import ToolEnv

FORCED = (TOOL_OK, TOOL_ERROR, TOOL_TIMEOUT)

ENDED, LIMIT, ANY = "ended", "limit", "any"
EXPECT = (ENDED, LIMIT, ANY)


@dataclass(frozen=True)
class Prefix:
    """The state a continuation starts from: reset with ``seed``, then play ``actions``."""

    seed: int
    actions: tuple = ()
    source: int | None = None
    """The episode id the prefix was cut from, when it was (for examples)."""
    faults: tuple = ()
    """``(call index, status)`` pairs forced again while the prefix replays: the faults the episode
    was played with (a fault-injection run's), so its state is reached as it was (a ``ToolEnv`` only)."""


@dataclass(frozen=True)
class Continuation:
    """A named way to go on from a prefix.

    ``actions`` are played right after the prefix; then the last planned action is repeated until
    the env ends the episode (its step limit at the latest), or ``policy`` takes over when given
    (the oracle's continuation). ``fault`` forces the status of the first continuation step's tool
    call (``ok``: no fault; ``error``/``timeout`` through ``envaudit.faults``, a ``ToolEnv`` only).
    ``expect`` says which played episodes count: ``ended`` — the env ended the episode on the last
    planned action, no sooner; ``limit`` — the step limit cut it (truncated); ``any`` — whatever
    happened, as long as the prefix played as planned.
    """

    name: str
    actions: tuple = ()
    expect: str = ANY
    fault: str | None = None
    policy: Policy | None = None
    watch: bool = False
    """Keep a fingerprint of every observation the episode sees (``Played.observations``); the run
    then plays in order in the scanning process, where the policy can hand them back."""
    label: str = ""
    """The continuation in the user's words (``"end now with 'submit'"``)."""
    tags: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.expect in EXPECT, f"expect must be one of {EXPECT}, got {self.expect!r}"
        assert self.fault is None or self.fault in FORCED, f"fault must be one of {FORCED}, got {self.fault!r}"
        assert self.actions or self.policy is not None or self.expect != ENDED, (
            f"continuation {self.name!r} expects the episode to end on its last action but plans none")


def end_now(action: int, label: str = "", name: str | None = None) -> Continuation:
    """End the episode now with ``action`` (submit, quit, hand off)."""
    return Continuation(name or f"end-{action}", (int(action),), ENDED, label=label or f"end now with {action}")


def idle_then_end(idle: int, k: int, ender: int, name: str | None = None) -> Continuation:
    """``k`` idle steps (``idle`` repeated), then end with ``ender``."""
    assert k >= 0, f"k counts idle steps, got {k}"
    return Continuation(name or f"idle-{k}-end-{ender}", (int(idle),) * k + (int(ender),), ENDED,
                        label=f"idle {k} steps, then end with {ender}")


def cycle_then_end(cycle: Sequence[int], k: int, ender: int, name: str | None = None) -> Continuation:
    """Repeat the action cycle ``k`` times, then end with ``ender``."""
    assert len(cycle) > 0 and k >= 0, f"a cycle needs actions and k >= 0, got {list(cycle)}, k={k}"
    return Continuation(name or f"cycle-{k}-end-{ender}", tuple(int(a) for a in cycle) * k + (int(ender),), ENDED,
                        label=f"repeat {list(cycle)} {k} times, then end with {ender}")


def run_into_limit(idle: int | Sequence[int], name: str = "step-limit") -> Continuation:
    """Repeat ``idle`` (an action or a cycle) until the step limit cuts the episode."""
    cycle = (int(idle),) if isinstance(idle, (int, np.integer)) else tuple(int(a) for a in idle)
    return Continuation(name, cycle * 1, LIMIT, label=f"repeat {list(cycle)} until the step limit")


def play_then(actions: Sequence[int], name: str, label: str = "") -> Continuation:
    """A known continuation (the rest of a success, say), then whatever follows by repetition."""
    return Continuation(name, tuple(int(a) for a in actions), ANY, label=label or name)


def oracle_from_here(policy: Policy, name: str = "oracle") -> Continuation:
    """The env's oracle (or any honest policy) takes over right after the prefix."""
    return Continuation(name, (), ANY, policy=policy, label=f"{policy.describe()} from here")


def forced(action: int, status: str, then: Sequence[int] = (), expect: str = ANY,
           name: str | None = None) -> Continuation:
    """``action`` with its tool call forced to ``status`` (ok, error, timeout), then ``then``."""
    return Continuation(name or f"{action}-{status}", (int(action), *(int(a) for a in then)), expect, fault=status,
                        label=f"{action} with its tool forced {status}")


# -- playing ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    actions: tuple
    start: int  # where the continuation begins (the prefix's length)
    fault: str | None
    seed: int = 0
    prefix_faults: tuple = ()


class PlannedEnv(gym.Wrapper):
    """Looks up the plan of the episode by its reset seed and forces the planned fault (and the
    prefix's own faults while it replays); the policy
    reads ``counterfactual_plan`` through ``get_wrapper_attr``."""

    def __init__(self, env: gym.Env, plans: Mapping[int, Plan]) -> None:
        self.plans = dict(plans)
        inner = env
        if any(p.fault in (TOOL_ERROR, TOOL_TIMEOUT) or p.prefix_faults for p in self.plans.values()):
            if not isinstance(env.unwrapped, ToolEnv):
                raise TypeError(f"forcing a tool {TOOL_ERROR}/{TOOL_TIMEOUT} needs an envaudit.ToolEnv, got "
                                f"{type(env.unwrapped).__name__}; only ok (no fault) can be forced on other envs")
            inner = FaultInjector(env, schedule=self._schedule)
        super().__init__(inner)
        self.counterfactual_plan: Plan | None = None
        self._prefix_faults: dict[int, str] = {}

    def _schedule(self, tool: str, call_index: int) -> str | None:
        # Every step of a ToolEnv is one tool call: the call index is the step index.
        plan = self.counterfactual_plan
        if plan is None:
            return None
        if call_index < plan.start:
            return self._prefix_faults.get(call_index)
        if plan.fault in (None, TOOL_OK) or call_index != plan.start:
            return None
        return plan.fault

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.counterfactual_plan = self.plans.get(int(seed)) if seed is not None else None
        # Looked up on every tool call of the replay: made once per episode.
        self._prefix_faults = dict(self.counterfactual_plan.prefix_faults) if self.counterfactual_plan else {}
        return self.env.reset(seed=seed, options=options)


class PlanPolicy(Policy):
    """Plays the episode's plan (found by its seed), then repeats its last action, or hands over
    to ``then`` (reset at the start of each episode; it sees the steps after the plan)."""

    def __init__(self, name: str, then: Policy | None = None, watch: bool = False) -> None:
        self.name = name
        self.then = then
        self.watch = watch
        self.digests: dict[int, list[str]] = {}

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.plan: Plan | None = env.get_wrapper_attr("counterfactual_plan")
        if self.then is not None:
            self.then.reset(env, rng)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        plan = self.plan
        assert plan is not None, "an episode without a plan: its seed was not in the run's plans"
        if self.watch:
            self.digests.setdefault(plan.seed, []).append(digest(obs))
        if self.then is not None and self.t >= len(plan.actions):
            return self.then(obs, info)
        return plan.actions[min(self.t, len(plan.actions) - 1)]

    def describe(self) -> str:
        return f"counterfactual {self.name}"
