"""Rollouts for GRPO: many envs stepped in lockstep on the executor's workers, recorded and
hang-protected.

A GRPO iteration runs G rollouts from each of a few reset seeds. They are stepped in lockstep
turns: the policy (in this process) acts on every live rollout with one batched forward pass, and
the envs step on the executor's workers (``envaudit.execution.lanes``: threads, worker processes,
or one slot in this process when there is no executor), each env pinned to one worker for the
collector's life, as in Gymnasium's vector API. Every env is wrapped in ``AuditWrapper`` where it
lives (so episodes get envaudit's end reasons and outcome classes) and every ``reset``/``step``
runs there under a deadline, as in ``envaudit.rollout.Runner``: an env that raises is recorded (an
``env_exception`` episode) and rebuilt, an env that hangs stops the collection (its worker's
thread cannot be killed, so the collector is dead from then on), an env whose worker process dies
costs its episode (a ``crash`` or ``memory`` problem) and the collection goes on; the envs that
shared that worker are replayed on a fresh one (same seed, same actions). Nothing a collection
returns depends on the executor or its number of workers.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.deadline import DeadlineWorker
from envaudit.execution.aio import sync_env
from envaudit.execution.lanes import Evicted, Hung, open_lanes
from envaudit.execution.slots import Lost, Slot
from envaudit.grpo.engine import PolicyEngine
from envaudit.recording import AuditWrapper, Recorder, Records, audit_wrap, strip_user_wrapper
from envaudit.rollout import (
    EnvFactory,
    EpisodeCapture,
    Problem,
    enter_scan_place,
    env_factory,
    limit_steps,
)


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


# -- where the envs live: one lane each --------------------------------------------------------
@dataclass
class LaneRun:
    """What every lane of a collector needs where its env lives (pickled once per worker process)."""

    make_env: EnvFactory | None
    spec: str | None
    """The scan's env spec, resolved where the env is made, instead of a pickled factory."""
    wrappers: tuple
    step_timeout_s: float
    max_steps: int
    success_threshold: float | None
    tool_key: str
    where: tuple[str, list[str]] | None = None
    """The collecting process's working directory and ``sys.path``, for worker processes."""


def _build(run: LaneRun) -> tuple[AuditWrapper, int]:
    enter_scan_place(run.where)
    make_env = env_factory(run.spec, run.make_env)
    made, mapping = strip_user_wrapper(sync_env(make_env()))  # keep an envaudit.wrap mapping
    env = limit_steps(made, run.max_steps)
    for wrapper in run.wrappers:
        env = wrapper(env)
    env = audit_wrap(env, tool_key=run.tool_key, success_threshold=run.success_threshold, mapping=mapping)
    return env, step_limit(env, run.max_steps)


def _drop(slot: Slot, envs: dict, lane: int, deadline_s: float) -> None:
    held = envs.pop(lane, None)
    if held is not None:
        try:
            slot.guard(held[0].close, deadline_s, "close")
        except Exception:  # closing a broken env is best effort; its episodes are recorded
            pass


def _reset(slot: Slot, run: LaneRun, envs: dict, lane: int, seed: int, tags: Mapping[str, Any]) -> tuple:
    T = run.step_timeout_s
    slot.label(lane, seed)
    held = envs.get(lane)
    if held is None:
        try:
            held = envs[lane] = slot.guard(lambda: _build(run), T, "make")
        except Exception as exc:
            return ("error", f"{type(exc).__name__}: {exc}", None)
    env, limit = held
    env.recorder = EpisodeCapture(-1)  # the collector names the episode (``episode_id`` of each step)
    env.set_tags(**tags)
    try:
        obs, _ = slot.guard(lambda: env.reset(seed=seed), T, "reset")
    except Exception as exc:
        _drop(slot, envs, lane, T)
        return ("error", f"{type(exc).__name__}: {exc}", None)
    return ("ok", obs, limit)


def _step(slot: Slot, run: LaneRun, envs: dict, lane: int, action: Any, episode_id: int, t: int, seed: int) -> tuple:
    T = run.step_timeout_s
    env = envs[lane][0]
    env.episode_id = episode_id
    slot.label(lane, seed)
    try:
        obs, _, terminated, truncated, _ = slot.guard(lambda: env.step(action), T, "step", t)
    except Exception as exc:  # recorded by AuditWrapper as an env_exception episode
        rows = env.recorder.rows()
        _drop(slot, envs, lane, T)
        return ("error", f"{type(exc).__name__}: {exc}", rows)
    ended = bool(terminated) or bool(truncated)
    return ("ok", obs, bool(terminated), bool(truncated), env.recorder.rows() if ended else None)


def serve_lane(slot: Slot, run: LaneRun, lane: int, request: tuple) -> Any:
    """Answer one request of the collector for ``lane``'s env, where it lives (the lanes' ``fn``).

    ``("reset", seed, tags, None, ())``: ``("ok", obs, step limit)``; ``("step", action,
    episode_id, t, seed)``: ``("ok", obs, terminated, truncated, rows of the episode when it
    ended)``; ``("replay", seed, tags, episode_id, actions)``: a reset and those steps, answered as
    the last of them. An env call that raised: ``("error", message, rows or None)``."""
    envs = slot.state.get("lanes")
    if envs is None:
        envs = slot.state["lanes"] = {}
        slot.at_end(lambda: [_drop(slot, envs, lane, run.step_timeout_s) for lane in list(envs)])
    if request[0] == "step":
        _, action, episode_id, t, seed = request
        if lane not in envs:
            return Evicted("its env is not on this worker")
        return _step(slot, run, envs, lane, action, episode_id, t, seed)
    _, seed, tags, episode_id, actions = request
    _drop(slot, envs, lane, run.step_timeout_s) if actions else None
    answer = _reset(slot, run, envs, lane, seed, tags)
    for t, action in enumerate(actions):
        if answer[0] != "ok":
            break
        answer = _step(slot, run, envs, lane, action, episode_id, t, seed)
    return answer


# -- the collector: the policy here, the envs on the lanes -------------------------------------
REPLAYS = 3
"""Replays of a lane evicted by another lane's dying env, before it counts as lost itself."""


class LockstepCollector:
    """``n_slots`` envs from ``make_env``, each on one lane of ``executor``'s workers and reused
    across collections until it breaks.

    A turn sends one request per live env (reset, or step with the policy's action) and waits for
    all of them; each env call runs under ``step_timeout_s`` where the env lives, and an env that
    overruns it is reported as a hang and ends collecting. The caller's ``deadline`` (a safety
    cap) is checked between turns only, so a slow machine near the cap stops with ``"deadline"``
    and is never mistaken for a hanging env. ``executor``: threads, processes or a probe worker's
    remote pool (``envaudit.execution``); None: every env on one slot in this process. ``spec``:
    the env's spec string, which worker processes resolve instead of unpickling ``make_env``.
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
        executor: Any = None,
        spec: str | None = None,
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
        self.executor = executor
        self.spec = spec
        self._limits = [max_steps] * n_slots
        self._lanes: Any = None
        self._inspect: AuditWrapper | None = None
        self._worker: DeadlineWorker | None = None
        self.dead = False

    # -- envs ---------------------------------------------------------------------------------
    def _run(self, remote: bool) -> LaneRun:
        run = LaneRun(self.make_env, None, tuple(self.wrappers), self.step_timeout_s, self.max_steps,
                      self.success_threshold, self.tool_key)
        if remote:
            run.where = (os.getcwd(), list(sys.path))
            if self.spec is not None:
                run.make_env, run.spec = None, self.spec
        return run

    def _open(self) -> Any:
        if self._lanes is None:
            remote = getattr(self.executor, "kind", None) in ("processes", "remote")
            try:
                self._lanes = open_lanes(self.executor, serve_lane, self._run(remote), self.n_slots,
                                         self.step_timeout_s)
            except Exception as exc:
                if not remote:
                    raise
                import warnings

                warnings.warn(f"the GRPO rollouts cannot be sent to worker processes ({type(exc).__name__}: {exc}), "
                              "so their envs step in this process; make the env factory and wrappers picklable, "
                              "or scan a spec string", RuntimeWarning, stacklevel=3)
                self._lanes = open_lanes(None, serve_lane, self._run(False), self.n_slots, self.step_timeout_s)
        return self._lanes

    def env(self, slot: int = 0) -> AuditWrapper:
        """An instance for inspection (spaces, action labels), made in this process and never stepped."""
        if self._inspect is None:
            self._worker = self._worker or DeadlineWorker("envaudit-grpo")
            self._inspect = self._worker.call(lambda: _build(self._run(False))[0], self.step_timeout_s,
                                              what="making the env")
        return self._inspect

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        env = self.env(0)
        return env.observation_space, env.action_space

    def close(self) -> None:
        if self._lanes is not None:
            self._lanes.close()
            self._lanes = None
        if self._worker is not None:
            if self._inspect is not None:
                try:
                    self._worker.call(self._inspect.close, self.step_timeout_s, what="close()")
                except Exception:
                    pass
                self._inspect = None
            self._worker.close()
            self._worker = None

    def _turn(self, requests: list[tuple[int, tuple]], replay: Callable[[int], tuple]) -> list[Any]:
        """Answers to ``requests``; a lane evicted by another lane's dead worker is replayed
        (``replay(lane)``: its episode from the reset up to this turn) on a fresh one."""
        answers = self._open().turn(requests)
        for _ in range(REPLAYS):
            evicted = [j for j, a in enumerate(answers) if isinstance(a, Evicted)]
            if not evicted or any(isinstance(a, Hung) or isinstance(a, Lost) and a.kind == "hang" for a in answers):
                break
            again = self._lanes.turn([(requests[j][0], replay(requests[j][0])) for j in evicted])
            for j, a in zip(evicted, again, strict=True):
                answers[j] = a
        return [Lost("crash", "reset" if requests[j][1][0] == "reset" else "step", None, a.detail)
                if isinstance(a, Evicted) else a
                for j, a in enumerate(answers)]

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
        ids = self.ids if self.ids is not None else itertools.count()
        recorder = Recorder()
        problems: list[Problem] = []
        if self.dead:
            return Rollouts(recorder.records(), {}, problems, "hang")
        seeds = [int(s) for s in seeds]
        tag_of = [dict(tags[s]) if tags is not None else {} for s in range(len(seeds))]

        def reset(slot: int) -> tuple:
            return ("reset", seeds[slot], tag_of[slot], None, ())

        def hang(answer: Any) -> Problem | None:
            if isinstance(answer, Hung) or isinstance(answer, Lost) and answer.kind == "hang":
                self.dead = True
                return Problem("hang", answer.call or "step", answer.detail, None, answer.step)
            return None

        answers = self._turn([(slot, reset(slot)) for slot in range(len(seeds))], reset)
        for slot, answer in enumerate(answers):
            if (problem := hang(answer)) is not None:
                problem.seed = seeds[slot]
                problems.append(problem)
                return Rollouts(recorder.records(), {}, problems, "hang")
        obs: dict[int, Any] = {}
        episode_of: dict[int, int] = {}
        for slot, answer in enumerate(answers):
            if isinstance(answer, Lost):
                problems.append(_lost(answer, seeds[slot], None, None))
            elif answer[0] == "error":
                problems.append(Problem("reset_exception", "reset", answer[1], seeds[slot]))
            else:
                obs[slot], self._limits[slot] = answer[1], answer[2]
                episode_of[slot] = next(ids)
        active = sorted(obs)
        t = dict.fromkeys(active, 0)
        steps = {slot: Steps() for slot in active}
        stopped: str | None = None
        env_steps = 0

        def replay(slot: int) -> tuple:
            return ("replay", seeds[slot], tag_of[slot], episode_of[slot], tuple(steps[slot].actions))

        while active:
            if deadline is not None and time.monotonic() > deadline:
                stopped = "deadline"
                break
            fractions = [t[s] / self._limits[s] for s in active]
            sample = engine.sample([obs[s] for s in active], fractions, rng, greedy=greedy)
            requests = []
            for k, slot in enumerate(active):
                action = _plain(sample.actions[k])
                record = steps[slot]
                record.states.append(sample.states[k])
                record.actions.append(action)
                record.logprobs.append(float(sample.logprobs[k]))
                requests.append((slot, ("step", action, episode_of[slot], t[slot], seeds[slot])))
            answers = self._turn(requests, replay)
            hung = [(slot, p) for slot, a in zip(active, answers, strict=True) if (p := hang(a)) is not None]
            if hung:
                slot, problem = hung[0]
                problem.step, problem.episode_id = t.get(slot), episode_of.get(slot)
                problems.append(problem)
                stopped = "hang"
                break
            still = []
            for slot, answer in zip(active, answers, strict=True):
                if isinstance(answer, Lost):  # its rows died with the worker
                    problems.append(_lost(answer, seeds[slot], t[slot], episode_of[slot]))
                    continue
                if answer[0] == "error":
                    _add(recorder, answer[2])
                    problems.append(Problem("exception", "step", answer[1], None, t[slot], episode_of[slot]))
                    continue
                _, obs[slot], terminated, truncated, rows = answer
                _add(recorder, rows)
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


def _add(recorder: Recorder, rows: Any) -> None:
    if rows is not None:
        step_columns, episode, tags = rows
        recorder.add_step_columns(step_columns)
        recorder.add_episode(episode, tags)


def _lost(lost: Lost, seed: int, step: int | None, episode_id: int | None) -> Problem:
    """An episode whose worker process died (a crash, memory past the cap) in its env's call."""
    where = lost.call or "step"
    during = "making the env" if where == "make" else f"{where}()"
    at = f" at step {step}" if step is not None else ""
    return Problem(lost.kind, where, f"{lost.detail}, during {during}{at} of a GRPO rollout (reset seed {seed})",
                   seed, step, episode_id)
