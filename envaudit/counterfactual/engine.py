"""The counterfactual engine: play named continuations from the same prefixes, pair their returns.

``Counterfactuals(run)`` takes the function that plays episodes (a probe's ``ctx.run``, or
``from_runner(Runner(...), seed)`` outside a scan); ``play(prefixes, continuations)`` plays every
continuation once from every prefix on the prefix's own seed, one ordinary run per continuation,
and returns ``Played``: per continuation and prefix the episode that played as planned (a replay
that diverged from its prefix, on an env that is not replayable, is left out), the records to keep,
and the cost in env steps. ``Played.pairs(a, b)`` pairs two continuations' returns prefix by
prefix; ``paired_test`` turns the per-prefix differences into the statistics the severity ladder
reads (mean, bootstrap CI, one-sided signed-rank p, n, whether it is material).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from envaudit.counterfactual.plans import (
    ENDED,
    LIMIT,
    Continuation,
    Plan,
    PlannedEnv,
    PlanPolicy,
    Prefix,
)
from envaudit.protocol import SUCCESS
from envaudit.recording import Records
from envaudit.rollout import Runner, RunResult
from envaudit.stats import MIN_SAMPLES, bootstrap_ci, signed_rank_p

NAMING = ("policy_name", "rng_name")
"""Keys of ``Continuation.tags`` that name its run's policy and random stream instead of tagging it."""

PlayFn = Callable[..., RunResult]
"""``run(policy, seeds, *, wrappers, tags, rng_name, ordered) -> RunResult``: ``ProbeContext.run``."""


def from_runner(runner: Runner, seed: int = 0) -> PlayFn:
    """A ``PlayFn`` over a bare ``Runner`` (tests, notebooks): every run's generator from ``seed``."""

    def run(policy, seeds, *, wrappers=(), tags=None, rng_name=None, ordered=None) -> RunResult:
        return runner.run(policy, seeds, rng=np.random.default_rng(seed), wrappers=wrappers, tags=tags,
                          ordered=ordered)

    return run


@dataclass(frozen=True, eq=False)
class Episode:
    """One continuation played from one prefix, as it played."""

    episode_id: int
    ret: float
    success: bool
    length: int
    terminated: bool
    truncated: bool
    steps: pd.DataFrame
    start: int = 0
    """Where the continuation began: the prefix's length."""

    @property
    def tail(self) -> pd.DataFrame:
        """The steps after the prefix."""
        return self.steps.iloc[self.start:]


@dataclass
class Played:
    """What ``Counterfactuals.play`` returns: ``episodes[name][i]`` is continuation ``name`` from
    prefix ``i`` when it played as planned and as its ``expect`` asks; ``records[name]`` its run's
    records (for ``ctx.keep``); ``steps[name]`` the env steps it cost."""

    prefixes: list[Prefix]
    episodes: dict[str, dict[int, Episode]] = field(default_factory=dict)
    records: dict[str, Records] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    observations: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    """Per watched continuation and prefix: the fingerprint of each observation, before each step."""
    diverged: dict[str, int] = field(default_factory=dict)
    """Per continuation: episodes left out because they did not play as planned."""

    @property
    def cost(self) -> int:
        """Env steps all continuations took, the scan's unit of work."""
        return int(sum(self.steps.values()))

    def get(self, name: str, i: int) -> Episode | None:
        return self.episodes.get(name, {}).get(i)

    def pairs(self, a: str, b: str, when: Callable[[Episode, Episode], bool] | None = None
              ) -> tuple[np.ndarray, list[int]]:
        """Per-prefix differences ``return(a) - return(b)`` where both played (and ``when`` holds),
        and the prefix indices they come from."""
        diffs, where = [], []
        for i in range(len(self.prefixes)):
            ea, eb = self.get(a, i), self.get(b, i)
            if ea is None or eb is None or (when is not None and not when(ea, eb)):
                continue
            diffs.append(ea.ret - eb.ret)
            where.append(i)
        return np.asarray(diffs, float), where

    def best(self, names: Sequence[str], i: int) -> Episode | None:
        """The best-paying of ``names`` from prefix ``i`` (first listed on ties), or None."""
        played = [e for e in (self.get(n, i) for n in names) if e is not None]
        return max(played, key=lambda e: e.ret) if played else None


def _held(ep: pd.DataFrame, plan: tuple, start: int, cont: Continuation) -> bool:
    """Whether the episode played its prefix as planned and ended as the continuation expects."""
    actions = ep["action"].tolist()
    if len(actions) < start or [_as_int(a) for a in actions[:start]] != list(plan[:start]):
        return False
    last = ep.iloc[-1]
    if cont.expect == ENDED:
        return len(actions) == len(plan) and bool(last["terminated"]) and \
            [_as_int(a) for a in actions] == list(plan)
    if cont.expect == LIMIT:
        return bool(last["truncated"]) and not bool(last["terminated"])
    return True


def _as_int(a: Any) -> Any:
    return int(a) if isinstance(a, (int, np.integer)) else a


class Counterfactuals:
    """Plays continuations from prefixes through ``run`` (module docstring). ``tag`` names the
    caller: it goes into each run's random stream name and tags, so two callers never share one."""

    def __init__(self, run: PlayFn, *, tag: str = "counterfactual",
                 tags: Mapping[str, Any] | None = None) -> None:
        self.run = run
        self.tag = tag
        self.tags = dict(tags or {})

    def play(self, prefixes: Sequence[Prefix], continuations: Sequence[Continuation], *,
             stop: Callable[[str], bool] | None = None) -> Played:
        """Every continuation from every prefix. ``stop(what)`` is asked before each run (a probe's
        ``ctx.over_cap``); once it says yes the remaining continuations are not played."""
        prefixes = list(prefixes)
        out = Played(prefixes)
        names = [c.name for c in continuations]
        assert len(set(names)) == len(names), f"continuation names must be unique, got {names}"
        for cont in continuations:
            if stop is not None and stop(f"counterfactual {cont.name!r} of {self.tag!r}"):
                break
            out.episodes[cont.name], out.steps[cont.name], out.diverged[cont.name] = {}, 0, 0
            parts: list[Records] = []
            for batch in _unique_seed_batches(prefixes):
                plans = {prefixes[i].seed: Plan(tuple(prefixes[i].actions) + cont.actions, len(prefixes[i].actions),
                                                cont.fault, prefixes[i].seed, tuple(prefixes[i].faults))
                         for i in batch}
                assert all(p.actions for p in plans.values()) or cont.policy is not None, (
                    f"continuation {cont.name!r} from an empty prefix plays nothing")
                policy = PlanPolicy(cont.tags.get("policy_name", f"{self.tag}-{cont.name}"), cont.policy, cont.watch)
                result = self.run(policy, [prefixes[i].seed for i in batch],
                                  wrappers=(functools.partial(PlannedEnv, plans=plans),),
                                  tags={**self.tags, **{k: v for k, v in cont.tags.items() if k not in NAMING}},
                                  rng_name=cont.tags.get("rng_name", f"{self.tag}-{cont.name}"),
                                  ordered=True if cont.watch else None)
                parts.append(result.records)
                self._collect(out, cont, batch, plans, result.records)
                if cont.watch:
                    seen = out.observations.setdefault(cont.name, {})
                    seen.update({i: policy.digests[prefixes[i].seed] for i in batch if prefixes[i].seed in policy.digests})
            out.records[cont.name] = Records.concat(parts) if len(parts) != 1 else parts[0]
        return out

    @staticmethod
    def _collect(out: Played, cont: Continuation, batch: list[int], plans: Mapping[int, Plan],
                 records: Records) -> None:
        eps = records.episodes
        if eps.empty:
            return
        out.steps[cont.name] += int(eps["length"].sum())
        index_of = {out.prefixes[i].seed: i for i in batch}
        meta = eps.set_index("episode_id")
        for eid, ep in records.steps.sort_values(["episode_id", "step"]).groupby("episode_id", sort=True):
            if eid not in meta.index:
                continue
            seed = int(meta.loc[eid, "seed"])
            i, plan = index_of.get(seed), plans.get(seed)
            if i is None or plan is None:
                continue
            if not _held(ep, plan.actions, plan.start, cont):
                out.diverged[cont.name] += 1
                continue
            last = ep.iloc[-1]
            out.episodes[cont.name][i] = Episode(int(eid), float(ep["reward"].sum()),
                                                 bool(meta.loc[eid, "outcome"] == SUCCESS), len(ep),
                                                 bool(last["terminated"]), bool(last["truncated"]),
                                                 ep.reset_index(drop=True), plan.start)


def _unique_seed_batches(prefixes: Sequence[Prefix]) -> list[list[int]]:
    """Prefix indices split so that no batch holds one seed twice (first occurrences first)."""
    batches: list[list[int]] = []
    seen: list[set[int]] = []
    for i, p in enumerate(prefixes):
        for batch, used in zip(batches, seen, strict=True):
            if p.seed not in used:
                batch.append(i)
                used.add(p.seed)
                break
        else:
            batches.append([i])
            seen.append({p.seed})
    return batches


def paired_test(diffs: Sequence[float], scale: float, rng: np.random.Generator, *, alpha: float,
                min_effect: float) -> dict[str, Any]:
    """Is the per-prefix difference positive, clearly? A one-sided Wilcoxon signed-rank test on the
    differences, their mean and bootstrap CI; ``pays`` when significant at ``alpha`` and the mean
    is at least ``min_effect`` of ``scale``; below ``MIN_SAMPLES`` pairs it is underpowered."""
    d = np.asarray(diffs, float)
    n = len(d)
    out: dict[str, Any] = {"n_pairs": n, "min_effect": min_effect * scale,
                           "test": "Wilcoxon signed-rank on per-seed differences, one-sided"}
    if n < MIN_SAMPLES:
        return {**out, "mean": float(d.mean()) if n else None, "p_value": 1.0, "underpowered": True, "pays": False}
    p = signed_rank_p(d, alternative="greater")
    mean = float(d.mean())
    out.update(mean=mean, ci=list(bootstrap_ci(d, rng)), p_value=p, underpowered=False,
               pays=bool(p < alpha and mean >= min_effect * scale))
    return out
