"""Action cycles with positive net reward: the candidates for oscillation farming.

A boat-race loop pays a progress bonus for each step forward and charges nothing for the step
back, so pacing forward and back farms the bonus. Repeating one action pays nothing there (the
stall replays' question); only the alternating cycle does. ``find_cycles`` reads recorded steps for
windows of 2 to ``max_len`` actions — at least two distinct ones, none that ends episodes, not a
repeat of a shorter window — whose rewards add up to more than zero, and hands back the windows
seen most, each with the prefixes it was seen after (one lap included, so a continuation that
repeats the cycle starts where a lap ends). Whether a lap returns to the same observation is
checked when the cycle is replayed (``lap_digests``); what repeating it pays, by the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from envaudit.counterfactual.plans import Prefix

MAX_PREFIXES = 24
"""Prefixes kept per cycle (the earliest-starting first): enough pairs for a signed-rank test."""


@dataclass(frozen=True)
class Cycle:
    """A window of actions seen with positive net reward, and where it was seen."""

    actions: tuple[int, ...]
    pay: float
    """Mean summed reward of the window where it was seen."""
    count: int
    prefixes: list[Prefix] = field(default_factory=list)


def _minimal(window: tuple[int, ...]) -> bool:
    """True when ``window`` is not a shorter window repeated (``(a, b, a, b)`` is ``(a, b)``)."""
    n = len(window)
    return not any(n % p == 0 and window == window[:p] * (n // p) for p in range(1, n))


def find_cycles(steps: pd.DataFrame, episodes: pd.DataFrame, enders: Iterable[int], *, max_len: int = 3,
                top: int = 2, min_count: int = 8) -> list[Cycle]:
    """The ``top`` windows with the most sightings among those whose mean pay is positive
    (module docstring); ``min_count`` sightings at least. Integer actions only."""
    if steps.empty or episodes.empty:
        return []
    enders = {int(a) for a in enders}
    seeds = episodes.set_index("episode_id")["seed"]
    seen: dict[tuple[int, ...], list[tuple[float, int, Prefix]]] = {}
    for eid, ep in steps.sort_values(["episode_id", "step"]).groupby("episode_id", sort=True):
        actions = ep["action"].tolist()
        if eid not in seeds.index or pd.isna(seeds.loc[eid]) or \
                not all(isinstance(a, (int, np.integer)) for a in actions):
            continue
        acts = [int(a) for a in actions]
        rewards = ep["reward"].to_numpy(float)
        ended = ep["terminated"].to_numpy(bool) | ep["truncated"].to_numpy(bool)
        for length in range(2, max_len + 1):
            for t in range(0, len(acts) - length + 1):
                window = tuple(acts[t:t + length])
                if len(set(window)) < 2 or enders & set(window) or ended[t:t + length].any() or not _minimal(window):
                    continue
                prefix = Prefix(int(seeds.loc[eid]), tuple(acts[:t + length]), int(eid))
                seen.setdefault(window, []).append((float(rewards[t:t + length].sum()), t, prefix))
    cycles = []
    for window, rows in seen.items():
        pay = float(np.mean([r[0] for r in rows]))
        if len(rows) < min_count or not np.isfinite(pay) or pay <= 0:
            continue
        # One prefix per seed (the engine plays each seed once per run anyway), earliest first.
        chosen: dict[int, Prefix] = {}
        for _, _t, prefix in sorted(rows, key=lambda r: (r[1], r[2].source)):
            chosen.setdefault(prefix.seed, prefix)
        cycles.append(Cycle(window, pay, len(rows), list(chosen.values())[:MAX_PREFIXES]))
    cycles.sort(key=lambda c: (-c.count, -c.pay, c.actions))
    return cycles[:top]
