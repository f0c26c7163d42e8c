"""Every random choice flows from the scan's seed: named child generators, stable across runs."""

from __future__ import annotations

import zlib

import numpy as np


def child_seed(seed: int, *names: str | int) -> int:
    """A 63-bit seed derived from ``seed`` and a path of names (stable across processes)."""
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    words = [seed & 0xFFFFFFFF, seed >> 32]
    for name in names:
        words.append(zlib.crc32(str(name).encode()) if isinstance(name, str) else int(name) & 0xFFFFFFFF)
    return int(np.random.SeedSequence(words).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1)


def child_rng(seed: int, *names: str | int) -> np.random.Generator:
    """A generator for one named purpose, e.g. ``child_rng(seed, "probe", "replay")``."""
    return np.random.default_rng(child_seed(seed, *names))
