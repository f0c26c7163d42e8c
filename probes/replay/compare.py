"""Comparing two plays of the same seed and actions: what differs (``Divergence``), where, and the
tally of every comparison by check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envaudit.probes.replay.capture import Trajectory
from envaudit.rollout import Problem

RTOL, ATOL = 1e-9, 1e-12

RESET_SAME = "reset, same instance"
RESET_FRESH = "reset, fresh instance"
EPISODE_SAME = "episode, same instance"
EPISODE_FRESH = "episode, fresh instance"
BRANCH = "mid-episode branch"
ELSEWHERE = "episode, other interpreter"
CHECKS = (RESET_SAME, RESET_FRESH, EPISODE_SAME, EPISODE_FRESH, BRANCH, ELSEWHERE)


def same(a: Any, b: Any) -> bool:
    """Equal as the agent sees it: ints, bools and text exactly, floats to ``RTOL``/``ATOL``."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        return isinstance(a, (str, bytes)) and isinstance(b, (str, bytes)) and a == b
    try:
        x, y = np.asarray(a), np.asarray(b)
    except Exception:
        return bool(a == b)
    if x.shape != y.shape:
        return False
    if x.dtype == object or y.dtype == object:
        return all(same(p, q) for p, q in zip(x.ravel().tolist(), y.ravel().tolist(), strict=True))
    if x.dtype.kind in "fc" or y.dtype.kind in "fc":
        return bool(np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(x, y))


def shown(x: Any, n: int = 80) -> str:
    if isinstance(x, np.ndarray):
        text = np.array2string(x, precision=12, threshold=8)
    else:
        text = repr(x.item() if isinstance(x, np.generic) else x)
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass(frozen=True)
class Divergence:
    check: str
    seed: int | None
    step: int | None  # None: the observation of reset()
    field: str
    first: str
    second: str

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "seed": self.seed, "step": self.step, "field": self.field,
                "values": [self.first, self.second]}


FIELDS = (("observation", "observation"), ("reward", "reward"), ("terminated", "terminated"),
          ("truncated", "truncated"), ("tool_status", "tool status"), ("exception", "exception"))


def reset_difference(a: Trajectory, b: Trajectory, check: str) -> Divergence | None:
    if same(a.reset_obs, b.reset_obs):
        return None
    return Divergence(check, a.seed, None, "observation", *_shown_pair(a.reset_obs, b.reset_obs))


def _shown_pair(u: Any, v: Any) -> tuple[str, str]:
    """Both values as text; for arrays of one shape printed with their middle cut, with the first
    differing element named (the cut may be where they differ)."""
    first, second = shown(u), shown(v)
    if ("..." in first + second and isinstance(u, np.ndarray) and isinstance(v, np.ndarray) and u.shape == v.shape and u.size > 1
            and u.dtype.kind in "biufc" and v.dtype.kind in "biufc"):
        for index in zip(*np.nonzero(~np.isclose(u, v, rtol=RTOL, atol=ATOL, equal_nan=True)), strict=True):
            where = ", ".join(str(int(i)) for i in index)
            return f"{first} ([{where}] = {shown(u[index])})", f"{second} ([{where}] = {shown(v[index])})"
    return first, second


def episode_difference(a: Trajectory, b: Trajectory, check: str) -> Divergence | None:
    """The first step and field where two plays of the same actions differ."""
    for t, (x, y) in enumerate(zip(a.steps, b.steps, strict=False)):
        for attr, label in FIELDS:
            u, v = getattr(x, attr), getattr(y, attr)
            if not same(u, v):
                return Divergence(check, a.seed, t, label, *_shown_pair(u, v))
    if len(a.steps) != len(b.steps):
        return Divergence(check, a.seed, min(len(a.steps), len(b.steps)), "episode length",
                          str(len(a.steps)), str(len(b.steps)))
    return None




@dataclass
@dataclass
class Tally:
    replays: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    diverged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    divergences: list[Divergence] = field(default_factory=list)
    examples: list[int] = field(default_factory=list)
    skipped: int = 0
    stopped: str | None = None
    hang: Problem | None = None

    def compare(self, check: str, divergence: Divergence | None) -> bool:
        self.replays[check] += 1
        if divergence is not None:
            self.diverged[check] += 1
            self.divergences.append(divergence)
        return divergence is not None



__all__ = ["ATOL", "BRANCH", "CHECKS", "ELSEWHERE", "EPISODE_FRESH", "EPISODE_SAME", "FIELDS", "RESET_FRESH",
           "RESET_SAME", "RTOL", "Divergence", "Tally", "episode_difference", "reset_difference", "same", "shown"]
