"""Matched comparisons across reset seeds, for tool calls whose fault cannot be forced.

On a plain Gymnasium env a failed or timed-out tool call comes from the env's own randomness, so
replaying the same seed gives the same fault, and there may be no other action that calls the
same tool. One episode then cannot say what the same step would have paid had the call gone
through. What can: the same action prefix replayed under other reset seeds, where the call
sometimes fails and sometimes does not. Those replays are grouped into *strata* of comparable
states (same tool, same action prefix, and where possible the same observation before the call),
and each faulted replay is paired with the mean of the other calls in its stratum (matching with
replacement); a one-sided Wilcoxon signed-rank test over those pairs
(``envaudit.stats.paired_compare``) decides. Fewer than ``envaudit.stats.MIN_SAMPLES`` pairs
decide nothing: the property then reports that it could not exercise its subject rather than
passing.

Every amount of work is counted: ``MATCHED_SEEDS`` replays per prefix, at most ``MAX_STRATA``
prefixes per property run; the replay seeds come from the property's ``seed``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envaudit.seeding import child_rng
from envaudit.stats import MIN_SAMPLES, paired_compare
from envaudit.testing.trajectory import EnvSession, Episode, Plan, Step

MATCHED_SEEDS = 24
"""Other reset seeds each action prefix is replayed under (plus the seed it was found with)."""

MAX_STRATA = 24
"""Action prefixes replayed per property run: the rest of the search adds no more replays."""

ALPHA = 0.01
"""One-sided significance level of the matched comparison (one test per property run)."""


@dataclass(frozen=True)
class Sample:
    """One replay of a prefix: the status its tool call got and what the call was worth."""

    seed: int
    index: int
    status: str | None
    value: float
    state: str
    episode: Episode = field(repr=False, compare=False)


@dataclass
class Verdict:
    """The matched comparison: its evidence and whether it shows the faulted calls paying more."""

    violated: bool
    evidence: dict[str, Any]
    matching: str
    pairs: int
    example: tuple[Sample, Sample] | None = None
    controls: tuple = ()

    @property
    def decided(self) -> bool:
        return self.pairs >= MIN_SAMPLES


def state_key(obs: Any) -> str:
    """A stable digest of an observation, to match states across seeds."""
    h = hashlib.sha1()
    _feed(h, obs)
    return h.hexdigest()[:16]


def _feed(h: Any, obs: Any) -> None:
    if isinstance(obs, np.ndarray):
        h.update(f"{obs.dtype}{obs.shape}".encode())
        h.update(np.ascontiguousarray(obs).tobytes())
    elif isinstance(obs, dict):
        for k in sorted(obs, key=repr):
            h.update(repr(k).encode())
            _feed(h, obs[k])
    elif isinstance(obs, (tuple, list)):
        h.update(f"{type(obs).__name__}{len(obs)}".encode())
        for x in obs:
            _feed(h, x)
    else:
        h.update(repr(obs).encode())


class MatchedPool:
    """Replays of action prefixes that end in a tool call, under ``MATCHED_SEEDS`` other seeds.

    ``measure(episode, index)`` is what a call is worth (the step's reward, or the return from
    that step on, ``to_end``); ``subject`` is the fault under test ("error" or "timeout") and
    ``control_sets`` the statuses it is compared with, in order of preference.
    """

    def __init__(self, session: EnvSession, *, seed: int, purpose: str, subject: str,
                 control_sets: Iterable[tuple[str, ...]], measure: Callable[[Episode, int], float],
                 to_end: bool) -> None:
        self.session = session
        self.subject = subject
        self.control_sets = [tuple(c) for c in control_sets]
        self.measure = measure
        self.to_end = to_end  # replay the whole plan (the value is the return from the call on)
        self.seed = seed
        self.purpose = purpose
        rng = child_rng(seed, "testing", purpose, "replay-seeds")
        self.replay_seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=MATCHED_SEEDS)]
        self.strata: dict[tuple, list[Sample]] = {}
        self.replays = 0

    def add(self, plan: Plan, episode: Episode, step: Step) -> None:
        """Replay the prefix that ends in ``step``'s call (and, for the rest, ``plan``'s actions)."""
        i = step.index
        key = (step.tool, i, _hashable(episode.actions[: i + 1]))
        if key in self.strata or len(self.strata) >= MAX_STRATA:
            return
        seeds = [plan.seed if plan.seed is not None else 0] + [s for s in self.replay_seeds if s != plan.seed]
        samples = []
        for s in seeds:
            replay = self.session.play(Plan(s, episode.actions if self.to_end else episode.actions[: i + 1],
                                            plan.then_repeat if self.to_end else None, None),
                                       keep_observations=True)
            self.replays += 1
            if len(replay.steps) <= i or replay.steps[i].tool != step.tool:
                continue
            samples.append(Sample(s, i, replay.steps[i].status, self.measure(replay, i),
                                  state_key(replay.observations[i]), replay))
        self.strata[key] = samples

    def verdict(self, tolerance: float) -> Verdict:
        """Compare faulted and control calls stratum by stratum.

        Control sets are tried in order (e.g. outright failures first, then any call that did not
        time out), each with finer matching first; the first with ``MIN_SAMPLES`` pairs decides,
        else the one with the most pairs is reported as undecided.
        """
        levels = [("the same action prefix and observation before the call", lambda k, s: (k, s.state)),
                  ("the same action prefix", lambda k, s: k)]
        best: tuple[str, tuple, list] | None = None
        for controls in self.control_sets:
            for name, group_of in levels:
                groups: dict[Any, list[Sample]] = {}
                for key in sorted(self.strata, key=repr):  # order-free: strata are sorted
                    for sample in self.strata[key]:
                        groups.setdefault(group_of(key, sample), []).append(sample)
                pairs = [p for g in sorted(groups, key=repr) for p in self._pairs(groups[g], controls)]
                if best is None or len(pairs) > len(best[2]):
                    best = (name, controls, pairs)
                if len(pairs) >= MIN_SAMPLES:
                    best = (name, controls, pairs)
                    break
            if best is not None and len(best[2]) >= MIN_SAMPLES:
                break
        assert best is not None
        name, controls, pairs = best
        rng = child_rng(self.seed, "testing", self.purpose, "bootstrap")
        evidence = paired_compare([p[0] for p in pairs], [p[1] for p in pairs], rng,
                                  labels=(self.subject, "control"), test="signed-rank")
        evidence.update(alpha=ALPHA, min_pairs=MIN_SAMPLES, controls=list(controls), matching=name,
                        replays=self.replays, prefixes=len(self.strata))
        violated = bool(len(pairs) >= MIN_SAMPLES and evidence["p_value"] < ALPHA
                        and evidence["diff"] is not None and evidence["diff"] > tolerance)
        example = None
        if pairs:
            top = max(pairs, key=lambda p: p[0] - p[1])
            example = (top[2], top[3])
        return Verdict(violated, evidence, name, len(pairs), example, tuple(controls))

    def _pairs(self, samples: list[Sample], controls: tuple) -> list[tuple[float, float, Sample, Sample]]:
        """Each faulted replay of one matched group against the best control arm of that group:
        (its value, the arm's mean value, itself, the arm's best replay)."""
        faulted = [s for s in samples if s.status == self.subject]
        arms = {c: [s for s in samples if s.status == c] for c in controls}
        arms = {c: xs for c, xs in arms.items() if xs}
        if not faulted or not arms:
            return []
        means = {c: float(np.mean([s.value for s in xs])) for c, xs in arms.items()}
        control = max(means, key=lambda c: (means[c], str(c)))
        best = max(arms[control], key=lambda s: s.value)
        return [(s.value, means[control], s, best) for s in faulted]


def _hashable(actions: tuple) -> tuple:
    return tuple(a.tobytes() if isinstance(a, np.ndarray) else repr(a) for a in actions)


__all__ = ["ALPHA", "MATCHED_SEEDS", "MAX_STRATA", "MatchedPool", "Sample", "Verdict", "state_key"]
