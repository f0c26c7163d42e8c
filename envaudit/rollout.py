"""Running episodes for probes: policies, hang protection and recording in one place.

Every ``reset``/``step`` of the env under scan runs under a deadline, so an env that sleeps forever
costs one deadline, not the scan. An env that hung is abandoned and the run stops using that env
factory; an env that raised gets a fresh instance for the next episode. Both are reported in
``RunResult.problems`` for the probes to turn into ``env-error`` findings.

Episodes run on an executor (``envaudit.execution``): inline, on threads, or in worker processes
where a crash of env code (a segfault, ``os._exit``, memory past the cap) is a ``crash``/``memory``
problem of one episode and the run goes on with a fresh worker. What a run returns does not depend
on the executor or its number of workers: episode ids are handed out before the run, each episode's
policy randomness comes from the run's generator and the episode's index, and records are put
together in index order.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import functools
import itertools
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envaudit.deadline import DeadlineExceeded
from envaudit.errors import user_frame
from envaudit.execution import InlineExecutor, Lost, Slot
from envaudit.execution.aio import sync_env
from envaudit.recording import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    AuditWrapper,
    Recorder,
    Records,
    audit_wrap,
    strip_user_wrapper,
)
from envaudit.seeding import child_seed

EnvFactory = Callable[[], gym.Env]


class Policy:
    """A policy for probe rollouts. ``reset`` is called at the start of each episode.

    Subclasses override ``act``; ``name`` and ``describe()`` are what reports show. A run may play
    its episodes on several env instances at once, each with its own copy of the policy; a policy
    that reports back through state shared across episodes sets ``ordered = True`` and its runs
    play every episode in order, on one instance, in the scanning process.
    """

    name = "policy"
    ordered = False

    def reset(self, env: gym.Env, rng: np.random.Generator) -> None:
        self.env = env
        self.rng = rng
        self.t = 0

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def for_episode(self, index: int, seed: int) -> Policy:
        """The policy that plays episode ``index`` of a run (from ``reset(seed=seed)``): this one.
        A run whose episodes each play their own policy (``policies.BySeed``, ``ReplayPlan``) picks
        it here, in whatever worker plays the episode, so the run still fans out over the workers."""
        return self

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
        # A copy to seed: envs that declare their space on the class share it across instances,
        # and episodes played at once on threads must not reseed each other's sampler.
        if getattr(self, "_space_of", None) is not env.action_space:
            self._space_of, self.space = env.action_space, copy.deepcopy(env.action_space)
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


@dataclass(frozen=True)
class Run:
    """One run of ``ProbeContext.run_all``: ``policy`` once per seed, with ``tags`` and its policy
    randomness named ``rng_name`` (default: the policy's name), as ``ProbeContext.run`` takes them."""

    policy: Policy
    seeds: Sequence[int]
    tags: Mapping[str, Any] | None = None
    rng_name: str | None = None


class Segments(Policy):
    """Several runs' policies as one run's: ``parts`` are ``(policy, episodes)`` in order, and episode
    ``i`` plays its part's policy (that policy's own ``for_episode`` for its place in the part)."""

    def __init__(self, parts: Sequence[tuple[Policy, int]]) -> None:
        assert parts and all(n >= 1 for _, n in parts), f"Segments needs parts of at least one episode, got {parts}"
        self.parts = list(parts)
        self.starts = list(itertools.accumulate((n for _, n in parts), initial=0))
        self.name = self.parts[0][0].name

    def for_episode(self, index: int, seed: int) -> Policy:
        if not 0 <= index < self.starts[-1]:
            raise IndexError(f"Segments has no policy for episode {index} (it has {self.starts[-1]})")
        k = bisect.bisect_right(self.starts, index) - 1
        return self.parts[k][0].for_episode(index - self.starts[k], seed)

    def act(self, obs: Any, info: Mapping[str, Any]) -> Any:
        raise RuntimeError("Segments plays no episode itself: the runner asks for_episode(index, seed)")

    def describe(self) -> str:
        return "; ".join(p.describe() for p, _ in self.parts)


@dataclass
class Problem:
    """Something the env did that is not an episode: a hang, an exception, a bad reset."""

    kind: str  # "hang" | "exception" | "reset_exception" | "crash" | "memory"
    """``crash``: the worker process running the env died (a signal, an exit); ``memory``: it was
    killed past the memory cap. Both happen only under the process executor."""
    where: str  # "reset" | "step" | "make" | "close" | "" (between calls)
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
    payloads: dict[int, Any] = field(default_factory=dict)
    """Per seed index: what a wrapper of the episode's env handed back (``episode_payload()``, see
    ``payload_of``), for the episodes that had one; it travels back from whatever worker played."""
    episode_ids: list[int] = field(default_factory=list)
    """The episode id handed out to each seed index (recorded or not)."""
    finished: int = 0
    """How many episodes from the first on were played to their end (an episode whose reset or step
    raised included): a hang, an env that cannot be made or the cap stops the run at the next."""

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


class EpisodeCapture(Recorder):
    """Records the one episode its env plays; ``rows()`` hands its rows to the run, which adds them
    in index order (whichever worker played it)."""

    def __init__(self, episode_id: int) -> None:
        super().__init__(ids=itertools.repeat(episode_id))

    def rows(self) -> tuple[list[list], tuple, dict[str, Any]] | None:
        """(step columns, episode row, tags) of the finished episode, or None when none finished."""
        self._flush()
        if not self._episodes["episode_id"]:
            return None
        return ([self._steps[c] for c in STEP_COLUMNS], tuple(self._episodes[c][0] for c in EPISODE_COLUMNS),
                self._tags[0])


@dataclass
class _Run:
    """What every slot of one run needs; pickled once per worker process under that executor."""

    make_env: EnvFactory | None
    spec: str | None  # the scan's env spec, resolved where the env is made (a worker process)
    wrappers: tuple
    policy: Policy
    tags: dict[str, Any]
    reset_options: Mapping[str, Any] | None
    tool_key: str
    success_threshold: float | None
    max_steps: int
    step_timeout_s: float
    where: tuple[str, list[str]] | None = None
    """The scanning process's working directory and ``sys.path``, for worker processes: they were
    forked from a server started earlier, and a relative ``path/file.py`` spec, an env reading
    relative files or a module put on the path since must work there as here."""


@dataclass
class _Episode:
    """One episode's outcome: its rows (when it was recorded), its problem and its payload."""

    capture: EpisodeCapture | None = None
    problem: Problem | None = None
    stop: bool = False  # the run stops here: the env hung or cannot be made
    payload: Any = None


def payload_of(env: gym.Env) -> Any:
    """What the first layer of ``env``'s wrapper stack with an ``episode_payload()`` method says about
    the episode just played (a picklable value), or None. A wrapper that records what the agent saw
    (the replay probe's ``Capture``) hands it back this way instead of through shared state, so its
    runs fan out over the workers like any other."""
    layer: Any = env
    while layer is not None:
        take = getattr(type(layer), "episode_payload", None)
        if callable(take):
            return layer.episode_payload()
        layer = getattr(layer, "env", None)
    return None


@functools.lru_cache(maxsize=8)
def _factory_of(spec: str) -> EnvFactory:
    from envaudit.resolve import resolve_env  # the worker side only: resolve sits above rollout

    return resolve_env(spec)[1]


def enter_scan_place(where: tuple[str, list[str]] | None) -> None:
    """Take on the scanning process's working folder and ``sys.path`` (``where``, only ever set for a
    worker process, whose own are otherwise different), so the env's relative paths and imports
    resolve as they do for the user."""
    if where is None:
        return
    cwd, path = where
    if os.getcwd() != cwd:
        os.chdir(cwd)
    if sys.path != path:
        sys.path[:] = path


def env_factory(spec: str | None, make_env: EnvFactory | None) -> EnvFactory:
    """The factory a worker builds from: ``make_env`` itself, or the target ``spec`` resolved there
    (cached per process)."""
    return make_env if spec is None else _factory_of(spec)


def _build(run: _Run) -> tuple[AuditWrapper, int]:
    enter_scan_place(run.where)
    make_env = env_factory(run.spec, run.make_env)
    made, mapping = strip_user_wrapper(sync_env(make_env()))
    env = limit_steps(made, run.max_steps)
    cap = step_limit(env) or run.max_steps
    for wrapper in run.wrappers:
        env = wrapper(env)
    # audit_wrap keeps an envaudit.wrap(env, success=..., tool_key=...) mapping of the user's.
    return audit_wrap(env, tool_key=run.tool_key, success_threshold=run.success_threshold,
                      recorder=Recorder(), mapping=mapping), cap


def _drop_env(slot: Slot) -> None:
    """Close the slot's env (it raised); the next episode gets a fresh instance."""
    policy = slot.state.get("policy")
    slot.end()
    if policy is not None:
        slot.state["policy"] = policy


def play(slot: Slot, run: _Run, item: tuple) -> _Episode:
    """Play one episode of ``run`` on ``slot``'s env (made on first use): the work item of a run.

    The whole episode runs on the slot's deadline thread (``Slot.run``), each env call under its
    deadline there; an env call that overran comes back here as ``DeadlineExceeded``."""
    _index, episode_id, seed, _rng_seed, _episode_tags = item
    playing: dict[str, Any] = {}
    try:
        return slot.run(lambda: _play(slot, run, item, playing), run.step_timeout_s)
    except DeadlineExceeded as exc:  # an env call hung: drop the env without calling into it again
        slot.abandon()
        if exc.call == "step":
            env = playing.get("env")
            return _Episode(playing.get("capture"), Problem("hang", "step", str(exc), seed, exc.step, episode_id),
                            stop=True, payload=payload_of(env) if env is not None else None)
        return _Episode(problem=Problem("hang", exc.call, str(exc), seed), stop=True)


def play_chain(slot: Slot, run: _Run, chain: Sequence[tuple]) -> list[_Episode]:
    """Play a chain of episodes in order on one fresh env instance of ``slot`` (the work item of a
    run with ``chains``); the chain stops at an episode that stops the run."""
    _drop_env(slot)
    out = []
    for item in chain:
        out.append(play(slot, run, item))
        if out[-1].stop:
            break
    return out


def _play(slot: Slot, run: _Run, item: tuple, playing: dict[str, Any]) -> _Episode:
    index, episode_id, seed, rng_seed, episode_tags = item
    T = run.step_timeout_s
    if "policy" not in slot.state:
        slot.state["policy"] = copy.deepcopy(run.policy) if slot.shares_objects else run.policy
    if "env" not in slot.state:
        try:
            env, cap = slot.guard(lambda: _build(run), T, "make")
        except Exception as exc:
            return _Episode(problem=Problem("exception", "make", f"{type(exc).__name__}: {exc}", seed,
                                            location=user_frame(exc)), stop=True)
        slot.state["env"], slot.state["cap"] = env, cap
        slot.at_end(lambda: slot.guard(env.close, T, "close"))
    env, cap, policy = slot.state["env"], slot.state["cap"], slot.state["policy"].for_episode(index, seed)
    capture = playing["capture"] = EpisodeCapture(episode_id)
    playing["env"] = env
    env.recorder = capture
    env.set_tags(**{**run.tags, **(episode_tags or {})})  # an episode's own tags over the run's
    try:
        obs, info = slot.guard(lambda: env.reset(seed=seed, options=run.reset_options), T, "reset")
    except Exception as exc:
        _drop_env(slot)
        return _Episode(problem=Problem("reset_exception", "reset", f"{type(exc).__name__}: {exc}", seed,
                                        location=user_frame(exc)))
    policy.reset(env, np.random.default_rng(rng_seed))
    # The env's own limit when it has one (MountainCarContinuous runs 999 steps), else ours.
    for t in range(cap + 1):
        try:
            action = policy(obs, info)
        except Exception as exc:  # the probe's policy broke, not the env: re-raise to the probe
            raise RuntimeError(f"policy {policy.name!r} failed at step {t}: {exc}") from exc
        try:
            obs, _, terminated, truncated, info = slot.guard(lambda a=action: env.step(a), T, "step", t)
        except Exception as exc:
            payload = payload_of(env)
            _drop_env(slot)
            return _Episode(capture, Problem("exception", "step", f"{type(exc).__name__}: {exc}", seed, t,
                                             episode_id, location=user_frame(exc)), payload=payload)
        if terminated or truncated:
            return _Episode(capture, payload=payload_of(env))
    payload = payload_of(env)
    _drop_env(slot)
    return _Episode(capture, Problem("exception", "step", f"the episode did not end within its step limit of "
                                     f"{cap} steps", seed, cap, episode_id), payload=payload)


def _lost(lost: Lost, item: tuple) -> _Episode:
    """The outcome of an episode whose worker process died or was killed."""
    _index, episode_id, seed = item[:3]
    where = lost.call or "step"
    if lost.kind == "hang":
        return _Episode(problem=Problem("hang", where, lost.detail, seed, lost.step), stop=True)
    during = f"{where}()" if where != "make" else "making the env"
    at = f" at step {lost.step}" if lost.step is not None else ""
    if not lost.call:
        during = "the episode, between env calls"
    message = f"{lost.detail}, during {during}{at} (reset seed {seed})"
    # The episode's rows died with the worker: the problem names the seed and call, not an episode.
    return _Episode(problem=Problem(lost.kind, where, message, seed, lost.step), stop=where == "make")


def policy_seeds(rng: np.random.Generator, n: int) -> list[int]:
    """The seeds of the policy randomness of a run's ``n`` episodes, drawn from the run's ``rng``:
    each follows the episode's index, never the schedule (``ProbeContext.run_all`` draws them as
    each merged run would)."""
    base = int(rng.integers(2**62))
    return [child_seed(base, i) for i in range(n)]


class Runner:
    """Runs episodes of envs from one factory with hang protection, recording into one Recorder.

    ``wrappers`` are applied between the env and the recorder (fault injection goes there).
    ``executor`` runs the episodes (default: inline, one after another in this process); ``spec``
    is the env's spec string, which worker processes resolve themselves instead of unpickling the
    factory.
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
        executor: Any = None,
        spec: str | None = None,
    ) -> None:
        self.make_env = make_env
        self.step_timeout_s = step_timeout_s
        self.max_steps = max_steps
        self.success_threshold = success_threshold
        self.tool_key = tool_key
        self.ids = ids if ids is not None else itertools.count()
        self.executor = executor if executor is not None else InlineExecutor()
        self.spec = spec
        self.dead = False  # set once the env hung: its thread is stuck, stop using it

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
        episode_tags: Sequence[Mapping[str, Any]] | None = None,
        ordered: bool | None = None,
        chains: Sequence[int] | None = None,
        rng_seeds: Sequence[int] | None = None,
    ) -> RunResult:
        """Run one episode per seed with ``policy``; returns the records of just these episodes.

        ``episode_tags[i]`` adds tags to episode ``i`` only (over the run's of the same name).
        ``ordered`` (default: the policy's ``ordered``) plays the episodes in order on one instance
        in this process, for policies and wrappers that report back through shared state.
        ``chains``: the lengths of consecutive
        stretches of ``seeds`` (summing to their number), each played in order on one fresh env
        instance by one worker; the chains fan out over the workers as episodes do (the replay
        probe's same-instance replays). ``RunResult.payloads`` has what the episodes' wrappers handed
        back (``payload_of``). ``rng_seeds[i]``: the seed of episode ``i``'s policy randomness
        (default: drawn from ``rng`` and the index), so runs merged into one play as they would apart
        (``ProbeContext.run_all``).
        """
        seeds = [int(s) for s in seeds]
        if self.dead:
            return RunResult(Recorder().records(), [], stopped_early=bool(seeds))
        assert episode_tags is None or len(episode_tags) == len(seeds), (
            f"episode_tags needs one mapping per seed: {len(episode_tags or ())} for {len(seeds)} seeds")
        assert chains is None or (all(n >= 1 for n in chains) and sum(chains) == len(seeds)), (
            f"chains must be positive lengths summing to the {len(seeds)} seeds, got {list(chains or ())}")
        assert rng_seeds is None or len(rng_seeds) == len(seeds), (
            f"rng_seeds needs one seed per episode: {len(rng_seeds or ())} for {len(seeds)} seeds")
        # Handed out before anything runs, so ids and randomness follow the index, not the schedule.
        ids = [next(self.ids) for _ in seeds]
        rng_seeds = policy_seeds(rng, len(seeds)) if rng_seeds is None else [int(s) for s in rng_seeds]
        items = [(i, ids[i], s, rng_seeds[i], episode_tags[i] if episode_tags else None) for i, s in enumerate(seeds)]
        run = _Run(self.make_env, None, tuple(wrappers), policy, dict(tags or {}), reset_options, self.tool_key,
                   self.success_threshold, self.max_steps, self.step_timeout_s)
        executor = self._executor_for(run, policy, ordered)
        stop_at, cut = [len(items)], [False]

        def keep_going(i: int) -> bool:
            if i >= stop_at[0]:
                return False
            if deadline is not None and time.monotonic() > deadline:
                cut[0] = True
                return False
            return True

        shared = run
        if executor.kind in ("processes", "ray"):
            # Ray actors take up the scanning process's folder and paths themselves, where they exist.
            shared = self._portable(run, where=executor.kind == "processes")
            if shared is None:
                executor, shared = InlineExecutor(), run
        outcomes: dict[int, _Episode] = {}
        if chains is None:
            work: Sequence[Any] = items
            first = list(range(len(items)))
            fn: Callable = play
        else:
            first = list(itertools.accumulate(chains, initial=0))[:-1]
            work = [items[a:a + n] for a, n in zip(first, chains, strict=True)]
            fn = play_chain
            stop_at[0] = len(work)  # counted in chains while they are handed out
        for c, outcome in executor.map(fn, shared, work, keep_going):
            if isinstance(outcome, Lost):
                # A chain's worker died: its episodes' rows died with it; the death is one problem.
                played = [_lost(outcome, items[first[c]])] + [_Episode() for _ in work[c][1:]] if chains else [
                    _lost(outcome, items[first[c]])]
            else:
                played = outcome if chains is not None else [outcome]
            for k, episode in enumerate(played):
                outcomes[first[c] + k] = episode
            if any(episode.stop for episode in played):
                stop_at[0] = min(stop_at[0], c)
                self.dead = self.dead or any(e.stop and e.problem.kind == "hang" for e in played)
        # The run ends at its first episode that stopped it (counted in episodes, chains or not).
        stop_at[0] = min((i for i, out in outcomes.items() if out.stop), default=len(items))
        recorder, problems = Recorder(), []
        for i in sorted(outcomes):
            if i > stop_at[0]:  # played by another worker after the run had to stop: not this run's
                continue
            out = outcomes[i]
            rows = out.capture.rows() if out.capture is not None else None
            if rows is not None:
                steps, episode, tags = rows
                recorder.add_step_columns(steps)
                recorder.add_episode(episode, tags)
            if out.problem is not None:
                problems.append(out.problem)
        done = sum(1 for i, out in outcomes.items() if i <= stop_at[0] and not out.stop)
        payloads = {i: out.payload for i, out in outcomes.items() if i <= stop_at[0] and out.payload is not None}
        finished = next((i for i in range(len(items)) if i not in outcomes or outcomes[i].stop), len(items))
        return RunResult(recorder.records(), problems, stopped_early=done < len(items), payloads=payloads,
                         episode_ids=ids, finished=finished)

    def _executor_for(self, run: _Run, policy: Policy, ordered: bool | None) -> Any:
        if ordered or (ordered is None and getattr(policy, "ordered", False)):
            return InlineExecutor()
        return self.executor

    def _portable(self, run: _Run, where: bool = True) -> _Run | None:
        """``run`` as worker processes get it: the env's spec instead of its factory when there is
        one (a factory loaded from a file path cannot be unpickled elsewhere); None when it cannot
        be sent at all, and the run stays in this process."""
        import cloudpickle

        if where:
            run = dataclasses.replace(run, where=(os.getcwd(), list(sys.path)))
        if self.spec is not None:
            run = dataclasses.replace(run, make_env=None, spec=self.spec)
        try:
            cloudpickle.dumps(run)
        except Exception as exc:
            warnings.warn(f"policy {run.policy.name!r}: this run cannot be sent to worker processes "
                          f"({type(exc).__name__}: {exc}), so it runs in the scanning process without "
                          "isolation; make the env factory, policy and wrappers picklable, or scan a spec "
                          "string", RuntimeWarning, stacklevel=3)
            return None
        return run
