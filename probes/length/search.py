"""Finding honest successes when neither random play nor an ``oracle()`` shows one.

The length probe places a behaviour against honest success (a brevity bonus "pays as much as
succeeding"; a delayed success "pays more than succeeding at once"). In a long task random play
almost never succeeds, and an env without ``oracle()`` offers no success to compare with, so both
checks had nothing to stand on. This module searches for successes on fixed reset seeds:

- ``breadth_first``: over action sequences from ``reset(seed)``, one cell per distinct
  observation (components that change on every step, such as a step counter, left out), each cell
  expanded with every action (a few states per cell, see ``VISITS``). A cell is restored by
  replaying its prefix on the same seed. Breadth-first, so the first success found is among the
  shortest. ``BATCH`` cells are expanded at once, each action of each a replay of its own that
  fans out over the scan's workers (``search_runs.RunExpander``); ``bfs`` does the same on one env
  instance, a cell at a time.
- following: once one success is known, the next seeds first try its *skeleton* (the actions whose
  tool call worked, a failed call retried), then every action as the last one, all those seeds at
  once (``search_runs.follow_seeds``); only a seed where that fails is searched afresh.

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

from envaudit.probe import ProbeContext
from envaudit.probes.length.search_runs import RunExpander, Stopped, follow_seeds, statuses_of
from envaudit.protocol import TOOL_FAILED

SEARCH_STEPS = 20000
"""Env steps (replays included) spent on one seed's breadth-first search before giving that seed up."""
MISSES = 3
"""Seeds in a row without a success after which the search stops (the task is out of its reach)."""
BATCH = 16
"""Cells a breadth-first search expands at once (each with every action: one run of up to
``BATCH`` x actions replays). A fixed number, never the workers', so the work is the same anywhere."""
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


Outcome = tuple[Any, bool, bool, bool]
"""What one action did from a cell: the observation, terminated, truncated, and success."""


class _EnvExpander:
    """Expands cells on one env instance, one action after another (a success ends a cell early)."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        self.box = _Env(env, seed)

    @property
    def used(self) -> int:
        return self.box.used

    @property
    def reset_obs(self) -> Any:
        return self.box.obs

    def __call__(self, prefixes: Sequence[tuple], actions: Sequence[Any]) -> list[list[Outcome]]:
        out = []
        for prefix in prefixes:
            tried: list[Outcome] = []
            for a in actions:
                e = self.box.from_state(prefix)
                o, _, terminated, truncated, info = self.box.step(e, a)
                tried.append((o, bool(terminated), bool(truncated), bool(terminated) and info.get("success") is True))
                if tried[-1][3]:
                    break
            out.append(tried)
        return out


def _read(prefix: tuple, tried: Sequence[Outcome], actions: Sequence[Any]) -> tuple[tuple | None, list]:
    """A cell's expansion: a success's actions if one succeeded, and the cells still running."""
    children = []
    for a, (o, terminated, truncated, won) in zip(actions, tried, strict=False):
        if won:
            return (*prefix, a), children
        if not (terminated or truncated):
            children.append(((*prefix, a), o))
    return None, children


def bfs(env: gym.Env, seed: int, actions: Sequence[Any], budget: int) -> tuple | None:
    """The first success found breadth-first on ``seed`` (its actions), or None within ``budget`` steps."""
    return breadth_first(_EnvExpander(env, seed), actions, budget)


def breadth_first(expand: Any, actions: Sequence[Any], budget: int, batch: int = 1) -> tuple | None:
    """``bfs`` over an expander (``expand(prefixes, actions)``: each prefix's outcome per action, with
    ``used``, the steps played so far, and ``reset_obs``), up to ``batch`` cells expanded at once. The
    cells are read in queue order as one at a time would read them, so the success found is the same
    whatever ``batch``; a batch only plays some cells past it."""
    won, layer = _read((), expand([()], actions)[0], actions)
    if won is not None or not layer:
        return won
    won, grandchildren = _read(layer[0][0], expand([layer[0][0]], actions)[0], actions)
    if won is not None:
        return won
    clock = clock_mask(layer[0][1], [o for _, o in grandchildren])
    seen: Counter = Counter({_key(expand.reset_obs, clock): 1})
    queue: deque = deque()

    def visit(children: list) -> None:
        for child in children:
            k = _key(child[1], clock)
            if seen[k] < VISITS:
                seen[k] += 1
                queue.append(child)

    visit(layer)
    used = expand.used  # counted as one cell at a time plays them, so the budget stops where it would
    while queue and used < budget:
        cells, projected = [], used
        while len(cells) < min(batch, len(queue)) and projected < budget:
            cells.append(queue[len(cells)][0])
            projected += (len(cells[-1]) + 1) * len(actions)
        for prefix, tried in zip(cells, expand(cells, actions), strict=True):
            if used >= budget:
                return None
            queue.popleft()
            won, children = _read(prefix, tried, actions)
            if won is not None:
                return won
            used += len(tried) * (len(prefix) + 1)
            visit(children)
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
    seeds it tried) and updates it; the successes are the same as one search for ``n`` would find.

    Every env call is an episode of ``ctx.run`` (``search_runs``), so the search fans out over the
    scan's workers: a seed's breadth-first search ``BATCH`` cells at a time, and the seeds still
    needed followed all at once (a seed followed but not needed in the end is work spent past the
    answer, never a different answer)."""
    state = state if state is not None else SearchState()
    space = ctx.env.action_space
    if not isinstance(space, gym.spaces.Discrete) or ctx.hangs or state.stopped:
        return list(state.found)
    if len(state.found) >= n or state.misses >= MISSES or state.tried >= len(seeds):
        return list(state.found)
    actions = [int(space.start) + i for i in range(int(space.n))]
    followed: dict[int, tuple | None] = {}
    for k in range(state.tried, len(seeds)):
        seed = int(seeds[k])
        if len(state.found) >= n or state.misses >= MISSES or ctx.over_cap("the search for successes"):
            break
        state.tried += 1
        try:
            if state.skeleton is not None and k not in followed:
                ahead = list(range(k, min(len(seeds), k + n - len(state.found))))
                found = follow_seeds(ctx, [int(seeds[j]) for j in ahead], state.skeleton, actions, SEARCH_STEPS)
                followed.update(zip(ahead, found, strict=True))
            seq = followed.get(k)
            if seq is None:
                seq = breadth_first(RunExpander(ctx, seed), actions, SEARCH_STEPS, batch=BATCH)
            if seq is not None and state.skeleton is None:
                state.skeleton = skeleton_of(list(seq), statuses_of(ctx, seed, seq))
        except Stopped as stop:
            state.stopped = f"stopped at seed {seed}: {stop} ({len(state.found)} successes found before)"
            if stop.raised:  # the env's own error is the api probe's finding, not this probe's crash
                ctx.notes["success_search"] = state.stopped
            break
        if seq is None:
            state.misses += 1
            continue
        state.misses = 0
        state.found.append((seed, tuple(int(a) for a in seq)))
    return list(state.found)


__all__ = ["BATCH", "SEARCH_STEPS", "SearchState", "bfs", "breadth_first", "clock_mask", "find_successes", "skeleton_of"]
