"""Helpers for the bundled-env tests: play scripted policies, and the exact value of an oracle.

The bundled oracles walk a chain of stages (search, open, answer; lookup, lookup, resolve, reply,
close; ...): each step attempts the current stage, which succeeds with a known probability and
otherwise is retried. ``chain_value`` computes, by dynamic programming over (stage, step), the
exact expected return, success probability and length of such a walk under a step limit, from
the env's own parameters. Monte Carlo means are then checked against it within a tolerance that
follows from the sample size (``z`` standard errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import gymnasium as gym
import numpy as np
import pytest

import envaudit  # noqa: F401 - registers the bundled envs


@dataclass(frozen=True)
class Stage:
    """One stage of an oracle's walk: succeeds with ``p_ok``; rewards for an ok and a failed try,
    and ``truncation``, the reward when the step limit cuts the walk while this stage is next."""

    p_ok: float
    r_ok: float = 0.0
    r_fail: float = 0.0
    truncation: float = 0.0


@dataclass(frozen=True)
class ChainValue:
    mean_return: float
    p_success: float
    mean_length: float


def chain_value(stages: list[Stage], max_steps: int, *, final: float = 1.0) -> ChainValue:
    """Exact expectations of walking ``stages`` in order; the last stage's success ends with ``final``."""
    n = len(stages)

    @cache
    def value(i: int, t: int) -> tuple[float, float, float]:
        st = stages[i]
        if t >= max_steps:
            return st.truncation, 0.0, 0.0
        if i == n - 1:
            ok = (st.r_ok + final, 1.0, 1.0)
        else:
            r, s, length = value(i + 1, t + 1)
            ok = (st.r_ok + r, s, 1.0 + length)
        r, s, length = value(i, t + 1)
        fail = (st.r_fail + r, s, 1.0 + length)
        return tuple(st.p_ok * a + (1 - st.p_ok) * b for a, b in zip(ok, fail, strict=True))

    return ChainValue(*value(0, 0))


def mix(*weighted: tuple[float, ChainValue]) -> ChainValue:
    """The expectation of a mixture of walks (e.g. the correct suspect tried first or second)."""
    return ChainValue(*(sum(w * getattr(v, f) for w, v in weighted)
                        for f in ("mean_return", "p_success", "mean_length")))


@dataclass
class Played:
    returns: np.ndarray
    success: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray
    last_status: list[str]

    def assert_mean_return(self, expected: float, z: float = 4.0) -> None:
        """Mean return within ``z`` standard errors of ``expected`` (exact when returns are constant)."""
        se = self.returns.std(ddof=1) / np.sqrt(len(self.returns)) if len(self.returns) > 1 else 0.0
        assert abs(self.returns.mean() - expected) <= z * se + 1e-9, (
            f"mean return {self.returns.mean():.4f} over {len(self.returns)} episodes is not within "
            f"{z} standard errors ({se:.4f}) of the designed {expected:.4f}"
        )

    def assert_success_rate(self, expected: float, z: float = 4.0) -> None:
        n = len(self.success)
        se = np.sqrt(max(expected * (1 - expected), 1e-12) / n)
        assert abs(self.success.mean() - expected) <= z * se + 1e-9, (
            f"success rate {self.success.mean():.4f} over {n} episodes is not within {z} standard "
            f"errors ({se:.4f}) of the designed {expected:.4f}"
        )


def play(env: gym.Env, policy, seeds, *, rng_seed: int = 0) -> Played:
    """Run ``policy`` for one episode per seed; the policy sees only observations and info."""
    rng = np.random.default_rng(rng_seed)
    returns, success, lengths, truncated, status = [], [], [], [], []
    for seed in seeds:
        obs, info = env.reset(seed=int(seed))
        policy.reset(env, rng)
        total, steps = 0.0, 0
        while True:
            obs, reward, term, trunc, info = env.step(policy(obs, info))
            total += reward
            steps += 1
            if term or trunc:
                break
        returns.append(total)
        success.append(bool(info["success"]))
        lengths.append(steps)
        truncated.append(bool(trunc))
        status.append(info["tool"]["status"])
    return Played(np.array(returns), np.array(success), np.array(lengths), np.array(truncated), status)


def rollout(env: gym.Env, seed: int, actions) -> list[tuple]:
    """Everything a replay must reproduce: observations, rewards, endings and info, step by step."""
    obs, info = env.reset(seed=seed)
    out: list[tuple] = [(obs.tobytes(), repr(info))]
    for a in actions:
        obs, reward, term, trunc, info = env.step(int(a))
        out.append((obs.tobytes(), float(reward), term, trunc, repr(info)))
        if term or trunc:
            break
    return out


@pytest.fixture
def helpers():
    """The helpers above, as a fixture (test files here are not a package)."""

    class _Helpers:
        Stage = Stage
        chain_value = staticmethod(chain_value)
        mix = staticmethod(mix)
        play = staticmethod(play)
        rollout = staticmethod(rollout)

    return _Helpers
