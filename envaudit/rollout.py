"""Running episodes for probes: policies, hang protection and recording in one place.

Every ``reset``/``step`` of the env under scan runs under a deadline on a worker thread, so an env
that sleeps forever costs one deadline, not the scan. An env that hung is abandoned (its thread
cannot be killed) and the run stops using that env factory; an env that raised gets a fresh
instance for the next episode. Both are reported in ``RunResult.problems`` for the probes to turn
into ``env-error`` findings.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.errors import user_frame
from envaudit.recording import AuditWrapper, Recorder, Records, audit_wrap, strip_user_wrapper

EnvFactory = Callable[[], gym.Env]


class Policy:
    """A policy for probe rollouts. ``reset`` is called at the start of each episode.

    Subclasses override ``act``; ``name`` and ``describe()`` are what reports show.
    """

    name = "policy"

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        self.env = env
        self.rng = rng
        self.t = 0

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def __call__(self, obs: Any, info: Mapping[str, Any]) -> Any:
        action = self.act(obs, info)
        self.t += 1
        return action

    def describe(self) -> str:
        return self.name


class RandomPolicy(Policy):
    """Uniform over the action space, seeded per episode."""

    name = "random"

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        self.space = env.action_space
        self.space.seed(int(rng.integers(2**31)))

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        return self.space.sample()

    def describe(self) -> str:
        return "pick a uniformly random action at every step"


class SequencePolicy(Policy):
    """Play a fixed list of actions, then ``fallback`` (default: repeat the last action)."""

    def __init__(self, actions: Sequence[Any], name: str = "sequence", fallback: Policy | None = None) -> None:
        assert len(actions) > 0, "SequencePolicy needs at least one action"
        self.actions = list(actions)
        self.name = name
        self.fallback = fallback

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        super().reset(env, rng)
        if self.fallback is not None:
            self.fallback.reset(env, rng)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        if self.t < len(self.actions):
            return self.actions[self.t]
        if self.fallback is not None:
            return self.fallback(obs, info)
        return self.actions[-1]


@dataclass
class Problem:
    """Something the env did that is not an episode: a hang, an exception, a bad reset."""

    kind: str  # "hang" | "exception" | "reset_exception"
    where: str  # "reset" | "step" | "make"
    message: str
    seed: int | None
    step: int | None = None
    episode_id: int | None = None
    location: str | None = None
    """``file:line`` in the user's code where the exception was raised (``errors.user_frame``)."""


@dataclass
class RunResult:
    records: Records
    problems: list[Problem] = field(default_factory=list)
    stopped_early: bool = False  # a hang or the deadline stopped the run

    @property
    def hung(self) -> bool:
        return any(p.kind == "hang" for p in self.problems)


def step_limit(env: gym.Env) -> int | None:
    """The env's own step limit: its spec's ``max_episode_steps`` or a ``ToolEnv``'s ``max_steps``."""
    spec_limit = env.spec.max_episode_steps if env.spec is not None else None
    own_limit = getattr(env.unwrapped, "max_steps", None)
    limits = [int(x) for x in (spec_limit, own_limit) if isinstance(x, (int, np.integer))]
    return max(limits) if limits else None


def limit_steps(env: gym.Env, max_steps: int) -> gym.Env:
    """Add a ``TimeLimit`` when the env has no step limit of its own, so no episode runs forever."""
    if step_limit(env) is None:
        return gym.wrappers.TimeLimit(env, max_episode_steps=max_steps)
    return env


class Runner:
    """Runs episodes of envs from one factory with hang protection, recording into one Recorder.

    ``wrappers`` are applied between the env and the recorder (fault injection goes there).
    """

    def __init__(
        self,
        make_env: EnvFactory,
        *,
        step_timeout_s: float = 5.0,
        max_steps: int = 500,
        success_threshold: float | None = None,
        tool_key: str = "tool",
        ids: Iterator[int] | None = None,
    ) -> None:
        self.make_env = make_env
        self.step_timeout_s = step_timeout_s
        self.max_steps = max_steps
        self.success_threshold = success_threshold
        self.tool_key = tool_key
        self.ids = ids if ids is not None else itertools.count()
        self._worker = DeadlineWorker("envaudit-env")
        self.dead = False  # set once the env hung: its thread is stuck, stop using it

    def _guard(self, fn: Callable[[], Any], what: str) -> Any:
        return self._worker.call(fn, self.step_timeout_s, what=what)

    def run(
        self,
        policy: Policy,
        seeds: Iterable[int],
        *,
        rng: np.random.Generator,
        wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
        tags: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        reset_options: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run one episode per seed with ``policy``; returns the records of just these episodes."""
        recorder = Recorder(ids=self.ids)
        problems: list[Problem] = []
        stopped = False
        env: AuditWrapper | None = None
        for seed in seeds:
            if self.dead or (deadline is not None and time.monotonic() > deadline):
                stopped = True
                break
            if env is None:
                try:
                    env = self._build(recorder, wrappers)
                except DeadlineExceeded as exc:
                    problems.append(Problem("hang", "make", str(exc), seed))
                    self.dead, stopped = True, True
                    break
                except Exception as exc:
                    problems.append(Problem("exception", "make", f"{type(exc).__name__}: {exc}", seed,
                                            location=user_frame(exc)))
                    stopped = True
                    break
            env.set_tags(**(tags or {}))
            ok = self._episode(env, policy, int(seed), rng, problems, reset_options)
            if not ok:
                if not self.dead:
                    self._close(env)
                env = None
        if env is not None:
            self._close(env)
        return RunResult(recorder.records(), problems, stopped)

    def _build(self, recorder: Recorder, wrappers) -> AuditWrapper:
        def build() -> AuditWrapper:
            made, mapping = strip_user_wrapper(self.make_env())
            env = limit_steps(made, self.max_steps)
            self._step_cap = step_limit(env) or self.max_steps
            for wrapper in wrappers:
                env = wrapper(env)
            # audit_wrap keeps an envaudit.wrap(env, success=..., tool_key=...) mapping of the user's.
            return audit_wrap(env, tool_key=self.tool_key, success_threshold=self.success_threshold,
                              recorder=recorder, mapping=mapping)
        return self._guard(build, "making the env")

    def _episode(self, env, policy, seed, rng, problems, reset_options) -> bool:
        """One episode; False when the env must be replaced (it raised or hung)."""
        try:
            obs, info = self._guard(lambda: env.reset(seed=seed, options=reset_options), "reset()")
        except DeadlineExceeded as exc:
            problems.append(Problem("hang", "reset", str(exc), seed))
            self.dead = True
            return False
        except Exception as exc:
            problems.append(Problem("reset_exception", "reset", f"{type(exc).__name__}: {exc}", seed,
                                    location=user_frame(exc)))
            return False
        policy.reset(env, rng)
        episode_id = env.episode_id
        # The env's own limit when it has one (MountainCarContinuous runs 999 steps), else ours.
        for t in range(self._step_cap + 1):
            try:
                action = policy(obs, info)
            except Exception as exc:  # the probe's policy broke, not the env: re-raise to the probe
                raise RuntimeError(f"policy {policy.name!r} failed at step {t}: {exc}") from exc
            try:
                obs, _, terminated, truncated, info = self._guard(lambda a=action: env.step(a), "step()")
            except DeadlineExceeded as exc:
                problems.append(Problem("hang", "step", str(exc), seed, t, episode_id))
                self.dead = True
                return False
            except Exception as exc:
                problems.append(Problem("exception", "step", f"{type(exc).__name__}: {exc}", seed, t, episode_id,
                                        location=user_frame(exc)))
                return False
            if terminated or truncated:
                return True
        problems.append(Problem("exception", "step", f"the episode did not end within its step limit of "
                                f"{self._step_cap} steps", seed, self._step_cap, episode_id))
        return False

    def _close(self, env: gym.Env) -> None:
        try:
            self._guard(env.close, "close()")
        except Exception:  # closing a broken env is best effort; the episode data is already kept
            pass
