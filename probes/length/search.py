"""Finding honest successes when neither random play nor an ``oracle()`` shows one.

The length probe places a behaviour against honest success (a brevity bonus "pays as much as
succeeding"; a delayed success "pays more than succeeding at once"). In a long task random play
almost never succeeds, and an env without ``oracle()`` offers no success to compare with, so both
checks had nothing to stand on. This module searches for successes on fixed reset seeds:

- ``bfs``: breadth-first over action sequences from ``reset(seed)``, one cell per distinct
  observation (components that change on every step, such as a step counter, left out), each cell
  expanded with every action (a few states per cell, see ``VISITS``). A cell is restored by
  replaying its prefix on the same seed. Breadth-first, so the first success found is among the
  shortest.
- ``follow``: once one success is known, the next seeds first try its *skeleton* (the actions whose
  tool call worked, a failed call retried), then every action as the last one; only a seed where
  that fails is searched afresh.

Work is counted in env steps (``SEARCH_STEPS`` per seed), never in seconds. Every found sequence is
played again through ``ProbeContext.run`` by the caller, so only successes the recorder saw count.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.policies import tool_status
from envaudit.probe import ProbeContext
from envaudit.protocol import TOOL_FAILED

SEARCH_STEPS = 20000
"""Env steps (replays included) spent on one seed's breadth-first search before giving that seed up."""
MISSES = 3
"""Seeds in a row without a success after which the search stops (the task is out of its reach)."""
VISITS = 3
"""States kept per cell. One observation can hide states that differ where the agent cannot see
(how far the env's random stream has run): with one state per cell a call that fails from it
fails again every time, and the search would stop at the first flaky tool."""


class _Env:
    """One env instance the search restores states of, by replaying a prefix on the same seed.

    Replay, not ``copy.deepcopy``: a copy can cost as much as hundreds of steps (Taxi's transition
    table) or fail (a ToolEnv's thread pool), and replayed steps are the work unit counted."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        self.env, self.seed, self.used = env, seed, 0
        self.obs, _ = env.reset(seed=seed)

    def from_state(self, prefix: Sequence[Any]) -> gym.Env:
        self.env.reset(seed=self.seed)
        for a in prefix:
            self.env.step(a)
            self.used += 1
        return self.env

    def step(self, env: gym.Env, action: Any) -> tuple:
        self.used += 1
        return env.step(action)


def clock_mask(parent: Any, children: list[Any]) -> np.ndarray | None:
    """Observation components that changed on every step out of ``parent`` (a step counter), read
    from a state after the first step (the first step also changes "nothing happened yet" slots):
    left out of a cell's key, else every step would be a new cell."""
    if not isinstance(parent, np.ndarray) or not children:
        return None
    base = np.asarray(parent, float).ravel()
    changed = np.ones(base.shape, bool)
    for o in children:
        o = np.asarray(o, float).ravel()
        if o.shape != base.shape:
            return None
        changed &= o != base
    return changed


def _key(obs: Any, clock: np.ndarray | None) -> Any:
    if isinstance(obs, np.ndarray):
        a = np.asarray(obs, float).ravel()
        if clock is not None and clock.shape == a.shape:
            a = a[~clock]
        return np.round(a, 6).tobytes()
    return repr(obs)


def _expand(box: _Env, prefix: tuple, actions: Sequence[Any]) -> tuple[tuple | None, list]:
    """Every action from one cell: a success's actions if one succeeds, and the cells still running."""
    children = []
    for a in actions:
        e = box.from_state(prefix)
        o, _, terminated, truncated, info = box.step(e, a)
        if terminated and info.get("success") is True:
            return (*prefix, a), children
        if not (terminated or truncated):
            children.append(((*prefix, a), o))
    return None, children


def bfs(env: gym.Env, seed: int, actions: Sequence[Any], budget: int) -> tuple | None:
    """The first success found breadth-first on ``seed`` (its actions), or None within ``budget`` steps."""
    box = _Env(env, seed)
    won, layer = _expand(box, (), actions)
    if won is not None or not layer:
        return won
    won, grandchildren = _expand(box, layer[0][0], actions)
    if won is not None:
        return won
    clock = clock_mask(layer[0][1], [o for _, o in grandchildren])
    seen: Counter = Counter({_key(box.obs, clock): 1})
    queue: deque = deque()

    def visit(children: list) -> None:
        for child in children:
            k = _key(child[1], clock)
            if seen[k] < VISITS:
                seen[k] += 1
                queue.append(child)

    visit(layer)
    while queue and box.used < budget:
        prefix, _ = queue.popleft()
        won, children = _expand(box, prefix, actions)
        if won is not None:
            return won
        visit(children)
    return None


def follow(env: gym.Env, seed: int, skeleton: Sequence[Any], actions: Sequence[Any], budget: int) -> tuple | None:
    """The skeleton of a known success on a new seed (failed calls retried), then every action as
    the last one; the success's actions, or None."""
    box = _Env(env, seed)
    e, prefix, i = box.from_state(()), [], 0
    while i < len(skeleton) and box.used < budget:
        _, _, terminated, truncated, info = box.step(e, skeleton[i])
        prefix.append(skeleton[i])
        if terminated or truncated:
            return None
        if tool_status(info) not in TOOL_FAILED:
            i += 1
    if i < len(skeleton):
        return None
    for a in actions:
        last = box.from_state(prefix)
        _, _, terminated, _, info = box.step(last, a)
        if terminated and info.get("success") is True:
            return (*prefix, a)
    return None


def skeleton_of(actions: Sequence[Any], statuses: Sequence[Any]) -> list[Any]:
    """A success's actions whose tool call worked, the final action left out (it is tried afresh)."""
    return [a for a, s in zip(actions[:-1], statuses[:-1], strict=True) if s not in TOOL_FAILED]


@dataclass
class SearchState:
    """Where a search over a list of seeds stands, so that it can go on for more successes later
    (``find_successes(..., state=)``) instead of starting again: the successes found, the skeleton
    of the first, the seeds tried and the misses in a row."""

    found: list[tuple[int, tuple]] = field(default_factory=list)
    skeleton: list[Any] | None = None
    tried: int = 0
    misses: int = 0
    stopped: str | None = None
    """Why the search can go no further (the env raised), else None."""


def find_successes(ctx: ProbeContext, n: int, seeds: Sequence[int],
                   state: SearchState | None = None) -> list[tuple[int, tuple]]:
    """Up to ``n`` (seed, actions) successes over ``seeds`` in order; stops after ``MISSES`` misses in
    a row. With ``state`` it goes on from where that search stopped (``seeds`` must start with the
    seeds it tried) and updates it; the successes are the same as one search for ``n`` would find."""
    state = state if state is not None else SearchState()
    space = ctx.env.action_space
    if not isinstance(space, gym.spaces.Discrete) or ctx.hangs or state.stopped:
        return list(state.found)
    if len(state.found) >= n or state.misses >= MISSES or state.tried >= len(seeds):
        return list(state.found)
    actions = [int(space.start) + i for i in range(int(space.n))]
    env = ctx.counted(ctx.make_env())
    try:
        for seed in seeds[state.tried:]:
            if len(state.found) >= n or state.misses >= MISSES or ctx.over_cap("the search for successes"):
                break
            state.tried += 1
            try:
                seq = follow(env, seed, state.skeleton, actions, SEARCH_STEPS) if state.skeleton is not None else None
                if seq is None:
                    seq = bfs(env, seed, actions, SEARCH_STEPS)
                if seq is not None and state.skeleton is None:
                    state.skeleton = _replayed_skeleton(env, seed, seq)
            except Exception as exc:  # the env's own error is the api probe's finding, not this probe's crash
                state.stopped = ctx.notes["success_search"] = (
                    f"stopped at seed {seed}: the env raised {type(exc).__name__}: {exc}"
                    f" ({len(state.found)} successes found before)")
                break
            if seq is None:
                state.misses += 1
                continue
            state.misses = 0
            state.found.append((int(seed), tuple(int(a) for a in seq)))
    finally:
        env.close()
    return list(state.found)


def _replayed_skeleton(env: gym.Env, seed: int, seq: Sequence[Any]) -> list[Any]:
    env.reset(seed=seed)
    statuses = [tool_status(env.step(a)[4]) for a in seq]
    return skeleton_of(list(seq), statuses)


__all__ = ["SEARCH_STEPS", "SearchState", "bfs", "clock_mask", "find_successes", "follow", "skeleton_of"]
