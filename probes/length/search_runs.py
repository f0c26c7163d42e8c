"""The success search's env work as runs over the scan's workers (``ProbeContext.run``).

``search.breadth_first`` expands cells in batches: each cell's actions are replays of its prefix and
one more action on its reset seed (``RunExpander``, a ``ReplayPlan`` whose episodes hand back what
their last step saw). ``follow_seeds`` plays a known success's skeleton on many seeds at once
(failed calls retried, the episode cut where the skeleton ends), then every action as the last one.
Every episode goes through the executor, so ``--workers`` divides the search; each is counted in the
scan's env steps as any run's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.policies import Replay, ReplayPlan, tool_status
from envaudit.probe import ProbeContext
from envaudit.protocol import TOOL_FAILED
from envaudit.rollout import Policy, RunResult


class Stopped(RuntimeError):
    """One of the search's runs could not be read whole: the env raised (``raised``: the api
    probe's finding), hung, or the scan's cap was reached. The search stops there."""

    def __init__(self, message: str, raised: bool) -> None:
        super().__init__(message)
        self.raised = raised


class _Ends(gym.Wrapper):
    """Hands back an episode's reset observation, its steps and what its last step saw (the env's
    own terminated, truncated and ``info["success"]``, below any cut)."""

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self.start, self.steps, self.last = obs, 0, None
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        won = bool(terminated) and isinstance(info, Mapping) and info.get("success") is True
        self.last = (obs, bool(terminated), bool(truncated), won)
        return obs, reward, terminated, truncated, info

    def episode_payload(self) -> tuple:
        return self.start, self.steps, self.last


def _checked(result: RunResult, n: int) -> RunResult:
    """``result`` of a run of ``n`` episodes, when every one played to its end without an error."""
    raised = next((p for p in result.problems if p.kind in ("exception", "reset_exception")), None)
    if raised is not None:
        raise Stopped(f"the env raised {raised.message}", raised=True)
    died = next((p for p in result.problems if p.kind in ("crash", "memory")), None)
    if died is not None:  # its worker process died with it: the scan's env-error finding lists it
        raise Stopped(f"the env's process died: {died.message}", raised=True)
    if result.finished < n:
        raise Stopped("the env hung" if result.hung else "the scan's cap was reached", raised=False)
    return result


def replay_ends(ctx: ProbeContext, replays: list[Replay]) -> list[tuple]:
    """Play each replay in one run; per replay its payload ``(reset obs, steps, last step)``."""
    plan = ReplayPlan(replays, name="success search")
    result = _checked(ctx.run(plan.policy(), plan.seeds, wrappers=(_Ends, *plan.wrappers())), len(replays))
    return [result.payloads[k] for k in range(len(replays))]


class RunExpander:
    """``search.breadth_first``'s expander on ``seed``: every action from every cell of a batch,
    each a replay of the cell's prefix, all in one run."""

    def __init__(self, ctx: ProbeContext, seed: int) -> None:
        self.ctx, self.seed, self.used = ctx, seed, 0
        self.reset_obs: Any = None

    def __call__(self, prefixes: Sequence[tuple], actions: Sequence[Any]) -> list[list[tuple]]:
        ends = replay_ends(self.ctx, [Replay(self.seed, tuple(int(x) for x in (*p, a))) for p in prefixes
                                      for a in actions])
        out = []
        for k, prefix in enumerate(prefixes):
            tried = []
            for start, steps, last in ends[k * len(actions):(k + 1) * len(actions)]:
                self.reset_obs = start if self.reset_obs is None else self.reset_obs
                self.used += steps
                # A prefix that ended before its last action (an env that does not replay) is a dead end.
                tried.append(last if steps == len(prefix) + 1 else (last[0] if last else None, True, False, False))
            out.append(tried)
        return out


class _Skeleton(gym.Wrapper):
    """Plays a known success's skeleton (a failed call retried) and cuts the episode where it ends
    or at ``budget`` steps; hands back the actions played and whether the skeleton was done."""

    def __init__(self, env: gym.Env, skeleton: Sequence[Any], budget: int) -> None:
        super().__init__(env)
        self.skeleton, self.budget = list(skeleton), budget

    def reset(self, **kwargs: Any):
        self.i, self.played, self.ended = 0, [], False
        return self.env.reset(**kwargs)

    def next_action(self) -> Any:
        return self.skeleton[min(self.i, len(self.skeleton) - 1)]

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.played.append(int(action))
        self.ended = bool(terminated or truncated)
        if tool_status(info) not in TOOL_FAILED:
            self.i += 1
        if not self.ended and (self.i >= len(self.skeleton) or len(self.played) >= self.budget):
            truncated = True
        return obs, reward, terminated, truncated, info

    def episode_payload(self) -> tuple | None:
        """The actions that played the whole skeleton, or None (the env ended it, or the budget)."""
        return tuple(self.played) if self.i >= len(self.skeleton) and not self.ended else None


class _PlaySkeleton(Policy):
    name = "success search"

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        layer = env
        while not isinstance(layer, _Skeleton):
            layer = layer.env
        self.layer = layer

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.layer.next_action()


def follow_seeds(ctx: ProbeContext, seeds: Sequence[int], skeleton: Sequence[Any], actions: Sequence[Any],
                 budget: int) -> list[tuple | None]:
    """``search.follow`` on every seed at once: the skeleton on each (one run), then every action as
    the last one after each skeleton played (one run); per seed the first success's actions, or None."""
    if skeleton:
        played = _checked(ctx.run(_PlaySkeleton(), list(seeds), wrappers=[lambda env: _Skeleton(env, skeleton, budget)]),
                          len(seeds))
        prefixes = [played.payloads.get(k) for k in range(len(seeds))]
    else:
        prefixes = [() for _ in seeds]
    tries = [(k, Replay(seeds[k], (*prefix, int(a)))) for k, prefix in enumerate(prefixes) if prefix is not None
             for a in actions]
    ends = replay_ends(ctx, [r for _, r in tries]) if tries else []
    out: list[tuple | None] = [None] * len(seeds)
    for (k, replay), (_, steps, last) in zip(tries, ends, strict=True):
        if out[k] is None and steps == len(replay.actions) and last is not None and last[3]:
            out[k] = replay.actions
    return out


def statuses_of(ctx: ProbeContext, seed: int, actions: Sequence[Any]) -> list[Any]:
    """The tool status of each step of ``actions`` replayed once from ``seed``."""
    plan = ReplayPlan([Replay(seed, tuple(int(a) for a in actions))], name="success search")
    records = _checked(plan.run(ctx), 1).records
    return records.steps["tool_status"].tolist()


__all__ = ["RunExpander", "Stopped", "follow_seeds", "replay_ends", "statuses_of"]
