"""The replayed episodes played again in other interpreters, each with its own ``PYTHONHASHSEED``."""

from __future__ import annotations

import math
from typing import Any

from envaudit.counterfactual.digest import digest
from envaudit.interpreter import TIMEOUT_S, Elsewhere, other_hash_seeds
from envaudit.probe import ProbeContext
from envaudit.probes.replay.capture import Step, Trajectory
from envaudit.probes.replay.compare import ELSEWHERE, Tally, episode_difference, reset_difference
from envaudit.probes.replay.plans import DIFFER, ORACLE_MISS

ELSEWHERE_INTERPRETERS = 2
"""Other interpreters (each with its own ``PYTHONHASHSEED``) that play the chosen episodes: a
hash-seeded choice is drawn afresh in each, so every interpreter adds one draw per episode."""
ELSEWHERE_UNITS = math.ceil(math.log(ORACLE_MISS) / math.log(1 - DIFFER))
"""Replayed episodes played again in each other interpreter (7), on distinct reset seeds where there
are enough (episodes of one seed draw the same hidden choice, so they are not independent draws):
each compares ``ELSEWHERE_INTERPRETERS`` more draws of a hash-seeded choice with its first play, so
all of them miss one that shows in their episodes with probability at most ``ORACLE_MISS`` —
already when only ``ELSEWHERE_UNITS / ELSEWHERE_INTERPRETERS`` of them reach where it shows. Not
scaled by ``--quick``."""


def _seen(trajectory: Trajectory) -> int:
    """How many distinct observations the agent saw in ``trajectory`` (the reset's included): how
    much of the env's state it walked through, where hidden state can show."""
    return len({digest(trajectory.reset_obs), *(digest(s.observation) for s in trajectory.steps)})


def elsewhere_choice(played: list[Trajectory], n_oracle: int, n: int = ELSEWHERE_UNITS) -> list[Trajectory]:
    """The ``n`` replayed episodes the other interpreters play (none that raised): the oracle's first
    (its ``n_oracle`` episodes lead ``played``; they reach a success, where a hash-seeded answer
    shows), then the episodes that saw the most distinct observations; one per reset seed before a
    second of any seed, since episodes of one seed draw the same hidden choice."""
    usable = [(i, t) for i, t in enumerate(played) if t.steps and not any(s.exception for s in t.steps)]
    ranked = [t for _, t in sorted(usable, key=lambda it: (it[0] >= n_oracle, -_seen(it[1]), it[0]))]
    first_of_seed: list[Trajectory] = []
    rest: list[Trajectory] = []
    seeds: set[Any] = set()
    for t in ranked:
        (rest if t.seed in seeds else first_of_seed).append(t)
        seeds.add(t.seed)
    return (first_of_seed + rest)[:n]


def start_elsewhere(ctx: ProbeContext, tally: Tally, played: list[Trajectory],
                     n_oracle: int) -> tuple[list[Elsewhere], list[Trajectory]] | None:
    """The episodes ``elsewhere_choice`` picks, started in ``ELSEWHERE_INTERPRETERS`` other
    interpreters (one hash seed each), which play them while the branch replays run here."""
    chosen = elsewhere_choice(played, n_oracle)
    if tally.stopped or not chosen:
        return None
    timeout_s = max(1.0, min(TIMEOUT_S, ctx.time_left()))
    plans = [(t.seed, t.actions) for t in chosen]
    # Threads in the child only where the scan itself steps several env instances in one process.
    executor = ctx.executor
    workers = getattr(executor, "workers", 1) if getattr(executor, "kind", None) in ("threads", "asyncio") else 1
    return [Elsewhere(ctx.spec, ctx.make_env, plans, hash_seed=h, timeout_s=timeout_s, workers=workers)
            for h in other_hash_seeds(ELSEWHERE_INTERPRETERS)], chosen


def compare_elsewhere(ctx: ProbeContext, tally: Tally,
                       started: tuple[list[Elsewhere], list[Trajectory]] | None) -> None:
    """Each episode every other interpreter played against its first play here (``ELSEWHERE``)."""
    if started is None:
        return
    children, chosen = started
    if tally.stopped:
        for elsewhere in children:
            elsewhere.cancel()
        return
    notes = ctx.notes["other_interpreter"] = {"hash_seeds": [e.hash_seed for e in children],
                                              "episodes": len(chosen),
                                              "reset_seeds": len({t.seed for t in chosen})}
    failed: dict[str, str] = {}
    for elsewhere in children:
        theirs = elsewhere.result()
        if theirs is None:
            failed[elsewhere.hash_seed] = elsewhere.reason or "no reason given"
            continue
        ctx.count_env(sum(len(r.steps) for r in theirs), len(theirs))
        for first, replayed in zip(chosen, theirs, strict=True):
            other = Trajectory(replayed.seed, replayed.reset_obs, object(),
                               [Step(*row) for row in replayed.steps])
            divergence = (reset_difference(first, other, ELSEWHERE)
                          or episode_difference(first, other, ELSEWHERE))
            tally.compare(ELSEWHERE, divergence)
    if failed:
        notes["reasons"] = failed
        where = "another interpreter" if len(failed) == 1 else f"{len(failed)} other interpreters"
        ctx.incomplete(f"the {len(chosen)} replays in {where} (PYTHONHASHSEED={', '.join(failed)})",
                       "; ".join(dict.fromkeys(failed.values())))



__all__ = ["ELSEWHERE_INTERPRETERS", "ELSEWHERE_UNITS", "compare_elsewhere", "elsewhere_choice", "start_elsewhere"]
