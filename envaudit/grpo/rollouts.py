"""Rollouts for GRPO: many envs stepped in lockstep, recorded and hang-protected.

A GRPO iteration runs G rollouts from each of a few reset seeds. Stepping them in lockstep lets
the policy act on all of them with one batched forward pass. Every env is wrapped in
``AuditWrapper`` (so episodes get envaudit's end reasons and outcome classes), and every
``reset``/``step`` runs on a ``DeadlineWorker`` thread under a deadline, as in
``envaudit.rollout.Runner``: an env that raises is recorded (an ``env_exception`` episode) and
rebuilt, an env that hangs stops the collection (its thread cannot be killed, so the collector is
dead from then on).

Under the process executor the GRPO probe runs in a worker process of its own
(``envaudit.probe_host``), so these envs are stepped outside the scanning process; each call says
which env call, step and seed it is (``execution.slots.note``), so a group whose env kills that
process is reported with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.execution.slots import note
from envaudit.grpo.engine import PolicyEngine
from envaudit.recording import AuditWrapper, Recorder, Records, audit_wrap, strip_user_wrapper
from envaudit.rollout import EnvFactory, Problem, limit_steps


@dataclass
class Steps:
    """What the policy did in one episode, step by step (the engine's states, actions, log-probs)."""

    states: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    """Catalogue indices (ints), or text for a text env's tool calls."""
    logprobs: list[float] = field(default_factory=list)


@dataclass
class Rollouts:
    records: Records
    """Steps and episodes tables of the episodes that finished."""
    steps: dict[int, Steps]
    """Per episode id, what the policy did."""
    problems: list[Problem]
    stopped: str | None = None
    """``"hang"`` or ``"deadline"`` when the collection stopped early."""
    env_steps: int = 0


def step_limit(env: gym.Env, default: int) -> int:
    """The step limit an episode of ``env`` runs to (for the policy's step-fraction feature)."""
    limits = []
    inner = env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, gym.wrappers.TimeLimit):
            limits.append(int(inner._max_episode_steps))
        inner = inner.env
    own = getattr(env.unwrapped, "max_steps", None)
    if isinstance(own, (int, np.integer)) and own > 0:
        limits.append(int(own))
    return min(limits) if limits else default


def _plain(action: Any) -> Any:
    """An int for a catalogue index (numpy or not), the text itself for a text action."""
    return action if isinstance(action, str) else int(action)


class LockstepCollector:
    """``n_slots`` envs from ``make_env``, each reused across collections until it breaks.

    All env calls run on one ``DeadlineWorker`` thread, a whole lockstep round (one step of every
    active env) per call, so a round costs one thread handoff instead of one per env. The round's
    deadline is ``step_timeout_s`` per env in it; an env that overruns it is reported as a hang
    and ends collecting.
    The caller's ``deadline`` (a safety cap) is checked between rounds only, so a slow machine near
    the cap stops with ``"deadline"`` and is never mistaken for a hanging env.
    """

    def __init__(
        self,
        make_env: EnvFactory,
        n_slots: int,
        *,
        step_timeout_s: float = 5.0,
        max_steps: int = 500,
        success_threshold: float | None = None,
        wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
        ids: Any = None,
        tool_key: str = "tool",
    ) -> None:
        assert n_slots >= 1, f"a collector needs at least one env slot, got {n_slots}"
        self.make_env = make_env
        self.n_slots = n_slots
        self.step_timeout_s = step_timeout_s
        self.max_steps = max_steps
        self.success_threshold = success_threshold
        self.wrappers = list(wrappers)
        self.ids = ids
        self.tool_key = tool_key
        self._envs: list[AuditWrapper | None] = [None] * n_slots
        self._limits = [max_steps] * n_slots
        self._worker = DeadlineWorker("envaudit-grpo")
        self.dead = False

    # -- envs ---------------------------------------------------------------------------------
    def _build(self, slot: int) -> AuditWrapper:
        """Make the env of ``slot`` (on the worker thread: making an env can hang too)."""
        made, mapping = strip_user_wrapper(self.make_env())  # keep an envaudit.wrap mapping
        env = limit_steps(made, self.max_steps)
        for wrapper in self.wrappers:
            env = wrapper(env)
        env = audit_wrap(env, tool_key=self.tool_key, success_threshold=self.success_threshold, mapping=mapping)
        self._envs[slot] = env
        self._limits[slot] = step_limit(env, self.max_steps)
        return env

    def env(self, slot: int) -> AuditWrapper:
        env = self._envs[slot]
        if env is None:
            env = self._worker.call(lambda: self._build(slot), self.step_timeout_s, what="making the env")
        return env

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        env = self.env(0)
        return env.observation_space, env.action_space

    def _discard(self, slot: int) -> None:
        env, self._envs[slot] = self._envs[slot], None
        if env is not None and not self.dead:
            try:
                self._worker.call(env.close, self.step_timeout_s, what="close()")
            except Exception:  # closing a broken env is best effort; its episodes are recorded
                pass

    def close(self) -> None:
        for slot in range(self.n_slots):
            self._discard(slot)
        self._worker.close()

    def _round(self, calls: list[tuple[int, Callable[[], Any]]], what: str,
               marks: Mapping[int, tuple[int | None, int | None]] | None = None):
        """Run ``calls`` (slot, fn) in order on the worker; per call ``("ok", value)`` or
        ``("error", exception)``. Raises ``DeadlineExceeded`` with ``where[0]`` the slot that hung.
        ``marks[slot]``: the (step, seed) of the slot's call, for ``note``."""
        where = [None]
        call = what.rstrip("()")

        def job() -> list[tuple[str, Any]]:
            out = []
            for slot, fn in calls:
                where[0] = slot
                step, seed = (marks or {}).get(slot, (None, None))
                try:
                    with note(call, step, seed):
                        out.append(("ok", fn()))
                except Exception as exc:  # the env raised: data for the caller, not a crash
                    out.append(("error", exc))
            return out

        limit = self.step_timeout_s * len(calls)
        try:
            return self._worker.call(job, limit, what=what)
        except DeadlineExceeded as exc:
            exc.slot = where[0]
            raise

    # -- collecting ---------------------------------------------------------------------------
    def collect(
        self,
        engine: PolicyEngine,
        seeds: Sequence[int],
        rng: np.random.Generator,
        *,
        tags: Sequence[Mapping[str, Any]] | None = None,
        greedy: bool = False,
        deadline: float | None = None,
    ) -> Rollouts:
        """One episode per seed (at most ``n_slots``), all stepped together."""
        assert len(seeds) <= self.n_slots, f"{len(seeds)} seeds for {self.n_slots} env slots"
        recorder = Recorder(ids=self.ids)
        problems: list[Problem] = []
        if self.dead:
            return Rollouts(recorder.records(), {}, problems, "hang")

        def start(slot: int, seed: int) -> tuple[Any, int]:
            env = self._envs[slot]
            if env is None:
                env = self._build(slot)
            env.recorder = recorder
            env.set_tags(**(tags[slot] if tags is not None else {}))
            obs, _ = env.reset(seed=seed)
            return obs, env.episode_id

        obs: dict[int, Any] = {}
        episode_of: dict[int, int] = {}
        try:
            started = self._round([(slot, lambda s=slot, x=int(seed): start(s, x))
                                   for slot, seed in enumerate(seeds)], "reset()",
                                  {slot: (None, int(seed)) for slot, seed in enumerate(seeds)})
        except DeadlineExceeded as exc:
            self.dead = True
            problems.append(Problem("hang", "reset", str(exc), int(seeds[exc.slot]) if exc.slot is not None else None))
            return Rollouts(recorder.records(), {}, problems, "hang")
        for slot, (status, value) in enumerate(started):
            if status == "ok":
                obs[slot], episode_of[slot] = value
            else:
                problems.append(Problem("reset_exception", "reset", f"{type(value).__name__}: {value}",
                                        int(seeds[slot])))
                self._discard(slot)  # rebuilt next time
        active = sorted(obs)
        t = dict.fromkeys(active, 0)
        steps = {slot: Steps() for slot in active}
        stopped: str | None = None
        env_steps = 0
        while active:
            if deadline is not None and time.monotonic() > deadline:
                stopped = "deadline"
                break
            fractions = [t[s] / self._limits[s] for s in active]
            sample = engine.sample([obs[s] for s in active], fractions, rng, greedy=greedy)
            calls = []
            for k, slot in enumerate(active):
                action = _plain(sample.actions[k])
                record = steps[slot]
                record.states.append(sample.states[k])
                record.actions.append(action)
                record.logprobs.append(float(sample.logprobs[k]))
                calls.append((slot, lambda env=self._envs[slot], a=action: env.step(a)))
            try:
                outcomes = self._round(calls, "step()", {s: (t[s], int(seeds[s])) for s in active})
            except DeadlineExceeded as exc:
                self.dead, stopped = True, "hang"
                slot = exc.slot
                problems.append(Problem("hang", "step", str(exc), None, t.get(slot), episode_of.get(slot)))
                break
            still = []
            for slot, (status, value) in zip(active, outcomes, strict=True):
                if status == "error":  # recorded by AuditWrapper as an env_exception episode
                    problems.append(Problem("exception", "step", f"{type(value).__name__}: {value}", None,
                                            t[slot], episode_of[slot]))
                    self._discard(slot)
                    continue
                obs[slot], _, terminated, truncated, _ = value
                env_steps += 1
                t[slot] += 1
                # An env that ignores its own step limit is abandoned well past it.
                if not (terminated or truncated) and t[slot] <= 2 * self._limits[slot]:
                    still.append(slot)
            active = still
        records = recorder.records()
        finished = set(records.episodes["episode_id"].tolist())
        by_episode = {episode_of[s]: steps[s] for s in steps if episode_of[s] in finished}
        return Rollouts(records, by_episode, problems, stopped, env_steps)
