"""Systematic short plans and paired counterfactuals on them, for the properties' defaults.

Random search finds a flaw that needs one particular two-step plan and one particular fault only
by luck (the issue this module answers: a timed-out search graded "found" passed 50 Hypothesis
cases). Small tool envs are small, so their short plans can be played *all*: every action
sequence up to ``depth`` steps (the deepest that keeps ``MAX_NODES`` plans per seed; at most
``DEPTH``), from each of ``SEEDS`` reset seeds, in order of length. A flaw reachable within
that depth is then found by every run, and the first one found is the shortest: the
enumeration is its own shrinker.

On those plans the properties compare *pairs*: the same plan from the same reset seed with one
tool call forced (``FaultSchedule``), its continuation unchanged. A forced error and a forced
timeout skip the tool's own code alike, so the two arms draw the same random numbers and differ
in the call's status alone: an exact counterfactual. A forced fault against the call left to
run normally differs also in what the tool drew; such a comparison is confirmed on
``CONFIRM_SEEDS`` more reset seeds (``Explorer.confirm``, a one-sided sign test at ``ALPHA``),
so a noisy grader is not mistaken for a rewarded failure.

Work is counted in plays (episodes), never seconds; every seed comes from the property's ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats as _st

from envaudit.protocol import TOOL_OK
from envaudit.testing.trajectory import EnvSession, Episode, FaultSchedule, Plan

DEPTH = 3
"""The longest enumerated action sequence."""

SEEDS = 4
"""Reset seeds every short plan is played from: ``seed``, ``seed + 1``, ..."""

MAX_NODES = 400
"""Plans per seed the enumeration may hold; the depth is the largest that keeps within it."""

CONFIRM_SEEDS = 24
"""More reset seeds a comparison with a normally running call is replayed on before it decides."""

ALPHA = 0.01
"""One-sided level of the sign test that confirms a comparison across seeds."""

DEEP_PLAYS = 2000
"""Plays the search for a first success may spend past the enumerated depth, all seeds together."""


@dataclass(frozen=True)
class Node:
    """One enumerated plan, as played from its seed (no faults forced)."""

    plan: Plan
    episode: Episode

    @property
    def depth(self) -> int:
        return len(self.plan.actions)


def _key(values: Any) -> tuple:
    return tuple(v.tobytes() if isinstance(v, np.ndarray) else repr(v) for v in values)


class Explorer:
    """Plays and caches plans on one ``EnvSession``; enumerates short plans; pairs and confirms."""

    def __init__(self, session: EnvSession, *, seed: int = 0, seeds: Any = None, depth: int | None = None,
                 max_nodes: int = MAX_NODES) -> None:
        self.session = session
        self.seed = seed
        self.actions = session.candidate_actions(seed=seed)
        self.seeds = _seed_list(seeds, seed)
        self.depth = depth if depth is not None else _depth_for(len(self.actions), max_nodes)
        self.plays = 0
        self._cache: dict[tuple, Episode] = {}
        self._tree: list[Node] | None = None
        self.deep_played: list[Episode] = []
        """Every episode ``deep_successes`` played, in order: more plans to check, past the tree."""

    # -- playing ---------------------------------------------------------------------------------
    def play(self, plan: Plan) -> Episode:
        key = _plan_key(plan)
        episode = self._cache.get(key)
        if episode is None:
            episode = self.session.play(plan)
            self.plays += 1
            self._cache[key] = episode
        return episode

    def forced(self, plan: Plan, call: int, status: str | None) -> Episode:
        """``plan`` with tool call ``call`` forced to ``status`` (None: left to run normally)."""
        if status is None:
            return self.play(plan)
        return self.play(replace(plan, faults=FaultSchedule({call: status})))

    # -- enumerating -----------------------------------------------------------------------------
    def tree(self) -> list[Node]:
        """Every action sequence up to ``depth`` from every seed, shortest first; a sequence whose
        episode ended is not extended."""
        if self._tree is None:
            nodes: list[Node] = []
            frontier = {s: [()] for s in self.seeds}
            for _ in range(self.depth):
                for s in self.seeds:
                    grown = []
                    for prefix in frontier[s]:
                        for a in self.actions:
                            plan = Plan(s, prefix + (a,))
                            episode = self.play(plan)
                            nodes.append(Node(plan, episode))
                            if not episode.finished and episode.length == len(plan.actions):
                                grown.append(plan.actions)
                    frontier[s] = grown
            self._tree = nodes
        return self._tree

    # -- finding successes -------------------------------------------------------------------------
    def successes(self, policy: Any = None) -> list[Episode]:
        """Successful episodes to compare with: ``policy``'s (an oracle) from every seed and the
        enumerated plans' that succeeded; when none did, the shortest successes of a deeper
        search (``deep_successes``)."""
        found: list[Episode] = []
        if policy is not None:
            for s in self.seeds:
                found.append(self.session.play(Plan(s), policy=policy, rng=np.random.default_rng([self.seed, s])))
                self.plays += 1
        found += [n.episode for n in self.tree()]
        return [ep for ep in found if ep.success] or self.deep_successes()

    def deep_successes(self, budget: int = DEEP_PLAYS) -> list[Episode]:
        """The shortest successes past the enumerated depth, from a breadth-first search that
        extends *one plan per distinct observation* at each depth: plans that reach the same
        observation after the same number of steps are taken for one state, so a path of a few
        steps among many actions (which the exhaustive tree cannot reach: its size grows as
        actions ** depth) costs about actions x states plays. Seeds are searched in order, each
        up to the depth of its first successes, until ``budget`` plays are spent; an env whose
        observation never repeats simply spends the budget."""
        out: list[Episode] = []
        for s in self.seeds:
            frontier: list[tuple] = [()]
            for _ in range(self.session.max_steps):
                seen: set = set()
                grown: list[tuple] = []
                hits: list[Episode] = []
                for prefix in frontier:
                    for a in self.actions:
                        if budget <= 0:
                            return out + hits
                        budget -= 1
                        episode = self._observed(Plan(s, prefix + (a,)))
                        self.deep_played.append(episode)
                        if episode.success:
                            hits.append(episode)
                        elif not episode.finished and episode.length == len(prefix) + 1:
                            key = _obs_key(episode.observations[-1])
                            if key not in seen:
                                seen.add(key)
                                grown.append(prefix + (a,))
                frontier = grown
                if hits or not frontier:
                    out += hits
                    break
        return out

    def _observed(self, plan: Plan) -> Episode:
        """``play`` that keeps the episode's observations (and caches it for ``play``)."""
        key = _plan_key(plan)
        episode = self._cache.get(key)
        if episode is None or episode.observations is None:
            episode = self.session.play(plan, keep_observations=True)
            self.plays += 1
            self._cache[key] = episode
        return episode

    def continuations(self, plan: Plan, episode: Episode) -> Iterator[tuple[Plan, Episode]]:
        """The plan itself and, when its episode goes on, the plan with each action appended."""
        yield plan, episode
        if not episode.finished and episode.length == len(plan.actions):
            for a in self.actions:
                longer = replace(plan, actions=plan.actions + (a,))
                yield longer, self.play(longer)

    def repeated(self, seed: int) -> Iterator[tuple[Any, Episode]]:
        """Each action repeated from ``seed`` until the episode ends (or ``max_steps``)."""
        for a in self.actions:
            yield a, self.play(Plan(seed, (), a))

    # -- confirming across seeds -------------------------------------------------------------------
    def confirm_seeds(self) -> list[int]:
        start = max(self.seeds) + 1 if self.seeds else self.seed
        return list(range(start, start + CONFIRM_SEEDS))

    def confirm(self, actions: tuple, index: int, status: str,
                measure: Callable[[Episode, Episode], float | None], tolerance: float) -> dict | None:
        """Replay ``actions`` from ``CONFIRM_SEEDS`` other seeds; where step ``index`` calls a tool
        that runs normally (status ok), pair that run with the same plan whose call is forced to
        ``status`` and take ``measure(forced, normal)`` (None: not comparable). Confirmed when a
        one-sided sign test over the non-tied pairs gives p < ``ALPHA``: the evidence, else None."""
        diffs = []
        for s in self.confirm_seeds():
            plan = Plan(s, actions)
            normal = self.play(plan)
            if normal.length <= index or normal.steps[index].status != TOOL_OK or normal.steps[index].call is None:
                continue
            value = measure(self.forced(plan, normal.steps[index].call, status), normal)
            if value is not None:
                diffs.append(value)
        return sign_test(diffs, tolerance)


def sign_test(diffs: list[float], tolerance: float) -> dict | None:
    """One-sided sign test that the differences are positive (ties dropped): its evidence when
    p < ``ALPHA``, else None."""
    above = sum(1 for d in diffs if d > tolerance)
    below = sum(1 for d in diffs if d < -tolerance)
    if above == 0:
        return None
    p = float(_st.binomtest(above, above + below, 0.5, alternative="greater").pvalue)
    if p >= ALPHA:
        return None
    return {"pairs": len(diffs), "higher": above, "lower": below, "ties": len(diffs) - above - below,
            "mean_diff": float(np.mean(diffs)), "p_value": p, "test": "one-sided sign test over reset seeds"}


def _plan_key(plan: Plan) -> tuple:
    return (plan.seed, _key(plan.actions), _key((plan.then_repeat,)), plan.faults)


def _obs_key(obs: Any) -> Any:
    """A hashable key that is equal for equal observations (arrays by dtype, shape and bytes)."""
    if isinstance(obs, np.ndarray):
        return ("array", obs.dtype.str, obs.shape, obs.tobytes())
    if isinstance(obs, dict):
        return ("dict", tuple((repr(k), _obs_key(v)) for k, v in sorted(obs.items(), key=lambda kv: repr(kv[0]))))
    if isinstance(obs, (list, tuple)):
        return (type(obs).__name__, tuple(_obs_key(v) for v in obs))
    return ("repr", repr(obs))


def _seed_list(seeds: Any, seed: int) -> list[int]:
    if seeds is None:
        return list(range(seed, seed + SEEDS))
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        return [int(seeds)]
    if isinstance(seeds, (list, tuple, range)) and seeds:
        return [int(s) for s in seeds]
    return list(range(seed, seed + SEEDS))  # a Hypothesis strategy: it drives the random search only


def _depth_for(n_actions: int, max_nodes: int) -> int:
    depth, total = 1, max(1, n_actions)
    while depth < DEPTH and total + n_actions ** (depth + 1) <= max_nodes:
        depth += 1
        total += n_actions ** depth
    return depth


__all__ = ["ALPHA", "CONFIRM_SEEDS", "DEEP_PLAYS", "DEPTH", "Explorer", "MAX_NODES", "Node", "SEEDS", "sign_test"]
