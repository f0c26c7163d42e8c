"""Matched comparisons across reset seeds, for tool calls whose fault cannot be forced.

On a plain Gymnasium env a failed or timed-out tool call comes from the env's own randomness, so
replaying the same seed gives the same fault, and there may be no other action that calls the
same tool. One episode then cannot say what the same step would have paid had the call gone
through. What can: the same action prefix replayed under other reset seeds, where the call
sometimes fails and sometimes does not. Those replays are grouped into *strata* of comparable
states (same tool, same action prefix, and where possible the same observation before the call),
and the faulted replays are compared with the others within each stratum by a one-sided
stratified Mann–Whitney test (van Elteren's statistic, p-value by permutations within strata:
``stratified_test``); with several measures of what a call is worth (the step's own reward, the
return from the call on) the p-values are Holm-adjusted. When fewer than ``TARGET_SAMPLES``
replays of either kind were matched, every prefix is replayed under ``EXTRA_SEEDS`` more seeds
once (the decision to extend looks only at the counts, never at the rewards, so it costs no
significance); fewer than ``MIN_SAMPLES`` of either kind decide nothing, and the property reports
that it could not exercise its subject rather than passing.

Every amount of work is counted: ``MATCHED_SEEDS`` (+ ``EXTRA_SEEDS``) replays per prefix, at
most ``MAX_STRATA`` prefixes per property run; the replay seeds come from the property's ``seed``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats as _st

from envaudit.seeding import child_rng
from envaudit.stats import MIN_SAMPLES, holm
from envaudit.testing.trajectory import EnvSession, Episode, Plan, Step

MATCHED_SEEDS = 24
"""Other reset seeds each action prefix is replayed under (plus the seed it was found with)."""

EXTRA_SEEDS = 72
"""More reset seeds per prefix, replayed once when the first ones matched fewer than
``TARGET_SAMPLES`` calls of either kind."""

TARGET_SAMPLES = 4 * MIN_SAMPLES
"""Matched calls of each kind the first replays should give; below it the pool is extended once.
(``MIN_SAMPLES`` of each still decide: the target only buys power against noisy rewards.)"""

MAX_STRATA = 24
"""Action prefixes replayed per property run: the rest of the search adds no more replays."""

ALPHA = 0.01
"""One-sided significance level of the matched comparison (Holm-adjusted across its measures)."""

PERMUTATIONS = 2000
"""Stratified permutations behind a p-value: it cannot go below 1/2001, well under ``ALPHA``."""


@dataclass(frozen=True)
class Sample:
    """One replay of a prefix: the status its tool call got and what the call was worth."""

    seed: int
    index: int
    status: str | None
    values: tuple[float, ...]  # one per measure
    state: str
    episode: Episode = field(repr=False, compare=False)


@dataclass
class Verdict:
    """The matched comparison: its evidence and whether it shows the faulted calls paying more."""

    violated: bool
    evidence: dict[str, Any]
    matching: str
    faulted: int  # faulted replays in matched groups
    compared: int  # control replays they are compared with
    example: tuple[Sample, Sample] | None = None
    controls: tuple = ()
    measure: str = ""

    @property
    def decided(self) -> bool:
        return min(self.faulted, self.compared) >= MIN_SAMPLES


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


def step_reward(episode: Episode, index: int) -> float:
    return episode.steps[index].reward


def return_from(episode: Episode, index: int) -> float:
    return float(sum(episode.rewards[index:]))


MEASURES: dict[Callable[[Episode, int], float], str] = {
    step_reward: "paid on the step",
    return_from: "returned from the call on",
}

_LEVELS = [("the same action prefix and observation before the call", lambda key, s: (key, s.state)),
           ("the same action prefix", lambda key, s: key)]


class MatchedPool:
    """Replays of action prefixes that end in a tool call, under ``MATCHED_SEEDS`` other seeds.

    ``subject`` is the fault under test ("error" or "timeout"), ``control_sets`` the statuses it
    is compared with, in order of preference, and ``measures`` what a call is worth
    (``step_reward``, ``return_from``: the latter replays the whole plan, not just the prefix);
    ``permutations`` behind each p-value (raise it when the caller adjusts over many questions:
    the p-value cannot go below ``1 / (permutations + 1)``).
    """

    def __init__(self, session: EnvSession, *, seed: int, purpose: str, subject: str,
                 control_sets: Iterable[tuple[str, ...]],
                 measures: Iterable[Callable[[Episode, int], float]] = (step_reward,),
                 permutations: int = PERMUTATIONS) -> None:
        self.session = session
        self.permutations = permutations
        self.subject = subject
        self.control_sets = [tuple(c) for c in control_sets]
        self.measures = list(measures)
        self.to_end = return_from in self.measures
        self.seed = seed
        self.purpose = purpose
        rng = child_rng(seed, "testing", purpose, "replay-seeds")
        seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=MATCHED_SEEDS + EXTRA_SEEDS)]
        self.replay_seeds, self.extra_seeds = seeds[:MATCHED_SEEDS], seeds[MATCHED_SEEDS:]
        self.strata: dict[tuple, list[Sample]] = {}
        self._sources: dict[tuple, tuple[Plan, int, str | None]] = {}
        self.extended = False
        self.replays = 0

    def add(self, plan: Plan, episode: Episode, step: Step) -> None:
        """Replay the prefix that ends in ``step``'s call (and, for the rest, ``plan``'s actions)."""
        i = step.index
        # Measured to the end, the stratum is the whole plan: another continuation is another state.
        key = (step.tool, i, _hashable(episode.actions if self.to_end else episode.actions[: i + 1]))
        if key in self.strata or len(self.strata) >= MAX_STRATA:
            return
        source = Plan(plan.seed if plan.seed is not None else 0,
                      episode.actions if self.to_end else episode.actions[: i + 1],
                      plan.then_repeat if self.to_end else None, None)
        self._sources[key] = (source, i, step.tool)
        self.strata[key] = []
        self._replay(key, [source.seed] + [s for s in self.replay_seeds if s != source.seed])

    def extend(self) -> None:
        """Replay every prefix under ``EXTRA_SEEDS`` more seeds (once)."""
        if self.extended:
            return
        self.extended = True
        for key in sorted(self.strata, key=repr):
            source = self._sources[key][0]
            self._replay(key, [s for s in self.extra_seeds if s != source.seed])

    def _replay(self, key: tuple, seeds: list[int]) -> None:
        source, i, tool = self._sources[key]
        for s in seeds:
            replay = self.session.play(replace(source, seed=s), keep_observations=True)
            self.replays += 1
            if len(replay.steps) <= i or replay.steps[i].tool != tool:
                continue
            self.strata[key].append(Sample(s, i, replay.steps[i].status, tuple(m(replay, i) for m in self.measures),
                                           state_key(replay.observations[i]), replay))

    def groups(self) -> tuple[str, tuple, list[tuple[list[Sample], dict[str, list[Sample]]]]]:
        """Matched groups holding faulted and control replays: (matching, controls, groups).

        Finer matching is tried first. Within each group the control sets are tried in order
        (e.g. outright failures first, then any call that did not time out) and the first that
        has replays in that group is its control: a tool that never fails outright is still
        compared, with its calls that went through, beside a tool that does. The first matching
        with ``MIN_SAMPLES`` replays in each arm is used, else the one with the most faulted
        replays matched; ``controls`` lists every status any group was compared with.
        """
        best: tuple[str, tuple, list] | None = None
        for name, group_of in _LEVELS:
            groups: dict[Any, list[Sample]] = {}
            for key in sorted(self.strata, key=repr):  # order-free: strata are sorted
                for sample in self.strata[key]:
                    groups.setdefault(group_of(key, sample), []).append(sample)
            found, used = [], []
            for g in sorted(groups, key=repr):
                faulted = [s for s in groups[g] if s.status == self.subject]
                if not faulted:
                    continue
                for controls in self.control_sets:
                    arms = {c: xs for c in controls if (xs := [s for s in groups[g] if s.status == c])}
                    if arms:
                        found.append((faulted, arms))
                        used.extend(c for c in controls if c not in used)
                        break
            chosen = tuple(used) or self.control_sets[0]  # none matched: say what was preferred
            if best is None or _sizes(found)[0] > _sizes(best[2])[0]:
                best = (name, chosen, found)
            if min(_sizes(found)) >= MIN_SAMPLES:
                return name, chosen, found
        assert best is not None
        return best

    def verdict(self, tolerance: float) -> Verdict:
        """Per measure, a stratified one-sided test of faulted against control replays within
        matched groups (``stratified_test``), Holm-adjusted across measures."""
        name, controls, found = self.groups()
        results = []
        for m, measure in enumerate(self.measures):
            strata, examples = [], []
            for faulted, arms in found:
                means = {c: float(np.mean([s.values[m] for s in xs])) for c, xs in arms.items()}
                arm = arms[max(means, key=lambda c: (means[c], str(c)))]  # the better control arm
                strata.append(([s.values[m] for s in faulted], [s.values[m] for s in arm]))
                top = max(faulted, key=lambda s: s.values[m])
                examples.append((top.values[m] - float(np.mean([s.values[m] for s in arm])), top,
                                 max(arm, key=lambda s: s.values[m])))
            rng = child_rng(self.seed, "testing", self.purpose, "bootstrap", m)
            results.append((measure, stratified_test(strata, rng, label=self.subject, permutations=self.permutations),
                            examples))
        adjusted = holm([ev["p_value"] for _, ev, _ in results])
        verdicts = []
        for (measure, ev, examples), p_holm in zip(results, adjusted, strict=True):
            ev.update(p_value_holm=float(p_holm), alpha=ALPHA, min_samples=MIN_SAMPLES, controls=list(controls),
                      matching=name, measure=MEASURES[measure], replays=self.replays, prefixes=len(self.strata))
            violated = bool(not ev["underpowered"] and p_holm < ALPHA and ev["diff"] is not None
                            and ev["diff"] > tolerance)
            top = max(examples, key=lambda e: e[0]) if examples else None
            verdicts.append(Verdict(violated, ev, name, ev[f"n_{self.subject}"], ev["n_control"],
                                    (top[1], top[2]) if top else None, tuple(controls), MEASURES[measure]))
        violated = [v for v in verdicts if v.violated]
        return min(violated, key=lambda v: v.evidence["p_value_holm"]) if violated else verdicts[0]


def _sizes(groups: list) -> tuple[int, int]:
    faulted = sum(len(f) for f, _ in groups)
    control = sum(max(len(xs) for xs in arms.values()) for _, arms in groups) if groups else 0
    return faulted, control


def stratified_test(strata: list[tuple[list[float], list[float]]], rng: np.random.Generator, *,
                    label: str = "faulted", permutations: int = PERMUTATIONS, n_boot: int = 2000) -> dict:
    """Do the faulted values exceed the control values *within* strata? Van Elteren's stratified
    Mann–Whitney statistic (each stratum's U centred and weighted 1/(n+1) for n values), one-sided
    (``greater``), its p-value from permutations of the labels within each stratum.

    Stratified rather than paired: a stratum's replays share its control arm, and pairing every
    faulted replay with that arm's mean would count the arm many times and understate the
    p-value; by permutation rather than the normal approximation, which is far off for the small,
    heavily tied strata that deterministic rewards make. ``diff`` is the mean over faulted values
    of (value - its stratum's control mean), with a 95% bootstrap interval that resamples whole
    strata. ``underpowered``: fewer than ``MIN_SAMPLES`` values in either arm.
    """
    n_f = sum(len(f) for f, _ in strata)
    n_c = sum(len(c) for _, c in strata)
    out: dict = {f"n_{label}": int(n_f), "n_control": int(n_c), "strata": len(strata),
                 "underpowered": bool(min(n_f, n_c) < MIN_SAMPLES),
                 "test": f"van Elteren stratified Mann-Whitney, {permutations} stratified permutations"}
    if not strata:
        out.update({f"mean_{label}": None, "mean_control": None, "diff": None, "diff_ci": None, "p_value": 1.0})
        return out
    observed = 0.0
    null = np.zeros(permutations)
    for f, c in strata:
        n, total = len(f), len(f) + len(c)
        ranks = _st.rankdata(np.asarray(list(f) + list(c), float))
        weight, centre = 1.0 / (total + 1), n * (total + 1) / 2  # E[rank sum of n values]
        observed += weight * (float(ranks[:n].sum()) - centre)
        shuffled = rng.permuted(np.broadcast_to(ranks, (permutations, total)), axis=1)
        null += weight * (shuffled[:, :n].sum(axis=1) - centre)
    tol = 1e-9 * max(1.0, abs(observed))
    p = float((1 + np.sum(null >= observed - tol)) / (1 + permutations))
    shifts = [np.asarray(f, float) - float(np.mean(c)) for f, c in strata]
    picks = rng.integers(0, len(strata), size=(n_boot, len(strata)))
    boots = [float(np.concatenate([shifts[j] for j in row]).mean()) for row in picks]
    out.update({f"mean_{label}": float(np.mean([x for f, _ in strata for x in f])),
                "mean_control": float(np.mean([float(np.mean(c)) for f, c in strata for _ in f])),
                "diff": float(np.concatenate(shifts).mean()),
                "diff_ci": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))],
                "p_value": p})
    return out


def _hashable(actions: tuple) -> tuple:
    return tuple(a.tobytes() if isinstance(a, np.ndarray) else repr(a) for a in actions)


__all__ = ["ALPHA", "EXTRA_SEEDS", "MATCHED_SEEDS", "MAX_STRATA", "MEASURES", "MatchedPool", "Sample", "Verdict",
           "return_from", "state_key", "PERMUTATIONS", "TARGET_SAMPLES", "step_reward", "stratified_test"]
